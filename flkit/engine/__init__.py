"""The engine: local training of many clients at once and evaluation of one model.

    result = train_clients(model, start, x, y, client_indices, spec, client_seeds)
    accuracy, loss = evaluate(model, state, x_test, y_test)

Inside: `train` (train_clients, its backends and the fixed "auto" rule), `reference` (the plain
per-client loop it is checked against), `spec` (LocalSpec, LocalResult, the batch plan), `wide`
(the wide backend), `graphed` (the wide step replayed from CUDA graphs), `copies` (the engine's
private copies of a model), `inference` (evaluate) and `backend` (a run's backend chosen by
measurement).
"""

from .inference import evaluate
from .spec import LocalResult, LocalSpec, batch_plan
from .train import BACKENDS, train_clients

__all__ = ["BACKENDS", "LocalResult", "LocalSpec", "batch_plan", "evaluate", "train_clients"]

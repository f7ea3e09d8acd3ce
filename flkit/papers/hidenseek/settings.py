"""The settings notebook 04 runs each method with: its learning rate per task and the options of
its Params. The levers' and the MNIST score-lr's choices are derived by their rules from the
recorded tables (never copied from them); the HAR score lrs are the HAR grid's choices as the
README's table records them (that grid's runs are in the lab log, not recorded as a table here).

- ``PRE_LEVER``: the score learning rates chosen on HAR (``searches.choose_score_lr``), the MNIST
  ones of ``searches.choose_task_score_lr`` on ``searches.MNIST_LR_SEARCH``, and the supermask
  options before the baseline levers. The score-lr, rounds and clients searches ran with these, so
  their drivers (``study.score_lr_grid``, ``rounds_search``, ``clients_search``) keep them: a
  rerun reproduces the recorded tables and finds their cached runs.
- ``PRE_LONG_LR``: ``PRE_LEVER`` with every baseline lever that its rule in ``baseline_levers``
  adopts on the recorded tables applied to its method (``with_levers``); a lever not adopted
  changes nothing; and BNNAvg's VGG9 in the binary networks' block order (``with_bnn_layout``).
  The long-lr rule's runs (``long_lr_runs.long_lr_search``) used these.
- ``NOTEBOOK``: ``PRE_LONG_LR`` with each supermask method's MNIST lr as the long-lr rule
  (``long_lr.choose_long_lr``) answers on its recorded runs (``with_long_lr``). Every run of the
  notebook uses these (``study.config``'s default).

    settings.NOTEBOOK.lr_of("fedmask", "mnist_a1")
    settings.VOTE_WEIGHT_CHOICE["signed"]["reason"]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import pandas as pd

from flkit.utils import FlkitError

from .baseline_levers import (
    BNNAVG_REAL_LR_SEARCH,
    VOTE_WEIGHT_METHODS,
    VOTE_WEIGHT_SEARCH,
    choose_bnnavg_real_lr,
    choose_vote_weights,
)
from .long_lr import LONG_LR_SEARCH, choose_long_lr
from .searches import MNIST_LR_SEARCH, choose_task_score_lr

__all__ = [
    "LABELS",
    "PAPER_LR",
    "Settings",
    "with_levers",
    "with_bnn_layout",
    "with_long_lr",
    "BNN_VGG_KWARGS",
    "PRE_LEVER_LR",
    "PRE_LEVER_MNIST_LR",
    "PRE_LEVER_PARAMS",
    "PRE_LEVER",
    "VOTE_WEIGHT_CHOICE",
    "BNNAVG_REAL_LR_CHOICE",
    "PRE_LONG_LR",
    "LONG_LR_CHOICE",
    "NOTEBOOK",
    "LR",
    "MNIST_LR",
    "SUPERMASK_PARAMS",
]

LABELS = {
    "fedavg_split": "FedAvg",
    "bnnavg": "BNNAvg",
    "fedmask": "FedMask",
    "signed": "Signed",
    "hidenseek": "HideNseek",
}
#: the paper's learning rates (Sec. 4.2)
PAPER_LR = {
    "fedavg_split": 0.001,
    "bnnavg": 0.01,
    "fedmask": 0.001,
    "signed": 0.001,
    "hidenseek": 10.0,
}
_SUPERMASK = ("hidenseek", "fedmask", "signed", "bnnavg")


@dataclass(frozen=True)
class Settings:
    """Per method: the learning rate on HAR and FEMNIST (``lr``; every method), on MNIST
    (``mnist_lr``; a method without one there runs at its ``lr``) and the Params options every
    run passes explicitly (``params``), so that a run cached before a default changed is never
    served; ``vgg_kwargs``: the VGG9 flags a method's MNIST and FEMNIST runs add (empty: the
    model as the other methods build it)."""

    lr: Mapping[str, float]
    mnist_lr: Mapping[str, float]
    params: Mapping[str, Mapping[str, object]]
    vgg_kwargs: Mapping[str, Mapping[str, object]] = field(
        default_factory=lambda: MappingProxyType({})
    )

    def lr_of(self, method: str, task: str) -> float:
        """The learning rate of ``method`` on ``task`` (har, femnist, mnist_a<alpha>)."""
        if method not in self.lr:
            raise FlkitError(f"unknown method {method!r}; accepted: {sorted(self.lr)}")
        table = self.mnist_lr if task.split("_")[0] == "mnist" else self.lr
        return float(table.get(method, self.lr[method]))

    def params_of(self, method: str) -> dict:
        """The Params options of ``method`` (a copy; empty: the method's defaults)."""
        return dict(self.params.get(method, {}))

    def vgg_kwargs_of(self, method: str) -> dict:
        """The VGG9 flags of ``method``'s runs (a copy; empty: none beyond the preset's width)."""
        return dict(self.vgg_kwargs.get(method, {}))


def with_levers(base: Settings, vote_weights: Mapping[str, dict], bnnavg_real_lr: dict) -> Settings:
    """``base`` with each lever applied where its rule adopts it (a new Settings; ``base`` is
    unchanged). ``vote_weights``: method -> ``choose_vote_weights``'s answer; adopted, the method
    gets ``normalize="all"`` on every task, ``lr_har`` on HAR and FEMNIST (FEMNIST is not
    searched and takes HAR's) and ``lr_mnist`` on MNIST. ``bnnavg_real_lr``:
    ``choose_bnnavg_real_lr``'s answer; adopted, BNNAvg gets ``real_lr`` on every task and the
    latent ``lr_mnist`` on MNIST (HAR was not searched and keeps its lr). FlkitError for a method
    the vote-weights lever does not decide."""
    unknown = sorted(set(vote_weights) - set(VOTE_WEIGHT_METHODS))
    if unknown:
        raise FlkitError(
            f"unknown method {unknown[0]!r} for the vote-weights lever; accepted: "
            f"{list(VOTE_WEIGHT_METHODS)}"
        )
    lr, mnist_lr = dict(base.lr), dict(base.mnist_lr)
    params = {m: dict(p) for m, p in base.params.items()}
    for method, choice in vote_weights.items():
        if choice["adopt"]:
            params[method] = {**params.get(method, {}), "normalize": "all"}
            lr[method] = float(choice["lr_har"])
            mnist_lr[method] = float(choice["lr_mnist"])
    if bnnavg_real_lr["adopt"]:
        params["bnnavg"] = {**params.get("bnnavg", {}), "real_lr": float(bnnavg_real_lr["real_lr"])}
        mnist_lr["bnnavg"] = float(bnnavg_real_lr["lr_mnist"])
    return _frozen(lr, mnist_lr, params, base.vgg_kwargs)


def with_bnn_layout(base: Settings) -> Settings:
    """``base`` with BNNAvg's VGG9 built in the binary networks' block order
    (``BNN_VGG_KWARGS``): a decision of fidelity to the BNN that BNNAvg names (Courbariaux et al.
    2016), taken before any run of it and kept whatever its verdicts (README, "Decisions")."""
    vgg = {m: dict(k) for m, k in base.vgg_kwargs.items()}
    vgg["bnnavg"] = {**vgg.get("bnnavg", {}), **BNN_VGG_KWARGS}
    return _frozen(base.lr, base.mnist_lr, base.params, vgg)


def with_long_lr(base: Settings, choice: Mapping[str, dict]) -> Settings:
    """``base`` with each supermask method's MNIST lr set to the one ``long_lr.choose_long_lr``
    answered (``choice``: label -> {"lr", "passes", ...}); a method whose every lr failed keeps
    its lr, which is the answer's too. FlkitError for a label that is not a supermask method."""
    by_label = {LABELS[m]: m for m in _SUPERMASK}
    unknown = sorted(set(choice) - set(by_label))
    if unknown:
        raise FlkitError(
            f"unknown method {unknown[0]!r} for the long-lr rule; accepted: {sorted(by_label)}"
        )
    mnist_lr = dict(base.mnist_lr)
    for label, answer in choice.items():
        mnist_lr[by_label[label]] = float(answer["lr"])
    return _frozen(base.lr, mnist_lr, base.params, base.vgg_kwargs)


def _frozen(lr, mnist_lr, params, vgg_kwargs=None) -> Settings:
    """Settings whose tables cannot be changed in place: ``study.LR`` and the like are these very
    tables, and a notebook cell that wrote into one would change every later config."""
    return Settings(
        lr=MappingProxyType(dict(lr)),
        mnist_lr=MappingProxyType(dict(mnist_lr)),
        params=MappingProxyType({m: MappingProxyType(dict(p)) for m, p in params.items()}),
        vgg_kwargs=MappingProxyType(
            {m: MappingProxyType(dict(k)) for m, k in (vgg_kwargs or {}).items()}
        ),
    )


#: the learning rates of the searches: the paper's, except the score learning rate of a supermask
#: method whose scores do not move at the paper's, chosen once by ``searches.choose_score_lr`` on
#: the HAR grid ``searches.SCORE_LR_GRID`` (README, "Decisions")
PRE_LEVER_LR = {**PAPER_LR, "fedmask": 100.0, "signed": 10.0, "bnnavg": 1.0}
#: the searches' score learning rates on MNIST (VGG9, where a score's gradient differs from HAR's
#: MLP): ``searches.choose_task_score_lr`` on the recorded ``searches.MNIST_LR_SEARCH``, the HAR
#: choice wherever no lr of the grid passes there
_MNIST_CHOICE = choose_task_score_lr(
    pd.DataFrame(MNIST_LR_SEARCH), {LABELS[m]: PRE_LEVER_LR[m] for m in _SUPERMASK}
)
PRE_LEVER_MNIST_LR = {m: _MNIST_CHOICE[LABELS[m]]["lr"] for m in _SUPERMASK}
#: how the supermask methods turned votes into scores and whom they scored in the searches
#: (README, "Decisions"); FedMask and Signed at their Params' default ``normalize="sampled"``
PRE_LEVER_PARAMS = {
    "hidenseek": {"normalize": "all", "writeback": "inverse", "score_clients": "trained"},
    "fedmask": {"writeback": "linear", "score_clients": "trained"},
    "signed": {"writeback": "linear", "score_clients": "trained"},
    "bnnavg": {"normalize": "all"},
}
PRE_LEVER = _frozen(PRE_LEVER_LR, PRE_LEVER_MNIST_LR, PRE_LEVER_PARAMS)

#: lever 1 (vote weights over all clients' samples) per method, by its rule on the recorded runs
VOTE_WEIGHT_CHOICE = {
    m: choose_vote_weights(pd.DataFrame(VOTE_WEIGHT_SEARCH), m) for m in VOTE_WEIGHT_METHODS
}
#: lever 2 (BNNAvg's real-valued learning rate), by its rule on the recorded runs
BNNAVG_REAL_LR_CHOICE = choose_bnnavg_real_lr(pd.DataFrame(BNNAVG_REAL_LR_SEARCH))
#: BNNAvg's VGG9: each max-pool before its block's BatchNorm and sign, as in a binary network
#: (``deep.build_vgg9``'s ``pool_position``); the other methods keep the model's own order
BNN_VGG_KWARGS = MappingProxyType({"pool_position": "before_norm"})
#: the settings after the levers and BNNAvg's block order, which the long-lr rule's runs used
PRE_LONG_LR = with_bnn_layout(with_levers(PRE_LEVER, VOTE_WEIGHT_CHOICE, BNNAVG_REAL_LR_CHOICE))
#: the long-lr rule's answer on its recorded runs: each supermask method's MNIST lr at `long`'s
#: rounds and seeds
LONG_LR_CHOICE = choose_long_lr(
    pd.DataFrame(LONG_LR_SEARCH),
    {LABELS[m]: PRE_LONG_LR.lr_of(m, "mnist_a1") for m in _SUPERMASK},
)
#: what every run of the notebook uses
NOTEBOOK = with_long_lr(PRE_LONG_LR, LONG_LR_CHOICE)
#: ``NOTEBOOK``'s tables under their own names (the same objects, not copies)
LR, MNIST_LR, SUPERMASK_PARAMS = NOTEBOOK.lr, NOTEBOOK.mnist_lr, NOTEBOOK.params

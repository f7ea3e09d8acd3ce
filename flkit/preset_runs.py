"""From a notebook's preset to its runs: one vocabulary for every paper folder.

Two things live here, and every ``flkit/papers/<slug>/study.py`` uses them:

- :func:`from_preset`: the :class:`~flkit.experiment.RunConfig` a preset table describes. A
  preset key that sets a run's field is named as the field (``num_clients``,
  ``clients_per_round``, ``local_epochs``; ``train_subset`` and ``test_subset`` for the dataset's
  sizes), alone or behind one dataset part's prefix (``mnist_rounds``); reading those keys into
  a config is written here once.
- the run-list contract: each paper's ``study.runs(preset, seeds)`` returns every training run its
  notebook makes at ``preset`` when executed once for each notebook ``seed`` in ``seeds`` (the
  notebook's own ``seed`` parameter, as ``flkit reproduce --seeds`` passes it; a notebook that runs
  ``seed, seed + 1, ...`` lists them all), each once (:func:`distinct`), as the very configs its
  drivers run, so their cache keys are the ones the notebook looks up. ``flkit reproduce``'s run
  pool trains that list before the notebook executes, and ``benchmarks/paper_cost.py`` costs it.
  A study whose notebook trains a run other than by ``flkit.experiment.run(config)`` alone also
  defines ``study.train(config, **run_kwargs)``, the call its drivers make (notebook 05 starts
  every run from a seeded global generator), and the pool trains through it. A study whose
  notebook reads runs' wall-clock times as evidence (a table of training seconds, a claim on
  them) lists those runs in ``study.timed(preset, seeds)``, a part of ``runs``: a time depends on
  what else runs beside it, so the pool never packs a timed run with others
  (:mod:`flkit.reproduce.pool`).

    cfg = from_preset(P, "mnist_", method="stc", partition="shards", seed=0)
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping

from .experiment import RunConfig
from .utils import FlkitError

__all__ = [
    "DATASET_KEYS",
    "from_preset",
    "seeds_of",
    "use_threads",
    "distinct",
    "identity",
]

#: preset keys that go into ``dataset_kwargs`` (0 = the whole split: left out)
DATASET_KEYS = ("train_subset", "test_subset")
#: fields cast as the studies always did: whole numbers to int, reals to float (a real's type is
#: part of the cache key: 1 and 1.0 name other folders)
_INTEGERS = (
    "num_clients",
    "clients_per_round",
    "local_epochs",
    "local_steps",
    "batch_size",
    "rounds",
    "eval_every",
)
_REALS = ("lr", "momentum", "weight_decay")
_FIELDS = {f.name for f in dataclasses.fields(RunConfig)}


def _is_field(key: str) -> bool:
    return key in _FIELDS or key in DATASET_KEYS


def from_preset(preset: Mapping, prefix: str = "", **fields) -> RunConfig:
    """The RunConfig of ``preset``'s keys that name a field, the keys starting with ``prefix``
    (stripped) over the unprefixed ones, ``fields`` over both. ``train_subset`` / ``test_subset``
    above 0 join ``dataset_kwargs`` (after any given in ``fields``). Keys that name no field (a
    method's hyperparameter, a seed count, a near miss such as ``per_round``) are
    not read; the config validates itself as usual."""
    plain, prefixed = {}, {}
    for key, value in preset.items():
        if prefix and key.startswith(prefix):
            if _is_field(name := key[len(prefix) :]):
                prefixed[name] = value
        elif _is_field(key):
            plain[key] = value
    values = {**plain, **prefixed}
    dataset = dict(fields.pop("dataset_kwargs", {}))
    for key in DATASET_KEYS:
        n = values.pop(key, 0)
        if n:
            dataset[key] = int(n)
    for name in _INTEGERS:
        if values.get(name) is not None:
            values[name] = int(values[name])
    for name in _REALS:
        if name in values:
            values[name] = float(values[name])
    return RunConfig(**{**values, "dataset_kwargs": dataset, **fields})


def seeds_of(preset: Mapping, seed: int = 0, key: str = "seeds") -> list[int]:
    """The seeds a notebook run with ``seed`` trains: ``seed`` and the ones after it,
    ``preset[key]`` in all (FlkitError naming the key when it is below 1)."""
    n = int(preset[key])
    if n < 1:
        raise FlkitError(f"{key}={n} in the preset; accepted: an integer >= 1")
    return [int(seed) + i for i in range(n)]


def use_threads(preset: Mapping) -> int:
    """Set torch's CPU threads to the preset's ``threads`` (0 keeps the count in use) and return
    the count in use. A preset pins it where a run's floats must not follow the machine: other
    counts sum in another order (:meth:`flkit.experiment.RunConfig.key`)."""
    import torch

    n = preset["threads"]
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise FlkitError(f"threads={n!r} in the preset; accepted: 0 (torch default) or an int >= 1")
    if n > 0:
        torch.set_num_threads(n)
    return torch.get_num_threads()


def identity(run) -> str:
    """What makes two entries of a run list the same run: a RunConfig's fields, or a FedAST
    ``(config, seed)`` pair (:func:`flkit.asyncfl.run`'s arguments), as sorted JSON."""
    if isinstance(run, RunConfig):
        return json.dumps(run.to_dict(), sort_keys=True, default=str)
    config, seed = run
    config = config.to_dict() if hasattr(config, "to_dict") else config
    return json.dumps([config, int(seed)], sort_keys=True, default=str)


def distinct(runs: Iterable) -> list:
    """``runs`` without repeats (:func:`identity`), each at its first place."""
    seen, out = set(), []
    for r in runs:
        key = identity(r)
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out

"""What notebook 03 costs on a CPU, estimated before it runs (README, "Cost"): every experiment's
local trainings and tests, counted by the timing simulation (a trainer that trains nothing, so
the count takes seconds), times a price per request and per test of each learner.

The timing simulation fixes how many requests arrive per simulated time unit whatever the learner;
what it cannot know is when a trained run reaches its targets. So each experiment's runs are
counted to a horizon: one per experiment or one per run (an estimate of its time to target; the
`long` cuts' estimate took each run's `cpu` counterpart's all-done time, scaled: README, "The
`long` cut rule"), capped by the run's own ``max_time``; without one, to the run's own stop
(``max_time``, or ``max_events`` arrivals for Fig. 3). In the count no task ever reaches a target,
so every task trains up to the horizon: for a run whose tasks finish at different times, an upper
bound. Option D is counted as option S with b = ceil(R / r) (Realloc needs real updates), so the
split of the trainings between the learners is the static one."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from flkit import asyncfl
from flkit.utils import FlkitError, check_choice, check_real

from . import configs

__all__ = [
    "PRICES",
    "PRICE_SOURCE",
    "STARTUP_SECONDS",
    "REQUEST_STEPS",
    "EXPERIMENTS",
    "price_key",
    "experiment_runs",
    "CountingTrainer",
    "count_runs",
    "estimate",
]

#: where :data:`PRICES` come from
PRICE_SOURCE = (
    'benchmarks/results/fedast.md, "Prices and probes behind the `cpu` estimate" (2026-11-27): '
    "one torch thread while another notebook ran on the 2 cores, so likely high on an idle machine"
)
#: seconds of one core per request (one client's local training) and per periodic test (on
#: 2,000 test items), per learner (:func:`price_key`); the LSTM-100 request is the midpoint of
#: the measured 1.0-1.2 s
PRICES = {
    "mnist_mlp": {"request": 0.08, "test": 0.023},
    "fmnist_mlp": {"request": 0.08, "test": 0.028},
    "cifar10_lenet5": {"request": 0.28, "test": 0.155},
    "shakespeare_lstm100": {"request": 1.1, "test": 0.37},
    "shakespeare_lstm32": {"request": 0.30, "test": 0.066},
}
#: seconds per run for its start-up and data (README, "Cost")
STARTUP_SECONDS = 3.0
#: local steps of one request (27, the paper's delay model): the centralised reference's steps are
#: priced as this many steps per request
REQUEST_STEPS = 27
#: the experiments of :func:`experiment_runs`, in the order their runs are claimed (a run two
#: experiments share, Fig. 5's largest M being Fig. 2's, counts in the first)
EXPERIMENTS = ("mix", "fig4", "fig2", "buffer", "fig5", "fig3", "k", "central")

_LEARNERS = {
    ("mnist", "mlp_mnist"): "mnist_mlp",
    ("fmnist", "mlp_mnist"): "fmnist_mlp",
    ("cifar10", "lenet5_cifar"): "cifar10_lenet5",
}


def price_key(task: Mapping) -> str:
    """The learner of a run config's task (its dataset and model; the Shakespeare LSTM by hidden
    size, 100 unless ``model_flags`` say otherwise): a key of :data:`PRICES`. FlkitError for a
    learner without a price, naming the priced ones."""
    dataset = task["dataset"]
    check_choice("dataset", dataset, asyncfl.DATASET_DEFAULTS)
    model = task.get("model") or asyncfl.DATASET_DEFAULTS[dataset]["model"]
    if dataset == "shakespeare" and model == "lstm_shakespeare":
        width = int((task.get("model_flags") or {}).get("hidden_size", 100))
        key = f"shakespeare_lstm{width}"
    else:
        key = _LEARNERS.get((dataset, model))
    if key not in PRICES:
        raise FlkitError(
            f"no price for dataset {dataset!r} with model {model!r}; accepted (priced): "
            f"{', '.join(PRICES)}"
        )
    return key


def experiment_runs(preset) -> dict[str, list]:
    """{experiment: [run config, ...]} of one seed of notebook 03 at ``preset``: the runs of
    :func:`.configs.experiment_configs` grouped by experiment (:data:`EXPERIMENTS`), each counted
    once, plus the centralised reference (``central``: {"steps", "task"}, trained outside the
    simulator)."""
    out, seen = {}, set()
    for exp, cfg in configs.experiment_configs(preset):
        out.setdefault(exp, [])
        key = configs.run_key(cfg)
        if key not in seen:
            seen.add(key)
            out[exp].append(cfg)
    model = preset.get(f"{preset['dataset']}_model") or None
    out["central"] = [
        {
            "steps": int(preset["central_steps"]),
            "task": {"dataset": preset["dataset"], "model": model},
        }
    ]
    return out


class CountingTrainer(asyncfl.TimingTrainer):
    """A :class:`flkit.asyncfl.TimingTrainer` that counts, per task, the clients it was asked to
    train and the tests it was asked for."""

    def __init__(self):
        super().__init__()
        self.trainings: dict = {}
        self.tests: dict = {}

    def train(self, task, version, client_ids, *args, **kw):
        self.trainings[task] = self.trainings.get(task, 0) + len(client_ids)
        return super().train(task, version, client_ids, *args, **kw)

    def evaluate(self, task):
        self.tests[task] = self.tests.get(task, 0) + 1
        return super().evaluate(task)


#: a horizon as :func:`count_runs` takes it, per experiment: one time for all its runs, a mapping
#: {run key: time or None}, or a function config -> time or None (None: the run's own stop)
Horizon = float | Mapping[str, float | None] | Callable[[dict], float | None]


def _run_label(exp: str, i: int, n: int, cfg: dict) -> str:
    names = ", ".join(t["name"] for t in cfg["tasks"])
    return f"run {i + 1} of {n} of {exp!r} ({cfg['method']} on {names})"


def _per_run(exp: str, cfgs: list, value) -> list:
    """The horizon of each of one experiment's runs (time or None) from its entry of
    ``horizons``, checked (module doc of :func:`count_runs`)."""
    n = len(cfgs)
    if value is None:
        got = [None] * n
    elif isinstance(value, Mapping):
        keys = [configs.run_key(c) for c in cfgs]
        for k in value:
            if k not in keys:
                raise FlkitError(
                    f"horizons[{exp!r}] names the run {str(k)[:120]!r}, not one of {exp!r}'s; "
                    f"accepted: the run keys (configs.run_key) of its {n} runs (a run two "
                    "experiments share is counted in the first, EXPERIMENTS' order)"
                )
        for i, (k, c) in enumerate(zip(keys, cfgs)):
            if k not in value:
                raise FlkitError(
                    f"horizons[{exp!r}] has no entry for {_run_label(exp, i, n, c)}; accepted: "
                    "a mapping with every run of the experiment (a time, or None for its own stop)"
                )
        got = [value[k] for k in keys]
    elif callable(value):
        got = [value(c) for c in cfgs]
    else:
        got = [_horizon(exp, value)] * n
    out = []
    for i, (c, h) in enumerate(zip(cfgs, got)):
        if h is not None:
            try:
                h = check_real("horizon", h, low=0, low_open=True)
            except FlkitError:
                raise FlkitError(
                    f"horizon of {_run_label(exp, i, n, c)}={h!r}; accepted: a positive finite "
                    "time, or None for the run's own stop"
                ) from None
        run = asyncfl.FedASTRun.from_dict(c)
        if h is None and run.max_time is None and run.max_events is None:
            raise FlkitError(
                f"{_run_label(exp, i, n, c)} has no max_time or max_events; accepted: a horizon "
                "for it in `horizons`"
            )
        out.append(h)
    return out


def _horizon(name: str, value) -> float:
    return check_real(f"horizon of {name!r}", value, low=0, low_open=True)


def _count_one(cfg: dict, horizon: float | None, seed: int) -> dict:
    """{learner: [trainings, tests]} of one run counted by the timing simulation."""
    run = asyncfl.FedASTRun.from_dict(cfg)
    limit = run.max_time if run.max_time is not None else math.inf
    if horizon is not None:
        limit = min(limit, horizon)
    trainer = CountingTrainer()
    asyncfl.timing_run(cfg, seed, limit, run.max_events, trainer=trainer)
    out: dict = {}
    for t in cfg["tasks"]:
        c = out.setdefault(price_key(t), [0, 0])
        c[0] += trainer.trainings.get(t["name"], 0)
        c[1] += trainer.tests.get(t["name"], 0)
    return out


def count_runs(
    preset, horizons: Mapping[str, Horizon] | None = None, seed: int = 0
) -> tuple[dict, dict]:
    """(counts, runs) of one seed of notebook 03 at ``preset``: counts {experiment: {learner:
    (trainings, tests)}} from the timing simulation (module doc), runs {experiment: number of
    runs}. ``horizons``: {experiment (a key of :data:`EXPERIMENTS`): horizon}, the horizon one
    time for every run of the experiment, or per run a mapping {:func:`.configs.run_key`: time or
    None} naming every run of the experiment (as :func:`experiment_runs` groups them), or a
    function config -> time or None; None is the run's own stop. Each run is counted to the
    smaller of its horizon and its own ``max_time``; an experiment without an entry runs to its
    own stop. The centralised reference takes no horizon (its steps are fixed).

    FlkitError before any count: an unknown experiment, a horizon that is not a positive finite
    number or None, a mapping naming a run the experiment does not have or leaving one out, a
    per-run form for ``central``, a run with no horizon and neither ``max_time`` nor
    ``max_events``."""
    horizons = dict(horizons or {})
    for name in horizons:
        check_choice("experiment", name, EXPERIMENTS)
    groups = experiment_runs(preset)
    if "central" in horizons:
        value = horizons["central"]
        if isinstance(value, Mapping) or callable(value):
            raise FlkitError(
                "horizons['central'] is per run; accepted: one time or nothing (the centralised "
                "reference is trained outside the simulator, for a fixed number of steps)"
            )
        _horizon("central", value)
    per_run = {
        exp: _per_run(exp, cfgs, horizons.get(exp))
        for exp, cfgs in groups.items()
        if exp != "central"
    }
    counts, runs = {}, {}
    for exp, cfgs in groups.items():
        runs[exp] = len(cfgs)
        total: dict = {}
        if exp == "central":
            for c in cfgs:
                key = price_key(c["task"])
                t = total.setdefault(key, [0, 0])
                t[0] += c["steps"] / REQUEST_STEPS
                t[1] += 1
        else:
            for cfg, h in zip(cfgs, per_run[exp]):
                for key, (tr, te) in _count_one(cfg, h, seed).items():
                    t = total.setdefault(key, [0, 0])
                    t[0] += tr
                    t[1] += te
        counts[exp] = {k: (v[0], v[1]) for k, v in total.items()}
    return counts, runs


def _count_number(what: str, value) -> float:
    return check_real(what, value, low=0)


def estimate(
    counts: Mapping[str, Mapping[str, Sequence[float]]],
    runs: Mapping[str, int],
    seeds: int,
    jobs: int,
    prices: Mapping[str, Mapping[str, float]] = PRICES,
    startup: float = STARTUP_SECONDS,
) -> dict:
    """Core-seconds per experiment and the wall time of the notebook's runs: ``counts``
    {experiment: {learner: (trainings, tests)}} and ``runs`` {experiment: runs} of one seed (as
    :func:`count_runs` gives them), times ``seeds``; an experiment costs its trainings times the
    learner's request price plus its tests times its test price plus ``startup`` seconds per run
    (every run in one batch over ``jobs`` cores, so wall = the sum / ``jobs``).

    FlkitError, before any sum: ``seeds`` or ``jobs`` not an integer >= 1, a negative or missing
    price, a learner without a price (naming the priced ones), a negative count, an experiment
    without a run count. Returns {"core_seconds" ({experiment: s}), "total_core_seconds",
    "wall_seconds", "wall_minutes"}."""
    for name, value in (("seeds", seeds), ("jobs", jobs)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise FlkitError(f"{name}={value!r}; accepted: an integer >= 1")
    _count_number("startup", startup)
    for learner, p in prices.items():
        for kind in ("request", "test"):
            if kind not in p:
                raise FlkitError(
                    f"price of {learner!r} has no {kind!r}; accepted: {{'request': s, 'test': s}}"
                )
            _count_number(f"{kind} price of {learner!r}", p[kind])
    for exp, per in counts.items():
        if exp not in runs:
            raise FlkitError(f"experiment {exp!r} has no run count; accepted: {list(runs)}")
        _count_number(f"runs of {exp!r}", runs[exp])
        for learner, (tr, te) in per.items():
            check_choice("learner", learner, prices)
            _count_number(f"trainings of {learner!r} in {exp!r}", tr)
            _count_number(f"tests of {learner!r} in {exp!r}", te)
    core = {}
    for exp, per in counts.items():
        one = sum(
            tr * prices[lr]["request"] + te * prices[lr]["test"] for lr, (tr, te) in per.items()
        )
        core[exp] = seeds * (one + runs[exp] * startup)
    total = sum(core.values())
    return {
        "core_seconds": core,
        "total_core_seconds": total,
        "wall_seconds": total / jobs,
        "wall_minutes": total / jobs / 60,
    }

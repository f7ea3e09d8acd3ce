"""Notebook 03's timing-only simulations: the regime indicators that timing alone decides, for our
presets and for the paper's setting, before any training run.

Sync-ST's round length, FedAST's update rate and the staleness of its updates depend on the delay
model, N, availability, R, b and k only, so :func:`flkit.asyncfl.timing_run` computes them in
seconds. :func:`timing_table` runs every experiment (:data:`.regime.TIMING_EXPERIMENTS`: the
four-task mix, Fig. 2's six identical tasks, Fig. 3's largest point) in the paper's setting and in a
preset's and puts the indicators (:data:`.regime.TIMING_INDICATORS`) side by side; the reduced
presets are chosen so each is within :data:`.regime.TIMING_TOLERANCE` of the paper's. The claims
read that table through ``regime.measure``.

:func:`paper_setting` gives the paper's value of the in-run indicator it reports none of: the
paper's Sync-ST rounds are its inferred completion time (Fig. 7: 619 / (1 - 0.401) = 1033) divided
by the Sync-ST round length of a timing-only run of its heterogeneous setting (four tasks,
N = 1000, 300 available, R = 96 and b = 3 per task, first-30 of 100/84/48/68 clients).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from flkit import asyncfl
from flkit.utils import check_choice

from . import configs
from .numbers import NUMBERS
from .regime import TIMING_EXPERIMENTS, TIMING_INDICATORS, TIMING_TOLERANCE
from .tables import staleness

__all__ = [
    "PAPER_ROUND_LENGTH",
    "paper_setting",
    "realloc_room",
    "timing_indicators",
    "experiment_configs",
    "timing_table",
]

#: the Sync-ST round lengths of the paper's settings, from timing-only runs of those settings
#: (N = 1000, 300 available, first-30): the four-task mix with shares 100/84/48/68, and six
#: identical CIFAR-10 tasks with 50 clients each
PAPER_ROUND_LENGTH = {"heterogeneous": 16.0, "identical": 10.8}


def _staleness_stats(res) -> tuple[float | None, float | None]:
    st = staleness(res).staleness
    if not len(st):
        return None, None
    return float(st.mean()), float(np.percentile(st, 90))


def paper_setting(seed: int = 0, horizon: float = 600.0) -> dict:
    """The in-run quantities (:data:`.run_evidence.QUANTITIES`) of the paper's heterogeneous setting
    from a timing-only simulation (module doc): FedAST option S with R = 96, b = 3 per task for
    ``horizon`` time units, and Sync-ST with first-30 of 100/84/48/68 clients for the same time.
    Returns the indicators plus the mean Sync-ST round length they come from."""
    ratios = NUMBERS["delay_ratios"]
    names = ["mnist", "fmnist", "cifar10", "shakespeare"]
    shares = NUMBERS["sync_het_clients"]
    common = dict(
        num_clients=NUMBERS["num_clients"],
        availability=NUMBERS["available"] / NUMBERS["num_clients"],
        max_time=float(horizon),
    )
    fed_tasks = tuple(
        asyncfl.TaskConfig(
            n,
            dataset=n,
            requests=NUMBERS["requests_per_task_demo"],
            buffer=NUMBERS["buffer_demo"],
            target=0.99,
            delay_ratio=ratios[n],
        )
        for n in names
    )
    fed = asyncfl.run_fedast(
        asyncfl.FedASTRun("fedast_s", fed_tasks, **common),
        asyncfl.TimingTrainer(),
        seed=int(seed),
    )
    sync_tasks = tuple(
        asyncfl.TaskConfig(
            n, dataset=n, target=0.99, weight=float(shares[n]), delay_ratio=ratios[n]
        )
        for n in names
    )
    sync = asyncfl.run_sync(
        asyncfl.FedASTRun("sync_st", sync_tasks, k=NUMBERS["sync_k"], **common),
        asyncfl.TimingTrainer(),
        seed=int(seed),
    )
    rounds = int(sync.stats.get("rounds", 0))
    length = sync.total_time / rounds if rounds else None
    mean, p90 = _staleness_stats(fed)
    return {
        "sync_rounds": NUMBERS["het4_sync_completion_time_inferred"] / length if length else None,
        "sync_round_length": length,
        "staleness_mean": mean,
        "staleness_p90": p90,
    }


def realloc_room(config: dict) -> float:
    """The share of the requests Realloc can move between tasks: 1 - M * floor / sum R, where
    the floor per task is the official rule's allocation unit (``realloc_unit``, else r; at most
    sum R / M) and 1 for the paper's rule. The paper setting: 1 - 4 * 32 / 384 = 2/3."""
    cfg = asyncfl.FedASTRun.from_dict(config)
    total = sum(int(t.requests) for t in cfg.tasks)
    n = len(cfg.tasks)
    floor = 1 if cfg.realloc_rule == "paper" else min(cfg.realloc_unit or cfg.ratio, total // n)
    return 1.0 - n * floor / total


def _rate(res) -> float:
    return len(res.history) / res.total_time / max(1, len(res.tasks))


def timing_indicators(
    fedast: dict | None,
    sync: dict | None = None,
    nobuffer: dict | None = None,
    seeds: Sequence[int] = (0,),
    horizon: float = 300.0,
) -> dict:
    """The timing-only indicators (:data:`.regime.TIMING_INDICATORS`) of a FedAST config, a
    Sync-ST config and a NoBuffer config of one experiment (any may be None), over ``seeds``:
    round length and rate are means over seeds, staleness over every arrival of every seed."""
    out = dict.fromkeys(TIMING_INDICATORS)
    if fedast is not None and asyncfl.FedASTRun.from_dict(fedast).method == "fedast_d":
        out["realloc_room"] = realloc_room(fedast)
    if fedast is not None:
        runs = [asyncfl.timing_run(fedast, s, horizon) for s in seeds]
        st = pd.concat([staleness(r).staleness for r in runs], ignore_index=True)
        out["fedast_rate"] = float(np.mean([_rate(r) for r in runs]))
        out["staleness_mean"] = float(st.mean())
        out["staleness_p90"] = float(np.percentile(st, 90))
    if sync is not None:
        runs = [asyncfl.timing_run(sync, s, horizon) for s in seeds]
        out["sync_round_length"] = float(
            np.mean([r.total_time / r.stats["rounds"] for r in runs if r.stats.get("rounds")])
        )
    if out["fedast_rate"] is not None and out["sync_round_length"] is not None:
        out["updates_per_sync_round"] = out["fedast_rate"] * out["sync_round_length"]
    if nobuffer is not None:
        runs = [asyncfl.timing_run(nobuffer, s, horizon) for s in seeds]
        st = pd.concat([staleness(r).staleness for r in runs], ignore_index=True)
        out["nobuffer_staleness_mean"] = float(st.mean())
    return out


def experiment_configs(preset, experiment: str, requests: int | None = None) -> dict:
    """{"fedast", "sync", "nobuffer"} configs (None where the experiment has none) of one
    experiment of ``preset`` (:data:`.regime.TIMING_EXPERIMENTS`): the heterogeneous task mix
    (:func:`.configs.heterogeneous`), Fig. 2's identical tasks (:func:`.configs.fig2_config`), and
    Fig. 3's point with ``requests`` per task (:func:`.configs.active_config`; None: the largest of
    ``preset['active_requests']``)."""
    check_choice("experiment", experiment, TIMING_EXPERIMENTS)
    if experiment == "heterogeneous":
        return {
            "fedast": configs.heterogeneous(preset, "fedast_d"),
            "sync": configs.heterogeneous(preset, "sync_st"),
            "nobuffer": None,
        }
    if experiment == "identical":
        return {
            "fedast": configs.fig2_config(preset, "fedast_s"),
            "sync": configs.fig2_config(preset, "sync_st"),
            "nobuffer": None,
        }
    requests = max(preset["active_requests"]) if requests is None else int(requests)
    return {
        "fedast": configs.active_config(preset, requests, "fedast_d"),
        "sync": None,
        "nobuffer": configs.active_config(preset, requests, "nobuffer"),
    }


def timing_table(
    preset,
    paper_preset=None,
    seeds: Sequence[int] = (0,),
    horizon: float = 300.0,
    experiments: Sequence[str] = TIMING_EXPERIMENTS,
) -> pd.DataFrame:
    """Regime first: the timing-only indicators of every experiment
    (:data:`.regime.TIMING_EXPERIMENTS`) in the paper's setting (``paper_preset``, default the
    ``paper`` preset) beside ``preset``'s, with ours / paper and whether that is within
    :data:`.regime.TIMING_TOLERANCE`. No training: a few seconds per experiment and seed.
    ``experiments``: a subset of :data:`.regime.TIMING_EXPERIMENTS`."""
    from flkit.workbook import presets as _presets

    for exp in experiments:
        check_choice("experiment", exp, TIMING_EXPERIMENTS)
    paper_preset = paper_preset or _presets.load("03_fedast", "paper")
    rows = []
    for exp in experiments:
        # Fig. 3: both pools at our largest R (the paper does not give its x-values)
        req = max(preset["active_requests"]) if exp == "fig3" else None
        ours = timing_indicators(**experiment_configs(preset, exp), seeds=seeds, horizon=horizon)
        theirs = timing_indicators(
            **experiment_configs(paper_preset, exp, req), seeds=seeds, horizon=horizon
        )
        for key, text in TIMING_INDICATORS.items():
            p, o = theirs[key], ours[key]
            # Fig. 3 stops at a number of arrivals, not a time: its rate is not an indicator;
            # Realloc runs only in the mix
            if (
                (p is None and o is None)
                or (exp == "fig3" and key == "fedast_rate")
                or (exp != "heterogeneous" and key == "realloc_room")
            ):
                continue
            ratio = o / p if p and o is not None else None
            rows.append(
                {
                    "experiment": exp,
                    "key": key,
                    "indicator": text,
                    "paper": p,
                    "ours": o,
                    "ours / paper": ratio,
                    "within": None if ratio is None else abs(ratio - 1) <= TIMING_TOLERANCE,
                }
            )
    return pd.DataFrame(rows)

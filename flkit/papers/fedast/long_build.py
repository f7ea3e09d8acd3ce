"""Building notebook 03's `long` preset by its rule (README, "The `long` cut rule", as amended):
the two probes that set the targets and the high level's time (:func:`long_main_probe`,
:func:`long_high_probe`), and the plan that reads them (:func:`plan`): the targets they give,
each run's horizon from the `cpu` runs' times, the estimate of every cut preset and the cuts the
rule makes. The readings and the cuts themselves are pure functions in :mod:`.long_rule`; this
module is where runs are started or read from the run cache."""

from __future__ import annotations

from collections.abc import Mapping

from flkit import asyncfl
from flkit.utils import FlkitError, check_real

from . import configs, cost, horizons, long_rule
from .configs import heterogeneous
from .numbers import NUMBERS
from .study import use_threads

__all__ = ["uncut", "long_main_probe", "long_high_probe", "with_targets", "plan"]


def _paper_mix(preset) -> list[str]:
    """The mix's datasets; FlkitError for one without the paper's targets (Table 1)."""
    datasets = list(preset["het_datasets"])
    paper = NUMBERS["targets_main"]
    unknown = [d for d in datasets if d not in paper]
    if unknown:
        raise FlkitError(
            f"het_datasets={datasets}; accepted: a mix of datasets with the paper's targets, "
            f"{sorted(paper)} (no target for {unknown[0]!r})"
        )
    return datasets


def uncut(preset) -> dict:
    """``preset`` (the `long` preset as built) as the rule found it: every cut of
    :data:`.long_rule.LONG_CUTS` reverted and the mix at the paper's targets (Table 1's main ones,
    the appendix's higher ones, the regime ablation's the main ones), the input of the probes and
    of :func:`plan`. FlkitError for a dataset of the mix without the paper's targets."""
    datasets = _paper_mix(preset)
    main = [float(NUMBERS["targets_main"][d]) for d in datasets]
    high = [float(NUMBERS["targets_higher"][d]) for d in datasets]
    out = {**preset, "het_targets_main": main, "regime_het_targets": list(main)}
    out["het_targets_high"] = high
    for cut in long_rule.LONG_CUTS:
        out[cut.key] = list(cut.before) if isinstance(cut.before, list) else cut.before
    return out


def _check_horizon_and_paper_mix(preset, horizon) -> tuple[float, list[str]]:
    """``horizon`` as a float and the mix's datasets; FlkitError for a horizon that is not a
    positive finite number or a dataset without the paper's targets."""
    horizon = check_real("horizon", horizon, low=0, low_open=True)
    return horizon, _paper_mix(preset)


def _probe(preset, cfg, seed, device, out_dir, progress):
    use_threads(preset)
    return asyncfl.run(cfg, seed=int(seed), device=device, progress=progress, root=out_dir)


def long_main_probe(
    preset,
    seed: int = 0,
    horizon: float = 300.0,
    device="auto",
    out_dir=None,
    progress: bool = False,
) -> dict:
    """The first probe of the `long` cut rule (README, "The `long` cut rule"): one FedAST(D) run
    of ``preset``'s heterogeneous mix (:func:`heterogeneous`) with every task at the paper's main
    target (``NUMBERS['targets_main']``, whatever the preset's ``het_targets_main``) and
    ``max_time`` = ``horizon``, then its reading (:func:`.long_rule.long_main_targets`: T and every
    task's main and high target). The run is cached like every run (``out_dir``: the run-cache
    root; None, the default), so a reading that fails (the horizon too short) keeps its run.

    FlkitError before any work: ``horizon`` not a positive finite number, a dataset of the mix
    without the paper's targets. Returns the reading plus "horizon", "wall_seconds" and "result"
    (the SimResult)."""
    horizon, datasets = _check_horizon_and_paper_mix(preset, horizon)
    targets = [NUMBERS["targets_main"][d] for d in datasets]
    probed = {**preset, "het_targets_main": targets}
    cfg = heterogeneous(probed, "fedast_d", "main", max_time=horizon)
    res = _probe(preset, cfg, seed, device, out_dir, progress)
    paper = {t["name"]: t["target"] for t in cfg["tasks"]}
    reading = long_rule.long_main_targets(res.history, res.completion_time, paper)
    return {
        **reading,
        "horizon": horizon,
        "wall_seconds": res.stats.get("wall_seconds"),
        "result": res,
    }


def long_high_probe(
    preset,
    first_reading,
    seed: int = 0,
    horizon: float = 600.0,
    device="auto",
    out_dir=None,
    progress: bool = False,
) -> dict:
    """The second probe of the `long` cut rule (README, "The rule amended"): one FedAST(D) run of
    ``preset``'s heterogeneous mix at the high targets, ``max_time`` = ``horizon``, then its
    reading (:func:`.long_rule.long_high_targets`: each task's high level and T_high). A task the
    first probe left at its paper target (``first_reading['times']``) runs at the preset's
    ``het_targets_high``; a task it lowered, at ``first_reading['high']``. ``first_reading`` is
    :func:`long_main_probe`'s reading (or :data:`.long_rule.FIRST_PROBE`). Cached like every run.

    FlkitError before any work: ``horizon`` not a positive finite number, a dataset of the mix
    without the paper's targets, ``first_reading`` without "main", "high" and "times" for exactly
    the mix's tasks, a high target not above its main target. Returns the reading plus "main"
    (the first reading's main targets), "targets" (the high targets the probe ran at), "horizon",
    "wall_seconds" and "result" (the SimResult)."""
    horizon, _ = _check_horizon_and_paper_mix(preset, horizon)
    names = [t["name"] for t in heterogeneous(preset, "fedast_d", "high")["tasks"]]
    for key in ("main", "high", "times"):
        given = first_reading.get(key) if isinstance(first_reading, Mapping) else None
        if not isinstance(given, Mapping) or not set(given) <= set(names):
            raise FlkitError(
                f"first_reading[{key!r}]={given!r}; accepted: the first probe's reading, "
                f"{{task: ...}} over the mix's tasks {names}"
            )
    for key in ("main", "high"):
        if set(first_reading[key]) != set(names):
            raise FlkitError(
                f"first_reading[{key!r}] names {sorted(first_reading[key])}; accepted: every task "
                f"of the mix, {names}"
            )
    preset_high = dict(zip(names, preset["het_targets_high"], strict=True))
    highs = {
        n: float(preset_high[n] if n in first_reading["times"] else first_reading["high"][n])
        for n in names
    }
    main = {n: float(first_reading["main"][n]) for n in names}
    for n in names:
        if highs[n] <= main[n]:
            raise FlkitError(
                f"high target of {n!r}={highs[n]!r}; accepted: a level above its main target "
                f"{main[n]!r} (het_targets_high={list(preset['het_targets_high'])})"
            )
    probed = {**preset, "het_targets_high": [highs[n] for n in names]}
    cfg = heterogeneous(probed, "fedast_d", "high", max_time=horizon)
    res = _probe(preset, cfg, seed, device, out_dir, progress)
    reading = long_rule.long_high_targets(res.history, res.completion_time, main, highs)
    return {
        **reading,
        "main": main,
        "targets": highs,
        "horizon": horizon,
        "wall_seconds": res.stats.get("wall_seconds"),
        "result": res,
    }


def with_targets(preset, first_reading, second_reading) -> dict:
    """``preset`` with the mix's targets the two readings give: main targets from the first
    (:func:`.long_rule.long_main_targets`), also the regime ablation's (``regime_het_targets``, so
    that it reads the mix's runs as at `cpu`), high targets from the second
    (:func:`.long_rule.long_high_targets`), in the order of ``het_datasets``.

    FlkitError before any change: a reading without a level for one of the mix's tasks, or a task
    the second reading left with one level (the preset has no spelling for a task with one level
    in the dynamic vs static comparison; the message names the task)."""
    names = list(preset["het_datasets"])
    for label, reading, key in (
        ("first", first_reading, "main"),
        ("second", second_reading, "high"),
    ):
        levels = reading.get(key) if isinstance(reading, Mapping) else None
        if not isinstance(levels, Mapping) or set(levels) != set(names):
            raise FlkitError(
                f"the {label} reading's {key!r}={levels!r}; accepted: a level for every task of "
                f"the mix, {names}"
            )
    one = [n for n in names if second_reading["high"][n] is None]
    if one:
        raise FlkitError(
            f"tasks {one} have one level after the second probe; accepted: a high level for "
            "every task (a mix with one level for some task has no `long` spelling yet)"
        )
    main = [float(first_reading["main"][n]) for n in names]
    return {
        **preset,
        "het_targets_main": main,
        "het_targets_high": [float(second_reading["high"][n]) for n in names],
        # as at `cpu`: the regime ablation reads the mix's own runs, so its targets follow
        "regime_het_targets": list(main),
    }


def plan(long_preset, cpu_preset, cpu_root, first_reading, second_reading, seed: int = 0) -> dict:
    """The `long` rule on the probes' readings: ``long_preset`` (the uncut one) with the readings'
    targets (:func:`with_targets`), each run's horizon (:func:`.horizons.long_horizons`: the `cpu`
    runs' all-done times of seed ``seed``, read from the run cache under ``cpu_root`` without
    training, scaled by T and T_high over the `cpu` mix's FedAST(D) all-done time), the estimate
    of the preset as it stands and after each cut (:func:`.cost.long_estimate`, the horizons
    recomputed for each cut preset, since a cut changes the runs), and the cuts
    (:func:`.long_rule.long_cuts`).

    FlkitError before any estimate: a `cpu` run the estimate needs that is not cached under
    ``cpu_root`` (naming it), the `cpu` mix's FedAST(D) run missing a target, and the errors of
    the functions it calls. Returns :func:`.long_rule.long_cuts`' dict plus "targets" (the preset
    with the targets, before the cuts), "cpu_mix_alldone", "T", "T_high" and "estimates"
    ({cut number: the estimate's dict} of each step)."""
    targeted = with_targets(long_preset, first_reading, second_reading)
    times, why = horizons.cpu_alldone(cpu_preset, cpu_root, seed)
    absent = [k for k, w in why.items() if w == "not cached"]
    if absent:
        raise FlkitError(
            f"{len(absent)} `cpu` runs of seed {seed} are not cached under {str(cpu_root)!r} "
            f"(first: {str(absent[0])[:80]}...); accepted: the run-cache root of a finished "
            "`cpu` run of notebook 03"
        )
    mix_key = configs.run_key(configs.heterogeneous(cpu_preset, "fedast_d", "main"))
    cpu_mix = times.get(mix_key)
    if cpu_mix is None:
        raise FlkitError(
            f"the `cpu` mix's FedAST(D) run ({why.get(mix_key, 'absent')}) has no all-done time; "
            "accepted: a `cpu` run whose mix reached every target"
        )
    t_main = check_real("the first reading's T", first_reading.get("T"), low=0, low_open=True)
    t_high = check_real(
        "the second reading's T_high", second_reading.get("T_high"), low=0, low_open=True
    )
    estimates: list[dict] = []

    def estimate(preset: dict) -> float:
        per_run = horizons.long_horizons(preset, cpu_preset, times, cpu_mix, t_main, t_high)
        out = cost.long_estimate(preset, per_run, seed)
        estimates.append(out)
        return out["wall_minutes"]

    cuts = long_rule.long_cuts(estimate, targeted)
    return {
        **cuts,
        "targets": targeted,
        "cpu_mix_alldone": cpu_mix,
        "T": t_main,
        "T_high": t_high,
        "estimates": dict(zip((n for n, _ in cuts["steps"]), estimates, strict=True)),
    }

"""The horizons of notebook 03's `long` estimate, per run (README, "The `long` cut rule",
"Horizons of the estimate, per run"): the `cpu` runs' all-done times read from a run cache
(:func:`cpu_alldone`, nothing trained), which `cpu` run each `long` run is priced from
(:func:`run_roles`) and each `long` run's horizon (:func:`long_horizons`), in the per-run form
:func:`.cost.count_runs` takes."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from flkit.asyncfl.runner import cached
from flkit.utils import FlkitError, check_real

from . import configs
from .tables import summarize

__all__ = ["OWN_STOP", "cpu_alldone", "run_roles", "long_horizons"]

#: the experiments whose runs stop at their own arrival count (Fig. 3) or time (Fig. 4), never at
#: targets: their horizon is always their own stop
OWN_STOP = ("fig3", "fig4")


def cpu_alldone(cpu_preset, root, seed: int = 0, device="cpu") -> tuple[dict, dict]:
    """The all-done time of every run of :func:`.configs.experiment_configs` at ``cpu_preset``,
    read from the run cache under ``root`` (:func:`flkit.asyncfl.runner.cached`, looked up under
    the preset's ``threads``); nothing is trained and nothing under ``root`` is written.

    Returns (times, why): times {run key: the time its last task reached its target, or None},
    why {run key: "not cached", "missed a target" or "no target"} for each None (Fig. 3's runs
    have no target). FlkitError before any lookup: ``root`` not an existing folder."""
    folder = Path(root)
    if not folder.is_dir():
        raise FlkitError(f"root={str(root)!r} is not a folder; accepted: a run-cache folder")
    threads = int(cpu_preset["threads"]) or None
    times: dict = {}
    why: dict = {}
    for _, cfg in configs.experiment_configs(cpu_preset):
        key = configs.run_key(cfg)
        if key in times:
            continue
        res = cached(cfg, seed, device=device, root=folder, threads=threads)
        done = None if res is None else summarize(res)["all_done"]
        times[key] = done
        if res is None:
            why[key] = "not cached"
        elif done is None:
            no_target = all(t.get("target") is None for t in cfg["tasks"])
            why[key] = "no target" if no_target else "missed a target"
    return times, why


#: what tells one experiment's runs of a method and level apart, where it has several (Fig. 5:
#: the number of tasks M; the buffer sweep: b; the k sweep: k)
_SWEPT = {
    "fig5": lambda cfg: len(cfg["tasks"]),
    "buffer": lambda cfg: cfg["tasks"][0]["buffer"],
    "k": lambda cfg: cfg["k"],
}


def _mix_levels(preset, cfg: dict) -> list[str]:
    """Which of the mix's runs ``cfg`` is at ``preset``: "main", "high" and/or "ablation" (the
    regime ablation's setting), every one it equals (at `cpu` and `long` the ablation's run is
    the main one)."""
    method = cfg["method"]
    out = [lv for lv in ("main", "high") if cfg == configs.heterogeneous(preset, method, lv)]
    if cfg == configs.heterogeneous(configs.regime_preset(preset), method):
        out.append("ablation")
    if not out:
        raise FlkitError(
            f"a mix run ({method}) is none of the mix's settings; accepted: "
            "configs.heterogeneous at a level, or the regime ablation's"
        )
    return out


def run_roles(preset) -> list[tuple[str, str, tuple]]:
    """(experiment, run key, roles) of every run of :func:`.configs.experiment_configs` at
    ``preset``, in its order and with its repeats (a run two experiments share appears under
    each). A role is (method, level, setting): level the mix's "main", "high" or "ablation"
    (None elsewhere), setting the swept value of Fig. 5 (M), the buffer sweep (b) or the k sweep
    (k), None elsewhere. A mix run equal to several of its settings has a role for each, the
    first being the one it is counted as."""
    out = []
    for exp, cfg in configs.experiment_configs(preset):
        method = cfg["method"]
        levels = _mix_levels(preset, cfg) if exp == "mix" else [None]
        setting = _SWEPT[exp](cfg) if exp in _SWEPT else None
        out.append((exp, configs.run_key(cfg), tuple((method, lv, setting) for lv in levels)))
    return out


def _counterparts(table: dict, exp: str, role: tuple) -> list[str]:
    """The `cpu` run keys a `long` run of ``exp`` with ``role`` is priced from: the run with the
    same experiment, method, level (the high level's: the main one) and setting; where the swept
    setting has no `cpu` run, the `cpu` runs of the nearest settings below and above it."""
    method, level, setting = role
    level = "main" if level == "high" else level
    runs = table.get((exp, method, level), {})
    if not runs:
        have = sorted(f"{e}/{m}/{lv}" for e, m, lv in table)
        raise FlkitError(
            f"the `long` run {exp}/{method}/{level} has no `cpu` counterpart; accepted: a `long` "
            f"preset whose runs the `cpu` preset also has ({', '.join(have)})"
        )
    if setting in runs:
        return [runs[setting]]
    below = [s for s in runs if s < setting]
    above = [s for s in runs if s > setting]
    near = ([max(below)] if below else []) + ([min(above)] if above else [])
    return [runs[x] for x in near]


def _positive(what: str, value) -> float:
    return check_real(what, value, low=0, low_open=True)


def long_horizons(
    long_preset,
    cpu_preset,
    cpu_times: Mapping[str, float | None],
    cpu_mix_alldone: float,
    t_main: float,
    t_high: float | None = None,
) -> dict[str, dict[str, float | None]]:
    """The horizon of every run of ``long_preset`` by the README's `long` rule ("Horizons of the
    estimate, per run"), in :func:`.cost.count_runs`' per-run form {experiment: {run key: time or
    None}}. A run that stops at its targets: its `cpu` counterpart's all-done time
    (``cpu_times``, as :func:`cpu_alldone` gives them for ``cpu_preset``, seed 0) times
    ``t_main`` (the first probe's T) over ``cpu_mix_alldone`` (the `cpu` mix's FedAST(D) all-done
    time, seed 0), or times ``t_high`` (the second probe's T_high) for the mix's runs at the high
    level; None (the run's own ``max_time``) where the counterpart missed a target. Fig. 3 and
    Fig. 4 (:data:`OWN_STOP`): None (their own stop).

    The counterpart (the same experiment and method; :func:`run_roles`): the `cpu` run of the same
    experiment, method, level and swept setting. The mix's high-level runs take the `cpu` mix's
    main-level run of their method (`cpu` has one level). A swept setting `cpu` does not run (a
    `long` sweep point or M between `cpu`'s) takes the later all-done time of the `cpu` runs at
    the nearest settings below and above it (None if either missed), so the estimate stays an
    upper bound; beyond `cpu`'s range, the nearest one's.

    FlkitError before any work: ``t_main``, ``cpu_mix_alldone`` or a given ``t_high`` not a
    positive finite number; ``t_high`` missing while ``long_preset`` has high-level runs; a time in
    ``cpu_times`` neither None nor positive; a `long` run without a `cpu` counterpart; a
    counterpart missing from ``cpu_times``."""
    t_main = _positive("t_main", t_main)
    cpu_mix_alldone = _positive("cpu_mix_alldone", cpu_mix_alldone)
    if t_high is not None:
        t_high = _positive("t_high", t_high)
    for key, t in cpu_times.items():
        if t is not None:
            _positive(f"cpu_times[{str(key)[:80]!r}]", t)
    table: dict = {}
    for exp, key, roles in run_roles(cpu_preset):
        for method, level, setting in roles:
            table.setdefault((exp, method, level), {}).setdefault(setting, key)
    out: dict = {}
    for exp, key, roles in run_roles(long_preset):
        if any(key in runs for runs in out.values()):
            continue  # counted in the first experiment that has it (cost.experiment_runs)
        runs = out.setdefault(exp, {})
        if exp in OWN_STOP:
            runs[key] = None
            continue
        role = roles[0]
        if role[1] == "high" and t_high is None:
            raise FlkitError(
                f"t_high=None with the mix's high-level run of {role[0]} at `long`; accepted: "
                "the second probe's T_high (a positive time)"
            )
        times = []
        for part in _counterparts(table, exp, role):
            if part not in cpu_times:
                raise FlkitError(
                    f"cpu_times has no entry for the `cpu` counterpart of {exp}/{role[0]} "
                    f"({str(part)[:80]!r}...); accepted: the times cpu_alldone(cpu_preset, ...) "
                    "gives"
                )
            times.append(cpu_times[part])
        scale = t_high if role[1] == "high" else t_main
        runs[key] = None if None in times else max(times) * scale / cpu_mix_alldone
    return out

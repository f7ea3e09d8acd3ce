"""Experiment drivers of notebook 01 (STC with projection aggregation): configs from the preset,
runs through :func:`flkit.experiment.run` (cached on disk, keyed by the config), the ablation and
the layer update of Fig. 1. The measures and tables are in ``tables.py``, the verdicts in
``claims.py``::

    P = presets.load("01_stc_projection", "cpu")
    res = study.run_comparison(P, "mnist", seeds=[0, 1])    # {(method, seed): RunResult}
    tab = tables.summary(res, P["mnist_target"])             # one row per method and seed
    tables.table2(tab, "mnist")                              # paper beside ours
    claims.record(report, tab, "mnist")                      # verdicts
"""

from __future__ import annotations

import pandas as pd

from flkit import divergence
from flkit.experiment import RunConfig, Setup, is_cached, run
from flkit.preset_runs import distinct, from_preset, seeds_of
from flkit.preset_runs import use_threads as use_threads  # the notebook pins its threads
from flkit.utils import FlkitError, check_choice

from .numbers import NUMBERS as PAPER
from .tables import METHOD_LABELS, PARTS, mean_variance, oscillation, part_of, rounds_to_target

PAPER_METHODS = ("fedavg", "stc", "stc_pa")


# --------------------------------------------------------------------------- configs and runs
def method_params(preset: dict, method: str, **over) -> dict:
    """The method's hyperparameters from the preset (p, counter, alpha, tau, loss, variant)."""
    check_choice("method", method, tuple(METHOD_LABELS))
    mp = {}
    if method in ("stc", "stc_pa"):
        mp.update(p=float(preset["p"]), counter=preset["counter"])
    if method in ("fedfv", "stc_pa"):
        mp.update(
            alpha=float(preset["alpha"]),
            tau=int(preset["tau"]),
            loss=preset["loss"],
            external_variant=preset["external_variant"],
        )
    mp.update(over)
    return mp


def config(
    preset: dict, part: str, method: str, seed: int, device: str = "auto", **method_over
) -> RunConfig:
    """RunConfig of one method on one dataset part ("mnist" or "cifar10") of the preset: the part's
    keys (``mnist_rounds`` ...) over the shared ones (:func:`flkit.preset_runs.from_preset`)."""
    check_choice("part", part, PARTS)
    return from_preset(
        preset,
        f"{part}_",
        method=method,
        dataset=part,
        partition="shards",
        partition_kwargs={"shards_per_client": 2},
        per_client_eval=True,
        method_params=method_params(preset, method, **method_over),
        seed=int(seed),
        device=device,
    )


def part_settings(preset: dict, part: str) -> dict:
    """The preset keys of one dataset part without their prefix ("mnist_rounds" -> "rounds")."""
    check_choice("part", part, PARTS)
    pre = part + "_"
    return {k[len(pre) :]: v for k, v in preset.items() if k.startswith(pre)}


#: the parts run on fewer seeds than the comparison, each with its preset key and its smallest
#: count: the link ablation may be left out of a preset (0: not run there, for its time budget)
PART_SEEDS = {"cifar10_seeds": 1, "ablation_seeds": 1, "links_seeds": 0}


def part_seeds(preset: dict, seeds: list[int], key: str) -> list[int]:
    """The first ``preset[key]`` of the notebook's ``seeds``: the seeds of a part that runs on
    fewer of them (``PART_SEEDS``; ``links_seeds = 0`` gives no seeds: the link ablation is not
    run at that preset). FlkitError, before any run, for an unknown key or a count outside
    ``PART_SEEDS[key]`` .. len(seeds)."""
    check_choice("key", key, tuple(PART_SEEDS))
    n, low = preset[key], PART_SEEDS[key]
    if isinstance(n, bool) or not isinstance(n, int) or not low <= n <= len(seeds):
        raise FlkitError(
            f"{key}={n!r} in the preset; accepted: an integer from {low} to the preset's "
            f"seeds ({len(seeds)})"
        )
    return list(seeds[:n])


def labelled(results: dict) -> dict:
    """``run_comparison``'s {(method, seed): RunResult} keyed by the methods' display names
    instead, {(label, seed): RunResult}, as the figures of the link ablation take them."""
    return {(METHOD_LABELS.get(m, m), s): r for (m, s), r in results.items()}


def counter_runs(link_runs: dict, comparison: dict) -> dict:
    """The runs whose projection counters the notebook plots: the link ablation's, or, where the
    preset leaves it out (no runs), the comparison's own FedFV and STC-PA runs, relabelled."""
    return link_runs if link_runs else labelled(comparison)


def setup(preset: dict, part: str, seed: int, device: str = "auto") -> Setup:
    """Data, partition and initial model of a part at a seed (shared by all methods)."""
    return Setup.build(config(preset, part, "fedavg", seed, device))


def comparison_configs(preset: dict, part: str, seeds, methods=None, device: str = "auto") -> dict:
    """{(method, seed): RunConfig} of every method x seed on one part (``preset['methods']`` by
    default), seed by seed."""
    methods = list(methods or preset["methods"])
    if not methods:
        raise FlkitError("methods is empty; accepted: any of " + ", ".join(METHOD_LABELS))
    return {(m, seed): config(preset, part, m, seed, device) for seed in seeds for m in methods}


def run_comparison(
    preset: dict,
    part: str,
    seeds,
    methods=None,
    device: str = "auto",
    progress: bool = True,
    out_dir=None,
) -> dict:
    """Run every method × seed (cached); returns {(method, seed): RunResult}."""
    return _run_all(comparison_configs(preset, part, seeds, methods, device), progress, out_dir)


def _run_all(cfgs: dict, progress: bool, out_dir) -> dict:
    """{key: RunResult} of {key: RunConfig}, in order. Each run not in the cache gets its own
    setup, as it would alone (its partition, its initial model, the global generator seeded by
    it), on the dataset loaded once."""
    out, loaded = {}, {}
    for key, cfg in cfgs.items():
        su, data = None, (cfg.dataset, repr(cfg.dataset_kwargs), cfg.device)
        if not is_cached(cfg, out_dir):
            su = Setup.build(cfg, loaded.get(data))
            loaded[data] = su.data
        out[key] = run(cfg, out_dir=out_dir, progress=progress, setup=su)
    return out


# --------------------------------------------------------------------------- ablation
def ablation_grid(preset: dict) -> list[tuple]:
    """The (method, α, τ) settings of :func:`ablation`: plain STC, STC-PA at the preset's (α, τ),
    then each ``ablation_alphas`` at τ and each ``ablation_taus`` at α, each once."""
    a0, t0 = float(preset["alpha"]), int(preset["tau"])
    grid = [("stc", None, None), ("stc_pa", a0, t0)]
    grid += [("stc_pa", float(a), t0) for a in preset["ablation_alphas"]]
    grid += [("stc_pa", a0, int(t)) for t in preset["ablation_taus"]]
    return list(dict.fromkeys(grid))


def ablation_configs(preset: dict, seeds=(0,), device: str = "auto") -> dict:
    """{(method, α, τ, seed): RunConfig} of :func:`ablation`, seed by seed: MNIST at
    ``ablation_rounds`` rounds."""
    out = {}
    for seed in seeds:
        for method, a, t in ablation_grid(preset):
            over = {} if method == "stc" else {"alpha": a, "tau": t}
            cfg = config(preset, "mnist", method, seed, device, **over)
            out[(method, a, t, seed)] = cfg.replace(rounds=int(preset["ablation_rounds"]))
    return out


def ablation(
    preset: dict, seeds=(0,), device: str = "auto", progress: bool = True, out_dir=None
) -> pd.DataFrame:
    """STC-PA on MNIST over the preset's ``ablation_alphas`` (τ fixed at the preset's τ) and
    ``ablation_taus`` (α fixed), plus the preset's default (α, τ) and plain STC (the ``stc``
    method, the reference the projection has to beat), ``ablation_rounds`` rounds, every seed of
    ``seeds``. One row per setting and seed; ``setting`` names it ("STC", "α=0.1, τ=1 (default)"
    ...)."""
    a0, t0 = float(preset["alpha"]), int(preset["tau"])
    target = float(preset["mnist_target"])
    results = _run_all(ablation_configs(preset, seeds, device), progress, out_dir)
    rows = []
    for (method, a, t, seed), r in results.items():
        h = r.history
        if method == "stc":
            setting = "STC"
        else:
            setting = f"α={a:g}, τ={t}" + (" (default)" if (a, t) == (a0, t0) else "")
        rows.append(
            {
                "setting": setting,
                "seed": int(seed),
                "rounds": int(h["round"].max()),
                "alpha": a,
                "tau": t,
                "kept": int(h["kept"].iloc[-1]) if "kept" in h else None,
                "rounds_to_target": rounds_to_target(h, target),
                "rounds_to_paper_target": rounds_to_target(h, PAPER["target"][part_of(r.config)]),
                "final_acc": float(h["client_acc_mean"].iloc[-1] * 100),
                "variance": mean_variance(h),
                "oscillation": oscillation(h),
                "internal_proj/round": _mean_or_none(h, "internal_projections"),
                "external_proj/round": _mean_or_none(h, "external_projections"),
            }
        )
    return pd.DataFrame(rows)


def _mean_or_none(h: pd.DataFrame, column: str):
    return float(h[column].mean()) if column in h else None


# --------------------------------------------------------------------------- Fig. 1 data
def layer_update(
    preset: dict, seed: int = 0, device: str = "auto", part: str = "mnist", su: Setup | None = None
):
    """A real layer update for Fig. 1: one client's pseudo-gradient w_before − w_after after one
    local epoch from the initial model, for the model's largest weight tensor.
    Returns (parameter name, update tensor)."""
    from flkit.engine import train_clients
    from flkit.state import broadcast_state, model_state, param_names
    from flkit.utils import derive_seed

    cfg = config(preset, part, "fedavg", seed, device)
    su = su or Setup.build(cfg)
    start = broadcast_state(model_state(su.model), 1)
    res = train_clients(
        su.model,
        start,
        su.data.x_train,
        su.data.y_train,
        [su.parts[0]],
        cfg.local_spec(),
        [derive_seed(seed, "batches", 1, 0)],
        backend=cfg.backend,
    )
    divergence.check_finite(  # the divergence rule's first half: a figure of NaNs explains nothing
        res.train_loss[0],
        "training loss",
        "the local epoch of client 0 in layer_update",
        "a smaller learning rate usually keeps it finite",
    )
    names = param_names(su.model)
    name = max((n for n in names if start[n].dim() >= 2), key=lambda n: start[n][0].numel())
    return name, (start[name][0] - res.state[name][0]).detach().cpu()


# --------------------------------------------------------------------------- notebook helpers
def describe(preset: dict, seeds) -> str:
    """Markdown: what this preset runs, and how it differs from the paper preset."""
    ref = _paper_preset()
    lines = [
        f"**Preset `{getattr(preset, 'name', '?')}`** — seeds {list(seeds)} (CIFAR-10: "
        f"{list(seeds)[: int(preset['cifar10_seeds'])]}); p = {preset['p']}, α = "
        f"{preset['alpha']}, τ = {preset['tau']}, loss {preset['loss']!r} local training, "
        f"external loop {preset['external_variant']!r}, bits counted with the "
        f"{preset['counter']!r} counter.",
        "",
    ]
    lines.append(
        "| setting | MNIST here | MNIST paper preset | CIFAR-10 here | CIFAR-10 paper preset |"
    )
    lines.append("|---|---|---|---|---|")
    keys = (
        "model",
        "rounds",
        "lr",
        "batch_size",
        "local_epochs",
        "weight_decay",
        "num_clients",
        "clients_per_round",
        "train_subset",
        "test_subset",
        "target",
    )
    for k in keys:
        row = [k]
        for part in PARTS:
            here, paper = preset[f"{part}_{k}"], ref.get(f"{part}_{k}") if ref else None
            fmt = (
                (lambda v: "all" if v == 0 else f"{v:,}")
                if k.endswith("subset")
                else (lambda v: f"{v:.0%}" if isinstance(v, float) else str(v))
                if k == "target"
                else str
            )
            mark = "" if here == paper else " ⚠"
            row += [fmt(here) + mark, fmt(paper) if paper is not None else "?"]
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    lines.append("⚠ = scaled down from the paper preset to fit the CPU budget (README.md).")
    return "\n".join(lines)


def cifar10_note(preset: dict) -> str:
    """Markdown: the CIFAR-10 setting of this preset in words, every number from the preset (the
    notebook's text must not drift from it)."""
    d = part_settings(preset, "cifar10")
    seeds = int(preset["cifar10_seeds"])
    n, k = int(d["train_subset"]), int(d["num_clients"])
    train = (
        f"{n:,} training images ({n // k} per client)"
        if n
        else "the whole training set found (the offline mirror holds 12,000 images: "
        f"{12_000 // k} per client)"
    )
    test = (
        f"a {int(d['test_subset']):,}-image test subset"
        if d["test_subset"]
        else "the whole test set"
    )
    kind = "**qualitative**" if preset["cifar10_qualitative"] else "judged"
    return (
        f"This preset runs `{d['model']}` with {d['local_epochs']} local epoch(s) at lr {d['lr']} "
        f"for {d['rounds']} rounds, {int(d['num_clients'])} clients "
        f"({int(d['clients_per_round'])} per round), "
        f"on {train} and {test}, {seeds} seed(s), target {float(d['target']):.0%}. "
        f"Its CIFAR-10 verdicts are {kind}."
    )


def _paper_preset():
    from flkit.workbook import presets

    try:
        return dict(presets.load("01_stc_projection", "paper"))
    except FlkitError:  # pragma: no cover
        return {}


# --------------------------------------------------------------------------- calibrating STC
#: the parameters the paper leaves open that the STC calibration searches (preset key suffixes),
#: and the run's length (the scale at which the search runs)
CALIBRATION_KEYS = ("clients_per_round", "lr", "local_epochs", "rounds")


def calibration_row(
    preset: dict, setting: dict, seed: int = 0, device: str = "auto", out_dir=None, progress=False
) -> dict:
    """One row of the STC calibration table (the decision ``stc_setting`` of ``decisions.toml``,
    a measure for :func:`flkit.workbook.decision_runs.drive`): FedAvg and STC only
    (never STC-PA) on MNIST at the preset with ``setting`` ({"clients_per_round", "lr",
    "local_epochs", "rounds"}: any of them) overriding it; rounds to the preset's target,
    oscillation and best accuracy of each, and what the rule reads: FedAvg's share of the run to
    the target, STC's rounds over FedAvg's (None where one never reached it) and STC's
    oscillation minus FedAvg's."""
    bad = sorted(set(setting) - set(CALIBRATION_KEYS))
    if bad:
        raise FlkitError(f"calibration setting keys {bad}; accepted: {list(CALIBRATION_KEYS)}")
    p = dict(preset)
    p.update({f"mnist_{k}": v for k, v in setting.items()})
    target = float(p["mnist_target"])
    row = {
        "setting": ", ".join(f"{k}={setting[k]}" for k in CALIBRATION_KEYS if k in setting),
        "run_rounds": int(p["mnist_rounds"]),
        "seed": int(seed),
    }
    for m in ("fedavg", "stc"):
        h = run(config(p, "mnist", m, seed, device), out_dir=out_dir, progress=progress).history
        row[f"{m}_rounds"] = rounds_to_target(h, target)
        row[f"{m}_oscillation"] = oscillation(h)
        row[f"{m}_best"] = float(h["client_acc_mean"].max() * 100)
    fed, stc = row["fedavg_rounds"], row["stc_rounds"]
    row["fedavg_share"] = None if fed is None else fed / row["run_rounds"]
    row["stc_ratio"] = None if fed is None or stc is None else stc / fed
    row["oscillation_gap"] = row["stc_oscillation"] - row["fedavg_oscillation"]
    return row


# --------------------------------------------------------------------------- which link
#: the link ablation: (label, method, STC-PA's ``links``) -- which links carry STC
LINK_VARIANTS = (
    ("FedFV (no link compressed)", "fedfv", None),
    ("STC up, dense down", "stc_pa", "uplink"),
    ("dense up, STC down", "stc_pa", "downlink"),
    ("STC-PA (both links)", "stc_pa", None),
    ("STC (both links, no projection)", "stc", None),
)
#: the columns of ``link_ablation``'s table (also of an empty one: no seeds)
LINK_COLUMNS = (
    "variant",
    "seed",
    "rounds_to_target",
    "final_acc",
    "oscillation",
    "variance",
    "internal_proj/round",
    "external_proj/round",
    "update_norm",
)
#: what the notebook says where the preset leaves the link ablation out
LINKS_NOT_RUN = (
    "The link ablation is **not run at this preset** (`links_seeds = 0`: it holds the preset "
    'to its time budget, README "Run times"); the `cpu` and `paper` presets run it, and the '
    "parameter `links_seeds = 1` runs it here (two more full runs). The plots "
    "below show the projection's counters of this preset's own FedFV and STC-PA runs."
)


def link_configs(preset: dict, seeds, device: str = "auto") -> dict:
    """{(variant label, seed): RunConfig} of :func:`link_ablation`, seed by seed."""
    return {
        (label, int(seed)): config(
            preset, "mnist", method, seed, device, **({} if links is None else {"links": links})
        )
        for seed in seeds
        for label, method, links in LINK_VARIANTS
    }


def link_ablation(
    preset: dict, seeds, device: str = "auto", progress: bool = True, out_dir=None
) -> tuple[dict, pd.DataFrame]:
    """STC-PA with STC on the uplink only, on the downlink only, on both (the paper) and on
    neither (FedFV), beside plain STC, on MNIST at the preset's full run, every seed: which
    compressed link takes the projection's gain away. The FedFV, STC-PA and STC runs are the
    comparison's own (cached). Returns ({(label, seed): RunResult}, one row per variant and
    seed with rounds to the target, final accuracy, oscillation and the mean projection
    counters per round: ``LINK_COLUMNS``). No seeds (``links_seeds = 0``): nothing runs, and the
    table is empty with the same columns."""
    target = float(preset["mnist_target"])
    results = _run_all(link_configs(preset, seeds, device), progress, out_dir)
    rows = []
    for (label, seed), r in results.items():
        h = r.history
        rows.append(
            {
                "variant": label,
                "seed": seed,
                "rounds_to_target": rounds_to_target(h, target),
                "final_acc": float(h["client_acc_mean"].iloc[-1] * 100),
                "oscillation": oscillation(h),
                "variance": mean_variance(h),
                "internal_proj/round": _mean_or_none(h, "internal_projections"),
                "external_proj/round": _mean_or_none(h, "external_projections"),
                "update_norm": _mean_or_none(h, "update_norm"),
            }
        )
    return results, pd.DataFrame(rows, columns=LINK_COLUMNS)


# --------------------------------------------------------------------------- the notebook's runs
def runs(preset: dict, seeds) -> list[RunConfig]:
    """Every run the notebook trains at ``preset``, once for each notebook seed of ``seeds`` (each
    runs :func:`seeds_of` it): the MNIST and CIFAR-10 comparisons, the α/τ ablation and the link
    ablation, on their parts' seeds (:func:`part_seeds`) (:mod:`flkit.preset_runs`)."""
    out = []
    for seed in seeds:
        mine = seeds_of(preset, seed)
        out += comparison_configs(preset, "mnist", mine).values()
        cifar = part_seeds(preset, mine, "cifar10_seeds")
        out += comparison_configs(preset, "cifar10", cifar).values()
        out += ablation_configs(preset, part_seeds(preset, mine, "ablation_seeds")).values()
        out += link_configs(preset, part_seeds(preset, mine, "links_seeds")).values()
    return distinct(out)

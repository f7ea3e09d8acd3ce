"""Experiment drivers of notebook 05: configs from the preset, runs through flkit.experiment.run,
and the tables built from them. Every function returns a DataFrame (``dirichlet_counts`` a dict).
The estimation studies on a trajectory of global models are in :mod:`.estimation`."""

from __future__ import annotations

import pandas as pd
import torch

from ...data.partition import label_counts, partition
from ...experiment import RunConfig, Setup, run
from ...methods.staleness import WPred, stale_clients
from ...preset_runs import distinct, from_preset
from ...state import model_state
from ...utils import FlkitError, derive_seed, resolve_device

#: how the clients' data is drawn: Dirichlet label proportions (the paper's tables) or one class
#: per client (the official one-class script)
PARTITIONS = ("dirichlet", "one_class")

NAMES = {
    "unstale": "Unstale",
    "unweighted": "Unweighted",
    "weighted": "Weighted",
    "first_order": "1st-Order",
    "w_pred": "W-Pred",
    "asyn_tiers": "Asyn-Tiers",
    "gi_staleness": "Ours (GI)",
}
_SETUPS: dict = {}


def describe(preset) -> str:
    """Markdown: the data, clients, staleness and rounds this preset runs, and the size of each
    gradient inversion."""
    return (
        f"**Preset `{preset.name}`**: {preset['dataset']}, {preset['num_clients']} clients, "
        f"{preset['clients_per_round']} per round, {preset['rounds']} rounds, staleness "
        f"τ = {preset['tau']} rounds; each inversion fits {preset['gi_size']} surrogate samples "
        f"in {preset['gi_iters']} iterations."
    )


def config(
    preset,
    method: str,
    seed: int,
    alpha: float | None = None,
    tau: int | None = None,
    *,
    device: str = "auto",
    **extra,
) -> RunConfig:
    """The RunConfig of one method at the preset's setting (alpha, tau overridable) on
    `device`; `extra` joins the method's parameters."""
    mp = {
        "tau": int(preset["tau"] if tau is None else tau),
        "affected_class": preset["affected_class"],
        "num_stale": preset["num_stale"],
    }
    if method == "gi_staleness":
        mp.update(
            gi_size=preset["gi_size"],
            gi_iters=preset["gi_iters"],
            gi_lr=preset["gi_lr"],
            gi_topk=preset["gi_topk"],
            warm_start=preset["warm_start"],
            track_error=True,
        )
    if method == "w_pred" and preset["w_pred_damping"] != WPred.Params().damping:
        # a run's cache key holds its parameters as given: a damping equal to the method's
        # default is left out, so the key does not depend on where the value was written
        mp["damping"] = preset["w_pred_damping"]
    mp.update(extra)
    scheme = preset.get("partition", "dirichlet")
    if scheme not in PARTITIONS:
        raise FlkitError(f"partition={scheme!r}; accepted: {list(PARTITIONS)}")
    if scheme == "one_class":
        # the official one-class script: the label-sorted data cut into one contiguous chunk per
        # client, chunks dealt at random (a chunk may straddle two classes), so the stale clients
        # (the holders of the most affected-class samples) are that class's holders
        part, pkw = "shards", {"shards_per_client": 1}
    else:
        part = "dirichlet"
        pkw = {
            "alpha": float(preset["alpha"] if alpha is None else alpha),
            "samples_per_client": preset["samples_per_client"],
            "rounding": "floor",
        }
    # the preset's ``partition`` names a scheme here, never a RunConfig partition itself
    return from_preset(
        preset,
        method=method,
        partition=part,
        partition_kwargs=pkw,
        local_epochs=None,
        batch_size=preset["samples_per_client"] + 50,
        method_params=mp,
        seed=seed,
        device=device,
    )


def fresh_setup(cfg: RunConfig) -> Setup:
    """The Setup of a config, built once per (seed, partition, device, data) and reset to its
    init; the data tensors are shared by the setups of one device."""
    device = str(resolve_device(cfg.device))
    key = (
        cfg.seed,
        repr(cfg.partition_kwargs),
        device,
        cfg.dataset,
        repr(cfg.dataset_kwargs),
        cfg.model,
    )
    if key not in _SETUPS:
        data = next((s.data for k, s in _SETUPS.items() if k[2:5] == key[2:5]), None)
        s = Setup.build(cfg, data)
        s.init_state = model_state(s.model)
        _SETUPS[key] = s
    s = _SETUPS[key]
    s.model.load_state_dict(s.init_state)
    torch.manual_seed(cfg.seed)  # dropout draws start alike for every method of one seed
    return s


def train(cfg: RunConfig, **run_kwargs):
    """One run as every driver here trains it: from :func:`fresh_setup` (the global generator
    seeded by the config's seed, which the model's dropout draws from), then
    :func:`flkit.experiment.run` with ``run_kwargs``. The run pool trains the notebook's runs
    through it (:mod:`flkit.preset_runs`)."""
    return run(cfg, setup=fresh_setup(cfg), **run_kwargs)


def compare_configs(
    preset,
    seed: int,
    alpha=None,
    tau=None,
    seeds: int | None = None,
    names=None,
    device: str = "auto",
) -> list[RunConfig]:
    """The configs of :func:`compare`, seed by seed."""
    return [
        config(preset, m, s, alpha, tau, device=device)
        for s in range(seed, seed + (seeds or preset["seeds"]))
        for m in names or preset["methods"]
    ]


def compare(
    preset,
    seed: int,
    alpha=None,
    tau=None,
    seeds: int | None = None,
    names=None,
    progress: bool = True,
    device: str = "auto",
) -> pd.DataFrame:
    """Histories of every method over `seeds` consecutive seeds on `device`, one long frame."""
    frames = []
    for cfg in compare_configs(preset, seed, alpha, tau, seeds, names, device):
        h = train(cfg, progress=progress).history.copy()
        h["method"], h["seed"] = cfg.method, cfg.seed
        h["alpha"] = cfg.partition_kwargs.get("alpha", float("nan"))
        h["tau"] = cfg.method_params["tau"]
        frames.append(h)
    return pd.concat(frames, ignore_index=True)


def accuracy_table(
    hist: pd.DataFrame,
    ours: str = "gi_staleness",
    last: int = 3,
    smooth: int = 3,
    floor: float = 0.1,
) -> pd.DataFrame:
    """Final affected-class accuracy (mean of the last `last` evaluations, then over seeds) and
    the "Time" column: rounds to first reach the lowest final accuracy among the compared methods
    (curves smoothed over `smooth` evaluations), as 100 x rounds(method) / rounds(ours).
    A method that ends below `floor` (chance for 10 classes: it diverged) would make that target
    0 and every Time 100: it does not set the target and gets no Time (NaN)."""
    ev = hist.dropna(subset=["affected_accuracy"])
    rows = {}
    for (m, s), g in ev.groupby(["method", "seed"]):
        g = g.sort_values("round")
        curve = g["affected_accuracy"].rolling(smooth, min_periods=1).mean()
        rows[(m, s)] = (g["affected_accuracy"].tail(last).mean(), g["round"].values, curve.values)
    finals = pd.Series({k: v[0] for k, v in rows.items()})
    compared = [k for k in rows if k[0] != "unstale" and finals[k] >= floor]
    out = []
    for s in sorted({k[1] for k in rows}):
        target = min((finals[k] for k in compared if k[1] == s), default=float("nan"))
        hit = {}
        for (m, ss), (_, rounds, curve) in rows.items():
            if ss == s and finals[(m, ss)] < floor:
                hit[m] = float("nan")
            elif ss == s:
                idx = (curve >= target - 1e-12).nonzero()[0]
                hit[m] = float(rounds[idx[0]]) if len(idx) else float("nan")
        for m in hit:
            t = 100 * hit[m] / hit[ours] if ours in hit and hit[ours] > 0 else float("nan")
            out.append({"method": m, "seed": s, "acc": 100 * finals[(m, s)], "time": t})
    df = pd.DataFrame(out).groupby("method")[["acc", "time"]].mean()
    order = [m for m in NAMES if m in df.index]
    return df.loc[order]


def sweep_values(preset, which: str) -> list:
    """The alphas (at the main tau) or taus (at the main alpha) of :func:`sweep`: the preset's
    ``sweep_alphas`` / ``sweep_taus`` and its main value."""
    if which == "alpha":
        return sorted({float(preset["alpha"]), *map(float, preset["sweep_alphas"])}, reverse=True)
    return sorted({int(preset["tau"]), *map(int, preset["sweep_taus"])})


def sweep(
    preset, seed: int, which: str, progress: bool = True, device: str = "auto"
) -> pd.DataFrame:
    """Tables 10/11: accuracy and Time for each alpha (at the main tau) or tau (main alpha)."""
    parts = []
    for v in sweep_values(preset, which):
        kw = {"alpha": v} if which == "alpha" else {"tau": v}
        t = accuracy_table(
            compare(
                preset, seed, seeds=preset["sweep_seeds"], progress=progress, device=device, **kw
            )
        )
        t.columns = pd.MultiIndex.from_product([[f"{which}={v:g}"], t.columns])
        parts.append(t)
    return pd.concat(parts, axis=1)


def runs(preset, seeds) -> list[RunConfig]:
    """Every run the notebook trains at ``preset``, once for each notebook seed of ``seeds``:
    the comparison on the preset's ``seeds`` seeds from it, and each sweep the preset has (a
    non-empty ``sweep_alphas`` / ``sweep_taus``) on ``sweep_seeds`` seeds; each run is trained
    by :func:`train` (:mod:`flkit.preset_runs`)."""
    out = []
    for seed in seeds:
        out += compare_configs(preset, int(seed))
        for which in ("alpha", "tau"):
            if not preset[f"sweep_{which}s"]:
                continue
            for v in sweep_values(preset, which):
                kw = {"alpha": v} if which == "alpha" else {"tau": v}
                out += compare_configs(preset, int(seed), seeds=preset["sweep_seeds"], **kw)
    return distinct(out)


def affected_share(preset, seed: int, device: str = "auto") -> float:
    """Share of the affected class's training samples held by the stale clients, mean over the
    preset's seeds (regime indicator ``affected_share``)."""
    from . import regime  # here: listing or training the runs needs no claim rule

    out = []
    for s in range(seed, seed + preset["seeds"]):
        setup = fresh_setup(config(preset, "unstale", s, device=device))
        y = setup.data.y_train
        stale = stale_clients(setup.parts, y, preset["affected_class"], preset["num_stale"])
        out.append(regime.affected_share(setup.parts, y, stale, preset["affected_class"]))
    return float(sum(out) / len(out))


def dirichlet_counts(preset, seed: int, device: str = "auto") -> dict:
    """Fig. 10: clients x classes sample counts of the Dirichlet partition for each alpha."""
    y = fresh_setup(config(preset, "unstale", seed, device=device)).data.y_train
    out = {}
    for a in preset["heat_alphas"]:
        parts = partition(
            "dirichlet",
            y,
            preset["num_clients"],
            derive_seed(seed, "partition"),
            alpha=float(a),
            samples_per_client=preset["samples_per_client"],
            rounding="floor",
        )
        out[float(a)] = label_counts(parts, y, 10).cpu().numpy()
    return out


def with_paper(
    table: pd.DataFrame,
    paper: dict,
    on: str | None = None,
    columns: tuple = ("paper acc", "paper time"),
    digits: int = 1,
) -> pd.DataFrame:
    """Our table beside the paper's, rounded to `digits`: one column per name in `columns`.
    Each row's paper entry is looked up in `paper` by the row's method (the index, shown by its
    name; ``on=None``) or by its value in column `on`, rounded to 2 decimals as the paper's
    settings are; an entry is a tuple filling the columns in order, or one value for the
    first. A row the paper has no entry for gets empty paper columns."""
    out = table.copy()
    if on is None:
        keys = list(table.index)
        out.index = [NAMES.get(m, m) for m in keys]
    else:
        keys = [round(float(v), 2) for v in table[on]]
    vals = [paper.get(k) for k in keys]
    for i, name in enumerate(columns):
        out[name] = [v[i] if isinstance(v, tuple) else (v if i == 0 else None) for v in vals]
    return out.round(digits)

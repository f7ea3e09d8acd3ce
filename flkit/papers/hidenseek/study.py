"""Experiment drivers of notebook 04 (HideNseek): configs from the preset, runs through
flkit.experiment.run (cached on disk, resumable), results as DataFrames.

    P = presets.load("04_hidenseek", "cpu")
    runs = main_runs(P)   # long table: task, method, seed, round, accuracy, bytes, time
    accuracy_table(runs)                  # Table 1: final accuracy, mean and std over seeds

Measures, fixed before any run: accuracy = the test-size-weighted mean over the scored clients of
each client's accuracy on its own local test split with its own model, at the last round (methods
with personal heads or masks score only the clients that trained them; ``coverage`` = the share of
clients scored, beside every accuracy); bytes = per participating client per round, MiB; time =
the sum over rounds of the measured local-training seconds (one-shot pruning epochs included).
"""

from __future__ import annotations

import pandas as pd
import torch

from ... import models
from ...experiment import RunConfig, run
from ...preset_runs import distinct, from_preset, seeds_of, use_threads
from ...prune import (
    default_prunable,
    structural_masks,
    synflow_group_mask,
    weight_fraction,
)
from ...utils import FlkitError, check_choice, derive_seed
from ...workbook.tables import captioned
from .numbers import SETTINGS as PAPER_SETTINGS
from .regime import FIRST_FLIP_ROUND, chance, plateau_rise

LOCAL_TEST = {"har": 0.25, "femnist": 0.1, "mnist": 0.2}
MIB = 2**20
LABELS = {
    "fedavg_split": "FedAvg",
    "bnnavg": "BNNAvg",
    "fedmask": "FedMask",
    "signed": "Signed",
    "hidenseek": "HideNseek",
}
#: the Params options each method runs with, decided where the paper is silent (README,
#: "Decisions"), passed explicitly so that a run cached before a default changed is never served;
#: FedMask's and Signed's ``normalize`` and BNNAvg's ``real_lr`` are preset values, set by rules
#: (``<method>_normalize``, ``bnnavg_real_lr``)
OPTIONS = {
    "hidenseek": {"normalize": "all", "writeback": "inverse", "score_clients": "trained"},
    "fedmask": {"writeback": "linear", "score_clients": "trained"},
    "signed": {"writeback": "linear", "score_clients": "trained"},
    "bnnavg": {"normalize": "all"},
}
#: BNNAvg's VGG9 in the binary networks' block order, each max-pool before its block's BatchNorm
#: and sign (``deep.build_vgg9``'s ``pool_position``); the other methods keep the model's order
BNNAVG_VGG = {"pool_position": "before_norm"}


def lr_of(preset, method: str, task: str) -> float:
    """The learning rate of ``method`` on ``task`` (har, femnist, mnist_a<alpha>): the preset's
    ``<method>_mnist_lr`` on MNIST, ``<method>_lr`` on HAR and FEMNIST."""
    check_choice("method", method, tuple(LABELS))
    mnist = task.split("_")[0] == "mnist"
    return float(preset[f"{method}_mnist_lr" if mnist else f"{method}_lr"])


def options_of(preset, method: str) -> dict:
    """The Params options of ``method``'s runs: :data:`OPTIONS` and those the preset sets."""
    check_choice("method", method, tuple(LABELS))
    out = dict(OPTIONS.get(method, {}))
    if method in ("fedmask", "signed"):
        out["normalize"] = preset[f"{method}_normalize"]
    if method == "bnnavg" and preset["bnnavg_real_lr"]:
        out["real_lr"] = float(preset["bnnavg_real_lr"])
    return out


def tasks(preset) -> list[str]:
    """Task names of Table 1: har, femnist, mnist_a<alpha>."""
    return ["har", "femnist"] + [f"mnist_a{a:g}" for a in preset["alphas"]]


def describe(preset) -> str:
    """Markdown: the clients, rounds, local epochs and seeds this preset runs, beside the
    paper's."""
    har, mnist, paper = PAPER_SETTINGS["har"], PAPER_SETTINGS["mnist"], PAPER_SETTINGS
    return (
        f"**Preset `{preset.name}`.** HAR: {preset['har_num_clients']} subjects, "
        f"{preset['har_clients_per_round']} per round, {preset['har_rounds']} rounds (paper "
        f"{har['clients']}, {har['per_round']}, {har['rounds']}). MNIST: "
        f"{preset['mnist_num_clients']} clients, {preset['mnist_clients_per_round']} per round, "
        f"{preset['mnist_rounds']} rounds, alpha in {preset['alphas']}, VGG9 width "
        f"x{preset['vgg_width']} (paper {mnist['clients']}, {mnist['per_round']}, "
        f"{mnist['rounds']}, x1). FEMNIST: {preset['femnist_num_clients']} writers (the data "
        f"mirror holds 105; the paper uses 320). Local epochs E = {preset['har_local_epochs']} "
        f"(HAR) / {preset['local_epochs']} (images), paper {paper['local_epochs']}; "
        f"{preset['seeds']} seed(s) (paper {paper['seeds']})."
    )


def config(
    preset,
    task: str,
    method: str,
    seed: int,
    device: str = "auto",
    clients_per_round=None,
    **method_over,
) -> RunConfig:
    """The RunConfig of one method on one task at the preset's scale, with the preset's learning
    rate (:func:`lr_of`) and options (:func:`options_of`) of the method; ``method_over`` (``lr``
    and Params options) over them."""
    check_choice("method", method, tuple(LABELS))
    family = task.split("_")[0]
    check_choice("task", family, tuple(LOCAL_TEST))
    mp = {"local_test_frac": LOCAL_TEST[family]}
    if family == "femnist":  # LEAF's per-writer split, not per class
        mp["local_split"] = "writer"
    if method in ("hidenseek", "fedmask", "signed"):
        mp.update(keep_ratio=float(preset["keep_ratio"]), eps=float(preset["eps"]))
    mp.update(options_of(preset, method))
    if method == "hidenseek":
        mp.update(prune_iterations=int(preset["prune_iterations"]))
    lr = float(method_over.pop("lr", lr_of(preset, method, task)))
    mp.update(method_over)
    common = dict(method=method, lr=lr, momentum=0.9, seed=seed, device=device, method_params=mp)
    if clients_per_round:
        common["clients_per_round"] = clients_per_round
    if family == "har":
        common.update(dataset_kwargs={"flatten": True, "split": "pooled"}, model="mlp_har")
    else:
        vgg = {"width": float(preset["vgg_width"]), **(BNNAVG_VGG if method == "bnnavg" else {})}
        common.update(model="vgg9", model_kwargs=vgg)
    if family == "mnist":
        split = {"alpha": float(task.split("_a")[1]), "min_samples": 20}
        # passed only when set, so the configs (and cache keys) of the plain split stay as they were
        if preset["mnist_dirichlet_cap"]:
            split["cap"] = True
        if preset["mnist_dirichlet_tries"]:
            split["max_tries"] = int(preset["mnist_dirichlet_tries"])
        common.update(partition="dirichlet", partition_kwargs=split)
    else:  # HAR's subjects and FEMNIST's writers
        common.update(partition="natural")
    # the task's keys (har_rounds, mnist_train_subset ...) over the shared ones: flkit.preset_runs
    return from_preset(preset, f"{family}_", dataset=family, **common)


def _history(cfg: RunConfig, progress: bool) -> pd.DataFrame:
    res = run(cfg, progress=progress)
    h = res.history.copy()
    h["bytes_up_client"] = h["bytes_up"] / cfg.clients_per_round
    h["bytes_down_client"] = h["bytes_down"] / cfg.clients_per_round
    return h


def collect(preset, jobs, device="auto", progress=True) -> pd.DataFrame:
    """Run (or load from the cache) every job (task, method, seed, extra columns, config kwargs)."""
    use_threads(preset)
    frames = []
    for task, method, seed, cols, kw in jobs:
        h = _history(config(preset, task, method, seed, device, **kw), progress)
        for k, v in {"task": task, "method": LABELS[method], "seed": seed, **cols}.items():
            h[k] = v
        frames.append(h)
    return pd.concat(frames, ignore_index=True)


def seeds(preset, first: int = 0) -> list[int]:
    """The seeds a notebook run with ``first`` trains (:func:`flkit.preset_runs.seeds_of`)."""
    return seeds_of(preset, first)


def main_jobs(preset, seed: int = 0) -> list[tuple]:
    """The jobs (task, method, seed, extra columns, config kwargs) of :func:`main_runs`."""
    return [
        (t, m, s, {}, {})
        for t in tasks(preset)
        for m in preset["methods"]
        for s in seeds(preset, seed)
    ]


def main_runs(preset, device="auto", progress=True, seed: int = 0) -> pd.DataFrame:
    """Every method on every task and seed (Table 1, Figs. 2-3, Tables 2-3)."""
    return collect(preset, main_jobs(preset, seed), device, progress)


def active_jobs(preset, seed: int = 0) -> list[tuple]:
    """The jobs of :func:`active_runs`."""
    return [
        ("mnist_a1", m, s, {"active": k}, {"clients_per_round": k})
        for m in ("hidenseek", "fedmask")
        for k in preset["active_clients"]
        for s in seeds(preset, seed)
    ]


def active_runs(preset, device="auto", progress=True, seed: int = 0) -> pd.DataFrame:
    """Table 4: HideNseek and FedMask on MNIST alpha = 1 with more clients per round."""
    return collect(preset, active_jobs(preset, seed), device, progress)


def keep_ratio_jobs(preset, seed: int = 0) -> list[tuple]:
    """The jobs of :func:`keep_ratio_runs`."""
    return [
        (f"mnist_a{a:g}", "hidenseek", s, {"keep_ratio": r}, {"keep_ratio": r})
        for a in preset["alphas"]
        for r in (preset["small_keep_ratio"], preset["keep_ratio"])
        for s in seeds(preset, seed)
    ]


def keep_ratio_runs(preset, device="auto", progress=True, seed: int = 0) -> pd.DataFrame:
    """Fig. 4: HideNseek with keep ratio p_r = small_keep_ratio vs keep_ratio on MNIST."""
    return collect(preset, keep_ratio_jobs(preset, seed), device, progress)


def eps_jobs(preset, seed: int = 0) -> list[tuple]:
    """The jobs of :func:`eps_runs`."""
    return [
        ("har", "hidenseek", s, {"eps": e}, {"eps": e, "normalize": "sampled"})
        for e in [preset["eps"], *preset["eps_grid"]]
        for s in seeds(preset, seed)
    ]


def eps_runs(preset, device="auto", progress=True, seed: int = 0) -> pd.DataFrame:
    """Sensitivity of HideNseek on HAR to the clip eps of the arctanh aggregation, with the votes
    normalised over the sampled clients (``normalize="sampled"``): only there does a unanimous
    vote reach the clip (normalised over all clients the mean vote stays within the sampled
    share, and eps never binds)."""
    return collect(preset, eps_jobs(preset, seed), device, progress)


def runs(preset, seeds: list[int]) -> list[RunConfig]:
    """Every run the notebook trains at ``preset``, once for each notebook seed of ``seeds``
    (each runs the preset's ``seeds`` from it): Table 1's, Table 4's, Fig. 4's and the eps
    sensitivity's (:mod:`flkit.preset_runs`)."""
    jobs = [
        job
        for seed in seeds
        for make in (main_jobs, active_jobs, keep_ratio_jobs, eps_jobs)
        for job in make(preset, int(seed))
    ]
    return distinct(config(preset, task, m, s, **kw) for task, m, s, _, kw in jobs)


def timed(preset, seeds: list[int]) -> list[RunConfig]:
    """The runs of :func:`runs` whose local-training seconds the notebook reads (Table 3, the time
    claim): Table 1's, for each notebook seed of ``seeds``."""
    return distinct(
        config(preset, task, m, s, **kw)
        for seed in seeds
        for task, m, s, _, kw in main_jobs(preset, int(seed))
    )


# --------------------------------------------------------------------------- tables
def final_accuracy(runs: pd.DataFrame, by=("task", "method")) -> pd.DataFrame:
    """Per run: the last evaluated accuracy (%), the mean of its last three evaluations (%) and
    the share of clients scored at that evaluation (NaN: the method scores every client with the
    global model)."""
    ev = runs.dropna(subset=["test_accuracy"])
    keys = list(by) + ["seed"]
    tail = ev.groupby(keys).tail(1).set_index(keys)
    last = tail["test_accuracy"] * 100
    mean3 = ev.groupby(keys)["test_accuracy"].apply(lambda s: s.tail(3).mean() * 100)
    cover = tail["coverage"] if "coverage" in tail else pd.Series(float("nan"), index=tail.index)
    return pd.DataFrame({"final": last, "last3": mean3, "coverage": cover}).reset_index()


def accuracy_table(runs: pd.DataFrame, by=("task", "method")) -> pd.DataFrame:
    """Mean and std over seeds of the final accuracy (%), one row per task and method, with the
    smallest share of clients scored over the seeds (``coverage``; NaN: every client is scored
    with the global model)."""
    f = final_accuracy(runs, by)
    g = f.groupby(list(by))
    out = g["final"].agg(["mean", "std", "count"])
    out["coverage"] = g["coverage"].min()
    return out.reset_index()


def bytes_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Table 2: MiB per participating client per round, upload and download."""
    g = runs.groupby(["task", "method"])[["bytes_up_client", "bytes_down_client"]].mean() / MIB
    return g.rename(
        columns={"bytes_up_client": "up_MiB", "bytes_down_client": "down_MiB"}
    ).reset_index()


def time_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Table 3: local-training seconds per run (sum over rounds) and per round, mean over seeds."""
    per_run = (
        runs.groupby(["task", "method", "seed"])["train_seconds"].agg(["sum", "mean"]).reset_index()
    )
    return (
        per_run.groupby(["task", "method"])[["sum", "mean"]]
        .mean()
        .rename(columns={"sum": "total_s", "mean": "per_round_s"})
        .reset_index()
    )


def accuracy_views(acc: pd.DataFrame) -> list:
    """Table 1 as the notebook shows it: the mean final accuracy per method and task, then the
    share of clients scored (``accuracy_table``'s ``coverage``), each captioned."""
    mean = acc.pivot(index="method", columns="task", values="mean")
    cover = acc.pivot(index="method", columns="task", values="coverage")
    return [
        captioned(mean, "Table 1: final accuracy (%), mean over seeds", 1),
        captioned(
            cover,
            "Share of clients scored at the last round (–: every client, with the global model)",
            2,
        ),
    ]


def cost_views(byt: pd.DataFrame, tim: pd.DataFrame) -> list:
    """Tables 2 and 3 as the notebook shows them (``bytes_table``, ``time_table``), captioned."""
    up_down = byt.pivot(index="method", columns="task", values=["up_MiB", "down_MiB"])
    total = tim.pivot(index="method", columns="task", values="total_s")
    return [
        captioned(up_down, "Table 2: MiB per participating client per round, up and down", 4),
        captioned(
            total, "Table 3: local-training seconds per run (all rounds), mean over seeds", 1
        ),
    ]


def relative_to(
    table: pd.DataFrame,
    column: str,
    ref: str = "FedMask",
    method: str = "HideNseek",
    kind: str = "diff",
) -> pd.Series:
    """Per task: method minus ref ("diff", points) or 1 - method / ref ("saving", %)."""
    piv = table.pivot(index="task", columns="method", values=column)
    if kind == "diff":
        return piv[method] - piv[ref]
    return 100 * (1 - piv[method] / piv[ref])


# --------------------------------------------------------------------------- one-time costs
def one_time_costs(preset, seed: int = 0) -> pd.DataFrame:
    """Bytes sent once, not per round: the frozen weights as floats (or an 8-byte seed that lets a
    client regenerate them) and HideNseek's structural mask (1 byte per channel / node); with the
    channels kept and the realised fraction of the pruned layers' weights at the preset's p_r."""
    rows = []
    for name, kw, shape in (
        ("mlp_har", {}, (1152,)),
        ("vgg9", {"num_classes": 10, "width": float(preset["vgg_width"])}, (1, 28, 28)),
    ):
        torch.manual_seed(derive_seed(seed, "init"))
        model = models.build(name, **kw)
        layers = default_prunable(model)
        keep = synflow_group_mask(
            model, shape, float(preset["keep_ratio"]), layers, int(preset["prune_iterations"])
        )
        masks = structural_masks(model, keep, shape)
        rows.append(
            {
                "model": name,
                "groups_kept": sum(int(k.sum()) for k in keep.values())
                / sum(k.numel() for k in keep.values()),
                "weight_fraction": weight_fraction(model, masks, layers),
                "weights_as_floats_MiB": 4 * models.count_params(model) / MIB,
                "weights_as_seed_bytes": 8,
                "structural_mask_bytes": sum(k.numel() for k in keep.values()),
            }
        )
    return pd.DataFrame(rows)


def decision_rows(
    preset,
    task: str = "mnist_a1",
    methods=None,
    rounds=None,
    seeds=(0,),
    device="auto",
    progress=False,
    out_dir=None,
) -> pd.DataFrame:
    """The rows a decision's table holds for one candidate, the measure that
    ``flkit.workbook.decision_runs.drive`` runs: each method of ``methods`` (default the
    preset's) on ``task`` at the preset's settings (a candidate's over them), one run per seed of
    max(``rounds``) rounds (default: the preset's rounds of the task), read at every R of
    ``rounds`` (the first R rounds of a longer run are the R-round run: the learning rate is
    constant and nothing depends on the total). One row per (method, seed, R): accuracy at round R
    (%), above chance (points), the smallest flip share in rounds 3..R (None for a method without
    a mask), the rise over the last 5 rounds read from the fit over the last 20
    (``regime.plateau_rise``), the local-training seconds up to R, and the run's lr and clients
    per round. Every config is built (and so checked) before any run::

        d = decisions.load("hidenseek")["long_mnist_lr_hidenseek"]
        long = presets.load("04_hidenseek", "long")
        outcome, rows = decision_runs.drive(d, lambda c: decision_rows(
            {**long, **d.values(c)}, methods=["hidenseek"], seeds=(0, 1)).to_dict("records"))
    """
    family = task.split("_")[0]
    grid = sorted(rounds or (int(preset[f"{family}_rounds"]),))
    longest = grid[-1]
    bad = [r for r in grid if r % int(preset["eval_every"]) and r != longest]
    if bad:
        raise FlkitError(
            f"rounds {bad} are never evaluated; accepted: multiples of "
            f"eval_every={preset['eval_every']} or the largest, {longest}"
        )
    longer = {**preset, f"{family}_rounds": longest}
    cfgs = [
        (m, s, config(longer, task, m, s, device))
        for m in methods or preset["methods"]
        for s in seeds
    ]
    rows = []
    for method, seed, cfg in cfgs:
        res = run(cfg, out_dir=out_dir, progress=progress)
        h = res.history
        for r in grid:
            upto = h[h["round"] <= r]
            ev = upto.dropna(subset=["test_accuracy"])
            acc = float(ev.test_accuracy.iloc[-1] * 100)
            late = upto.loc[upto["round"] >= FIRST_FLIP_ROUND]
            flips = (
                float(late.flip_share.min())
                if "flip_share" in late and late.flip_share.notna().any()
                else None
            )
            rows.append(
                {
                    "task": task,
                    "method": LABELS[method],
                    "seed": seed,
                    "rounds": r,
                    "lr": float(res.config.lr),
                    "clients_per_round": int(res.config.clients_per_round),
                    "accuracy": acc,
                    "above_chance": acc - chance(task),
                    "flip_share": flips,
                    "rise5": plateau_rise(ev["round"], ev.test_accuracy * 100),
                    "train_s": float(upto.train_seconds.sum()),
                }
            )
    return pd.DataFrame(rows)

"""Experiment drivers of notebook 02 (FedDIP): configs from the preset, runs through
:func:`flkit.experiment.run` (cached on disk by config), result tables as DataFrames.

    P = presets.load("02_feddip", "cpu")
    info = check_data(P, "fmnist_lenet5")                 # refuses reduced copies at `paper`
    res = run_grid(P, "fmnist_lenet5", seeds=[0, 1])      # {(method, sparsity, seed): RunResult}
    final_table(res)                                      # rows methods, columns sparsities
"""

from __future__ import annotations

import pandas as pd

from ... import data as data_mod
from ...data.provenance import reduced_allowed, shown_source
from ...experiment import RunConfig, Setup, is_cached, run
from ...preset_runs import distinct, from_preset, seeds_of
from ...prune.schedules import check_landing
from ...utils import FlkitError, check_choice

# workload -> (dataset, model, dataset options); the paper's three pairs
WORKLOADS = {
    "fmnist_lenet5": ("fmnist", "lenet5", {"normalize": "none"}),
    "cifar10_alexnet": ("cifar10", "alexnet_cifar", {}),
    "cifar100_resnet18": ("cifar100", "resnet18", {}),
}
LABELS = {
    "fedavg": "FedAvg",
    "fedprox": "FedProx",
    "snip": "SNIP",
    "prunetrain": "PruneTrain",
    "prunefl": "PruneFL",
    "feddst": "FedDST",
    "dpf": "DPF",
    "feddp": "FedDP",
    "feddip": "FedDIP",
    "feddip_prox": "FedDIP+Prox",
}
DENSE = ("fedavg", "fedprox")


def method_params(preset: dict, method: str, sparsity: float, rounds: int, **over) -> dict:
    """The method's hyperparameters from the preset (schedules span the run's rounds)."""
    check_choice("method", method, tuple(LABELS))
    mp = {"lr_decay": float(preset["lr_decay"])}
    if method == "fedprox":
        mp["mu"] = float(preset["mu"])
    if method in DENSE:
        return {**mp, **over}
    mp["sparsity"] = float(sparsity)
    if method != "snip":
        mp["horizon"] = int(rounds)
    if method in ("feddip", "feddp", "dpf", "feddip_prox"):
        mp.update(
            R=int(preset["R"]),
            Q=int(preset["Q"]),
            lambda_variant=preset["lambda_variant"],
            mask_order=preset["mask_order"],
            round0=preset["round0"],
        )
        if method != "dpf":
            mp["s0"] = float(preset["s0"])
        if method in ("feddip", "feddip_prox"):
            mp["lambda_max"] = float(preset["lambda_max"])
        if method == "feddip_prox":
            mp["mu"] = float(preset["mu"])
    elif method == "prunetrain":
        mp.update(s0=float(preset["s0"]), coef=float(preset["prunetrain_coef"]))
    elif method == "prunefl":
        mp.update(
            s0=float(preset["s0"]),
            R=int(preset["R_baselines"]),
            init_rounds=int(preset["prunefl_init_rounds"]),
        )
    elif method == "feddst":
        mp.update(R=int(preset["R_baselines"]), alpha=float(preset["feddst_alpha"]))
    mp.update(over)
    return mp


def config(
    preset: dict,
    workload: str,
    method: str,
    sparsity: float,
    seed: int,
    device="auto",
    noniid: bool = False,
    **over,
) -> RunConfig:
    """RunConfig of one method at one target sparsity (IID, or 2 classes per client)
    (:func:`flkit.preset_runs.from_preset`; the non-IID runs last ``noniid_rounds``)."""
    check_choice("workload", workload, tuple(WORKLOADS))
    dataset, model, ds_kw = WORKLOADS[workload]
    rounds = int(preset["noniid_rounds"] if noniid else preset["rounds"])
    part = (
        dict(partition="classes_per_client", partition_kwargs={"classes": 2})
        if noniid
        else dict(partition="iid")
    )
    return from_preset(
        preset,
        method=method,
        dataset=dataset,
        model=model,
        rounds=rounds,
        per_client_eval=noniid,
        method_params=method_params(preset, method, sparsity, rounds, **over),
        dataset_kwargs=ds_kw,
        seed=int(seed),
        device=device,
        **part,
    )


def check_data(preset, workload: str, device="auto") -> dict:
    """Which data a workload uses; FlkitError when the preset requires the full training set
    (``require_full_data``) and only a reduced copy is available, unless ``allow_reduced_data``
    (the preset key, or ``$FLKIT_ALLOW_REDUCED_DATA=1``: :mod:`flkit.data.provenance`)."""
    dataset, _, ds_kw = WORKLOADS[workload]
    ident = data_mod.identity(dataset, **ds_kw)
    info = {
        "workload": workload,
        "dataset": dataset,
        "train_images": ident["train"],
        "full_train_images": ident["full_train"],
        "test_images": ident["test"],
        "source": ident["source"],
        "reduced": ident["reduced"],
    }
    allowed = preset["allow_reduced_data"] or reduced_allowed()
    if info["reduced"] and preset["require_full_data"] and not allowed:
        raise FlkitError(
            f"preset {getattr(preset, 'name', '?')!r} needs the full {dataset} training set "
            f"({ident['full_train']:,} images) but the copy found has {ident['train']:,} "
            f"({info['source']}); install the full dataset, or pass allow_reduced_data=True "
            "to run on it anyway (the results then record it)"
        )
    return info


def _runs(cfgs, progress, out_dir):
    """{key: RunResult} of [(key, RunConfig)], in order. Each run not in the cache gets its own
    setup, as it would alone (its partition, its initial model, the global generator seeded by it:
    AlexNet's dropout draws from it), on the dataset loaded once."""
    out, loaded = {}, {}
    for key, cfg in cfgs:
        su, data = None, (cfg.dataset, repr(cfg.dataset_kwargs), cfg.device)
        if not is_cached(cfg, out_dir):
            su = Setup.build(cfg, loaded.get(data))
            loaded[data] = su.data
        out[key] = run(cfg, out_dir=out_dir, progress=progress, setup=su)
    return out


def grid_configs(preset, workload: str, seeds, device="auto") -> list[tuple]:
    """[((method, sparsity, seed), RunConfig)] of :func:`run_grid`, seed by seed."""
    return [
        ((m, float(s), seed), config(preset, workload, m, s, seed, device))
        for seed in seeds
        for m in preset["methods"]
        for s in ([0.0] if m in DENSE else preset["sparsities"])
    ]


def run_grid(preset, workload: str, seeds, device="auto", progress=True, out_dir=None) -> dict:
    """Every method at every target sparsity and seed: {(method, sparsity, seed): RunResult}
    (FedAvg is dense: its key has sparsity 0.0)."""
    return _runs(grid_configs(preset, workload, seeds, device), progress, out_dir)


def noniid_configs(preset, seeds, device="auto") -> list[tuple]:
    """[((method, sparsity, seed), RunConfig)] of :func:`run_noniid`."""
    s = float(preset["noniid_sparsity"])
    return [
        (
            (m, 0.0 if m in DENSE else s, seed),
            config(preset, preset["workloads"][0], m, s, seed, device, noniid=True),
        )
        for seed in seeds
        for m in preset["noniid_methods"]
    ]


def run_noniid(preset, seeds, device="auto", progress=True, out_dir=None) -> dict:
    """FedAvg, FedProx, FedDIP+Prox on 2 classes per client: {(method, sparsity, seed): ...}."""
    return _runs(noniid_configs(preset, seeds, device), progress, out_dir)


def ablation_rs(preset) -> list[int]:
    """The R values of the ablation, each checked to land on s_p at the run's T: FedDIP's ramp
    ends at its last mask update, so every R <= T - 1 lands (FlkitError otherwise, naming the
    nearest that does). The `cpu` and `long` presets pick divisors of T - 1, so that every run's
    last update is in the final round, on the same ramp as the default R."""
    rounds = int(preset["rounds"])
    out = []
    for r in preset["ablation_R"]:
        if isinstance(r, bool) or not isinstance(r, int) or r < 1:
            raise FlkitError(f"ablation_R value {r!r}; accepted: integers in 1..{rounds - 1}")
        check_landing(rounds, r, float(preset["s0"]), max(preset["sparsities"]))
        out.append(r)
    return out


def ablation_configs(preset, seeds, device="auto") -> list[tuple]:
    """[((label, seed), RunConfig)] of :func:`run_ablations`, seed by seed."""
    s, w = max(preset["sparsities"]), preset["workloads"][0]
    values = ablation_rs(preset)
    other = "dense" if preset["mask_order"] == "code" else "code"
    cfgs = []
    for seed in seeds:
        for r in values:
            cfgs.append(((f"R={r}", seed), config(preset, w, "feddip", s, seed, device, R=int(r))))
        cfgs.append(
            (
                (f"mask from {other} average", seed),
                config(preset, w, "feddip", s, seed, device, mask_order=other),
            )
        )
    return cfgs


def run_ablations(preset, seeds, device="auto", progress=True, out_dir=None) -> dict:
    """FedDIP at the most extreme sparsity with R in ``ablation_R`` and both mask orders:
    {(label, seed): RunResult} (s0 and lambda ablations come from the main grid)."""
    return _runs(ablation_configs(preset, seeds, device), progress, out_dir)


def demo_config(preset, seed: int, device="auto") -> RunConfig:
    """The dense FedAvg run of the first workload that the slider demo prunes (a run of the grid
    when the grid has FedAvg)."""
    return config(preset, preset["workloads"][0], "fedavg", 0.0, seed, device)


def runs(preset, seeds) -> list[RunConfig]:
    """Every run the notebook trains at ``preset``, once for each notebook seed of ``seeds`` (each
    runs :func:`seeds_of` it): the demo's FedAvg run, every workload's grid, the non-IID grid and
    the ablations on the first ``ablation_seeds`` seeds (:mod:`flkit.preset_runs`)."""
    out = []
    for seed in seeds:
        mine = seeds_of(preset, seed)
        out.append(demo_config(preset, seed))
        for w in preset["workloads"]:
            out += [cfg for _, cfg in grid_configs(preset, w, mine)]
        out += [cfg for _, cfg in noniid_configs(preset, mine)]
        out += [cfg for _, cfg in ablation_configs(preset, mine[: preset["ablation_seeds"]])]
    return distinct(out)


# --------------------------------------------------------------------------- tables
def final_rows(res: dict, column: str = "test_accuracy") -> pd.DataFrame:
    """One row per run: method, sparsity, seed, final and best accuracy, realised sparsity,
    cumulative traffic under both accountings."""
    rows = []
    for key, r in res.items():
        h = r.history
        m, s, seed = key if len(key) == 3 else (key[0], None, key[1])
        rows.append(
            {
                "method": m,
                "sparsity": s,
                "seed": seed,
                "final_acc": r.final(column),
                "best_acc": float(h[column].max()),
                "final_sparsity": float(h["model_sparsity"].iloc[-1])
                if "model_sparsity" in h
                else 0.0,
                "cum_bytes": float(h["cum_bytes_up"].iloc[-1] + h["cum_bytes_down"].iloc[-1]),
                "cum_bytes_down": float(h["cum_bytes_down"].iloc[-1]),
                "cum_bytes_up": float(h["cum_bytes_up"].iloc[-1]),
                "official_mbit_up": _official(r, "up"),
                "official_mbit_down": _official(r, "down"),
            }
        )
    return pd.DataFrame(rows)


def _official(r, way: str) -> float:
    """Cumulative official-formula traffic in mebibits (dense methods: 32 bits x P x clients)."""
    h = r.history
    col = f"official_bits_{way}"
    if col in h:
        return float(h[col].sum()) / 2**20
    return float(h[f"bytes_{way}"].sum()) * 8 / 2**20


def final_table(res: dict, column: str = "test_accuracy") -> pd.DataFrame:
    """Final top-1 accuracy (%), mean ± sample standard deviation (ddof = 1) over seeds (the mean
    alone for one seed): rows methods, columns target sparsity; FedAvg (dense) is repeated in
    every column."""
    df = final_rows(res, column)
    order = [m for m in LABELS if m in set(df.method)]
    sp = sorted(s for s in df.sparsity.unique() if s > 0)
    out = pd.DataFrame(index=[LABELS[m] for m in order], columns=[f"s = {s:g}" for s in sp])
    for m in order:
        for s in sp:
            g = df[(df.method == m) & ((df.sparsity == s) | (df.sparsity == 0.0))]
            if len(g) > 1:
                std = g.final_acc.std(ddof=1) * 100
                out.loc[LABELS[m], f"s = {s:g}"] = f"{g.final_acc.mean() * 100:.1f} ± {std:.1f}"
            elif len(g):
                out.loc[LABELS[m], f"s = {s:g}"] = f"{g.final_acc.mean() * 100:.1f}"
    return out


def sparsity_table(res: dict) -> pd.DataFrame:
    """Final realised sparsity of the global model (fraction of zero prunable weights, mean over
    seeds) of every pruned method: rows methods, columns target s_p. PruneTrain ends below s_p
    by construction: as in the official code its first and last layers are never pruned."""
    df = final_rows(res)
    df = df[~df.method.isin(DENSE)]
    order = [m for m in LABELS if m in set(df.method)]
    sp = sorted(df.sparsity.unique())
    out = pd.DataFrame(index=[LABELS[m] for m in order], columns=[f"s_p = {s:g}" for s in sp])
    for m in order:
        for s in sp:
            g = df[(df.method == m) & (df.sparsity == s)]
            if len(g):
                out.loc[LABELS[m], f"s_p = {s:g}"] = f"{g.final_sparsity.mean():.4f}"
    return out


def mean_final(
    res: dict, method: str, sparsity: float | None = None, column: str = "test_accuracy"
) -> float:
    """Mean final accuracy over seeds of one method (dense methods: any sparsity)."""
    df = final_rows(res, column)
    g = df[df.method == method]
    if sparsity is not None and method not in DENSE:
        g = g[g.sparsity == sparsity]
    if not len(g):
        raise FlkitError(f"no run of {method!r} at sparsity {sparsity!r} in these results")
    return float(g.final_acc.mean())


def describe(preset, seeds, info: dict) -> str:
    """Markdown: what this preset runs and which data it used."""
    return (
        f"**Preset `{getattr(preset, 'name', '?')}`**: seeds {list(seeds)}; "
        f"{preset['num_clients']} clients, {preset['clients_per_round']} per round, "
        f"{preset['rounds']} rounds, {preset['local_epochs']} local epoch(s), batch "
        f"{preset['batch_size']}, lr {preset['lr']} "
        f"x {preset['lr_decay']}^t, weight decay {preset['weight_decay']}; s0 = {preset['s0']}, R "
        f"= {preset['R']}, lambda_max = {preset['lambda_max']}, Q = {preset['Q']} "
        f"({preset['lambda_variant']} variant), mask order `{preset['mask_order']}`, round-0 mask "
        f"`{preset['round0']}`. Data: {info['dataset']} with {info['train_images']:,} of "
        f"{info['full_train_images']:,} training images "
        f"available{' (reduced copy)' if info['reduced'] else ''}, training subset "
        f"{preset['train_subset'] or 'all'}, test subset {preset['test_subset'] or 'all'}."
    )


# --------------------------------------------------------------------------- interactive demo
def demo_inputs(
    preset, seed: int, device="auto", n_test: int = 1000, progress=True, out_dir=None
) -> dict:
    """What the slider demo needs: the dense FedAvg model of the first workload trained at the
    preset (the same cached run the comparison uses), its prunable tensors and a fixed test batch
    (the accuracy of a pruned copy then takes milliseconds)."""
    from ...engine import evaluate
    from ...prune import prunable_names

    cfg = demo_config(preset, seed, device)
    su = Setup.build(cfg)
    r = run(cfg, out_dir=out_dir, progress=progress, setup=su)
    state = {k: v.to(su.device) for k, v in r.final_state.model.items()}
    names = prunable_names(su.model)
    x, y = su.data.x_test[:n_test], su.data.y_test[:n_test]
    return {
        "model": su.model,
        "state": state,
        "names": names,
        "x": x,
        "y": y,
        "layer": max(names, key=lambda n: state[n].numel()),
        "dense_acc": evaluate(su.model, state, x, y)[0],
    }


def logit_spread(model, state: dict, x) -> float:
    """How much a network's output depends on its input: the standard deviation of each logit over
    the images of ``x``, averaged over the classes."""
    import torch
    from torch.func import functional_call

    with torch.no_grad():
        out = functional_call(model, state, (x,))
    return float(out.std(dim=0).mean())


def start_spreads(preset, workload: str, seed: int, device="auto", n_test: int = 1000) -> dict:
    """{method: logit spread of its initial (masked) global model / the dense initial model's} for
    the fixed-mask starts of the grid (SNIP, FedDST) at the highest target sparsity: near 0, the
    start's output barely depends on its input and its training sits at chance for many rounds."""
    from ... import methods
    from ...state import model_state

    s = max(preset["sparsities"])
    out = {}
    for m in ("snip", "feddst"):
        if m not in preset["methods"]:
            continue
        cfg = config(preset, workload, m, s, seed, device)
        su = Setup.build(cfg)
        ctx = methods.RunContext(
            su.model,
            su.data.x_train,
            su.data.y_train,
            su.parts,
            cfg.local_spec(),
            cfg.seed,
            su.data.num_classes,
            cfg.backend,
            cfg.clients_per_round,
        )
        dense = model_state(su.model)
        start = methods.get(m)(ctx, **cfg.method_params).init_state(dense).model
        x = su.data.x_test[:n_test]
        out[m] = logit_spread(su.model, start, x) / logit_spread(su.model, dense, x)
    return out


def pruned_accuracy(demo: dict, sparsity: float) -> tuple[float, dict]:
    """Test accuracy of the demo model after global magnitude pruning at `sparsity`, and the
    mask."""
    from ...engine import evaluate
    from ...prune import apply_mask, global_magnitude_mask

    mask = global_magnitude_mask({n: demo["state"][n] for n in demo["names"]}, sparsity)
    acc, _ = evaluate(demo["model"], apply_mask(demo["state"], mask), demo["x"], demo["y"])
    return acc, mask


def ablation_rows(preset, ablations: dict, grid: dict) -> pd.DataFrame:
    """Final accuracies of the ablation runs beside FedDIP's default from the grid."""
    s = max(preset["sparsities"])
    rows = [
        {
            "label": f"R={preset['R']}, mask from {preset['mask_order']} average (default)",
            "seed": seed,
            "final_acc": r.final(),
        }
        for (m, sp, seed), r in grid.items()
        if m == "feddip" and sp == s and seed in {k[1] for k in ablations}
    ]
    rows += [
        {"label": label, "seed": seed, "final_acc": r.final()}
        for (label, seed), r in ablations.items()
    ]
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- into the report
def record_data(report, infos: list[dict]) -> None:
    """Which data each workload used (the results must say when a reduced copy was used)."""
    for info in infos:
        report.number(
            f"{info['dataset']}: training images available",
            info["train_images"],
            note=f"of {info['full_train_images']:,} in the full set; source "
            f"{shown_source(info['source'])}{'; REDUCED COPY' if info['reduced'] else ''}",
        )


def record_grid(report, workload: str, grid: dict) -> None:
    """Mean final accuracy of every method and sparsity, and the cumulative traffic."""
    from ... import models
    from . import numbers

    df = final_rows(grid)
    for (m, s), g in df.groupby(["method", "sparsity"]):
        where = "dense" if m in DENSE else f"s = {s:g}"
        report.number(
            f"{workload}: final top-1 accuracy, {LABELS[m]}, {where}",
            float(g.final_acc.mean() * 100),
            unit="%",
            note=f"mean of {len(g)} seed(s); paper's table not recoverable",
        )
        report.number(
            f"{workload}: cumulative traffic (exact), {LABELS[m]}, {where}",
            float(g.cum_bytes.mean() / 2**20),
            unit="MiB",
        )
    if workload == "fmnist_lenet5":  # counted on the model flkit builds, beside the official one
        built = models.count_params(models.build("lenet5", num_classes=10, in_channels=1))
        report.number("LeNet-5 parameters", built, paper=numbers.PARAMS["lenet5"], unit="params")

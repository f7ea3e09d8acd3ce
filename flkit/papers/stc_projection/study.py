"""Experiment drivers of notebook 01 (STC with projection aggregation).

The notebook calls these; each is a thin loop over :func:`flkit.experiment.run` (cached on disk,
keyed by the config) and plain pandas for the tables::

    P = presets.load("01_stc_projection", "cpu")
    res = run_comparison(P, "mnist", seeds=[0, 1])          # {(method, seed): RunResult}
    tab = summary(res, P["mnist_target"])                     # one row per method and seed
    table2(tab, "mnist")                                     # paper beside ours
    claims.record(report, tab, "mnist")                      # verdicts (claims.py)

Measures (decided before looking at any result, stated in the notebook):

* accuracy = the average per-client test accuracy ``client_acc_mean`` (our protocol, see
  README.md: per-client accuracy = Σ_c π_i(c)·acc_c; π_i = client i's training label
  distribution);
* rounds to target = first round whose ``client_acc_mean`` ≥ target (None: never reached);
* variance = population variance of the per-client accuracies (percent², as the paper's
  "variance"; FedFV's plots actually show the standard deviation), averaged over the second half
  of the rounds;
* oscillation = mean |acc_t − acc_{t−1}| (percentage points) over the second half of the rounds,
  when the curves are past their initial climb;
* per-round traffic per participating client = mean of bytes_up / m and bytes_down / m over
  rounds ≥ 2 (round 1's download is the dense initial model).
"""

from __future__ import annotations

import math

import pandas as pd

from flkit import compress, metrics, models
from flkit.experiment import RunConfig, Setup, run
from flkit.utils import FlkitError, check_choice

from .numbers import NUMBERS as PAPER

PARTS = ("mnist", "cifar10")
METHOD_LABELS = {"fedavg": "FedAvg", "stc": "STC", "fedfv": "FedFV", "stc_pa": "STC-PA"}
PAPER_METHODS = ("fedavg", "stc", "stc_pa")


# --------------------------------------------------------------------------- configs and runs
def method_params(P: dict, method: str, **over) -> dict:
    """The method's hyperparameters from the preset (p, counter, alpha, tau, loss, variant)."""
    check_choice("method", method, tuple(METHOD_LABELS))
    mp = {}
    if method in ("stc", "stc_pa"):
        mp.update(p=float(P["p"]), counter=P["counter"])
    if method in ("fedfv", "stc_pa"):
        mp.update(
            alpha=float(P["alpha"]),
            tau=int(P["tau"]),
            loss=P["loss"],
            external_variant=P["external_variant"],
        )
    mp.update(over)
    return mp


def config(
    P: dict, part: str, method: str, seed: int, device: str = "auto", **method_over
) -> RunConfig:
    """RunConfig of one method on one dataset part ("mnist" or "cifar10") of the preset."""
    check_choice("part", part, PARTS)
    D = part_settings(P, part)
    ds_kw = {}
    if D["train_subset"]:
        ds_kw["train_subset"] = int(D["train_subset"])
    if D["test_subset"]:
        ds_kw["test_subset"] = int(D["test_subset"])
    return RunConfig(
        method=method,
        dataset=part,
        model=D["model"],
        num_clients=int(D["clients"]),
        partition="shards",
        partition_kwargs={"shards_per_client": 2},
        clients_per_round=int(D["per_round"]),
        local_epochs=int(D["epochs"]),
        batch_size=int(D["batch_size"]),
        lr=float(D["lr"]),
        weight_decay=float(D["weight_decay"]),
        rounds=int(D["rounds"]),
        per_client_eval=True,
        method_params=method_params(P, method, **method_over),
        dataset_kwargs=ds_kw,
        seed=int(seed),
        device=device,
    )


def part_settings(P: dict, part: str) -> dict:
    """The preset keys of one dataset part without their prefix ("mnist_rounds" -> "rounds")."""
    check_choice("part", part, PARTS)
    pre = part + "_"
    return {k[len(pre) :]: v for k, v in P.items() if k.startswith(pre)}


def seeds_of(P: dict, seed: int = 0) -> list[int]:
    """The preset's ``seeds`` consecutive seeds starting at the notebook's ``seed``."""
    n = int(P["seeds"])
    if n < 1:
        raise FlkitError(f"seeds={n} in the preset; accepted: an integer >= 1")
    return [int(seed) + i for i in range(n)]


def setup(P: dict, part: str, seed: int, device: str = "auto") -> Setup:
    """Data, partition and initial model of a part at a seed (shared by all methods)."""
    return Setup.build(config(P, part, "fedavg", seed, device))


def run_comparison(
    P: dict,
    part: str,
    seeds,
    methods=None,
    device: str = "auto",
    progress: bool = True,
    out_dir=None,
) -> dict:
    """Run every method × seed (cached); returns {(method, seed): RunResult}."""
    methods = list(methods or P["methods"])
    if not methods:
        raise FlkitError("methods is empty; accepted: any of " + ", ".join(METHOD_LABELS))
    out = {}
    for seed in seeds:
        su = None
        for m in methods:
            cfg = config(P, part, m, seed, device)
            if su is None and not _cached(cfg, out_dir):
                su = Setup.build(cfg)
            out[(m, seed)] = run(cfg, out_dir=out_dir, progress=progress, setup=su)
    return out


def _cached(cfg: RunConfig, out_dir) -> bool:
    from flkit import store

    return store.is_done(store.run_dir(out_dir, cfg.key(), prefix=cfg.method))


# --------------------------------------------------------------------------- measures
def rounds_to_target(history: pd.DataFrame, target: float, column: str = "client_acc_mean"):
    """First round whose ``column`` ≥ target (average client accuracy by default), or None."""
    return metrics.rounds_to(history, target, column)


def _second_half(history: pd.DataFrame, column: str) -> pd.Series:
    s = history[["round", column]].dropna()
    last = int(s["round"].max())
    return s[s["round"] > last // 2][column]


def oscillation(history: pd.DataFrame, column: str = "client_acc_mean") -> float:
    """Mean |acc_t − acc_{t−1}| in percentage points over the second half of the rounds."""
    return metrics.mean_abs_change(_second_half(history, column)) * 100


def mean_variance(history: pd.DataFrame, column: str = "client_acc_var") -> float:
    """Across-client accuracy variance (percent²) averaged over the second half of the rounds."""
    return float(_second_half(history, column).mean() * 1e4)


def per_round_traffic(history: pd.DataFrame, clients_per_round: int) -> tuple[float, float]:
    """Mean bytes up and down per participating client per round over rounds ≥ 2."""
    h = history[history["round"] >= 2] if len(history) > 1 else history
    return float(h["bytes_up"].mean() / clients_per_round), float(
        h["bytes_down"].mean() / clients_per_round
    )


def summary(results: dict, target: float) -> pd.DataFrame:
    """One row per (method, seed): rounds to target, final accuracy, variance, oscillation,
    traffic."""
    rows = []
    for (m, seed), r in results.items():
        h = r.history
        up, down = per_round_traffic(h, r.config.clients_per_round)
        rows.append(
            {
                "method": m,
                "seed": seed,
                "label": METHOD_LABELS.get(m, m),
                "rounds": int(h["round"].max()),
                "target": target,
                "rounds_to_target": rounds_to_target(h, target),
                "rounds_to_paper_target": rounds_to_target(h, PAPER["target"][_part(r.config)]),
                "final_acc": float(h["client_acc_mean"].dropna().iloc[-1] * 100),
                "best_acc": float(h["client_acc_mean"].max() * 100),
                "variance": mean_variance(h),
                "final_variance": float(h["client_acc_var"].dropna().iloc[-1] * 1e4),
                "oscillation": oscillation(h),
                "up_bytes": up,
                "down_bytes": down,
                "wall_s": h.attrs.get("wall_seconds"),
            }
        )
    tab = pd.DataFrame(rows)
    dense = tab[tab.method == "fedavg"].set_index("seed")
    for col, src in (("factor_up", "up_bytes"), ("factor_down", "down_bytes")):
        tab[col] = [
            dense[src].get(s, math.nan) / v if v else math.nan for s, v in zip(tab.seed, tab[src])
        ]
    return tab


def _part(cfg) -> str:
    return "cifar10" if cfg.dataset == "cifar10" else "mnist"


def by_method(tab: pd.DataFrame) -> pd.DataFrame:
    """Mean over seeds per method (rounds to target: mean over the seeds that reached it, and
    how many did)."""
    rows = []
    for m, g in tab.groupby("method", sort=False):
        reached = g["rounds_to_target"].dropna()
        rows.append(
            {
                "method": METHOD_LABELS.get(m, m),
                "seeds": len(g),
                "reached target": f"{len(reached)}/{len(g)}",
                "rounds to target (mean)": float(reached.mean()) if len(reached) else None,
                "final acc %": g["final_acc"].mean(),
                "variance %² (2nd half)": g["variance"].mean(),
                "oscillation pp (2nd half)": g["oscillation"].mean(),
                "up / client / round": compress.format_bytes(g["up_bytes"].mean()),
                "down / client / round": compress.format_bytes(g["down_bytes"].mean()),
                "factor vs FedAvg (up)": g["factor_up"].mean(),
            }
        )
    return pd.DataFrame(rows)


# ------------------------------------------------------------------ traffic (exact, from shapes)
def worked_examples(
    p: float = 0.1, counter: str = compress.DEFAULT_COUNTER, extra_models=()
) -> pd.DataFrame:
    """Per-round traffic per client and direction of VGG11* and the assumed MNIST CNN (the worked
    examples of README.md) plus ``extra_models`` (e.g. the model a reduced preset trains), FedAvg vs
    STC,
    with the worked examples' numbers beside."""
    rows = []
    for name in (
        "vgg11_star",
        "cnn3_mnist",
        *[m for m in extra_models if m not in ("vgg11_star", "cnn3_mnist")],
    ):
        net = models.build(name)
        t = compress.traffic_table(net, p=p, counter=counter).set_index("method")
        ref = PAPER["worked_example"].get(name, {})
        rows.append(
            {
                "model": name,
                "params": int(t.loc["FedAvg", "params"]),
                "FedAvg / direction": t.loc["FedAvg", "up"],
                "FedAvg Mbit": round(t.loc["FedAvg", "up_bits"] / 1e6, 2),
                "STC / direction": t.loc["STC", "up"],
                "STC Mbit": round(t.loc["STC", "up_bits"] / 1e6, 3),
                "factor": round(float(t.loc["STC", "factor"]), 1),
                "counter": counter,
                "worked example: FedAvg": compress.format_bytes(ref["fedavg_bytes"]) if ref else "",
                "worked example: STC": compress.format_bytes(ref["stc_bytes"]) if ref else "",
                "paper factor": {
                    "vgg11_star": PAPER["compression_factor"]["cifar10"],
                    "cnn3_mnist": PAPER["compression_factor"]["mnist"],
                }.get(name),
            }
        )
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- Table 2
def table2(tab: pd.DataFrame, part: str) -> pd.DataFrame:
    """Table 2 for one dataset: paper's rounds to target and compression factor beside ours."""
    check_choice("part", part, PARTS)
    rows = []
    for m in [x for x in ("fedavg", "stc", "fedfv", "stc_pa") if x in set(tab.method)]:
        g = tab[tab.method == m]
        reached = g["rounds_to_target"]
        per_seed = ", ".join("—" if pd.isna(v) else str(int(v)) for v in reached)
        rows.append(
            {
                "method": METHOD_LABELS[m],
                "paper: rounds to target": PAPER["rounds_to_target_text"][part].get(
                    m, "not reported"
                ),
                "ours: rounds to target (per seed)": per_seed,
                f"ours: rounds to {PAPER['target'][part]:.0%} (paper target)": ", ".join(
                    "—" if pd.isna(v) else str(int(v)) for v in g["rounds_to_paper_target"]
                ),
                "paper: factor vs FedAvg": (
                    1.0 if m in ("fedavg", "fedfv") else PAPER["compression_factor"][part]
                )
                if m != "fedfv"
                else "not reported",
                "ours: factor up": round(float(g["factor_up"].mean()), 1),
                "ours: factor down": round(float(g["factor_down"].mean()), 1),
                "ours: up / client": compress.format_bytes(g["up_bytes"].mean()),
                "ours: down / client": compress.format_bytes(g["down_bytes"].mean()),
            }
        )
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- ablation
def ablation(
    P: dict, seed: int = 0, device: str = "auto", progress: bool = True, out_dir=None
) -> pd.DataFrame:
    """STC-PA on MNIST over the preset's ``ablation_alphas`` (τ fixed at the preset's τ) and
    ``ablation_taus`` (α fixed), ``ablation_rounds`` rounds, one seed. α = 1, τ = 0 is plain STC."""
    rows = []
    grid = [(float(a), int(P["tau"])) for a in P["ablation_alphas"]] + [
        (float(P["alpha"]), int(t)) for t in P["ablation_taus"]
    ]
    seen, su = set(), None
    target = float(P["mnist_target"])
    for a, t in grid:
        if (a, t) in seen:
            continue
        seen.add((a, t))
        cfg = config(P, "mnist", "stc_pa", seed, device, alpha=a, tau=t)
        cfg = cfg.replace(rounds=int(P["ablation_rounds"]))
        if su is None and not _cached(cfg, out_dir):
            su = Setup.build(cfg)
        r = run(cfg, out_dir=out_dir, progress=progress, setup=su)
        h = r.history
        rows.append(
            {
                "alpha": a,
                "tau": t,
                "kept": int(h["kept"].iloc[-1]),
                "rounds_to_target": rounds_to_target(h, target),
                "rounds_to_paper_target": rounds_to_target(h, PAPER["target"][_part(r.config)]),
                "final_acc": float(h["client_acc_mean"].iloc[-1] * 100),
                "variance": mean_variance(h),
                "oscillation": oscillation(h),
                "internal_proj/round": float(h["internal_projections"].mean()),
                "external_proj/round": float(h["external_projections"].mean()),
            }
        )
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- Fig. 1 data
def layer_update(
    P: dict, seed: int = 0, device: str = "auto", part: str = "mnist", su: Setup | None = None
):
    """A real layer update for Fig. 1: one client's pseudo-gradient w_before − w_after after one
    local epoch from the initial model, for the model's largest weight tensor.
    Returns (parameter name, update tensor)."""
    from flkit.state import broadcast_state, model_state, param_names
    from flkit.train import train_clients
    from flkit.utils import derive_seed

    cfg = config(P, part, "fedavg", seed, device)
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
    names = param_names(su.model)
    name = max((n for n in names if start[n].dim() >= 2), key=lambda n: start[n][0].numel())
    return name, (start[name][0] - res.state[name][0]).detach().cpu()


# --------------------------------------------------------------------------- notebook helpers
def describe(P: dict, seeds) -> str:
    """Markdown: what this preset runs, and how it differs from the paper preset."""
    ref = _paper_preset()
    lines = [
        f"**Preset `{getattr(P, 'name', '?')}`** — seeds {list(seeds)} "
        f"(CIFAR-10: {list(seeds)[: int(P['cifar10_seeds'])]}); p = {P['p']}, α = {P['alpha']}, "
        f"τ = {P['tau']}, loss {P['loss']!r} local training, "
        f"external loop {P['external_variant']!r}, "
        f"bits counted with the {P['counter']!r} counter.",
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
        "epochs",
        "weight_decay",
        "clients",
        "per_round",
        "train_subset",
        "test_subset",
        "target",
    )
    for k in keys:
        row = [k]
        for part in PARTS:
            here, paper = P[f"{part}_{k}"], ref.get(f"{part}_{k}") if ref else None
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


def _paper_preset():
    from flkit import presets

    try:
        return dict(presets.load("01_stc_projection", "paper"))
    except FlkitError:  # pragma: no cover
        return {}


def record_traffic(report, wx: pd.DataFrame) -> None:
    """Worked-example traffic of the paper's two models into the report (exact, from shapes)."""
    for _, r in wx.iterrows():
        ref = PAPER["worked_example"].get(r["model"])
        if not ref:
            continue
        report.number(
            f"{r['model']}: FedAvg bytes per round per direction",
            float(r["FedAvg Mbit"]) * 1e6 / 8,
            paper=ref["fedavg_bytes"],
            unit="B",
        )
        report.number(
            f"{r['model']}: STC bytes per round per direction (p = 0.1, {r['counter']})",
            float(r["STC Mbit"]) * 1e6 / 8,
            paper=ref["stc_bytes"],
            unit="B",
        )
        report.number(
            f"{r['model']}: compression factor vs FedAvg",
            float(r["factor"]),
            paper=r["paper factor"],
            unit="x",
        )


def record_numbers(report, tab: pd.DataFrame, part: str) -> None:
    """Table 2 rows of one dataset into the report: rounds to target, variance, final accuracy,
    traffic factor (the verdicts are ``claims.record``)."""
    name = "MNIST" if part == "mnist" else "CIFAR-10"
    target = float(tab["target"].iloc[0])
    for m in tab.method.unique():
        g = tab[tab.method == m]
        reached = g["rounds_to_target"].dropna()
        label = METHOD_LABELS[m]
        other = (
            f"; paper target {PAPER['target'][part]:.0%}" if target != PAPER["target"][part] else ""
        )
        report.number(
            f"{name}: rounds to {target:.0%} ({label}, mean of seeds that reached it)",
            float(reached.mean()) if len(reached) else None,
            paper=PAPER["rounds_to_target"][part].get(m),
            unit="rounds",
            note=f"{len(reached)}/{len(g)} seeds reached the target" + other,
        )
        report.number(
            f"{name}: across-client variance, 2nd half ({label})",
            float(g["variance"].mean()),
            unit="%²",
        )
        report.number(
            f"{name}: final average client accuracy ({label})",
            float(g["final_acc"].mean()),
            unit="%",
        )
        if m in ("stc", "stc_pa"):
            report.number(
                f"{name}: per-round traffic factor vs FedAvg, up ({label})",
                float(g["factor_up"].mean()),
                paper=PAPER["compression_factor"][part],
                unit="x",
            )

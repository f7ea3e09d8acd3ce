"""Drivers of the FL primer notebook (notebooks/00_fl_primer.ipynb).

    P = presets.load("00_fl_primer", preset)
    ds = primer.load_data(P, device)
    cfgs = primer.configs(P, seed, device)                 # {label: RunConfig}
    results = primer.run_all(cfgs, ds)                     # cached by config (flkit.experiment.run)
    primer.runs(P, [seed])                                 # every run the notebook trains
    curves = primer.histories(results)                     # one long DataFrame, column "run"
    setup = primer.setup_for(cfgs["FedAvg, Dir(0.1)"], ds)
    drift = primer.client_drift(setup, results[...].final_state, clients)

Nothing here trains by itself: local training is `flkit.engine.train_clients` through the
method's own `client_update` (flkit.methods), whole runs are `flkit.experiment.run`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd
import torch

from flkit import data as data_mod
from flkit import divergence, methods
from flkit.data import partition as part_mod
from flkit.experiment import RunConfig, RunResult, Setup, is_cached, run
from flkit.methods import sample_clients
from flkit.preset_runs import distinct, from_preset
from flkit.state import flatten, param_names
from flkit.utils import FlkitError, check_range

__all__ = [
    "describe",
    "load_data",
    "configs",
    "runs",
    "label_iid",
    "label_noniid",
    "label_fedprox",
    "setup_for",
    "run_all",
    "histories",
    "compare",
    "final_accuracy",
    "probe_clients",
    "client_drift",
    "drift_by_partition",
    "drift_sweep",
    "drift_summary",
    "repartition",
    "draw_partition",
    "alpha_explorer",
]


# ------------------------------------------------------------------------------ settings
def describe(preset, seed: int, device: str, train_samples: int) -> str:
    """Markdown: the preset, seed and device of this run, its data (``train_samples`` training
    samples), model, clients and rounds."""
    return (
        f"**Preset `{preset.name}`**, seed {seed}, device `{device}`: {preset['dataset']} "
        f"({train_samples:,} training samples), model `{preset['model']}`, "
        f"{preset['num_clients']} clients, {preset['clients_per_round']} per round, "
        f"{preset['rounds']} rounds."
    )


def load_data(preset: Mapping, device="auto"):
    """The preset's dataset on `device` (train_subset/test_subset 0 = the whole split)."""
    kw = {
        k: int(preset[k]) for k in ("train_subset", "test_subset") if int(preset.get(k, 0) or 0) > 0
    }
    return data_mod.load(preset["dataset"], device=device, **kw)


def label_iid() -> str:
    return "FedAvg, IID"


def label_noniid(alpha: float) -> str:
    return f"FedAvg, Dir({alpha:g})"


def label_fedprox(mu: float, alpha: float) -> str:
    return f"FedProx mu={mu:g}, Dir({alpha:g})"


def configs(preset: Mapping, seed: int = 0, device: str = "auto") -> dict[str, RunConfig]:
    """The primer's runs: FedAvg on IID and Dirichlet(alpha) data, FedProx for each mu in P["mus"].

    Dataset subsets are part of the config (dataset_kwargs) so the run cache keys on them."""
    base = from_preset(preset, method="fedavg", partition="iid", seed=seed, device=device)
    noniid = base.replace(
        partition="dirichlet",
        partition_kwargs={"alpha": preset["alpha"], "min_samples": preset["min_samples"]},
    )
    out = {label_iid(): base, label_noniid(preset["alpha"]): noniid}
    for mu in preset["mus"]:
        out[label_fedprox(mu, preset["alpha"])] = noniid.replace(
            method="fedprox", method_params={"mu": float(mu)}
        )
    return out


def runs(preset: Mapping, seeds: Sequence[int]) -> list[RunConfig]:
    """Every run the notebook trains at ``preset``, once for each notebook seed of ``seeds``: all
    of :func:`configs` (the IID and non-IID FedAvg runs, then FedProx for each mu)
    (:mod:`flkit.preset_runs`)."""
    return distinct(c for s in seeds for c in configs(preset, int(s)).values())


def setup_for(cfg: RunConfig, ds=None) -> Setup:
    """Data, partition and model of `cfg`, reusing an already loaded dataset `ds`."""
    return Setup.build(cfg, data_obj=ds)


# ------------------------------------------------------------------------------ runs
def run_all(
    cfgs: Mapping[str, RunConfig], ds=None, progress: bool = True, out_dir=None
) -> dict[str, RunResult]:
    """`flkit.experiment.run` for every config (a cached run loads from disk, no setup is built)."""
    from tqdm.auto import tqdm

    results = {}
    bar = tqdm(list(cfgs.items()), desc="runs", disable=not progress)
    for label, cfg in bar:
        bar.set_postfix_str(label)
        cached = is_cached(cfg, out_dir)
        setup = None if cached else setup_for(cfg, ds)
        results[label] = run(cfg, out_dir=out_dir, progress=progress, setup=setup)
    return results


def histories(results: Mapping[str, RunResult]) -> pd.DataFrame:
    """All histories in one long DataFrame with a "run" column (the label)."""
    frames = []
    for label, res in results.items():
        h = res.history.copy()
        h.attrs = {}
        h.insert(0, "run", label)
        frames.append(h)
    return pd.concat(frames, ignore_index=True)


def compare(
    cfgs: Mapping[str, RunConfig], ds=None, progress: bool = True, out_dir=None
) -> pd.DataFrame:
    """Run (or load) every config and return their histories as one long DataFrame."""
    return histories(run_all(cfgs, ds, progress=progress, out_dir=out_dir))


def final_accuracy(curves: pd.DataFrame, last: int = 1, column: str = "test_accuracy") -> pd.Series:
    """Per run: the mean of the last `last` evaluations of `column` (smooths round-to-round
    noise)."""
    check_range("last", last, 1)
    ev = curves.dropna(subset=[column])
    return ev.groupby("run", sort=False)[column].apply(lambda s: float(s.iloc[-last:].mean()))


# ------------------------------------------------------------------------------ client drift
def probe_clients(cfg: RunConfig, rnd: int | None = None) -> list[int]:
    """The clients the run would sample in round `rnd` (default: the round after the last)."""
    rnd = cfg.rounds + 1 if rnd is None else rnd
    return sample_clients(cfg.seed, rnd, cfg.num_clients, cfg.clients_per_round)


def client_drift(
    setup: Setup,
    state: Mapping,
    clients: Sequence[int],
    spec=None,
    method: str = "fedavg",
    method_params: Mapping | None = None,
    rnd: int | None = None,
) -> pd.DataFrame:
    """Train `clients` for one round from the global model `state`; how far does each one move?

    state: the global model's state dict (or a method's server state, e.g.
    RunResult.final_state). spec: the local training (flkit.engine.LocalSpec; default the setup's
    config). method/method_params: whose local objective the clients minimise (e.g. "fedprox",
    {"mu": 0.1}); the training itself is the
    method's `client_update`, i.e. flkit.engine.train_clients. rnd fixes the batch order (default
    the round after the config's last).

    Returns one row per client: client, samples, dist_global = ||w_k - w||_2 (trainable parameters)
    and dist_avg = ||w_k - w_avg||_2, w_avg the data-size weighted average of the K client models
    (the next global model under FedAvg)."""
    if not clients:
        raise FlkitError("client_drift needs at least one client id")
    bad = [c for c in clients if not 0 <= int(c) < len(setup.parts)]
    if bad:
        raise FlkitError(f"client ids {bad} are out of range; accepted: 0..{len(setup.parts) - 1}")
    glob = dict(state.model) if isinstance(state, methods.ServerState) else dict(state)
    glob = {n: v.to(setup.device) for n, v in glob.items()}
    cfg = setup.config
    spec = spec if spec is not None else cfg.local_spec()
    rnd = cfg.rounds + 1 if rnd is None else rnd
    ctx = methods.RunContext(
        setup.model,
        setup.data.x_train,
        setup.data.y_train,
        setup.parts,
        spec,
        cfg.seed,
        setup.data.num_classes,
        cfg.backend,
    )
    m = methods.get(method)(ctx, **dict(method_params or {}))
    up = m.client_update(m.init_state(glob), list(int(c) for c in clients), rnd)
    for c, loss in zip(clients, up.train_loss.tolist()):  # the divergence rule's first half
        divergence.check_finite(
            loss,
            "training loss",
            f"the local round of client {int(c)} in client_drift",
            "a smaller learning rate usually keeps it finite",
        )
    names = param_names(setup.model)
    local = flatten(up.state, names).double()  # [K, d]
    g = flatten({n: glob[n].unsqueeze(0) for n in names}, names).double()[0]  # [d]
    avg = flatten(
        {
            n: v.unsqueeze(0)
            for n, v in methods.weighted_average(
                {n: up.state[n] for n in names}, up.weights
            ).items()
        },
        names,
    ).double()[0]
    return pd.DataFrame(
        {
            "client": [int(c) for c in clients],
            "samples": up.weights.cpu().long().tolist(),
            "dist_global": (local - g).norm(dim=1).cpu().tolist(),
            "dist_avg": (local - avg).norm(dim=1).cpu().tolist(),
        }
    )


def drift_by_partition(
    cfgs: Mapping[str, RunConfig], ds, state: Mapping, clients: Sequence[int], column: str = "data"
) -> pd.DataFrame:
    """`client_drift` of the same clients from the same global model `state`, once per config
    (e.g. {"IID": iid_cfg, "Dir(0.1)": dirichlet_cfg}): only the clients' data differ."""
    frames = []
    for name, cfg in cfgs.items():
        d = client_drift(setup_for(cfg, ds), state, clients)
        d.insert(0, column, name)
        frames.append(d)
    return pd.concat(frames, ignore_index=True)


def drift_sweep(
    setup: Setup,
    state: Mapping,
    clients: Sequence[int],
    mus: Sequence[float],
    spec=None,
    rnd: int | None = None,
) -> pd.DataFrame:
    """`client_drift` under FedProx for each mu (mu = 0 is FedAvg's local objective); column
    "mu"."""
    rows = []
    for mu in mus:
        d = client_drift(
            setup, state, clients, spec, method="fedprox", method_params={"mu": float(mu)}, rnd=rnd
        )
        d.insert(0, "mu", float(mu))
        rows.append(d)
    return pd.concat(rows, ignore_index=True)


def drift_summary(drift: pd.DataFrame, by: str) -> pd.DataFrame:
    """Mean and std over clients of dist_global and dist_avg, per value of column `by`."""
    return drift.groupby(by, sort=False)[["dist_global", "dist_avg"]].agg(["mean", "std"])


# ------------------------------------------------------------------------------ partition demo
def repartition(
    labels, num_clients: int, alpha: float, seed: int = 0, num_classes: int | None = None
):
    """Dirichlet(alpha) split of `labels` over clients: (parts, counts [clients, classes],
    summary)."""
    num_classes = int(labels.max()) + 1 if num_classes is None else num_classes
    parts = part_mod.partition("dirichlet", labels, num_clients, seed, alpha=float(alpha))
    return (
        parts,
        part_mod.label_counts(parts, labels, num_classes),
        part_mod.summary(parts, labels, num_classes),
    )


def draw_partition(
    labels,
    num_classes: int,
    num_clients: int,
    alpha: float,
    seed: int = 0,
    ax=None,
    max_clients: int | None = 50,
    colorbar: bool = True,
):
    """Label heat map (share of each class in every client's data) of a Dirichlet(alpha) split."""
    from flkit.workbook import plots

    parts, _, s = repartition(labels, num_clients, alpha, seed, num_classes)
    shown = min(len(parts), max_clients or len(parts))
    title = (
        f"Dir(α={alpha:.3g}): {s['classes_per_client_mean']:.1f} classes/client, "
        f"sizes {s['size_min']}–{s['size_max']}"
        + (f" (first {shown} clients)" if shown < len(parts) else "")
    )
    return plots.label_distribution(
        parts,
        labels,
        num_classes,
        ax=ax,
        normalize=True,
        max_clients=max_clients,
        title=title,
        colorbar=colorbar,
    )


def alpha_explorer(
    labels,
    num_classes: int,
    num_clients: int,
    seed: int = 0,
    alpha: float = 0.1,
    max_clients: int | None = 50,
):
    """A slider over alpha = 0.01, 0.03, ..., 100 (and ``alpha``) above the label heat map
    (:class:`flkit.workbook.widgets.Demo`: one figure, redrawn in place, every stop drawn ahead;
    display it as the cell's last expression). Without a live kernel (papermill, nbval) it shows its
    initial state."""
    import ipywidgets
    import matplotlib.pyplot as plt

    from flkit.workbook import plots, widgets

    labels = torch.as_tensor(labels).detach().cpu()

    def draw(alpha):
        with plots.style():
            fig, ax = plt.subplots(figsize=(8.0, 3.2))
            draw_partition(
                labels, num_classes, num_clients, alpha, seed, ax=ax, max_clients=max_clients
            )
        return fig

    slider = ipywidgets.SelectionSlider(
        options=widgets.log_stops(alpha, 0.01, 100.0),
        value=float(alpha),
        description="alpha",
        continuous_update=False,
    )
    demo = widgets.Demo(draw, alpha=slider)
    demo.precompute()  # nine settings: every move then only swaps the picture
    return demo


# ------------------------------------------------------------------------------ from scratch
def same_curve(scratch: Sequence[float], history: pd.DataFrame, tol: float = 1e-3) -> pd.DataFrame:
    """The from-scratch FedAvg accuracy curve beside flkit's (one value per round, both evaluated
    every round): columns round, from scratch, flkit, |difference|. FlkitError naming the rounds
    that differ by more than ``tol`` (accuracy as a fraction). Batched training adds the same
    numbers in another order, so float rounding can flip the odd test image near a decision
    boundary: ``tol`` allows ten images in 10,000."""
    check_range("tol", tol, 0)
    ev = history.dropna(subset=["test_accuracy"])
    if len(ev) != len(scratch):
        raise FlkitError(
            f"the flkit run has {len(ev)} evaluations, the scratch curve "
            f"{len(scratch)} points; accepted: eval_every = 1 and the same rounds"
        )
    out = pd.DataFrame(
        {
            "round": ev["round"].to_numpy(),
            "from scratch": list(scratch),
            "flkit": ev["test_accuracy"].to_numpy(),
        }
    )
    out["|difference|"] = (out["from scratch"] - out["flkit"]).abs()
    bad = out[out["|difference|"] > tol]
    if len(bad):
        raise FlkitError(
            f"the from-scratch FedAvg differs from flkit by more than tol={tol} in "
            f"rounds {bad['round'].tolist()}:\n{bad.to_string(index=False)}"
        )
    return out

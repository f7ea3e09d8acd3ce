"""Regime indicators of notebook 02's claims: where FedDIP's effect can show.

The paper compares methods after 1000 rounds, each at its target sparsity. Its accuracy claims
presuppose baselines that work: a dense FedAvg near its plateau where a claim compares against
it, and pruning baselines that have left chance. What separates FedDIP from FedDP is the
incremental penalty, which needs time to shrink the layers. The indicators say whether our run is
there; each names the source of its threshold (:class:`flkit.workbook.verdict.Indicator`):

- ``dense_gap``: how far dense FedAvg ends below the plateau of the same model on the same data
  (points). Read by the claim that compares FedDIP with dense FedAvg.
- ``penalty_shrink``: sum over the run of eta_t * lambda_t * (local steps per round), the norm the
  unsquared layer penalty can take off each layer; the paper's value follows from its settings
  (``paper_shrink``). Read by the claims that compare FedDIP with FedDP (the penalty is all that
  separates them).
- ``learns`` / ``learns_top`` / ``noniid_learns``: per method, how many points its mean final
  accuracy ends above chance beyond its seed spread (the seeds' standard deviation, at least the
  test set's binomial noise at chance), at every target sparsity (the smallest) / at the highest /
  on the non-IID grid. A baseline at chance (FedDST at s = 0.95 at the reduced presets) is not the
  baseline the paper beat.
- ``seed_noise`` / ``seed_noise_top`` / ``noniid_seed_noise``: per method, the largest
  seed-to-seed standard deviation (ddof = 1, points) of its final accuracy over the same runs.

Per-method indicators are mappings method -> value; a claim reads them only on the methods it
compares (:data:`CLAIM_METHODS`, the claim's :class:`ClaimRule`), so a method the claim does not
compare changes nothing. Each claim's tie (:func:`tie_threshold`) is built from the same runs.

Diagnostics, shown beside the claims and never gating: ``sparsity_shortfall`` (per method: how far
its final sparsity ends below s_p; the paper's own PruneTrain ends below s_p by construction, and
FedDIP's exact sparsity is a claim of its own), ``snip_start`` / ``feddst_start`` (the logit
spread of the fixed-mask start against the dense start's, ``study.start_spreads``: a property of
the initialisation that the paper's own LeNet-5 at s = 0.95 shares).

Interface (the same in every paper's ``regime.py``): ``REGIME`` and ``measure(...)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

from flkit import metrics
from flkit.utils import FlkitError
from flkit.workbook.regime import ClaimRule, Regime
from flkit.workbook.verdict import Indicator, above, at_least, at_most

from ...prune.schedules import incremental_lambda
from . import numbers
from .study import DENSE, final_rows

#: top-1 accuracy (%) dense FedAvg reaches at its plateau, per (workload, training subset; 0 = the
#: full set). LeNet-5 on all of Fashion-MNIST: about 90 %. On the 6,000-image subset of `cpu` and
#: `long`: the best final accuracy of FedAvg-only runs at the preset's data and optimiser, rounded
#: up by their remaining rise (the search: benchmarks/results/feddip.md).
PLATEAU = {("fmnist_lenet5", 0): 90.0, ("fmnist_lenet5", 6000): 85.0}
#: training images of each workload's full set (local steps per round of the paper's setting)
FULL_TRAIN = {"fmnist_lenet5": 60_000, "cifar10_alexnet": 50_000, "cifar100_resnet18": 50_000}
#: test images of each workload's full test set (a preset with test_subset = 0 uses all of them)
TEST_IMAGES = {"fmnist_lenet5": 10_000, "cifar10_alexnet": 10_000, "cifar100_resnet18": 10_000}
#: accuracy (%) of guessing, per workload
CHANCE = {"fmnist_lenet5": 10.0, "cifar10_alexnet": 10.0, "cifar100_resnet18": 1.0}
#: dense FedAvg may end at most this many points below its plateau
MAX_DENSE_GAP = 3.0
#: the penalty must be able to take off at least this share of the paper's shrink
MIN_SHRINK_SHARE = 0.5
#: seed-to-seed standard deviation of a compared method's final accuracy, at most (points)
MAX_SEED_NOISE = 2.0
#: diagnostic: a pruned method may end at most one LeNet-5 weight short of s_p
MAX_SHORTFALL = 1.0 / numbers.PRUNABLE["lenet5"]
#: diagnostic: a fixed-mask start's logit spread, at least this share of the dense network's
MIN_START_SPREAD = 0.1

#: the methods each claim compares (claim key -> methods), and the runs it reads: "all" = every
#: target sparsity, "top" = the highest, "noniid" = the non-IID grid
CLAIM_METHODS = {
    "sparsity_exact": ("feddip",),
    "close_to_dense": ("fedavg", "feddip"),
    "ordering": ("feddip", "feddp", "snip"),
    "gap_grows": ("feddip", "feddp"),
    "baselines": ("feddip", "prunefl", "prunetrain", "dpf", "snip"),
    "beats_feddst": ("feddip", "feddst"),
    "traffic": ("fedavg", "feddip"),
    "noniid_close": ("fedavg", "fedprox", "feddip_prox"),
}
CLAIM_SCOPE = {
    "sparsity_exact": "all",
    "close_to_dense": "all",
    "ordering": "top",
    "gap_grows": "all",
    "baselines": "top",
    "beats_feddst": "top",
    "traffic": "all",
    "noniid_close": "noniid",
}
SCOPES = ("all", "top", "noniid")


def local_steps(preset: Mapping, workload: str) -> int:
    """Local SGD steps of one client in one round: epochs * ceil(images per client / batch)."""
    n = int(preset["train_subset"]) or FULL_TRAIN[workload]
    per_client = n // int(preset["num_clients"])
    return int(preset["local_epochs"]) * math.ceil(per_client / int(preset["batch_size"]))


def penalty_shrink(
    rounds: int,
    segments: int,
    lambda_max: float,
    steps: int,
    lr: float,
    lr_decay: float,
    variant: str = "code",
) -> float:
    """sum_t eta_t * lambda_t * steps: how much the unsquared per-layer penalty can shrink a
    layer's norm over the run (its gradient has norm lambda at every step)."""
    return float(
        sum(
            lr * lr_decay**t * incremental_lambda(t, rounds, lambda_max, segments, variant) * steps
            for t in range(rounds)
        )
    )


def shrink_of(preset: Mapping, workload: str) -> float:
    """``penalty_shrink`` of a preset's FedDIP runs."""
    return penalty_shrink(
        int(preset["rounds"]),
        int(preset["Q"]),
        float(preset["lambda_max"]),
        local_steps(preset, workload),
        float(preset["lr"]),
        float(preset["lr_decay"]),
        preset["lambda_variant"],
    )


def paper_shrink() -> float:
    """The paper's (official scripts') shrink on LeNet-5 / Fashion-MNIST: T = 1000, Q = 20,
    lambda_max = 1e-3 (code variant), 5 epochs of ceil(1200 / 128) = 10 steps, 0.1 * 0.998^t."""
    steps = numbers.LOCAL_EPOCHS * math.ceil(
        FULL_TRAIN["fmnist_lenet5"] // numbers.CLIENTS / numbers.BATCH_SIZE
    )
    return penalty_shrink(
        numbers.ROUNDS,
        numbers.Q,
        numbers.LAMBDA_MAX,
        steps,
        numbers.LR0,
        numbers.LR_DECAY,
    )


PAPER_SHRINK = round(paper_shrink(), 2)

_NOISE_SOURCE = (
    "ours: with a seed-to-seed standard deviation above 2 points, a 3-point difference (the "
    "close-to-dense allowance) is within 1.5 standard deviations, so two seeds cannot tell the "
    "claim's methods apart"
)
_LEARNS_SOURCE = (
    "ours: a method whose mean final accuracy is within its seed spread (at least the test "
    "set's binomial noise at chance) of chance has not left chance, and a comparison with it "
    "compares noise"
)
_NOT_REPORTED = "not reported (single runs)"
_TRAINED = "above chance (1000 rounds; result tables not recoverable)"


def _noise(key: str, where: str) -> Indicator:
    return Indicator(
        key,
        f"final accuracy: seed-to-seed standard deviation of each compared method, {where}",
        _NOT_REPORTED,
        at_most(MAX_SEED_NOISE),
        unit="points",
        source=_NOISE_SOURCE,
    )


def _learns(key: str, where: str) -> Indicator:
    return Indicator(
        key,
        f"compared methods: final accuracy above chance beyond the seed spread, {where}",
        _TRAINED,
        above(0.0),
        unit="points",
        source=_LEARNS_SOURCE,
    )


REGIME = Regime(
    indicators=[
        Indicator(
            "dense_gap",
            "dense FedAvg: points below the model's plateau on the same data",
            "≈ 0 (1000 rounds, converged)",
            at_most(MAX_DENSE_GAP),
            unit="points",
            source="ours: within the close-to-dense claim's own 3-point allowance; further "
            "below its plateau, dense FedAvg's remaining climb alone could open or close that "
            "gap (the paper's FedAvg trains 1000 rounds)",
        ),
        Indicator(
            "penalty_shrink",
            "FedDIP: norm the layer penalty can take off a layer, sum of eta * lambda * steps",
            PAPER_SHRINK,
            at_least(MIN_SHRINK_SHARE * PAPER_SHRINK),
            source="computed: sum of eta_t * lambda_t * local steps at the official scripts' "
            f"setting (T = 1000, Q = 20, lambda_max = 1e-3, 50 steps a round, eta_t = 0.1 * "
            f"0.998^t) = {PAPER_SHRINK}; the rule asks half of it, the paper's order of shrink",
        ),
        _learns("learns", "smallest over the target sparsities"),
        _learns("learns_top", "at the highest target sparsity"),
        _learns("noniid_learns", "2 classes per client (mean client accuracy)"),
        _noise("seed_noise", "largest over the target sparsities"),
        _noise("seed_noise_top", "at the highest target sparsity"),
        _noise("noniid_seed_noise", "2 classes per client (mean client accuracy)"),
    ],
    diagnostics=[
        Indicator(
            "sparsity_shortfall",
            "pruned methods: final sparsity below s_p (largest over the target sparsities)",
            "0 (PruneTrain: above 0, its first and last layers stay dense)",
            at_most(MAX_SHORTFALL),
            source="ours: one LeNet-5 weight, the rounding of round(s_p * n); a diagnostic since "
            "the paper's own PruneTrain ends below s_p and FedDIP's exact sparsity is a claim "
            "of its own",
            diagnostic=True,
        ),
        *(
            Indicator(
                f"{m}_start",
                f"{name}: logit spread of its fixed-mask start / the dense start's (highest s_p)",
                "the same starts (the same LeNet-5, initialisation and mask rule), 1000 rounds "
                "to leave chance",
                at_least(MIN_START_SPREAD),
                source="ours: below a tenth of the dense start's spread the output barely "
                f"depends on the input; {why}",
                diagnostic=True,
            )
            for m, name, why in (
                (
                    "snip",
                    "SNIP",
                    "a diagnostic since the start is a property of the initialisation the "
                    "paper shares, and whether SNIP left chance is read by learns_top",
                ),
                (
                    "feddst",
                    "FedDST",
                    "a diagnostic since the paper's own LeNet-5 with its ERK mask at s = 0.95 "
                    "starts at about 0.006 too (at chance for about 100 rounds at s = 0.9)",
                ),
            )
        ),
    ],
    claims={
        "sparsity_exact": ClaimRule((), methods=CLAIM_METHODS["sparsity_exact"]),
        "close_to_dense": ClaimRule(
            ("dense_gap", "seed_noise", "sparsity_shortfall"),
            methods=CLAIM_METHODS["close_to_dense"],
            tasks=("IID, every s_p",),
        ),
        "ordering": ClaimRule(
            ("penalty_shrink", "learns_top", "seed_noise_top", "sparsity_shortfall", "snip_start"),
            methods=CLAIM_METHODS["ordering"],
            tasks=("IID, highest s_p",),
        ),
        "gap_grows": ClaimRule(
            ("penalty_shrink", "learns", "seed_noise", "sparsity_shortfall"),
            methods=CLAIM_METHODS["gap_grows"],
            tasks=("IID, every s_p",),
        ),
        "baselines": ClaimRule(
            ("learns_top", "seed_noise_top", "sparsity_shortfall", "snip_start"),
            methods=CLAIM_METHODS["baselines"],
            tasks=("IID, highest s_p",),
        ),
        "beats_feddst": ClaimRule(
            ("learns_top", "seed_noise_top", "sparsity_shortfall", "feddst_start"),
            methods=CLAIM_METHODS["beats_feddst"],
            tasks=("IID, highest s_p",),
        ),
        "traffic": ClaimRule((), methods=CLAIM_METHODS["traffic"]),
        "noniid_close": ClaimRule(
            ("noniid_learns", "noniid_seed_noise"),
            methods=CLAIM_METHODS["noniid_close"],
            tasks=("2 classes per client",),
        ),
    },
)

__all__ = [
    "REGIME",
    "CLAIM_METHODS",
    "CLAIM_SCOPE",
    "PLATEAU",
    "CHANCE",
    "TEST_IMAGES",
    "measure",
    "penalty_shrink",
    "paper_shrink",
    "shrink_of",
    "local_steps",
    "shortfall",
    "seed_noise",
    "learns",
    "tie_threshold",
    "test_images",
]


def test_images(preset: Mapping | None, workload: str) -> int:
    """Test images the accuracies are measured on: the preset's subset, else the full set."""
    n = int(preset["test_subset"]) if preset is not None else 0
    return n or TEST_IMAGES.get(workload, 10_000)


def _rows(grid: dict, scope: str, column: str) -> pd.DataFrame:
    """Final rows of ``grid`` that a claim of ``scope`` reads: every run ("all", "noniid") or
    the dense runs and the pruned ones at the highest target sparsity ("top")."""
    if scope not in SCOPES:
        raise FlkitError(f"scope={scope!r}; accepted: {', '.join(map(repr, SCOPES))}")
    df = final_rows(grid, column)
    if scope == "top" and len(df):
        pruned = ~df.method.isin(DENSE)
        top = df[pruned].sparsity.max() if pruned.any() else None
        df = df[~pruned | (df.sparsity == top)]
    return df


def _per_method(df: pd.DataFrame, value) -> dict:
    """{method: worst value over its (method, sparsity) groups}; ``value(group)`` is None when it
    cannot be measured (one seed), and then so is the method's."""
    out = {}
    for m, g in df.groupby("method", sort=False):
        vals = [value(h) for _, h in g.groupby("sparsity")]
        out[m] = None if any(v is None for v in vals) else vals
    return out


def seed_noise(grid: dict, scope: str = "all", column: str = "test_accuracy") -> dict:
    """{method: largest standard deviation (ddof = 1, points) of its final accuracy over seeds,
    over its target sparsities in ``scope``}; None for a method with a single seed."""

    def sd(g):
        return None if len(g) < 2 else 100.0 * float(g.final_acc.std(ddof=1))

    return {
        m: None if v is None else max(v)
        for m, v in _per_method(_rows(grid, scope, column), sd).items()
    }


def learns(
    grid: dict,
    chance: float,
    n_test: int,
    scope: str = "all",
    column: str = "test_accuracy",
) -> dict:
    """{method: points its mean final accuracy ends above ``chance`` (%) beyond its spread, the
    smallest over its target sparsities in ``scope``}. The spread is the seeds' standard
    deviation (ddof = 1), at least the binomial standard deviation of an accuracy at chance on
    ``n_test`` images: two seeds of a near-constant predictor can agree to the last digit.
    None for a method with a single seed (no spread)."""
    floor = 100.0 * metrics.binomial_se(chance / 100.0, max(1, int(n_test)))

    def margin(g):
        if len(g) < 2:
            return None
        spread = max(100.0 * float(g.final_acc.std(ddof=1)), floor)
        return 100.0 * float(g.final_acc.mean()) - chance - spread

    return {
        m: None if v is None else min(v)
        for m, v in _per_method(_rows(grid, scope, column), margin).items()
    }


def shortfall(grid: dict) -> dict:
    """{method: largest s_p - final sparsity over its target sparsities, >= 0} (dense methods: 0,
    their target is the dense model)."""
    df = final_rows(grid)
    out = {}
    for m, g in df.groupby("method", sort=False):
        if m in DENSE:
            out[m] = 0.0
            continue
        short = (g.sparsity.astype(float) - g.final_sparsity.astype(float)).max()
        out[m] = max(0.0, float(short))
    return out


def tie_threshold(
    grid: dict,
    methods,
    floor: float,
    n_test: int,
    scope: str = "all",
    column: str = "test_accuracy",
) -> float:
    """Two mean accuracies of a claim closer than this (a fraction) count as a tie: the largest
    of the preset's ``floor``, the binomial standard deviation of each compared method's mean
    accuracy on ``n_test`` images, and the seed-to-seed standard deviation of each compared
    method over the runs the claim reads (``scope``). Only the claim's ``methods`` count."""
    df = _rows(grid, scope, column)
    df = df[df.method.isin(list(methods))]
    binom = [
        metrics.binomial_se(min(1.0, max(0.0, float(g.final_acc.mean()))), max(1, int(n_test)))
        for _, g in df.groupby("method")
    ]
    noise = [v for m, v in seed_noise(grid, scope, column).items() if m in methods and v]
    return max([float(floor), *binom, *(v / 100.0 for v in noise)])


def measure(
    grid: dict,
    workload: str,
    preset: Mapping | None = None,
    spreads: Mapping | None = None,
    noniid: dict | None = None,
) -> dict:
    """Our indicators from the main grid's runs (``study.run_grid``), the non-IID grid's
    (``study.run_noniid``, column ``client_acc_mean``) and the fixed-mask starts' logit spreads
    (``study.start_spreads``). ``dense_gap`` is None for a workload without a known plateau on
    the preset's training subset (``PLATEAU``), ``penalty_shrink`` without a preset, a start's
    spread when not given, the non-IID indicators without the non-IID grid."""
    if workload not in CHANCE:
        raise FlkitError(f"workload {workload!r}; accepted: {', '.join(map(repr, CHANCE))}")
    spreads = spreads or {}
    df = final_rows(grid)
    dense = df[df.method == "fedavg"].final_acc.mean()
    subset = int(preset["train_subset"]) if preset is not None else 0
    plateau = PLATEAU.get((workload, subset))
    gap = None if plateau is None or pd.isna(dense) else plateau - 100 * float(dense)
    chance, n = CHANCE[workload], test_images(preset, workload)
    ours = {
        "dense_gap": gap,
        "penalty_shrink": None if preset is None else shrink_of(preset, workload),
        "learns": learns(grid, chance, n, "all"),
        "learns_top": learns(grid, chance, n, "top"),
        "seed_noise": seed_noise(grid, "all"),
        "seed_noise_top": seed_noise(grid, "top"),
        "sparsity_shortfall": shortfall(grid),
        "snip_start": spreads.get("snip"),
        "feddst_start": spreads.get("feddst"),
        "noniid_learns": None,
        "noniid_seed_noise": None,
    }
    if noniid:
        col = "client_acc_mean"
        ours["noniid_learns"] = learns(noniid, chance, n, "noniid", col)
        ours["noniid_seed_noise"] = seed_noise(noniid, "noniid", col)
    return ours

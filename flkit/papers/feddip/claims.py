"""Claim verdicts of notebook 02 as functions of result tables (thresholds are named parameters).

Each function returns a dict {text, holds, evidence, paper, regime, reason, test, seeds} for
``report.claim(**c)``: ``holds`` is the face-value outcome (True / False, None when the tables
cannot decide it, with the reason), ``test`` the claim's own test in words with its threshold,
``seeds`` the training seeds its evidence uses, and ``regime`` the readings of the indicators its
rule names (``regime.REGIME``, read on the methods it compares), from which ``report.claim``
derives "outside regime". The smoke preset's rule lives in ``report.claim`` too.
"""

from __future__ import annotations

import pandas as pd

from ...prune import prunable_names
from ...workbook.regime import Readings
from . import regime as _regime
from .study import final_rows, start_spreads

PAPER_WHERE = "abstract and Sections I/VI (result tables not recoverable)"
#: test images of each workload's full test set (kept here for the notebook's references)
TEST_IMAGES = _regime.TEST_IMAGES


def _seeds(res: dict, methods=None) -> list[int]:
    """The training seeds of ``res``'s runs (of ``methods`` when given)."""
    return sorted({int(k[-1]) for k in res if methods is None or k[0] in methods})


def _claim(text, holds, evidence, regime=(), reason="", test="", seeds=None):
    return {
        "text": text,
        "holds": None if holds is None else bool(holds),
        "evidence": evidence,
        "paper": PAPER_WHERE,
        # kept as given: REGIME.readings' result carries the claim key and its measurements
        "regime": regime if isinstance(regime, Readings) else list(regime),
        "reason": reason if holds is None else "",
        "test": test,
        "seeds": seeds,
    }


def sparsity_exact(res: dict, max_weights: float = 1.0, regime=()) -> dict:
    """FedDIP ends at the prescribed sparsity s_p: the final global mask of every FedDIP run prunes
    round(s_p * n) of its n prunable weights, give or take ``max_weights`` (judged against s_p,
    not against the schedule that built the mask)."""
    worst, n_checked = 0.0, 0
    for (m, s_p, _seed), r in res.items():
        if m != "feddip":
            continue
        state = r.final_state.model
        n = sum(state[k].numel() for k in prunable_names(state))
        final = float(r.history["mask_sparsity"].iloc[-1])
        worst = max(worst, abs(round(final * n) - round(float(s_p) * n)))
        n_checked += 1
    holds = worst <= max_weights if n_checked else None
    return _claim(
        "FedDIP controls the sparsity exactly: it ends at the prescribed s_p",
        holds,
        f"{n_checked} FedDIP runs; largest difference between the final mask's pruned count and "
        f"round(s_p * n): {worst:.0f} weights",
        regime,
        reason="no FedDIP run to check",
        test=f"every FedDIP run's final mask prunes round(s_p * n) weights, give or take "
        f"{max_weights:g}",
        seeds=_seeds(res, ("feddip",)),
    )


def baselines(
    res: dict,
    tie: float = 0.005,
    regime=(),
    others=("prunefl", "prunetrain", "dpf", "snip"),
    text: str = "At the highest sparsity FedDIP is similar to or better than PruneFL, "
    "PruneTrain, DPF and SNIP",
) -> dict:
    """Abstract: at the highest sparsity FedDIP's mean final accuracy is similar to or better than
    each pruning baseline's of ``others``: at least theirs minus `tie`. PruneTrain keeps its first
    and last layers dense, so it runs below s_p (its realised sparsity is in the evidence). FedDST
    is judged on its own (``beats_feddst``), so that its run at chance gates only its own
    comparison."""
    df = final_rows(res)
    s = df[df.method == "feddip"].sparsity.max()
    at = df[df.sparsity == s]
    acc = at.groupby("method").final_acc.mean()
    real = at.groupby("method").final_sparsity.mean()
    others = [m for m in others if m in acc]
    test = (
        f"FedDIP's mean final accuracy at least each of {', '.join(others) or 'the baselines'}'s "
        f"minus the tie ({tie * 100:.2f} points) at the highest s_p"
    )
    seeds = _seeds(res, ("feddip", *others))
    if "feddip" not in acc or not others:
        return _claim(
            text,
            None,
            "",
            regime,
            reason="FedDIP or every baseline is missing from the grid",
            test=test,
            seeds=seeds,
        )
    holds = all(acc["feddip"] >= acc[m] - tie for m in others)
    ev = (
        ", ".join(f"{m} {acc[m] * 100:.1f}% (s={real[m]:.3f})" for m in ["feddip", *others])
        + f" at s_p={s:g}; tie {tie * 100:.1f} pts"
    )
    return _claim(text, holds, ev, regime, test=test, seeds=seeds)


def beats_feddst(res: dict, tie: float = 0.005, regime=()) -> dict:
    """Abstract, the FedDST part of the baselines claim (same rule as ``baselines``)."""
    return baselines(
        res,
        tie,
        regime,
        ("feddst",),
        "At the highest sparsity FedDIP is similar to or better than FedDST",
    )


def close_to_dense(res: dict, max_gap: float = 0.03, regime=()) -> dict:
    """FedDIP's mean final accuracy is within max_gap of FedAvg's at every target sparsity."""
    df = final_rows(res)
    dense = df[df.method == "fedavg"].final_acc.mean()
    gaps = {
        s: dense - df[(df.method == "feddip") & (df.sparsity == s)].final_acc.mean()
        for s in sorted(df[df.method == "feddip"].sparsity.unique())
    }
    holds = all(g <= max_gap for g in gaps.values())
    ev = "; ".join(f"s={s:g}: {g * 100:+.1f} pts below FedAvg" for s, g in gaps.items())
    return _claim(
        f"FedDIP's accuracy at extreme sparsity is close to dense FedAvg "
        f"(gap <= {max_gap * 100:.0f} points)",
        holds,
        ev,
        regime,
        test=f"FedDIP's mean final accuracy at most {max_gap * 100:g} points below dense "
        "FedAvg's at every target sparsity",
        seeds=_seeds(res, ("fedavg", "feddip")),
    )


def ordering(res: dict, tie: float = 0.005, regime=()) -> dict:
    """At the highest sparsity: FedDIP >= FedDP >= SNIP (mean final accuracy, ties within `tie`)."""
    df = final_rows(res)
    s = df[df.method == "feddip"].sparsity.max()
    acc = {
        m: df[(df.method == m) & (df.sparsity == s)].final_acc.mean()
        for m in ("feddip", "feddp", "snip")
    }
    holds = acc["feddip"] >= acc["feddp"] - tie and acc["feddp"] >= acc["snip"] - tie
    ev = ", ".join(f"{m} {v * 100:.1f}%" for m, v in acc.items()) + f" at s={s:g}"
    ev += f"; tie {tie * 100:.1f} pts"
    return _claim(
        "At the highest sparsity FedDIP >= FedDP >= one-shot SNIP",
        holds,
        ev,
        regime,
        test=f"at the highest s_p, mean final accuracy FedDIP >= FedDP - tie and FedDP >= SNIP - "
        f"tie (tie {tie * 100:.2f} points)",
        seeds=_seeds(res, ("feddip", "feddp", "snip")),
    )


def gap_grows(res: dict, tie: float = 0.005, regime=()) -> dict:
    """The FedDIP - FedDP gap (incremental regularisation) is larger at the highest sparsity than
    at the lowest (by more than `tie`), and FedDIP does gain there (gap > `tie`): a gap rising from
    negative to zero is no gain."""
    df = final_rows(res)
    sp = sorted(df[df.method == "feddip"].sparsity.unique())
    gap = {
        s: (
            df[(df.method == "feddip") & (df.sparsity == s)].final_acc.mean()
            - df[(df.method == "feddp") & (df.sparsity == s)].final_acc.mean()
        )
        for s in sp
    }
    holds = gap[sp[-1]] > max(gap[sp[0]], 0.0) + tie if len(sp) > 1 else None
    ev = "; ".join(f"s={s:g}: {g * 100:+.1f} pts" for s, g in gap.items())
    return _claim(
        "The gain of FedDIP over FedDP grows with sparsity",
        holds,
        ev,
        regime,
        reason="a single target sparsity: nothing to grow over",
        test="FedDIP - FedDP (mean final accuracy) at the highest s_p above the larger of its "
        f"value at the lowest s_p and 0 by more than the tie ({tie * 100:.2f} points)",
        seeds=_seeds(res, ("feddip", "feddp")),
    )


def traffic(res: dict, min_saving: float = 0.5, dense_upload: float = 0.9, regime=()) -> dict:
    """Under exact sparse counting FedDIP's cumulative download is at most (1 - min_saving) of
    FedAvg's at every sparsity, and under the official formula its upload stays >= dense_upload of
    FedAvg's (error feedback keeps the uploaded local models dense)."""
    df = final_rows(res)
    fa = df[df.method == "fedavg"]
    fd = df[df.method == "feddip"]
    down = {
        s: g.cum_bytes_down.mean() / fa.cum_bytes_down.mean() for s, g in fd.groupby("sparsity")
    }
    up = {
        s: g.official_mbit_up.mean() / fa.official_mbit_up.mean() for s, g in fd.groupby("sparsity")
    }
    holds = all(v <= 1 - min_saving for v in down.values()) and all(
        v >= dense_upload for v in up.values()
    )
    ev = (
        "download / FedAvg (exact bytes): "
        + ", ".join(f"s={s:g}: {v:.2f}" for s, v in down.items())
        + "; upload / FedAvg (official formula): "
        + ", ".join(f"s={s:g}: {v:.2f}" for s, v in up.items())
    )
    return _claim(
        "Pruned models cost far less download traffic than FedAvg; FedDIP's upload "
        "under the official accounting stays near dense",
        holds,
        ev,
        regime,
        test=f"at every s_p, FedDIP's exact download at most {1 - min_saving:g} of FedAvg's and "
        f"its official-formula upload at least {dense_upload:g} of FedAvg's",
        seeds=_seeds(res, ("fedavg", "feddip")),
    )


def noniid_close(
    res: dict, max_gap: float = 0.03, column: str = "client_acc_mean", regime=()
) -> dict:
    """Non-IID: FedDIP+Prox's mean final accuracy within max_gap of the better of FedAvg/FedProx."""
    df = final_rows(res, column)
    acc = df.groupby("method").final_acc.mean()
    best_dense = max(acc.get("fedavg", float("nan")), acc.get("fedprox", float("nan")))
    gap = best_dense - acc.get("feddip_prox", float("nan"))
    holds = bool(gap <= max_gap) if pd.notna(gap) else None
    ev = ", ".join(f"{m} {v * 100:.1f}%" for m, v in acc.items()) + f"; gap {gap * 100:+.1f} pts"
    return _claim(
        f"Non-IID (2 classes per client): FedDIP+Prox stays close to FedAvg/FedProx "
        f"(gap <= {max_gap * 100:.0f} points)",
        holds,
        ev,
        regime,
        reason="a method of the comparison did not run",
        test=f"FedDIP+Prox's mean client accuracy at most {max_gap * 100:g} points below the "
        "better of FedAvg's and FedProx's",
        seeds=_seeds(res, ("fedavg", "fedprox", "feddip_prox")),
    )


def tie_of(grid: dict, preset, claim: str) -> float:
    """The tie allowance of an accuracy claim (a key of ``regime.CLAIM_METHODS``):
    ``regime.tie_threshold`` on the methods the claim compares and the runs it reads (the
    largest of the preset's ``tie``, those methods' seed spread and binomial noise)."""
    methods = _regime.REGIME.rule(claim).methods
    n = _regime.test_images(preset, preset["workloads"][0])
    return _regime.tie_threshold(grid, methods, float(preset["tie"]), n, _regime.CLAIM_SCOPE[claim])


def all_claims(
    grid: dict, noniid: dict, preset, spreads: dict | None = None, device="auto"
) -> list[dict]:
    """Every claim of the paper this notebook checks, in order, each with the readings of the
    indicators its rule names (``regime.measure`` on the main grid, the non-IID grid and the
    fixed-mask starts' spreads, measured here unless given, ``study.start_spreads``) and its own
    tie (``tie_of``)."""
    workload = preset["workloads"][0]
    if spreads is None:
        seed = min(k[-1] for k in grid)
        spreads = start_spreads(preset, workload, seed, device)
    ours = _regime.measure(grid, workload, preset, spreads, noniid)

    def reg(name):
        return _regime.REGIME.readings(ours, name)

    return [
        sparsity_exact(grid, regime=reg("sparsity_exact")),
        close_to_dense(grid, float(preset["max_gap"]), reg("close_to_dense")),
        ordering(grid, tie_of(grid, preset, "ordering"), reg("ordering")),
        gap_grows(grid, tie_of(grid, preset, "gap_grows"), reg("gap_grows")),
        baselines(grid, tie_of(grid, preset, "baselines"), reg("baselines")),
        beats_feddst(grid, tie_of(grid, preset, "beats_feddst"), reg("beats_feddst")),
        traffic(grid, regime=reg("traffic")),
        noniid_close(noniid, float(preset["max_gap"]), regime=reg("noniid_close")),
    ]

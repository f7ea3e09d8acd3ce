"""What notebook 03 puts into its report: each section's numbers beside the paper's and the
verdicts of its claims (``claims``), with the regime readings (``claim_readings``) and the trained
runs' own Sync-ST rounds and staleness (``run_evidence``) in the evidence of every FedAST-vs-Sync
claim. The paper's number goes beside ours only where it measures the same
thing; where the settings differ the note says so.

Every ``record_*`` function takes the report, the preset where it needs it, the study's
results and ``paper_regime``, the paper setting's indicators (:func:`.timing_only.paper_setting`):
those of the four-task mix, so they go beside that mix's runs only.
"""

from __future__ import annotations

import pandas as pd

from flkit.workbook import verdict

from . import claim_readings, claims, configs, run_evidence, timing_only
from .numbers import NUMBERS

__all__ = [
    "record_sync_variants",
    "record_gain",
    "record_active",
    "record_nobuffer",
    "record_heterogeneous",
    "record_ablation",
    "record_buffer",
    "record_k",
    "record_dynamic",
    "record_paper_only",
]


def _claim(report, text, holds, seeds, evidence="", paper="", regime=(), test=""):
    """``report.claim`` under the seed rule (``claims.seed_rule``): with fewer than
    ``claims.MIN_SEEDS`` seeds the claim is recorded inconclusive, the reason keeping its
    face-value outcome; regime readings still come first (``outside regime`` wins)."""
    holds, reason = claims.seed_rule(holds, seeds)
    return report.claim(
        text,
        holds,
        evidence=evidence,
        paper=paper,
        regime=regime,
        reason=reason,
        test=test,
        seeds=seeds,
    )


def _seeds(frame: pd.DataFrame) -> list:
    """The seeds of a study's frame (its ``seed`` column, the 'mean' rows left out)."""
    return sorted({int(s) for s in frame["seed"] if s != "mean"})


def _rounded(x, digits: int = 1):
    return None if x is None or pd.isna(x) else round(float(x), digits)


def _by_seed(results: dict, method: str, seeds, n_tasks=None) -> dict:
    """{seed: run} of one method from a study's results (keyed (method, seed) or (M, method,
    seed) when ``M`` is given)."""
    return {s: results[(method, s) if n_tasks is None else (n_tasks, method, s)] for s in seeds}


def _identical_note(results: dict, seeds, n_tasks: int) -> str:
    """The in-run regime indicators of an identical-task experiment's FedAST (option S) and
    Sync-ST runs, ours alone: the paper's inferred Sync-ST rounds (``paper_regime``) are the
    four-task mix's, and the paper prints no completion time for its identical tasks to infer
    theirs from."""
    ours = run_evidence.of_runs(
        _by_seed(results, claims.IDENTICAL_FEDAST, seeds, n_tasks),
        _by_seed(results, "sync_st", seeds, n_tasks),
    )
    return run_evidence.note(ours)


def record_sync_variants(
    report, preset, df: pd.DataFrame, results: dict, seeds, paper_regime: dict, timing=None
):
    """Fig. 2: FedAST before Sync-ST, Sync-ST without mitigation far slower, Sync-UCB-ST and
    Sync-Bayes-ST about equal to Sync-ST (thresholds: ``claims.FAR_SLOWER``, ``claims.NEAR``).
    ``timing``: the notebook's ``timing_only.timing_table`` (the claims' regime readings);
    ``paper_regime`` is the four-task mix's and goes beside no number here (six identical tasks)."""
    v = claims.sync_variants(df, seeds)
    note = _identical_note(results, seeds, preset["fig2_M"])
    tests = {
        "fedast_first": "FedAST's time to every target < Sync-ST's, in every seed",
        "nomit_slower": f"no-mitigation time > {claims.FAR_SLOWER:g}x Sync-ST's, in every seed",
        "ucb_bayes_near": f"both within {100 * claims.NEAR:g} % of Sync-ST's time, in every seed",
    }
    texts = {
        "fedast_first": "FedAST reaches the targets before Sync-ST (first-k), every seed",
        "nomit_slower": "Sync-ST without straggler mitigation is far slower "
        f"(> {claims.FAR_SLOWER:g}x Sync-ST), every seed",
        "ucb_bayes_near": "Sync-UCB-ST and Sync-Bayes-ST ≈ Sync-ST "
        f"(within {100 * claims.NEAR:g} %), every seed",
    }
    fig2_readings = claim_readings.timing_readings(timing, "fig2")
    for key, text in texts.items():
        holds, evidence = v[key]
        _claim(
            report, text, holds, seeds, f"{evidence}; {note}", "Fig. 2", fig2_readings, tests[key]
        )


def record_gain(
    report, preset, gains: pd.DataFrame, results: dict, seeds, paper_regime: dict, timing=None
):
    """Fig. 5: the seed-mean gain of FedAST over Sync-ST at each M (``gains``:
    ``tables.gain_table``) on Fig. 2's pool, and whether it grows with M (regime: Fig. 2's
    timing indicators, its largest M being Fig. 2's run; ``paper_regime`` is the four-task
    mix's and goes beside no number here)."""
    most_tasks = max(preset["Ms"])
    means = gains[gains.seed == "mean"].set_index("M")["gain_pct"]
    for n_tasks, g in means.items():
        report.number(
            f"Fig. 5 gain of FedAST over Sync-ST, M = {n_tasks} ({preset['fig2_dataset']})",
            _rounded(g),
            paper=NUMBERS["max_time_gain_vs_sync_st_pct"] if n_tasks == most_tasks else None,
            unit="%",
            note="paper: 46.0 % is the largest gain over its datasets (abstract)",
        )
    holds, ev = claims.gain_grows(gains, seeds)
    note = _identical_note(results, seeds, most_tasks)
    _claim(
        report,
        "The gain over Sync-ST grows with the number of tasks (largest M > smallest M), every seed",
        holds,
        seeds,
        f"{ev}; at M = {most_tasks}: {note}",
        "Fig. 5",
        claim_readings.timing_readings(timing, "fig5"),
        "gain at the largest M > gain at the smallest M, in every seed",
    )


def record_active(
    report, act: pd.DataFrame, central: float, n_test: int | None = None, timing=None
):
    """Figs. 3/13: FedAST minus NoBuffer final accuracy at the fewest and the most active
    requests, the centralised reference, and the claim (``claims.few_vs_many_active``).
    ``n_test``: the test items the final accuracies are measured on (the full test set); the
    evidence then gives their binomial standard error beside the gaps."""
    holds, ev, gap_lo, gap_hi = claims.few_vs_many_active(act)
    if n_test:
        p = float(act.final_accuracy.mean())
        se = claims.binomial_se(p, int(n_test))
        ev += (
            f"; final accuracies on the full test set ({int(n_test)} items): binomial SE "
            f"{se:.4f} per accuracy at {p:.3f}, about {se * 2**0.5:.4f} per gap (thresholds: "
            f"equal within {claims.EQUAL_GAP:g}, behind by more than {claims.MIN_GAP:g})"
        )
    for where, gap, paper in (("fewest", gap_lo, "≈ 0"), ("most", gap_hi, "> 0")):
        report.number(
            f"Fig. 3: FedAST − NoBuffer final accuracy, {where} active clients",
            round(gap, 4),
            paper=paper,
            unit="",
        )
    report.number("Fig. 3: centralised reference accuracy", round(central, 4))
    _claim(
        report,
        "FedAST ≈ NoBuffer with few active clients; NoBuffer falls behind as active clients grow",
        holds,
        _seeds(act),
        f"{ev}; centralised {central:.3f}",
        "Figs. 3/13",
        claim_readings.timing_readings(timing, "fig3"),
        f"FedAST − NoBuffer within {claims.EQUAL_GAP:g} at the fewest active clients and above "
        f"{claims.MIN_GAP:g} at the most",
    )


def record_nobuffer(
    report,
    het_results: dict,
    nobuffer: dict,
    seeds,
    paper_regime: dict,
    timing=None,
    eval_items: int = 0,
):
    """Fig. 4: NoBuffer's curve noisier than FedAST's on the heterogeneous tasks (``nobuffer``:
    {seed: run}; the staleness part of the regime note only, there is no Sync-ST run).
    ``eval_items``: the test items of a periodic test (the preset's ``eval_subset``; 0: the full
    test set, not stated), whose binomial SE the evidence gives beside the noise measure."""
    fedast = _by_seed(het_results, "fedast_d", seeds)
    holds, ev = claims.nobuffer_noisier(fedast, nobuffer)
    note = run_evidence.note(run_evidence.of_runs(fedast, {}), paper_regime, sync=False)
    if eval_items:
        se = claims.binomial_se(0.5, int(eval_items))
        ev += f"; curves tested on {int(eval_items)} items: binomial SE at most {se:.3f} per point"
    _claim(
        report,
        "NoBuffer's accuracy curve is noisier than FedAST's (mean |Δacc| at one time step), "
        "every seed",
        holds,
        seeds,
        f"{ev}; {note}",
        "Fig. 4",
        claim_readings.timing_readings(timing, "fig4"),
        "NoBuffer's mean |Δacc| per time step > FedAST's, in every seed",
    )


def _heterogeneous(preset, df: pd.DataFrame, results: dict, seeds) -> tuple[dict, dict]:
    """The heterogeneous verdict (``claims.heterogeneous``) and the in-run indicators (Sync-ST
    rounds to target, staleness; evidence only) of one heterogeneous comparison
    (``study.het_compare``'s frame and runs)."""
    fedast = _by_seed(results, "fedast_d", seeds)
    het = claims.heterogeneous(df, fedast, easy_task=preset["het_datasets"][0])
    return het, run_evidence.of_runs(fedast, _by_seed(results, "sync_st", seeds))


def _mix_timing(preset, seeds, timing=None, reuse_for=None) -> pd.DataFrame:
    """The ``heterogeneous`` rows of ``timing_only.timing_table`` for ``preset``: ``timing``
    itself when given and computed for ``reuse_for`` (the notebook's preset) whose mix runs the
    same configs as ``preset``'s; else a timing-only run of the mix (well under a second per
    seed)."""
    same = reuse_for is None or all(
        configs.heterogeneous(preset, m) == configs.heterogeneous(reuse_for, m)
        for m in ("fedast_d", "sync_st")
    )
    if timing is not None and same:
        return timing
    return timing_only.timing_table(preset, seeds=seeds, experiments=("heterogeneous",))


def _readings(timing: pd.DataFrame) -> list:
    """The regime readings the heterogeneous claims depend on: timing-only, ours beside the
    paper setting's, both from ``timing``."""
    return claim_readings.timing_readings(timing, "heterogeneous")


_HET_TEST = (
    "the easy task done first, its requests moved to the others, and FedAST done with every "
    "task before Sync-ST, in every seed"
)


def record_heterogeneous(
    report, preset, df: pd.DataFrame, results: dict, seeds, paper_regime: dict, timing=None
):
    """Figs. 6/7: first and last task done, Sync-ST done and the total gain beside the paper's
    four-task numbers (the notes say how the settings differ), and the claim, judged by the
    mix's timing-only indicators (``timing``: the notebook's ``timing_only.timing_table`` for
    ``preset``; None: its ``heterogeneous`` rows are computed here)."""
    het, ours = _heterogeneous(preset, df, results, seeds)
    # the paper's times are for its 4 tasks (MNIST ... CIFAR-10) on its own clock: each row says so
    setting = (
        f"ours: {len(preset['het_datasets'])} tasks ({', '.join(preset['het_datasets'])}), "
        "simulated time of our delay model; paper: 4 tasks, its own simulated time, so sizes do "
        "not compare"
    )
    same_seeds = f"mean over the seeds where both finished: {het['seeds_compared']}"
    report.number(
        "Figs. 6/7: FedAST first task done (mean)",
        round(het["first_time"], 1),
        paper=NUMBERS["het4_fedast_mnist_time"],
        note=f"first task: {het['first_task']}; paper: MNIST; " + setting,
    )
    report.number(
        "Figs. 6/7: FedAST all tasks done (mean)",
        _rounded(het["all_done_fedast"]),
        paper=NUMBERS["het4_fedast_cifar10_time"],
        note=f"{same_seeds}; {setting}",
    )
    report.number(
        "Figs. 6/7: Sync-ST all tasks done (mean)",
        _rounded(het["all_done_sync"]),
        paper=NUMBERS["het4_sync_completion_time_inferred"],
        note=f"paper value inferred 619/0.599; {same_seeds}; {setting}",
    )
    report.number(
        "Figs. 6/7: total gain of FedAST over Sync-ST",
        _rounded(het["gain_pct"]),
        paper=NUMBERS["het4_total_gain_pct"],
        unit="%",
        note=same_seeds,
    )
    _claim(
        report,
        "Heterogeneous: the easy task finishes first, its requests move to the others, "
        "all done before Sync-ST (every seed)",
        het["holds"],
        seeds,
        f"{het['evidence']}; {run_evidence.note(ours, paper_regime)}",
        "Figs. 6/7 (40.1 %)",
        _readings(_mix_timing(preset, seeds, timing)),
        _HET_TEST,
    )


def record_ablation(
    report, preset, before: tuple, after: tuple, seeds, paper_regime: dict, timing=None
) -> pd.DataFrame:
    """Section 6b: the heterogeneous gain and claim in the ablation's setting (``after``: the
    frame and runs of ``study.het_compare`` at ``study.regime_preset(preset)``; ``before``:
    at ``preset``), judged by the timing-only indicators of the ablation's mix (``timing``, the
    notebook's table for ``preset``, is reused when the ablation runs the same mix). Returns the
    ablation table (in-run indicators, face values and verdicts before and after): the verdict
    after is the recorded claim's, the verdict before the one :func:`record_heterogeneous`
    records for the same runs (same seed and regime rules)."""
    het, ind_before = _heterogeneous(preset, *before, seeds)
    het_after, ind_after = _heterogeneous(preset, *after, seeds)
    report.number(
        "Regime ablation: heterogeneous gain of FedAST over Sync-ST (after)",
        _rounded(het_after["gain_pct"]),
        paper=NUMBERS["het4_total_gain_pct"],
        unit="%",
        note=f"seeds where both finished: {het_after['seeds_compared']}; {het_after['evidence']}",
    )
    verdict_after = _claim(
        report,
        "Heterogeneous, in the ablation's setting (regime_* keys): easy task first, "
        "requests move, all done before Sync-ST (every seed)",
        het_after["holds"],
        seeds,
        f"{het_after['evidence']}; {run_evidence.note(ind_after, paper_regime)}",
        "Figs. 6/7 (40.1 %)",
        _readings(_mix_timing(configs.regime_preset(preset), seeds, timing, reuse_for=preset)),
        _HET_TEST,
    )
    holds_before, reason_before = claims.seed_rule(het["holds"], seeds)
    verdict_before, _ = verdict.decide(
        holds_before,
        report.preset,
        _readings(_mix_timing(preset, seeds, timing)),
        reason=reason_before,
    )
    return run_evidence.ablation_rows(
        paper_regime,
        ind_before,
        ind_after,
        [het["holds"]],
        [het_after["holds"]],
        verdict_before,
        verdict_after,
    )


def record_buffer(report, preset, buf: pd.DataFrame):
    """Figs. 8/9: the best buffer and R/b of the sweep beside the paper's, and the claim of an
    interior optimum."""
    interior, ev, best_b = claims.buffer_optimum(buf)
    requests = preset["buffer_requests"]
    report.number(
        "Figs. 8/9: best buffer (shortest mean time to target)",
        best_b,
        paper="b = 5 at R = 175, b = 3 at R = 105",
        note=f"R = {requests}",
    )
    report.number(
        "Figs. 8/9: best R/b",
        None if best_b is None else round(requests / best_b, 1),
        paper=NUMBERS["buffer_best_ratio"],
        note=f"R = {requests} here; paper: R = 175 and R = 105",
    )
    _claim(
        report,
        "The buffer sweep has an interior optimum (neither the smallest nor the largest b)",
        interior,
        _seeds(buf),
        ev,
        "Figs. 8/9",
        claim_readings.buffer_readings(preset),
        "the best b is neither the smallest nor the largest swept",
    )


def record_k(report, preset, ksw: pd.DataFrame):
    """Figs. 10-12: the k with the shortest time to target, and the k trade-off."""
    report.number(
        "Figs. 10-12: k with the shortest time to target",
        claims.best_k(ksw),
        paper=NUMBERS["sync_k"],
        note=f"k/N_avail scaled: preset k = {preset['k']}",
    )
    holds, ev = claims.k_tradeoff(ksw)
    _claim(
        report,
        "k trade-off: larger k gives longer rounds and fewer rounds",
        holds,
        _seeds(ksw),
        ev,
        "Figs. 10-12",
        claim_readings.k_readings(preset),
        "a larger k gives longer mean rounds and fewer rounds",
    )


def record_dynamic(report, dvs: pd.DataFrame, timing=None) -> pd.DataFrame:
    """Figs. 21-26: the gain of dynamic over static allocation at each target level, and the
    claim; returns the per-level table (``claims.dynamic_vs_static``). With one target level the
    "grows with difficulty" half cannot be judged: the claim is then inconclusive."""
    table, holds, ev = claims.dynamic_vs_static(dvs)
    for r in table.to_dict("records"):
        report.number(
            f"Figs. 21-26: gain of dynamic over static, {r['level']} targets",
            _rounded(r["gain_pct"]),
            paper=NUMBERS["dynamic_vs_static_max_gain_pct"] if r["level"] == "high" else None,
            unit="%",
            note="paper: up to 11.9 %",
        )
    text = "Dynamic beats static by a small margin that grows with target difficulty"
    if dvs.level.nunique() < 2:
        # one level: "grows with difficulty" is unmeasured; the small-margin half is the face value
        _, seed_reason = claims.seed_rule(holds, _seeds(dvs))
        half = "holds" if holds else "does not hold"
        report.claim(
            text,
            None,
            evidence=ev,
            paper="Figs. 21-26",
            regime=claim_readings.timing_readings(timing, "dynamic"),
            seeds=_seeds(dvs),
            reason="one target level: whether the gain grows with difficulty is not measured; at "
            f"face value the small-margin half {half}"
            + (f" ({seed_reason.split(';')[0]})" if seed_reason else ""),
        )
    else:
        _claim(
            report,
            text,
            holds,
            _seeds(dvs),
            ev,
            "Figs. 21-26",
            claim_readings.timing_readings(timing, "dynamic"),
            "dynamic's gain over static > 0 at every target level and larger at the harder one",
        )
    return table


def record_paper_only(report):
    """Section 10: the paper's CIFAR-100 gains and its heterogeneous gains at other targets,
    which need runs this preset does not make (no measured value)."""
    for n_tasks, g in NUMBERS["cifar100_gain_pct"].items():
        report.number(
            f"Fig. 16: CIFAR-100 gain, {n_tasks} tasks",
            None,
            paper=g,
            unit="%",
            note="paper preset / GPU only; not run here",
        )
    report.number(
        "Figs. 17/18: heterogeneous gain at higher targets",
        None,
        paper=NUMBERS["het4_higher_targets_gain_pct"],
        unit="%",
        note="not run at this preset",
    )
    report.number(
        "Figs. 19/20: heterogeneous gain at lower targets",
        None,
        paper=NUMBERS["het4_lower_targets_gain_pct"],
        unit="%",
        note="our cpu het run uses these lower targets (CIFAR-10 at 0.25, README)",
    )

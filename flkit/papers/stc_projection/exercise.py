"""Exercises of notebook 01: (a) the bits of one STC message, (b) the ternarisation step of STC
(Algorithm 1 of the paper), (c) error feedback, switched on and off, and what it changes.

(b) implement the ternarisation step.

The student writes ``ternarize(x, p)``: keep the k = max(ceil(n·p), 1) entries of largest
magnitude, replace each by sign(x_i)·μ with μ the mean magnitude of the kept entries, zero the
rest. :func:`check_ternarize` compares it with :func:`flkit.compress.stc` on random tensors and on
the edge cases (ties, an all-zero tensor, p = 1, a single entry) and explains any difference::

    from flkit.papers.stc_projection.exercise import check_ternarize
    check_ternarize(ternarize)          # prints a verdict per case; returns a CheckResult

It never raises on a wrong or unfinished answer (a notebook must run end to end); it raises
:class:`~flkit.utils.FlkitError` only when ``fn`` is not callable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from flkit.compress import message_size, num_kept, stc
from flkit.course.checks import Verdict, check_cases, check_choice, check_number
from flkit.utils import FlkitError


@dataclass
class CheckResult:
    passed: bool
    cases: list = field(default_factory=list)  # (case name, ok, explanation)
    attempted: bool = True  # False: the stub still raises NotImplementedError

    def __bool__(self):
        return self.passed

    def __repr__(self):
        if not self.attempted:
            return (
                "not attempted yet: replace `raise NotImplementedError` with your code "
                "and run the cell again.\n" + reference_result()
            )
        lines = [f"{'PASS' if ok else 'FAIL'}  {name}: {msg}" for name, ok, msg in self.cases]
        verdict = (
            "All cases agree with flkit.compress.stc."
            if self.passed
            else "Some cases differ from flkit.compress.stc (see above)."
        )
        return "\n".join(lines + [verdict])

    _repr_pretty_ = lambda self, p, cycle: p.text(repr(self))  # noqa: E731


def cases(seed: int = 0) -> list[tuple[str, torch.Tensor, float]]:
    """The test tensors: random shapes and rates, ties at the threshold, zeros, p = 1."""
    g = torch.Generator().manual_seed(seed)
    out = [
        ("random vector, p=0.1", torch.randn(1000, generator=g), 0.1),
        ("random conv weight [8,4,3,3], p=0.05", torch.randn(8, 4, 3, 3, generator=g), 0.05),
        ("random matrix [20,30], p=0.3", torch.randn(20, 30, generator=g), 0.3),
        ("n·p not an integer (n=7, p=0.2 → k=2)", torch.randn(7, generator=g), 0.2),
        ("tiny p (k = max(ceil(n·p), 1) = 1)", torch.randn(50, generator=g), 0.001),
        ("ties at the threshold", torch.tensor([3.0, -1.0, 1.0, -1.0, 1.0, 0.5, -2.0, 1.0]), 0.5),
        ("all-zero tensor", torch.zeros(6, 5), 0.1),
        ("p = 1 (still ternarised)", torch.randn(12, generator=g), 1.0),
        ("all entries negative", -torch.rand(40, generator=g) - 0.1, 0.25),
        ("single entry", torch.tensor([-0.7]), 0.5),
    ]
    return out


def _explain(
    x: torch.Tensor, p: float, got: torch.Tensor, ref: torch.Tensor, tol: float
) -> tuple[bool, str]:
    n = x.numel()
    k = num_kept(n, p)
    xf, gf, rf = x.reshape(-1).double(), got.reshape(-1).double(), ref.reshape(-1).double()
    nz_got = gf != 0
    kept_got = int(nz_got.sum())
    mu_ref = float(rf.abs().max()) if rf.abs().max() > 0 else 0.0
    if torch.allclose(gf, rf, atol=tol, rtol=tol):
        return True, f"matches (k={k}, μ={mu_ref:.4g})"
    # equal up to tie-breaking: same number of entries, same kept magnitudes, correct signs and μ
    vals = gf[nz_got].abs()
    ternary = vals.numel() == 0 or torch.allclose(vals, vals[0].expand_as(vals), atol=tol, rtol=tol)
    if kept_got == int((rf != 0).sum()) and ternary and kept_got:
        kept_mags = torch.sort(xf[nz_got].abs()).values
        ref_mags = torch.sort(xf[rf != 0].abs()).values
        if (
            torch.allclose(kept_mags, ref_mags, atol=tol)
            and abs(float(vals[0]) - mu_ref) <= tol * max(1, mu_ref)
            and bool((torch.sign(gf[nz_got]) == torch.sign(xf[nz_got])).all())
        ):
            return True, (
                "same up to tie-breaking: you kept other entries of equal magnitude "
                "(any k of the tied entries is a valid top-k)"
            )
    if got.shape != x.shape:
        return (
            False,
            f"shape {tuple(got.shape)} but the input has shape {tuple(x.shape)}: "
            "return a tensor shaped like x",
        )
    if kept_got > k:
        if n and kept_got == n:
            return False, (
                f"every entry is non-zero ({n}); keep only the k = max(ceil(n·p), 1) = {k} "
                "largest magnitudes and zero the rest"
            )
        return False, (
            f"kept {kept_got} entries but k = {k}: with ties at the threshold, "
            "'|x| >= v' keeps more than k — take exactly the k indices from torch.topk"
        )
    if not ternary:
        return False, (
            "the non-zero values are not all ±μ (you kept the original values — that is "
            "top-k, not ternary): set every kept entry to sign(x_i)·μ"
        )
    mu_got = float(vals[0]) if kept_got else 0.0
    if kept_got and bool((gf[nz_got] >= 0).all()) and bool((xf[nz_got] < 0).any()):
        return False, "all your values are +μ: multiply by sign(x_i) (you forgot the sign)"
    if kept_got and not bool((torch.sign(gf[nz_got]) == torch.sign(xf[nz_got])).all()):
        return False, "some kept entries have the wrong sign: use sign(x_i)·μ"
    if kept_got:
        kept_mags = torch.sort(xf[nz_got].abs()).values
        ref_mags = torch.sort(xf[rf != 0].abs()).values
        if kept_got == ref_mags.numel() and not torch.allclose(kept_mags, ref_mags, atol=tol):
            if float(kept_mags.max()) < float(ref_mags.min()):
                return False, "you kept the smallest magnitudes; keep the k largest |x_i|"
            return False, (
                "you kept the wrong entries: rank by magnitude |x_i| (not by the signed "
                "value x_i), largest first"
            )
    if abs(mu_got - mu_ref) > tol * max(1.0, mu_ref):
        mean_all = float(xf.abs().mean())
        if abs(mu_got - mean_all) <= tol * max(1.0, mean_all):
            return False, (
                f"μ = {mu_got:.4g} is the mean |x| over all n = {n} entries; "
                f"use the mean over the k = {k} kept entries (μ = {mu_ref:.4g})"
            )
        if abs(mu_got - float(xf.abs().max())) <= tol:
            return (
                False,
                f"μ = {mu_got:.4g} is the largest |x|; use the mean |x| over the kept entries "
                f"({mu_ref:.4g})",
            )
        if kept_got and abs(mu_got - float(xf[nz_got].abs().sum()) / n) <= tol:
            return (
                False,
                f"μ divides the kept magnitudes by n = {n}; divide by k = {k} (μ = {mu_ref:.4g})",
            )
        return False, f"μ = {mu_got:.4g} but the mean |x| over the {k} kept entries is {mu_ref:.4g}"
    if kept_got < int((rf != 0).sum()):
        return (
            False,
            f"kept {kept_got} non-zeros; the reference keeps {int((rf != 0).sum())} (k = {k})",
        )
    return False, "differs from flkit.compress.stc"


def check_ternarize(fn, seed: int = 0, tol: float = 1e-5, verbose: bool = True) -> CheckResult:
    """Compare ``fn(x, p)`` with :func:`flkit.compress.stc` on :func:`cases`; explain differences.

    A case passes when the outputs agree to ``tol``, or differ only in which of several tied
    entries were kept. Exceptions raised by ``fn`` (e.g. NotImplementedError of the stub) are
    reported, not propagated."""
    if not callable(fn):
        raise FlkitError(f"fn must be a function ternarize(x, p); got {type(fn).__name__}")
    res = CheckResult(passed=True)
    for name, x, p in cases(seed):
        ref = stc(x, p)
        try:
            got = fn(x.clone(), p)
        except NotImplementedError:
            if not res.cases:  # the untouched stub: no verdict at all, never "right"
                res = CheckResult(passed=False, attempted=False)
                break
            res.cases.append(
                (name, False, "not implemented yet (your function raised NotImplementedError)")
            )
            res.passed = False
            continue
        except Exception as e:  # noqa: BLE001 - report any error of the student's code
            res.cases.append((name, False, f"raised {type(e).__name__}: {e}"))
            res.passed = False
            continue
        if not isinstance(got, torch.Tensor):
            res.cases.append(
                (name, False, f"returned a {type(got).__name__}; return a torch.Tensor")
            )
            res.passed = False
            continue
        if not got.is_floating_point() or any(
            math.isnan(v) for v in got.reshape(-1).double().tolist()
        ):
            res.cases.append(
                (
                    name,
                    False,
                    "returned NaN or a non-float tensor (an all-zero tensor must "
                    "give zeros: guard the division when nothing is non-zero)",
                )
            )
            res.passed = False
            continue
        ok, msg = _explain(x, p, got, ref, tol)
        res.cases.append((name, ok, msg))
        res.passed &= ok
    if verbose:
        print(repr(res))
    return res


# ------------------------------------------------------------------ examples for the notebook
def solution(x: torch.Tensor, p: float) -> torch.Tensor:
    """A reference answer (the notebook shows it folded)."""
    flat = x.reshape(-1)
    k = max(math.ceil(round(flat.numel() * p, 6)), 1)
    idx = torch.topk(flat.abs(), k).indices
    mu = flat[idx].abs().mean()
    out = torch.zeros_like(flat)
    out[idx] = mu * torch.sign(flat[idx])
    return out.view_as(x)


def buggy_mean_over_all(x: torch.Tensor, p: float) -> torch.Tensor:
    """A typical mistake: μ = mean |x| over all entries."""
    flat = x.reshape(-1)
    k = max(math.ceil(flat.numel() * p), 1)
    idx = torch.topk(flat.abs(), k).indices
    out = torch.zeros_like(flat)
    out[idx] = flat.abs().mean() * torch.sign(flat[idx])
    return out.view_as(x)


def buggy_threshold(x: torch.Tensor, p: float) -> torch.Tensor:
    """A typical mistake: mask = |x| >= v keeps more than k entries on ties."""
    flat = x.reshape(-1)
    k = max(math.ceil(flat.numel() * p), 1)
    v = torch.topk(flat.abs(), k).values[-1]
    mask = flat.abs() >= v
    mu = flat[mask].abs().mean() if mask.any() else flat.new_zeros(())
    return (mu * torch.sign(flat) * mask).view_as(x)


def reference_result() -> str:
    """What the reference gives on a small case, shown apart beside "not attempted"."""
    x = torch.tensor([0.5, -2.0, 0.25, 1.5])
    return (
        f"(for comparison, the reference gives ternarize({x.tolist()}, p=0.5) = "
        f"{[round(v, 4) for v in stc(x, 0.5).tolist()]})"
    )


# ------------------------------------------------------------------ (a) bits of one message
MESSAGE_N, MESSAGE_P = 100_000, 0.01


def check_message_bits(fn, verbose: bool = True) -> Verdict:
    """``fn()``: bits of one STC message of MESSAGE_N entries at MESSAGE_P (the paper's counter)."""
    n, p = MESSAGE_N, MESSAGE_P
    size = message_size("stc", n, p=p, counter="paper")
    k, per_pos = size.k, (size.expected_bits - 32) / size.k - 1
    return check_number(
        fn,
        size.expected_bits,
        f"bits of one STC message (n = {n:,}, p = {p})",
        rel_tol=2e-3,
        mistakes={
            "add one sign bit per non-zero": k * per_pos + 32,
            "add the 32 bits of the mean magnitude mu, sent once": k * (per_pos + 1),
            "that is bytes; the question asks for bits": size.expected_bits / 8,
            "that is the dense message (32 bits per entry)": 32 * n,
        },
        verbose=verbose,
    )


# ------------------------------------------------------------------ (c) error feedback
def feedback_case(seed: int = 0, rounds: int = 30, n: int = 200) -> list[torch.Tensor]:
    """Gradients of ``rounds`` steps: 10 large coordinates that change sign at random, and 190
    small ones that point the same way every step (a slow but steady direction), plus noise."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(rounds):
        x = 0.1 * torch.ones(n) + 0.01 * torch.randn(n, generator=g)
        x[:10] = torch.randn(10, generator=g).sign() * (1.0 + 0.1 * torch.rand(10, generator=g))
        out.append(x)
    return out


def sent_total_reference(grads, p, error_feedback=True) -> torch.Tensor:
    """Sum of the STC messages sent for ``grads``; with error feedback each step compresses the
    gradient plus the residual of what earlier steps left out."""
    residual = torch.zeros_like(grads[0])
    total = torch.zeros_like(grads[0])
    for x in grads:
        a = x + residual if error_feedback else x
        t = stc(a, p)
        if error_feedback:
            residual = a - t
        total += t
    return total


NEVER_SENT = {
    "small": "without feedback each step sends only the 5 % largest entries, the 10 large "
    "coordinates, and the small steady ones are never sent (their sum, 3 each over 30 steps, "
    "is lost); with feedback they pile up in the residual until they win a place",
    "large": "the large coordinates win the top-k every step: they are always sent",
    "none": "compare sent_total(..., False) with the sum of the gradients on coordinates 10..199",
}


def check_error_feedback(fn, never_sent, verbose: bool = True) -> Verdict:
    """``fn(grads, p, error_feedback)``: the summed messages; ``never_sent()``: "large", "small"
    or "none", which coordinates never reach the server without error feedback."""
    grads, p = feedback_case(), 0.05

    def explain(got, want, args):
        if not isinstance(got, torch.Tensor) or got.shape != want.shape:
            return f"return one tensor shaped like a gradient {tuple(want.shape)}"
        if torch.allclose(got, want, atol=1e-4):
            return None
        if torch.allclose(got, sent_total_reference(grads, p, not args[2]), atol=1e-4):
            return "this is the result of the other setting: check how error_feedback is used"
        if args[2]:
            return "keep residual = a - stc(a, p) with a = gradient + residual"
        return "without feedback compress each gradient alone, stc(x, p), and add it up"

    cases = [
        (
            f"error_feedback={fb}",
            ([x.clone() for x in grads], p, fb),
            sent_total_reference(grads, p, fb),
        )
        for fb in (True, False)
    ]
    on, off = (float(sent_total_reference(grads, p, f)[50]) for f in (True, False))
    ref = f"with feedback, coordinate 50 receives {on:.3g} in total; without, {off:.3g}"
    then = ("never_sent()", lambda: check_choice(never_sent, "small", NEVER_SENT, verbose=False))
    return check_cases(fn, cases, explain, reference=ref, then=then, verbose=verbose)

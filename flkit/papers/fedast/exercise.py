"""Exercises of notebook 03: (a) the load of the paper's setting, (b) FedAST's heterogeneity
estimate, the normalised dispersion, (c) how Realloc's share answers a change of dispersion.

(b) the normalised dispersion.

Realloc gives a task more requests when its clients' updates disagree more. For K updates
u_1..u_K of one task (flat tensors) with mean ū, the estimate is

    D = Σ_k ||u_k − ū||² / (K · ||ū||²)

(0 when all updates agree; ∞ when they cancel exactly, ū = 0, but differ). The student writes
``my_dispersion(updates)``; :func:`check_dispersion` compares it with
``flkit.asyncfl.normalized_dispersion`` on several cases and says in words what differs.
An untouched stub (raising NotImplementedError) prints "not attempted yet", never "right"::

    from flkit.papers.fedast.exercise import check_dispersion
    check_dispersion(my_dispersion)      # True / False, or None when not attempted
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from flkit.asyncfl import normalized_dispersion, realloc_paper
from flkit.course.checks import Verdict, check_cases, check_choice, check_number, not_attempted
from flkit.utils import FlkitError

__all__ = [
    "cases",
    "reference_solution",
    "check_dispersion",
    "check_load",
    "check_realloc_share",
]


def cases(seed: int = 0) -> list[tuple[str, list[torch.Tensor]]]:
    """Named lists of updates: random, identical, a single one, opposite pairs, mixed scales."""
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(20, generator=g)
    return [
        ("4 random updates of 50 entries", [torch.randn(50, generator=g) for _ in range(4)]),
        ("3 identical updates (dispersion 0)", [base.clone() for _ in range(3)]),
        ("a single update (dispersion 0)", [base.clone()]),
        ("two updates that cancel (mean 0: infinite)", [base.clone(), -base.clone()]),
        (
            "updates around a common direction",
            [base + 0.1 * torch.randn(20, generator=g) for _ in range(5)],
        ),
        (
            "one update 10x larger than the others",
            [torch.randn(30, generator=g) * (10.0 if i == 0 else 1.0) for i in range(4)],
        ),
    ]


def reference_solution(updates):
    """Σ_k ||u_k − ū||² / (K ||ū||²), in float64."""
    x = torch.stack([u.double().flatten() for u in updates])  # [K, d]
    mean = x.mean(0)
    num = float(((x - mean) ** 2).sum())
    den = len(updates) * float(mean @ mean)
    if den == 0.0:
        return math.inf if num > 0 else 0.0
    return num / den


def _hint(name: str, got: float, want: float, updates) -> str:
    k = len(updates)
    x = torch.stack([u.double().flatten() for u in updates])
    mean = x.mean(0)
    num = float(((x - mean) ** 2).sum())
    den = float(mean @ mean)
    if math.isinf(want):
        return "the mean update is zero here: the dispersion is infinite (return math.inf)"
    if den > 0 and math.isclose(got, num / den, rel_tol=1e-6) and k > 1:
        return f"off by a factor K = {k}: divide by K · ||ū||², not by ||ū||² alone"
    if den > 0 and math.isclose(got, math.sqrt(num / (k * den)), rel_tol=1e-6):
        return "this is the square root: use squared norms in numerator and denominator"
    if want > 0 and math.isclose(got, want * k / (k - 1 if k > 1 else 1), rel_tol=1e-6):
        return "divide by K (all updates), not by K − 1"
    return f"expected {want:.6g}, got {got:.6g}"


def check_dispersion(fn: Callable, verbose: bool = True):
    """True: ``fn`` agrees with the library on every case (relative 1e-6); False: it does not
    (each mismatch explained); None: ``fn`` still raises NotImplementedError."""
    if not callable(fn):
        raise FlkitError(f"check_dispersion needs a function; got {type(fn).__name__}")
    ok_all, lines = True, []
    for name, updates in cases():
        want = normalized_dispersion([u.clone() for u in updates])
        try:
            got = float(fn([u.clone() for u in updates]))
        except NotImplementedError:
            if verbose:
                print(not_attempted(reference_result()).text())
            return None
        except Exception as e:  # a student's bug must not stop the notebook
            ok_all = False
            lines.append(f"FAIL  {name}: raised {type(e).__name__}: {e}")
            continue
        same = (math.isinf(want) and math.isinf(got)) or (
            not math.isinf(want) and math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-12)
        )
        ok_all &= same
        lines.append(
            f"{'PASS' if same else 'FAIL'}  {name}"
            + ("" if same else ": " + _hint(name, got, want, updates))
        )
    if verbose:
        print("\n".join(lines))
        print(
            "right: every case agrees with flkit's normalized_dispersion"
            if ok_all
            else "wrong: see the failing cases above"
        )
    return ok_all


def reference_result() -> str:
    """What the reference gives on the first case, shown apart beside "not attempted"."""
    name, updates = cases()[0]
    return f"D = {reference_solution(updates):.4g} on {name}"


# ------------------------------------------------------------------ (a) the load
def check_load(fn, verbose: bool = True) -> Verdict:
    """``fn()``: the paper's load, active requests per available client: 384 / (0.3 * 1000)."""
    return check_number(
        fn,
        384 / (0.3 * 1000),
        "the load (active requests per available client)",
        rel_tol=1e-3,
        mistakes={
            "divide by the available clients (30 % of 1000), not by all 1000": 384 / 1000,
            "that is available clients per request; invert it": 300 / 384,
        },
        verbose=verbose,
    )


# ------------------------------------------------------------------ (c) Realloc's share
GROWTH = {
    "double": "Realloc gives a task requests in proportion to sqrt(sigma²): four times the "
    "dispersion is twice the requests",
    "quadruple": "look at your numbers for ratio 4: the share is not 4 times larger",
    "same": "look at your numbers: the share grows with the ratio",
}


def check_realloc_share(fn, growth, verbose: bool = True) -> Verdict:
    """``fn(ratio, r_total)``: requests the library's Realloc (realloc_paper) gives task A of two
    when sigma²_A = ratio * sigma²_B; ``growth()``: "double", "quadruple" or "same", what 4x
    the dispersion does to the requests (away from the one-request floor)."""

    def explain(got, want, args):
        ratio, requests = args
        if got == want:
            return None
        lin = round(requests * ratio / (ratio + 1))
        if got == lin != want:
            return "that is proportional to sigma² itself; realloc_paper uses sqrt(sigma²)"
        return "return realloc_paper([ratio, 1.0], r_total)[0], task A's requests"

    cases = [
        (f"ratio {r}, R = {R}", (r, R), realloc_paper([r, 1.0], R)[0])
        for r, R in ((1.0, 64), (4.0, 64), (16.0, 100), (0.25, 90))
    ]
    then = ("growth()", lambda: check_choice(growth, "double", GROWTH, verbose=False))
    return check_cases(fn, cases, explain, then=then, verbose=verbose)

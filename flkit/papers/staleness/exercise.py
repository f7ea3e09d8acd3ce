"""Exercises of notebook 05: (a) how much the sigmoid weight discounts a stale update, (b) the
1st-Order compensation and the staleness weight, (c) how stale an update may be before each
weighting drops it below a threshold.

(b) write the 1st-Order (DC-ASGD style) compensation of a stale update,

    delta_use = delta - lam * delta ⊙ delta ⊙ (w_now - w_then),

and the sigmoid staleness weight s(tau) = 1 / (1 + exp(a (tau - b))). `check_first_order` and
`check_weighted` compare the student's functions with flkit.methods.staleness on several cases
and explain a mismatch in words. They never raise on a wrong or unfinished answer; an untouched
stub gets "not attempted yet" (None) beside the reference result."""

from __future__ import annotations

import math

import torch

from ...course.checks import Verdict, check_cases, check_choice, check_number, not_attempted
from ...methods.staleness import first_order, weighted_factor, weighted_factor_exp

HINTS_FO = {
    "sign": "the correction is subtracted: delta - lam * ...",
    "square": "the correction uses delta squared element-wise (delta * delta), not |delta|",
    "direction": "use (w_now - w_then), how far the global model moved since the client started",
    "lam": "scale the correction by lam (4.0 by default)",
}


def _fo_cases(seed=0):
    g = torch.Generator().manual_seed(seed)
    out = [
        (
            "hand-made",
            torch.tensor([0.1, -0.2]),
            torch.tensor([3.0, 5.0]),
            torch.tensor([2.0, 3.0]),
            4.0,
        )
    ]
    for _i, lam in enumerate((4.0, 1.0, 0.5)):
        d, wn, wt = (torch.randn(50, generator=g) * s for s in (0.1, 1, 1))
        out.append((f"random, lam={lam}", d, wn, wt, lam))
    out.append(
        (
            "global model did not move",
            torch.randn(5, generator=g),
            torch.ones(5),
            torch.ones(5),
            4.0,
        )
    )
    return out


def _diagnose(fn, d, wn, wt, lam, got):
    ref = first_order(d, wn, wt, lam)
    tries = {
        "sign": d + lam * d * d * (wn - wt),
        "square": d - lam * d.abs() * (wn - wt),
        "direction": d - lam * d * d * (wt - wn),
        "lam": d - d * d * (wn - wt),
    }
    for key, alt in tries.items():
        if torch.allclose(got, alt, atol=1e-6) and not torch.allclose(alt, ref, atol=1e-6):
            return HINTS_FO[key]
    return "the values differ from delta - lam * delta * delta * (w_now - w_then)"


def check_first_order(fn) -> bool:
    """Print one line per case; True when every case matches the library."""
    ok_all = True
    for name, d, wn, wt, lam in _fo_cases():
        try:
            got = fn(d.clone(), wn.clone(), wt.clone(), lam)
        except NotImplementedError:
            _, d, wn, wt, lam = _fo_cases()[0]
            ref = [round(v, 4) for v in first_order(d, wn, wt, lam).tolist()]
            print(not_attempted(f"the hand-made case gives {ref}").text())
            return None
        except Exception as e:  # a student's bug must not stop the notebook
            print(f"{name}: your function raised {type(e).__name__}: {e}")
            ok_all = False
            continue
        ref = first_order(d, wn, wt, lam)
        if not isinstance(got, torch.Tensor) or got.shape != ref.shape:
            print(f"{name}: return a tensor shaped like delta {tuple(ref.shape)}")
            ok_all = False
        elif torch.allclose(got, ref, atol=1e-6):
            print(f"{name}: right")
        else:
            print(f"{name}: wrong: {_diagnose(fn, d, wn, wt, lam, got)}")
            ok_all = False
    return ok_all


def check_weighted(fn) -> bool:
    """Check s(tau) at the paper's a = 0.25, b = 10 and a few other settings."""
    ok_all = True
    for tau, a, b in ((10, 0.25, 10), (40, 0.25, 10), (0, 0.25, 10), (5, 1.0, 3)):
        try:
            got = float(fn(tau, a, b))
        except NotImplementedError:
            print(
                not_attempted(
                    f"s(10) = {weighted_factor(10, 0.25, 10):.3g} at a = 0.25, b = 10"
                ).text()
            )
            return None
        except Exception as e:
            print(f"tau={tau}: your function raised {type(e).__name__}: {e}")
            ok_all = False
            continue
        ref = weighted_factor(tau, a, b)
        if math.isclose(got, ref, rel_tol=1e-6, abs_tol=1e-12):
            print(f"tau={tau}, a={a}, b={b}: right ({ref:.3g})")
        else:
            hint = (
                "the sign inside exp is flipped: stale updates must get smaller weights"
                if math.isclose(got, 1 / (1 + math.exp(-a * (tau - b))), rel_tol=1e-6)
                else "expected 1 / (1 + exp(a * (tau - b)))"
            )
            print(f"tau={tau}, a={a}, b={b}: wrong ({got:.3g} vs {ref:.3g}): {hint}")
            ok_all = False
    return ok_all


# ------------------------------------------------------------------ (a) the discount
def check_discount(fn, verbose: bool = True) -> Verdict:
    """``fn()``: s(0) / s(20) of the sigmoid weight at a = 0.25, b = 10."""
    want = weighted_factor(0, 0.25, 10) / weighted_factor(20, 0.25, 10)
    return check_number(
        fn,
        want,
        "s(0) / s(20) at a = 0.25, b = 10",
        rel_tol=1e-3,
        mistakes={
            "that is s(20) / s(0) (or the sign inside exp is flipped); the question asks how many "
            "times larger s(0) is": 1 / want,
            "that is the official code's 2^(-tau/20) weighting, not the sigmoid": 2.0,
        },
        verbose=verbose,
    )


# ------------------------------------------------------------------ (c) how stale is too stale
def first_tau_below_reference(threshold: float, form: str = "sigmoid") -> int:
    """Smallest integer staleness whose weight is below ``threshold`` (sigmoid: a = 0.25, b = 10;
    exp: 2^(-tau/20)), with the library's weights."""
    f = (lambda t: weighted_factor(t, 0.25, 10)) if form == "sigmoid" else weighted_factor_exp
    tau = 0
    while f(tau) >= threshold:
        tau += 1
    return tau


FASTER = {
    "sigmoid": "the sigmoid falls from about 0.92 to 0.0006 between tau = 0 and 40 (e^-7.5 far "
    "past b = 10), while 2^(-tau/20) only halves every 20 rounds: 0.25 at tau = 40",
    "exp": "compare the two at tau = 40: weighted_factor(40) against weighted_factor_exp(40)",
    "equal": "compare the two at tau = 40: weighted_factor(40) against weighted_factor_exp(40)",
}


def check_first_tau_below(fn, faster, verbose: bool = True) -> Verdict:
    """``fn(threshold, form)``: smallest integer tau with weight < threshold (form "sigmoid" or
    "exp"); ``faster()``: "sigmoid", "exp" or "equal", which discounts more at tau = 40."""

    def explain(got, want, args):
        if got == want:
            return None
        if isinstance(got, int) and abs(got - want) == 1:
            return "off by one: return the first tau whose weight is strictly below the threshold"
        weight = "weighted_factor(tau)" if args[1] == "sigmoid" else "weighted_factor_exp(tau)"
        return f"step tau = 0, 1, 2, ... through the library's {weight}"

    cases = [
        (f"threshold {th}, {form}", (th, form), first_tau_below_reference(th, form))
        # no threshold where a weight sits exactly on it (s(10) = 2^(-20/20) = 0.5): there
        # "below" and "at most" differ only by the tie
        for th, form in ((0.01, "sigmoid"), (0.3, "sigmoid"), (0.01, "exp"), (0.3, "exp"))
    ]
    ref = f"threshold 0.1, sigmoid: tau = {first_tau_below_reference(0.1)}"
    then = ("faster()", lambda: check_choice(faster, "sigmoid", FASTER, verbose=False))
    return check_cases(fn, cases, explain, reference=ref, then=then, verbose=verbose)

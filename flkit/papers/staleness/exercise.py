"""Exercise of notebook 05: write the 1st-Order (DC-ASGD style) compensation of a stale update,

    delta_use = delta - lam * delta ⊙ delta ⊙ (w_now - w_then),

and the sigmoid staleness weight s(tau) = 1 / (1 + exp(a (tau - b))). `check_first_order` and
`check_weighted` compare the student's functions with flkit.methods.staleness on several cases
and explain a mismatch in words. They never raise on a wrong or unfinished answer."""

from __future__ import annotations

import math

import torch

from ...methods.staleness import first_order, weighted_factor

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
            print("not attempted yet: replace the `raise NotImplementedError` with your formula")
            return False
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
            print("not attempted yet: replace the `raise NotImplementedError` with your formula")
            return False
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

"""Exercises of notebook 04: (a) the clip value of a unanimous vote, (b) HideNseek's server
aggregation, (c) how many votes move a latent score, and where arctanh is steep.

(b) write HideNseek's server aggregation.

The student writes ``aggregate(signs, weights, eps)``: signs [K, ...] in {-1, +1}, weights [K]
sample counts; return arctanh(clip(sum_k (n_k / n) s_k, -1 + eps, 1 - eps)) with n = sum_k n_k.
``check(aggregate)`` compares it with flkit.methods.hidenseek.arctanh_aggregate on edge cases
(unanimous votes, a split vote, an exact tie, unequal sample counts, two eps values) and says in
words what differs. It never raises on a wrong or unfinished answer; a stub that still raises
NotImplementedError is reported as "not attempted yet".
"""

from __future__ import annotations

import math

import torch

from ...course.checks import Verdict, check_cases, check_choice, check_number, not_attempted
from ...methods.hidenseek import arctanh_aggregate
from ...utils import FlkitError


def cases():
    """(name, signs, weights, eps) of every checked case."""
    return [
        ("unanimous +1, 3 clients", torch.ones(3, 4), torch.tensor([10.0, 20.0, 30.0]), 1e-6),
        ("unanimous -1, eps = 1e-2", -torch.ones(2, 3), torch.tensor([5.0, 5.0]), 1e-2),
        (
            "split vote 2 : 1, equal sizes",
            torch.tensor([[1.0], [1.0], [-1.0]]),
            torch.ones(3),
            1e-6,
        ),
        ("exact tie", torch.tensor([[1.0, -1.0], [-1.0, 1.0]]), torch.tensor([7.0, 7.0]), 1e-6),
        (
            "unequal sample counts",
            torch.tensor([[1.0, 1.0], [-1.0, 1.0]]),
            torch.tensor([1.0, 3.0]),
            1e-6,
        ),
        (
            "conv-shaped signs [4, 2, 3, 3]",
            torch.where(torch.arange(72.0).view(4, 2, 3, 3) % 5 < 2, 1.0, -1.0),
            torch.tensor([1.0, 2.0, 3.0, 4.0]),
            1e-3,
        ),
    ]


def _explain(got, want, signs, weights, eps):
    if not isinstance(got, torch.Tensor):
        return f"returned {type(got).__name__}, expected a tensor"
    if got.shape != want.shape:
        return f"shape {tuple(got.shape)}, expected {tuple(want.shape)} (one per position)"
    if not torch.isfinite(got).all():
        return (
            "infinite or NaN values: a unanimous vote gives mean +-1 and arctanh(+-1) = +-inf; "
            "clip the mean to [-1 + eps, 1 - eps] first"
        )
    mean = (weights / weights.sum()).view(-1, *[1] * (signs.dim() - 1)) * signs
    if torch.allclose(got.double(), mean.sum(0).double(), atol=1e-5):
        return "you returned the mean vote itself; apply arctanh to it"
    plain = (signs.mean(0)).clamp(-1 + eps, 1 - eps).atanh()
    if torch.allclose(got.double(), plain.double(), atol=1e-5):
        return "the votes are not weighted by sample counts n_k / n"
    raw = (weights.view(-1, *[1] * (signs.dim() - 1)) * signs).sum(0)
    if torch.allclose(got.double(), raw.clamp(-1 + eps, 1 - eps).atanh().double(), atol=1e-5):
        return "the weights are not normalised: divide by n = sum of the sample counts"
    if got.abs().max() > math.atanh(1 - eps) + 1e-4:
        return f"|value| exceeds arctanh(1 - eps) = {math.atanh(1 - eps):.3f}: clip with this eps"
    return f"values differ, largest gap {float((got - want).abs().max()):.3g}"


def check(fn) -> str:
    """Print and return the verdict: "not attempted yet", "right", or what differs."""
    if not callable(fn):
        raise FlkitError(f"check needs the function you wrote, got {type(fn).__name__}")
    lines, ok_all = [], True
    for name, signs, weights, eps in cases():
        signs, weights = signs.double(), weights.double()  # float32 cannot resolve 1 - 1e-6 well
        want = arctanh_aggregate(signs, weights, eps)
        try:
            got = fn(signs.clone(), weights.clone(), eps)
        except NotImplementedError:
            msg = not_attempted(reference_result()).text()
            print(msg)
            return msg
        except Exception as e:  # a student's bug must not stop the notebook
            lines.append(f"FAIL  {name}: raised {type(e).__name__}: {e}")
            ok_all = False
            continue
        if (
            isinstance(got, torch.Tensor)
            and got.shape == want.shape
            and torch.allclose(got.double(), want.double(), atol=1e-5, rtol=1e-5)
        ):
            lines.append(f"ok    {name}")
        else:
            ok_all = False
            lines.append(f"FAIL  {name}: {_explain(got, want, signs, weights, eps)}")
    lines.append(
        "right: every case agrees with the library"
        if ok_all
        else "not right yet: see the failing cases above"
    )
    text = "\n".join(lines)
    print(text)
    return text


def reference_result() -> str:
    """What the reference gives on the split-vote case, shown apart beside "not attempted"."""
    name, signs, weights, eps = cases()[2]
    got = arctanh_aggregate(signs.double(), weights.double(), eps)
    return f"{name}: {[round(v, 4) for v in got.reshape(-1).tolist()]}"


# ------------------------------------------------------------------ (a) the clip value
def check_clip_value(fn, verbose: bool = True) -> Verdict:
    """``fn()``: the latent score a unanimous +1 vote gives, arctanh(1 - eps) at eps = 1e-6."""
    eps = 1e-6
    return check_number(
        fn,
        math.atanh(1 - eps),
        "the latent of a unanimous vote (eps = 1e-6)",
        rel_tol=1e-4,
        mistakes={
            "that is tanh; the server applies arctanh": math.tanh(1 - eps),
            "that is the clipped vote itself, 1 - eps; apply arctanh to it": 1 - eps,
            "arctanh(1 - eps) = 0.5 * ln((2 - eps) / eps); check the logarithm": math.log(
                (2 - eps) / eps
            ),
        },
        verbose=verbose,
    )


# ------------------------------------------------------------------ (c) votes and latents
def votes_needed_reference(k: int, threshold: float, eps: float = 1e-6) -> int:
    """Fewest +1 votes of K equal-size clients whose aggregate latent exceeds ``threshold``
    (K + 1 when even a unanimous vote does not)."""
    for a in range(k + 1):
        signs = torch.tensor([[1.0]] * a + [[-1.0]] * (k - a), dtype=torch.float64)
        if float(arctanh_aggregate(signs, torch.ones(k, dtype=torch.float64), eps)) > threshold:
            return a
    return k + 1


STEEP = {
    "unanimous": "arctanh is steep near +-1: the last vote that makes a vote unanimous moves the "
    "latent by several units (up to the clip), while one more vote in a split moves it by "
    "about 0.2",
    "split": "compute both with your function: 5 -> 6 of 10 moves the latent by about 0.2",
    "equal": "compare arctanh(0.2) - arctanh(0) with arctanh(1 - eps) - arctanh(0.8)",
}


def check_votes_needed(fn, steeper, verbose: bool = True) -> Verdict:
    """``fn(K, threshold)``: fewest +1 votes of K whose latent exceeds ``threshold`` (with the
    library's arctanh_aggregate); ``steeper()``: "unanimous", "split" or "equal", where one
    more agreeing vote moves the latent more."""

    def explain(got, want, args):
        if got == want:
            return None
        if got == want + 1:
            return "the latent must exceed the threshold strictly (>); one vote too many"
        if isinstance(got, int) and abs(got - want) == 1:
            return "off by one: count the +1 votes, the others vote -1"
        return (
            "try a = 0..K votes of +1 (the others -1) through arctanh_aggregate and return the "
            "first a above the threshold"
        )

    cases = [
        (f"K = {K}, threshold {th}", (K, th), votes_needed_reference(K, th))
        for K, th in ((10, 1.0), (5, 0.5), (20, 2.0), (4, 0.0))
    ]
    ref = f"K = 10 clients, threshold 0.5: {votes_needed_reference(10, 0.5)}"
    then = ("steeper()", lambda: check_choice(steeper, "unanimous", STEEP, verbose=False))
    return check_cases(fn, cases, explain, reference=ref, then=then, verbose=verbose)

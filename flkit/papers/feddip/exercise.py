"""Exercises of notebook 02: (a) the pruning schedule's sparsity at one round (eq. 11), (b) the
ERK density solve, (c) ERK against uniform pruning on LeNet-5, and which layers it spares.

(b) write the ERK density solve.

The student writes ``erk(shapes, density, power=1.0) -> {name: density}`` (shapes: {name: tuple}
of the prunable tensors, density = 1 - s0). :func:`check_erk` compares it with
:func:`flkit.prune.erk_densities` on several models and explains a mismatch in words::

    check_erk(erk)          # prints one verdict per case; returns a CheckResult

It never raises on a wrong or unfinished answer; an untouched stub (NotImplementedError) is
reported as "not attempted yet".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ... import models
from ...course.checks import Verdict, check_cases, check_choice, check_number
from ...prune import erk_densities, prunable_names
from ...prune.schedules import cubic_sparsity
from ...utils import FlkitError


@dataclass
class CheckResult:
    passed: bool
    attempted: bool = True
    cases: list = field(default_factory=list)  # (case name, ok, explanation)

    def __bool__(self):
        return self.passed

    def __repr__(self):
        if not self.attempted:
            return (
                "not attempted yet: replace `raise NotImplementedError` with your ERK solve.\n"
                + reference_result()
            )
        lines = [f"{'PASS' if ok else 'FAIL'}  {name}: {msg}" for name, ok, msg in self.cases]
        verdict = (
            "right: every case agrees with flkit.prune.erk_densities."
            if self.passed
            else "Some cases differ from flkit.prune.erk_densities (see above)."
        )
        return "\n".join(lines + [verdict])

    _repr_pretty_ = lambda self, p, cycle: p.text(repr(self))  # noqa: E731


def model_shapes(name: str, **kw) -> dict[str, tuple]:
    """Shapes of a model's prunable tensors."""
    net = models.build(name, **kw)
    names = prunable_names(net)
    return {n: tuple(p.shape) for n, p in net.named_parameters() if n in names}


def cases():
    """(name, shapes, density, power) one at a time (big models are only built when reached)."""
    yield (
        "toy model with a layer forced dense (density 0.5)",
        {"A": (2, 2), "B": (10, 10), "C": (4, 25)},
        0.5,
        1.0,
    )
    lenet = model_shapes("lenet5")
    yield "LeNet-5, s0 = 0.5", lenet, 0.5, 1.0
    yield "LeNet-5, s0 = 0.9 (no layer dense)", lenet, 0.1, 1.0
    yield "LeNet-5, s0 = 0.5, power 0.5", lenet, 0.5, 0.5
    yield "CIFAR-10 CNN (2 conv + 3 FC), s0 = 0.95", model_shapes("cnn_cifar10"), 0.05, 1.0
    yield "ResNet-18 (CIFAR-100), s0 = 0.9", model_shapes("resnet18", num_classes=100), 0.1, 1.0


def _explain(shapes, density, got, ref) -> tuple[bool, str]:
    if not isinstance(got, dict) or set(got) != set(ref):
        return False, (
            f"return a dict with one density per layer name {sorted(ref)}; got "
            f"{type(got).__name__} with keys {sorted(got) if isinstance(got, dict) else '-'}"
        )
    g = {k: float(v) for k, v in got.items()}
    if all(math.isclose(g[k], ref[k], rel_tol=1e-6, abs_tol=1e-9) for k in ref):
        dense = [k for k in ref if ref[k] == 1.0]
        return True, f"matches ({len(dense)} layer(s) dense: {dense or 'none'})"
    n = {k: math.prod(s) for k, s in shapes.items()}
    over = [k for k in g if g[k] > 1 + 1e-9]
    if over:
        return False, (
            f"density above 1 for {over}: when eps * r_l exceeds 1, mark that layer "
            "dense (density 1) and solve eps again over the remaining layers"
        )
    kept, want = sum(g[k] * n[k] for k in n), density * sum(n.values())
    if not math.isclose(kept, want, rel_tol=1e-6):
        return False, (
            f"your densities keep {kept:,.1f} weights but density x total = {want:,.1f}: "
            "eps must solve sum_l min(1, eps r_l) n_l = density * sum_l n_l"
        )
    vals = list(g.values())
    if max(vals) - min(vals) < 1e-9 and max(ref.values()) - min(ref.values()) > 1e-9:
        return False, (
            "every layer got the same density (uniform pruning); ERK gives layer l the "
            "score r_l = (sum of its dims / product of its dims) ** power"
        )
    dense_got = {k for k in g if g[k] >= 1 - 1e-9}
    dense_ref = {k for k in ref if ref[k] >= 1 - 1e-9}
    if dense_got != dense_ref:
        return False, (
            f"dense layers differ: yours {sorted(dense_got)}, expected {sorted(dense_ref)}; "
            "mark only the layer with the largest score per iteration, then re-solve"
        )
    worst = max(ref, key=lambda k: abs(g[k] - ref[k]))
    return False, (
        f"right total but wrong split: layer {worst} has {g[worst]:.4f}, expected "
        f"{ref[worst]:.4f}; check the score r_l and the power"
    )


def check_erk(fn, verbose: bool = True) -> CheckResult:
    """Compare ``fn(shapes, density, power)`` with the library on every case."""
    if not callable(fn):
        raise FlkitError(f"check_erk needs a function, got {type(fn).__name__}")
    res = CheckResult(True)
    for name, shapes, density, power in cases():
        ref = erk_densities(shapes, density, power)
        try:
            got = fn(dict(shapes), density, power)
        except NotImplementedError:
            res = CheckResult(False, attempted=False)
            break
        except Exception as e:  # noqa: BLE001 - a student's error is reported, not raised
            res.cases.append((name, False, f"raised {type(e).__name__}: {e}"))
            res.passed = False
            continue
        ok, msg = _explain(shapes, density, got, ref)
        res.cases.append((name, ok, msg))
        res.passed &= ok
    if verbose:
        print(repr(res))
    return res


def reference_result() -> str:
    """What the reference gives on the toy model, shown apart beside "not attempted"."""
    ref = erk_densities({"A": (2, 2), "B": (10, 10), "C": (4, 25)}, 0.5)
    return (
        "(for comparison, the reference gives erk({'A': (2, 2), 'B': (10, 10), 'C': (4, 25)}, "
        f"0.5) = { {k: round(v, 4) for k, v in ref.items()} })"
    )


# ------------------------------------------------------------------ (a) the schedule
def check_schedule(fn, verbose: bool = True) -> Verdict:
    """``fn()``: s_t of eq. 11 at t = 25 of T = 100 rounds, s0 = 0.5, s_p = 0.9."""
    t, rounds, s0, sp = 25, 100, 0.5, 0.9
    return check_number(
        fn,
        cubic_sparsity(t, rounds, s0, sp),
        "the target sparsity at round 25 of 100",
        rel_tol=1e-4,
        mistakes={
            "that is a linear schedule; eq. 11 has the cube (1 - t/T)^3": sp
            + (s0 - sp) * (1 - t / rounds),
            "use (1 - t/T)^3, not (t/T)^3": sp + (s0 - sp) * (t / rounds) ** 3,
            "that is the density 1 - s_t; the question asks for the sparsity": 1
            - cubic_sparsity(t, rounds, s0, sp),
        },
        verbose=verbose,
    )


# ------------------------------------------------------------------ (c) ERK against uniform
SPARED = {
    "small": "ERK's score (sum of dims / product of dims) is largest for layers with few weights: "
    "LeNet-5's first conv (150 weights) and last layer (840) keep about 80 %, the 48,000-weight "
    "FC layer keeps 7.7 %, so the total stays at 10 % while no small layer is cut to nothing",
    "large": "look at the ratio of the biggest layer (classifier.0, 120 x 400): it is below 1",
    "same": "that is uniform pruning; ERK's ratios differ from 1 per layer",
}


def check_erk_ratio(fn, spared, verbose: bool = True) -> Verdict:
    """``fn(shapes, density)``: {layer: ERK density / uniform density} from the library's ERK;
    ``spared()``: "small", "large" or "same", which layers ERK keeps denser than uniform."""
    shapes = model_shapes("lenet5")

    def explain(got, want, args):
        if not isinstance(got, dict) or set(got) != set(want):
            return f"return {{layer: ratio}} for the layers {sorted(want)}"
        bad = [k for k in want if not math.isclose(float(got[k]), want[k], rel_tol=1e-4)]
        if not bad:
            return None
        if math.isclose(float(got[bad[0]]), want[bad[0]] * args[1], rel_tol=1e-4):
            return f"layer {bad[0]} holds the ERK density itself; divide it by the uniform density"
        return f"layer {bad[0]}: use flkit.prune.erk_densities(shapes, density) / density"

    cases = [
        (
            f"LeNet-5 at density {d}",
            (dict(shapes), d),
            {k: v / d for k, v in erk_densities(shapes, d).items()},
        )
        for d in (0.1, 0.3)
    ]
    then = ("spared()", lambda: check_choice(spared, "small", SPARED, verbose=False))
    return check_cases(fn, cases, explain, then=then, verbose=verbose)

"""Exercises of the FL primer: (a) the bytes of one upload, (b) FedAvg's weighted average,
(c) FedAvgM as a `Method` subclass. Each checker prints "right", "wrong" with a hint, or "not
attempted yet" beside the reference result.

(b) write FedAvg's weighted average yourself.

    def my_weighted_average(stacked, weights):
        # stacked: {name: Tensor[K, ...]} the K client models; weights: Tensor[K] samples per client
        ...
        return {name: Tensor[...]}          # one tensor per name, without the client dimension

    check_weighted_average(my_weighted_average)   # "right" / "wrong" with a hint / "not attempted"

The checker compares with `flkit.methods.weighted_average` on random client states and weights.
`reference_solution` is a worked solution; `check_or_reference(fn)` also checks the reference when
`fn` is still the stub (raises NotImplementedError), so a notebook runs headless without failing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from flkit import models
from flkit.course.checks import Verdict, check_number, not_attempted
from flkit.engine import LocalSpec
from flkit.methods import FedAvg, ServerState, real, weighted_average
from flkit.methods.base import ClientUpdates, RunContext

__all__ = [
    "reference_solution",
    "check_weighted_average",
    "check_or_reference",
    "cases",
    "check_upload_bytes",
    "check_fedavgm",
    "FedAvgMReference",
]


def reference_solution(stacked, weights):
    """w_global = sum_k (n_k / n) * w_k for every tensor of the model."""
    p = weights / weights.sum()  # normalise: the weights sum to 1
    out = {}
    for name, v in stacked.items():  # v: [K, ...]
        pk = p.to(v.dtype).reshape(
            -1, *[1] * (v.dim() - 1)
        )  # [K, 1, ..., 1] broadcasts over the rest
        out[name] = (pk * v).sum(dim=0)  # sum over clients (dim 0)
    return out


def cases(seed: int = 0) -> list[tuple[dict, torch.Tensor]]:
    """Test inputs: (stacked client states, weights) of several shapes. A tensor's last dimension
    equals K on purpose, so weights multiplied along the wrong axis are caught."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for k in (3, 5, 1):
        stacked = {
            "conv.weight": torch.randn(k, 4, 2, 3, 3, generator=g),
            "fc.weight": torch.randn(k, 7, k, generator=g),
            "fc.bias": torch.randn(k, 7, generator=g),
        }
        w = torch.randint(1, 200, (k,), generator=g).float()
        if k > 1:
            w[0] = 1000.0  # clearly unequal: a plain mean differs from the weighted one
        out.append((stacked, w))
    return out


def _alternatives(stacked, weights):
    """Common mistakes, by name, for the hint."""
    k = weights.shape[0]
    w = weights.double()
    p = w / w.sum()

    def along_dim0(coef):
        return {
            n: (coef.view(-1, *[1] * (v.dim() - 1)) * v.double()).sum(0) for n, v in stacked.items()
        }

    return {
        "plain mean": {n: v.double().mean(0) for n, v in stacked.items()},
        "unnormalised sum": along_dim0(w),
        "unnormalised mean": along_dim0(w / k),
        "plain sum": along_dim0(torch.ones_like(w)),
        "weights summed to 1 but not applied per client": along_dim0(p.mean().expand(k)),
    }


def _close(a, b, tol=1e-4):
    try:
        a = torch.as_tensor(a).double()
        return a.shape == b.shape and bool(torch.allclose(a, b.double(), rtol=tol, atol=tol))
    except Exception:
        return False


def _verdict(ok: bool, msg: str, quiet: bool) -> bool:
    if not quiet:
        print(("right: " if ok else "wrong: ") + msg)
    return ok


NOT_ATTEMPTED = (
    "not attempted yet: the function is still the stub (it raises "
    "NotImplementedError); replace `raise NotImplementedError` with your code."
)


def check_weighted_average(fn: Callable, quiet: bool = False, seed: int = 0) -> bool | None:
    """Call `fn(stacked, weights)` on random client states; print right/wrong with a hint.

    True: right; False: wrong; None: not attempted yet (the stub raises NotImplementedError)."""
    for stacked, weights in cases(seed):
        k = weights.shape[0]
        inputs = {n: v.clone() for n, v in stacked.items()}
        w_in = weights.clone()
        try:
            got = fn(inputs, w_in)
        except NotImplementedError:
            if not quiet:
                print("⏳ " + NOT_ATTEMPTED)
                print(reference_result())
            return None
        except Exception as e:  # noqa: BLE001 - any error of the student's code becomes a hint
            hint = ""
            if "size" in str(e) or "shape" in str(e) or "broadcast" in str(e):
                hint = (
                    " Hint: weights has shape [K] but each tensor is [K, ...]; reshape the "
                    "weights to [K, 1, ..., 1] (weights.view(-1, *[1] * (v.dim() - 1))) "
                    "before multiplying."
                )
            return _verdict(
                False, f"calling it with K={k} clients raised {type(e).__name__}: {e}.{hint}", quiet
            )
        if not all(torch.equal(inputs[n], stacked[n]) for n in stacked) or not torch.equal(
            w_in, weights
        ):
            return _verdict(
                False,
                "it changed its inputs in place (e.g. v.mul_ or weights /= ...). "
                "Hint: compute new tensors (v * w) instead of modifying the clients' states.",
                quiet,
            )
        if not isinstance(got, dict):
            return _verdict(
                False,
                f"it returned a {type(got).__name__}; return a dict {{name: tensor}} with "
                "one entry per entry of `stacked`.",
                quiet,
            )
        missing, extra = sorted(set(stacked) - set(got)), sorted(set(got) - set(stacked))
        if missing or extra:
            return _verdict(
                False,
                f"the returned dict has missing keys {missing} / unexpected keys {extra}; "
                "return one averaged tensor per name of `stacked`.",
                quiet,
            )
        want = weighted_average(stacked, weights)
        for n, v in stacked.items():
            t = got[n]
            if not isinstance(t, torch.Tensor):
                return _verdict(False, f"entry {n!r} is a {type(t).__name__}, not a tensor.", quiet)
            if tuple(t.shape) != tuple(want[n].shape):
                if tuple(t.shape) == tuple(v.shape):
                    hint = "it still has the client dimension: sum over dim 0 (the clients)."
                else:
                    hint = (
                        "the clients are along dim 0; average over dim=0, not over another "
                        "dimension (and keep the other dimensions)."
                    )
                return _verdict(
                    False,
                    f"entry {n!r} has shape {tuple(t.shape)}, expected {tuple(want[n].shape)} "
                    f"(the input is {tuple(v.shape)} = [K={k}, ...]). Hint: {hint}",
                    quiet,
                )
        if all(_close(got[n], want[n]) for n in stacked):
            continue
        for name, alt in _alternatives(stacked, weights).items():
            if all(_close(got[n], alt[n]) for n in stacked):
                hints = {
                    "plain mean": "this is the plain mean over clients. FedAvg weights client k "
                    "by its share of the data, n_k / sum_j n_j.",
                    "unnormalised sum": "you forgot to normalise the weights: divide them by their "
                    "sum so they add up to 1 (sum_k w_k x_k / sum_k w_k).",
                    "unnormalised mean": "you weighted by n_k and divided by K; divide by the "
                    "total sum_j n_j instead, so the weights add up to 1.",
                    "plain sum": "this is the sum of the client models; weight each by "
                    "n_k / sum_j n_j.",
                    "weights summed to 1 but not applied per client": "each client needs its own "
                    "weight n_k / sum_j n_j; multiply client k's tensor by its weight before "
                    "summing.",
                }
                return _verdict(False, hints.get(name, name), quiet)
        n0 = next(n for n in stacked if not _close(got[n], want[n]))
        if k > 1 and stacked[n0].shape[-1] == k:
            hint = (
                "a tensor whose last dimension equals K went wrong: the weights were probably "
                "broadcast along the last dimension. Reshape them to [K, 1, ..., 1] so they "
                "multiply along dim 0."
            )
        else:
            hint = "compare with w = sum_k (n_k / n) * w_k, summing over dim 0."
        return _verdict(
            False, f"entry {n0!r} differs from the weighted average (K={k}). Hint: {hint}", quiet
        )
    dtypes_ok = all(got[n].dtype == stacked[n].dtype for n in stacked)
    note = "" if dtypes_ok else " (note: return the input dtype, e.g. float32, to save memory)"
    return _verdict(
        True,
        "your weighted average matches flkit.methods.weighted_average on "
        f"{len(cases(seed))} random cases{note}.",
        quiet,
    )


def reference_result(seed: int = 0) -> str:
    """What the worked solution gives on the first case, shown apart beside "not attempted"."""
    stacked, weights = cases(seed)[0]
    bias = reference_solution(stacked, weights)["fc.bias"][:3].tolist()
    return (
        f"(for comparison, the reference answer on {len(weights)} clients with weights "
        f"{weights.int().tolist()}: fc.bias[:3] = {[round(b, 4) for b in bias]})"
    )


def check_or_reference(fn: Callable) -> bool | None:
    """Check `fn`. While it is still the stub, say "not attempted yet" (never "right") and
    confirm that the worked solution, `reference_solution`, passes the same checks, so a
    notebook run headless shows the checker works. Returns `fn`'s verdict (None: not attempted)."""
    try:
        stacked, weights = cases(0)[0]
        fn({n: v.clone() for n, v in stacked.items()}, weights.clone())
    except NotImplementedError:
        print("⏳ " + NOT_ATTEMPTED)
        ok = check_weighted_average(reference_solution, quiet=True)
        print(f"(the worked solution below {'passes' if ok else 'FAILS'} these checks)")
        return None
    except Exception:  # noqa: BLE001 - let the checker report the error with its hint
        pass
    return check_weighted_average(fn)


# ------------------------------------------------------------------ (a) the bytes of one upload
def check_upload_bytes(fn: Callable, verbose: bool = True) -> Verdict:
    """``fn()``: bytes one client uploads per round with the MNIST 2NN (784-200-200-10), float32."""
    n = sum(p.numel() for p in models.build("mlp_mnist").parameters())
    weights_only = 784 * 200 + 200 * 200 + 200 * 10
    return check_number(
        fn,
        4 * n,
        "bytes of one 2NN upload",
        rel_tol=1e-9,
        mistakes={
            "that is the number of parameters; a float32 parameter takes 4 bytes": n,
            "you counted the weights but not the biases (200 + 200 + 10 of them)": 4 * weights_only,
            "that is bits; 8 bits make a byte": 32 * n,
        },
        verbose=verbose,
    )


# ------------------------------------------------------------------ (c) FedAvgM as a Method
class FedAvgMReference(FedAvg):
    """Server momentum (Hsu et al. 2019): buf = beta * buf + (w - avg); w <- w - buf."""

    name = "fedavgm_reference"

    @dataclass(frozen=True)
    class Params(FedAvg.Params):
        beta: float = real(0.9, 0.0, 1.0, high_open=True)  # server momentum

    @dataclass
    class State(ServerState):
        buf: dict | None = None  # the momentum buffer; None before the first round

    def aggregate(self, state, updates, rnd):
        avg = weighted_average(updates.state, updates.weights)
        delta = {n: state.model[n] - avg[n] for n in self.param_names}
        beta = self.hp.beta
        buf = delta if state.buf is None else {n: beta * state.buf[n] + delta[n] for n in delta}
        model = {**avg, **{n: state.model[n] - buf[n] for n in buf}}
        return replace(state, model=model, buf=buf)


def _tiny_context() -> RunContext:
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    x, y = torch.zeros(4, 3), torch.zeros(4, dtype=torch.long)
    return RunContext(
        model, x, y, [torch.arange(4)], LocalSpec(lr=0.1, batch_size=4, epochs=1), 0, 2
    )


def _rounds(method, n_rounds: int = 4, seed: int = 0) -> list[dict]:
    """The global model after each of ``n_rounds`` aggregations of fixed random client models."""
    g = torch.Generator().manual_seed(seed)
    model = {n: p.detach().clone() for n, p in method.ctx.model.state_dict().items()}
    state, out = method.init_state(model), []
    for rnd in range(1, n_rounds + 1):
        stacked = {n: v + torch.randn(3, *v.shape, generator=g) for n, v in model.items()}
        w = torch.tensor([10.0, 30.0, 60.0])
        up = ClientUpdates([0, 1, 2], stacked, w, torch.zeros(3), [0, 0, 0])
        state = method.aggregate(state, up, rnd)
        out.append({n: state.model[n].detach().clone() for n in model})
    return out


def _same(a: list[dict], b: list[dict]) -> int | None:
    """The first round (1-based) where the two model sequences differ, None when equal."""
    for rnd, (x, y) in enumerate(zip(a, b), 1):
        if any(not torch.allclose(x[n].double(), y[n].double(), atol=1e-5) for n in x):
            return rnd
    return None


def check_fedavgm(cls, gain: Callable, verbose: bool = True) -> Verdict:
    """``cls``: the student's FedAvgM (a Method subclass with a ``beta`` parameter); ``gain()``: how
    many times FedAvg's step the server steps after many rounds of identical updates."""
    v = _fedavgm_verdict(cls)
    if v.passed:
        g = check_number(
            gain,
            1 / (1 - 0.9),
            "the long-run step gain at beta = 0.9",
            0.02,
            {
                "that is beta itself; sum the geometric series 1 + beta + beta² + ...": 0.9,
                "that is 1 - beta; the gain is 1 / (1 - beta)": 0.1,
            },
            verbose=False,
        )
        v = Verdict(g.passed, v.lines + g.lines, reference=g.reference)
        if g.passed is None:
            v = Verdict(False, v.lines + ["gain(): " + g.text().replace("\n", " ")])
    if verbose:
        print(v.text())
    return v


def _fedavgm_verdict(cls) -> Verdict:
    from flkit.methods import Method

    if not (isinstance(cls, type) and issubclass(cls, Method)):
        return Verdict(False, [f"wrong: give the class itself, a Method subclass (got {cls!r})"])
    ctx = _tiny_context()
    lines = []
    for beta in (0.9, 0.5):
        try:
            mine = _rounds(cls(ctx, beta=beta))
        except NotImplementedError:
            ref = _rounds(FedAvgMReference(ctx, beta=0.9))[1]["bias"]
            return not_attempted(
                f"global bias after 2 rounds at beta = 0.9: {[round(b, 4) for b in ref.tolist()]}"
            )
        except Exception as e:  # noqa: BLE001 - a student's error is reported, not raised
            return Verdict(False, [f"wrong: at beta = {beta} it raised {type(e).__name__}: {e}"])
        want = _rounds(FedAvgMReference(ctx, beta=beta))
        bad = _same(mine, want)
        if bad is None:
            lines.append(f"beta = {beta}: right in every round")
            continue
        if _same(mine, _rounds(FedAvg(ctx))) is None:
            hint = (
                "this is plain FedAvg: keep a momentum buffer in the state, "
                "buf = beta * buf + (w - avg), and step w - buf"
            )
        elif bad == 1:
            hint = "round 1 differs: with no buffer yet, buf = w - avg, so round 1 equals FedAvg"
        else:
            hint = (
                f"round {bad} differs: the buffer must be carried in the returned state "
                "(its buf field) and decay by beta"
            )
        return Verdict(False, lines + [f"wrong at beta = {beta}: {hint}"])
    return Verdict(True, lines)

"""The checkers of the (a) and (c) exercises of every notebook: a right answer passes, a typical
mistake gets its hint, an untouched stub is "not attempted yet" (never right), each against a
value worked out by hand from the paper's formula."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import pytest
import torch

from flkit.asyncfl import realloc_paper
from flkit.compress import stc as ternarize
from flkit.methods import FedAvg, ServerState, real, weighted_average
from flkit.papers.fedast import exercise as fedast
from flkit.papers.feddip import exercise as feddip
from flkit.papers.fl_primer import exercise as primer
from flkit.papers.hidenseek import exercise as hns
from flkit.papers.staleness import exercise as stale
from flkit.papers.stc_projection import exercise as stc
from flkit.prune import erk_densities


def _stub(*args):
    raise NotImplementedError


# (checker, hand-computed right answer, a typical mistake, a word of its hint)
NUMBERS = [
    (primer.check_upload_bytes, 4 * 199_210, 199_210, "4 bytes"),
    (primer.check_upload_bytes, 4 * 199_210, 4 * 198_800, "biases"),
    (stc.check_message_bits, 1000 * (8.108 + 1) + 32, 1000 * 8.108 + 32, "sign bit"),
    (feddip.check_schedule, 0.9 - 0.4 * 0.75**3, 0.9 - 0.4 * 0.75, "linear"),
    (fedast.check_load, 1.28, 0.384, "available"),
    (hns.check_clip_value, 0.5 * math.log((2 - 1e-6) / 1e-6), 1 - 1e-6, "arctanh"),
    (stale.check_discount, math.exp(2.5), 2.0, "2^(-tau/20)"),
]


@pytest.mark.parametrize("check,right,mistake,hint", NUMBERS)
def test_number_exercises(check, right, mistake, hint, capsys):
    assert check(lambda: right, verbose=False)
    v = check(lambda: mistake, verbose=False)
    assert v.passed is False and hint in v.text()
    v = check(_stub)
    out = capsys.readouterr().out
    assert v.passed is None and "not attempted yet" in out and "right" not in out


@dataclass(frozen=True)
class _BetaParams(FedAvg.Params):
    beta: float = real(0.9, 0.0, 1.0, high_open=True)


@dataclass
class _BufferState(ServerState):
    buf: dict | None = None


class _Momentum(FedAvg):
    Params, State = _BetaParams, _BufferState

    def aggregate(self, state, up, rnd):  # written from the paper, not from the reference
        avg = weighted_average(up.state, up.weights)
        old = state.buf or {n: torch.zeros_like(avg[n]) for n in self.param_names}
        buf = {n: self.hp.beta * old[n] + (state.model[n] - avg[n]) for n in self.param_names}
        return replace(state, model={n: state.model[n] - buf[n] for n in avg}, buf=buf)


def test_fedavgm_exercise():
    assert primer.check_fedavgm(_Momentum, lambda: 10.0, verbose=False)
    v = primer.check_fedavgm(FedAvg, lambda: 10.0, verbose=False)
    assert not v and "unknown parameter(s) ['beta']" in v.text()
    plain = type("Plain", (FedAvg,), {"Params": _BetaParams})
    v = primer.check_fedavgm(plain, lambda: 10.0, verbose=False)  # no momentum at all
    assert not v and "plain FedAvg" in v.text()
    v = primer.check_fedavgm(_Momentum, lambda: 0.9, verbose=False)
    assert not v and "geometric series" in v.text()

    class Stub(FedAvg):
        Params = _BetaParams
        aggregate = _stub

    assert primer.check_fedavgm(Stub, lambda: 10.0, verbose=False).passed is None


def test_error_feedback_exercise():
    def mine(grads, p, error_feedback=True):
        total, residual = torch.zeros_like(grads[0]), torch.zeros_like(grads[0])
        for g in grads:
            sent = ternarize(g + residual, p) if error_feedback else ternarize(g, p)
            residual = (g + residual - sent) if error_feedback else residual
            total = total + sent
        return total

    assert stc.check_error_feedback(mine, lambda: "small", verbose=False)
    # the experiment shows what the answer says: the 190 small entries are never sent without it
    g = stc.feedback_case()
    assert torch.all(mine(g, 0.05, False)[10:] == 0) and torch.any(mine(g, 0.05, True)[10:] != 0)
    v = stc.check_error_feedback(lambda g, p, f: mine(g, p, False), lambda: "small", False)
    assert not v and "other setting" in v.text()
    v = stc.check_error_feedback(mine, lambda: "large", verbose=False)
    assert not v and "always sent" in v.text()
    assert stc.check_error_feedback(_stub, _stub, verbose=False).passed is None


def test_erk_ratio_exercise():
    def mine(shapes, density):
        return {k: v / density for k, v in erk_densities(shapes, density).items()}

    assert feddip.check_erk_ratio(mine, lambda: "small", verbose=False)
    v = feddip.check_erk_ratio(erk_densities, lambda: "small", verbose=False)
    assert not v and "divide it by the uniform density" in v.text()
    assert not feddip.check_erk_ratio(mine, lambda: "large", verbose=False)
    assert feddip.check_erk_ratio(_stub, _stub, verbose=False).passed is None


def test_realloc_exercise():
    # by hand: R = 64, sqrt ratio 2 : 1, one request each first, 62 split 41.33 : 20.67 -> 42
    assert realloc_paper([4.0, 1.0], 64)[0] == 42
    ok = fedast.check_realloc_share(
        lambda r, total: realloc_paper([r, 1.0], total)[0], lambda: "double", False
    )
    assert ok
    v = fedast.check_realloc_share(
        lambda r, total: round(total * r / (r + 1)), lambda: "double", False
    )
    assert not v and "sqrt" in v.text()
    assert fedast.check_realloc_share(_stub, _stub, verbose=False).passed is None


def test_votes_needed_exercise():
    # by hand: K = 10, atanh((2a - 10) / 10) > 1 <=> a > 5 (1 + tanh 1) = 8.81 -> 9
    assert hns.votes_needed_reference(10, 1.0) == 9
    assert hns.check_votes_needed(hns.votes_needed_reference, lambda: "unanimous", False)
    v = hns.check_votes_needed(
        lambda k, t: hns.votes_needed_reference(k, t) + 1, lambda: "x", False
    )
    assert not v and "strictly" in v.text()
    assert hns.check_votes_needed(_stub, _stub, verbose=False).passed is None


def test_first_tau_below_exercise():
    # by hand: 1 / (1 + e^{(tau - 10) / 4}) < 0.01 <=> tau > 10 + 4 ln 99 = 28.4 -> 29;
    # 2^(-tau / 20) < 0.01 <=> tau > 20 log2 100 = 132.9 -> 133
    assert stale.first_tau_below_reference(0.01) == 29
    assert stale.first_tau_below_reference(0.01, "exp") == 133
    assert stale.check_first_tau_below(stale.first_tau_below_reference, lambda: "sigmoid", False)
    v = stale.check_first_tau_below(lambda t, f: 30, lambda: "sigmoid", verbose=False)
    assert not v and "off by one" in v.text()
    assert not stale.check_first_tau_below(stale.first_tau_below_reference, lambda: "exp", False)
    assert stale.check_first_tau_below(_stub, _stub, verbose=False).passed is None

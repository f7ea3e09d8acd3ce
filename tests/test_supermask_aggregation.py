"""Server steps of the supermask methods against hand values: the vote -> score write-backs,
FedMask's per-holder mean, BNNAvg's sample-weighted mean of signs; the flip share, coverage and
the bad-input errors of the options."""

import math

import pytest
import torch
from torch import nn

from flkit.engine import LocalSpec
from flkit.experiment import RunConfig
from flkit.methods import RunContext
from flkit.methods.base import ClientUpdates
from flkit.methods.fedmask import FedMask
from flkit.methods.hidenseek import BNNAvg, FedAvgSplit, HideNseek, arctanh_aggregate
from flkit.prune.supermask import flip_share, vote_to_score
from flkit.state import model_state
from flkit.utils import FlkitError


def _net():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 2, bias=False), nn.ReLU(), nn.Linear(2, 2))
    net.num_classes = 2
    return net


def _ctx(net, clients=4, lr=0.1):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(clients * 8, 3, generator=g)
    y = torch.arange(clients * 8) % 2
    parts = [torch.arange(i * 8, (i + 1) * 8) for i in range(clients)]
    spec = LocalSpec(lr=lr, batch_size=4, epochs=1, momentum=0.9)
    return RunContext(net, x, y, parts, spec, 0, 2, clients_per_round=2)


def test_write_backs_by_hand():
    m = torch.tensor([-1.0, -0.5, 0.0, 0.5, 1.0])
    assert torch.allclose(vote_to_score(m, "sign", "linear"), m)
    inv = vote_to_score(m.double(), "sign", "inverse", 1e-6)
    assert inv[1].item() == pytest.approx(math.atanh(-0.5))
    assert inv[4].item() == pytest.approx(math.atanh(1 - 1e-6))
    p = torch.tensor([0.0, 0.25, 0.5, 1.0])
    assert torch.allclose(vote_to_score(p, "binary", "linear"), torch.tensor([-2.0, -1.0, 0, 2]))
    inv = vote_to_score(p.double(), "binary", "inverse", 1e-3)
    assert inv[1].item() == pytest.approx(math.log(0.25 / 0.75))
    assert inv[3].item() == pytest.approx(math.log(0.999 / 0.001))
    # both write-backs give every position the same mask
    for kind, v in (("sign", m), ("binary", p)):
        a, b = vote_to_score(v, kind, "linear"), vote_to_score(v, kind, "inverse", 1e-6)
        assert torch.equal(a >= 0, b >= 0) and torch.equal(a > 0, b > 0)


def test_normalise_over_all_clients_keeps_latents_small():
    signs = torch.tensor([[1.0, 1.0], [1.0, -1.0]])
    w = torch.tensor([10.0, 30.0])
    # sampled: means (1, -0.5); all (total 400): means (0.1, -0.05)
    sampled = arctanh_aggregate(signs, w, 1e-6)
    assert sampled[1].item() == pytest.approx(math.atanh(-0.5), rel=1e-6)
    lit = arctanh_aggregate(signs, w, 1e-6, total=400.0)
    assert lit.tolist() == pytest.approx([math.atanh(0.1), math.atanh(-0.05)], rel=1e-6)


def test_fedmask_aggregation_per_holder_by_hand():
    net = _net()
    m = FedMask(_ctx(net), keep_ratio=0.5, prune_layers=["0"])
    state = m.init_state(model_state(net))
    n = "0.weight"
    votes = {k: torch.zeros(2, *state.scores[k].shape) for k in m.masked}
    votes[n] = torch.tensor([[[1, 0, 1], [1, 1, 0]], [[1, 1, 0], [0, 1, 0]]], dtype=torch.float32)
    # client 0 (4 samples) holds every position; client 1 (12 samples) dropped position (0, 0)
    holders = {k: None for k in m.masked}
    holders[n] = torch.tensor([[[1, 1, 1], [1, 1, 1]], [[0, 1, 1], [1, 1, 1]]])
    up = ClientUpdates(
        [0, 1],
        votes,
        torch.tensor([4.0, 12.0]),
        torch.zeros(2),
        [0, 0],
        {"holders": holders, "client": state.client, "pruned": state.pruned},
    )
    new = m.aggregate(state, up, 1)
    # per position: mean over holders weighted 1/4, 3/4; (0,0) only client 0 holds it
    mean = torch.tensor([[1.0, 0.75, 0.25], [0.25, 1.0, 0.0]])
    assert torch.allclose(new.scores[n], 4 * (mean - 0.5))
    m_inv = FedMask(_ctx(net), keep_ratio=0.5, prune_layers=["0"], writeback="inverse", eps=1e-3)
    inv = m_inv.aggregate(state, up, 1).scores[n]
    assert torch.allclose(inv, torch.logit(mean.clamp(1e-3, 1 - 1e-3)), atol=1e-5)
    assert torch.allclose(new.model[n], m.w0[n] * (mean > 0.5))


def test_bnnavg_aggregation_is_the_weighted_mean_of_signs():
    net = _net()
    m = BNNAvg(_ctx(net), normalize="sampled")
    state = m.init_state(model_state(m.ctx.model))
    signs = {
        k: torch.stack([torch.ones_like(v), -torch.ones_like(v)]) for k, v in state.model.items()
    }
    up = ClientUpdates([0, 1], signs, torch.tensor([1.0, 3.0]), torch.zeros(2), [0, 0])
    new = m.aggregate(state, up, 1)
    for k in m.bin:  # (1 * 1 + 3 * -1) / 4
        assert torch.allclose(new.model[k], torch.full_like(new.model[k], -0.5))
    # normalised over all clients' samples: 4 clients x 6 training samples = 24
    lit = BNNAvg(_ctx(_net())).aggregate(state, up, 1)
    for k in m.bin:  # (1 * 1 + 3 * -1) / 24
        assert torch.allclose(lit.model[k], torch.full_like(lit.model[k], -2 / 24))
    bn = [k for k in state.model if k not in m.bin]
    assert all(torch.equal(lit.model[k], new.model[k]) for k in bn)  # the rest: plain average


def test_flip_share_by_hand():
    a = {"x": torch.tensor([1.0, -1.0, 1.0, 1.0]), "y": torch.tensor([0.0, 1.0])}
    b = {"x": torch.tensor([1.0, 1.0, 1.0, -1.0]), "y": torch.tensor([0.0, 1.0])}
    assert flip_share(a, b) == pytest.approx(2 / 6)


def test_coverage_counts_only_trained_clients_and_is_refused_without_heads():
    net = _net()
    m = HideNseek(_ctx(net, lr=1.0), keep_ratio=1.0, prune_iterations=1)
    state = m.init_state(model_state(net))
    state, log = m.round(state, [0, 2], 1)
    assert log.metrics["coverage"] == pytest.approx(0.5)
    assert m.scored(state) == [0, 2]
    every = HideNseek(_ctx(net, lr=1.0), keep_ratio=1.0, prune_iterations=1, score_clients="all")
    assert every.scored(state) == [0, 1, 2, 3]
    for cls in (FedAvgSplit, BNNAvg):
        other = cls(_ctx(_net()))
        with pytest.raises(FlkitError, match="accepted: a method with per-client"):
            other.coverage(other.init_state(model_state(other.ctx.model)))


@pytest.mark.parametrize(
    "method,kw,match",
    [
        ("hidenseek", {"normalize": "some"}, "'some'.*accepted.*sampled.*all"),
        ("bnnavg", {"normalize": "every"}, "'every'.*accepted.*sampled.*all"),
        ("hidenseek", {"writeback": "clip"}, "'clip'.*accepted.*inverse.*linear"),
        ("fedmask", {"writeback": "atanh"}, "'atanh'.*accepted.*inverse.*linear"),
        ("signed", {"score_clients": "some"}, "'some'.*accepted.*trained.*all"),
        ("fedavg_split", {"local_split": "class"}, "'class'.*accepted.*stratified.*writer"),
    ],
)
def test_unknown_options_are_named_with_the_accepted_ones(method, kw, match):
    with pytest.raises(FlkitError, match=match):
        RunConfig(method=method, model="mlp_har", dataset="har", method_params=kw)


@pytest.mark.parametrize("lr", [0.0, -1.0])
def test_score_learning_rate_must_be_positive(lr):
    with pytest.raises(FlkitError, match="lr"):
        RunConfig(method="fedmask", model="mlp_har", dataset="har", lr=lr)


def test_vote_to_score_bad_input():
    with pytest.raises(FlkitError, match="'tangent'.*accepted: inverse, linear"):
        vote_to_score(torch.zeros(2), "sign", "tangent")
    with pytest.raises(FlkitError, match="accepted: sign, binary"):
        vote_to_score(torch.zeros(2), "ternary", "linear")

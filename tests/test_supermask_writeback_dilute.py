"""The votes of FedMask and Signed weighted over all clients' samples (``normalize="all"``,
``dilute_vote``) against hand values, its equivalence with HideNseek's server step, and BNNAvg's
separate learning rate for its real-valued parameters (``real_lr``); the bad-input errors."""

import math

import pytest
import torch
from torch import nn

from flkit.engine import LocalSpec
from flkit.experiment import RunConfig
from flkit.methods import RunContext
from flkit.methods.base import ClientUpdates
from flkit.methods.fedmask import FedMask, Signed
from flkit.methods.hidenseek import BNNAvg, arctanh_aggregate
from flkit.prune.supermask import dilute_vote, vote_to_score
from flkit.state import model_state
from flkit.utils import FlkitError


def _net():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 2, bias=False), nn.ReLU(), nn.Linear(2, 2))
    net.num_classes = 2
    return net


def _ctx(net, lr=0.1, batch_size=4, momentum=0.9, weight_decay=0.0):
    """4 clients of 8 samples; the default local test split keeps 6 of each for training."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(32, 3, generator=g)
    y = torch.arange(32) % 2
    parts = [torch.arange(i * 8, (i + 1) * 8) for i in range(4)]
    spec = LocalSpec(
        lr=lr, batch_size=batch_size, epochs=1, momentum=momentum, weight_decay=weight_decay
    )
    return RunContext(net, x, y, parts, spec, 0, 2, clients_per_round=2)


def test_dilute_vote_by_hand():
    signs = torch.tensor([-1.0, -0.5, 0.0, 1.0])
    assert dilute_vote(signs, 0.1, "sign").tolist() == pytest.approx([-0.1, -0.05, 0.0, 0.1])
    masks = torch.tensor([0.0, 0.25, 0.5, 1.0])
    assert dilute_vote(masks, 0.1, "binary").tolist() == pytest.approx([0.45, 0.475, 0.5, 0.55])
    assert torch.equal(dilute_vote(masks, 1.0, "binary"), masks)
    # one share per position; 0 leaves only the undecided value
    per = dilute_vote(torch.tensor([1.0, 1.0]), torch.tensor([0.5, 0.0]), "sign")
    assert per.tolist() == [0.5, 0.0]
    # what the server writes back: a unanimous vote from 10 % of the data
    one = torch.tensor([1.0], dtype=torch.float64)
    assert vote_to_score(dilute_vote(one, 0.1, "binary"), "binary", "linear").item() == (
        pytest.approx(0.2)
    )
    assert vote_to_score(dilute_vote(one, 0.1, "binary"), "binary", "inverse").item() == (
        pytest.approx(math.log(0.55 / 0.45))
    )
    assert vote_to_score(dilute_vote(one, 0.1, "sign"), "sign", "inverse").item() == (
        pytest.approx(math.atanh(0.1))
    )


def _fedmask_round(cls, **params):
    net = _net()
    m = cls(_ctx(net), keep_ratio=0.5, prune_layers=["0"], **params)
    state = m.init_state(model_state(net))
    n = "0.weight"
    votes = {k: torch.zeros(2, *state.scores[k].shape) for k in m.masked}
    votes[n] = torch.tensor([[[1, 0, 1], [1, 1, 0]], [[1, 1, 0], [0, 1, 0]]], dtype=torch.float32)
    if m.kind == "sign":  # the same votes as signs
        votes[n] = 2 * votes[n] - 1
    # client 0 (4 samples) drops (1, 2); client 1 (12 samples) drops (0, 0) and (1, 2)
    holders = {k: None for k in m.masked}
    holders[n] = torch.tensor([[[1, 1, 1], [1, 1, 0]], [[0, 1, 1], [1, 1, 0]]])
    up = ClientUpdates(
        [0, 1],
        votes,
        torch.tensor([4.0, 12.0]),
        torch.zeros(2),
        [0, 0],
        {"holders": holders, "client": state.client, "pruned": state.pruned},
    )
    return m, state, m.aggregate(state, up, 1), n


def test_fedmask_votes_over_all_clients_by_hand():
    m, state, new, n = _fedmask_round(FedMask, normalize="all")
    assert float(m.sizes.sum()) == 24  # 4 clients x 6 training samples
    # holders' mean weighted 1/4, 3/4 (only client 0 at (0, 0)); shares 16/24, 4/24 at (0, 0);
    # score = 4 * share * (mean - 1/2); (1, 2): nobody holds it, the old score stays
    want = torch.tensor([[4 * (4 / 24) * 0.5, 2 / 3 * 4 * 0.25, -2 / 3], [-2 / 3, 4 / 3, 0.0]])
    want[1, 2] = state.scores[n][1, 2]
    assert torch.allclose(new.scores[n], want, atol=1e-6)
    # the same masks as the plain mean vote, only closer to the split
    _, _, plain, _ = _fedmask_round(FedMask)
    assert torch.equal(new.scores[n] > 0, plain.scores[n] > 0)
    assert plain.scores[n][1, 1].item() == pytest.approx(2.0)  # unanimous: the range's end


def test_signed_votes_over_all_clients_by_hand():
    _, state, new, n = _fedmask_round(Signed, normalize="all")
    # signs 2v - 1: holders' means (1, 0.5, -0.5; -0.5, 1, -); shares 1/6 at (0, 0), else 2/3
    want = torch.tensor([[1 / 6, 1 / 3, -1 / 3], [-1 / 3, 2 / 3, 0.0]])
    want[1, 2] = state.scores[n][1, 2]
    assert torch.allclose(new.scores[n], want, atol=1e-6)


def test_signed_over_all_clients_is_hidenseeks_server_step():
    """Every client holding every position: Signed's inverse write-back over all clients' samples
    is HideNseek's arctanh aggregation with n over all clients' samples."""
    net = _net()
    m = Signed(_ctx(net), keep_ratio=0.5, prune_layers=["0"], normalize="all", writeback="inverse")
    state = m.init_state(model_state(net))
    g = torch.Generator().manual_seed(1)
    signs = {
        k: torch.randint(0, 2, (3, *state.scores[k].shape), generator=g) * 2.0 - 1 for k in m.masked
    }
    weights = torch.tensor([6.0, 6.0, 5.0])
    up = ClientUpdates(
        [0, 1, 2],
        signs,
        weights,
        torch.zeros(3),
        [0, 0, 0],
        {"holders": {k: None for k in m.masked}, "client": state.client, "pruned": state.pruned},
    )
    new = m.aggregate(state, up, 1)
    for k in m.masked:
        want = arctanh_aggregate(signs[k], weights, m.hp.eps, total=24.0)
        assert torch.allclose(new.scores[k], want, atol=1e-6)


def test_bnnavg_real_lr_scales_only_the_real_parameters():
    """One plain SGD step on one client (all 6 training samples in one batch): the biases move by
    real_lr / lr times their move at one learning rate; the uploaded signs are the same."""
    runs = {}
    for real_lr in (None, 0.01):
        net = _net()
        m = BNNAvg(_ctx(net, lr=1.0, batch_size=6, momentum=0.0), real_lr=real_lr)
        state = m.init_state(model_state(m.ctx.model))
        runs[real_lr] = (state, m.round(state, [0], 1)[0], m)
    (s0, one, m), (_, sep, _) = runs[None], runs[0.01]
    assert m.bin == ["0.weight", "2.weight"]
    step_one = one.model["2.bias"] - s0.model["2.bias"]
    step_sep = sep.model["2.bias"] - s0.model["2.bias"]
    assert step_one.abs().max() > 0
    assert torch.allclose(step_sep, 0.01 * step_one, atol=1e-7)
    for k in m.bin:
        assert torch.equal(sep.model[k], one.model[k])


@pytest.mark.parametrize(
    "method,kw,match",
    [
        ("fedmask", {"normalize": "some"}, "'some'.*accepted.*sampled.*all"),
        ("signed", {"normalize": "holders"}, "'holders'.*accepted.*sampled.*all"),
        ("bnnavg", {"real_lr": 0.0}, "real_lr=0.0 is outside the accepted range \\(0.0, inf\\)"),
        ("bnnavg", {"real_lr": -1.0}, "real_lr=-1.0 is outside the accepted range"),
    ],
)
def test_bad_options_are_named_with_the_accepted_ones(method, kw, match):
    with pytest.raises(FlkitError, match=match):
        RunConfig(method=method, model="mlp_har", dataset="har", method_params=kw)


@pytest.mark.parametrize("share", [1.5, -0.1, float("nan")])
def test_dilute_vote_refuses_a_share_outside_0_1(share):
    with pytest.raises(FlkitError, match="outside \\[0, 1\\].*accepted"):
        dilute_vote(torch.tensor([1.0]), share, "sign")


def test_dilute_vote_refuses_an_unknown_kind():
    with pytest.raises(FlkitError, match="'ternary'.*accepted.*sign.*binary"):
        dilute_vote(torch.tensor([1.0]), 0.5, "ternary")


def test_bnnavg_real_lr_refuses_weight_decay():
    with pytest.raises(FlkitError, match="weight_decay=0.1 with real_lr=0.01.*accepted"):
        BNNAvg(_ctx(_net(), weight_decay=0.1), real_lr=0.01)

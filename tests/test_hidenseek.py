"""HideNseek building blocks and methods (flkit.prune, flkit.methods.hidenseek / fedmask):
hand-computed values, invariants and equivalences."""

import io
import math

import pytest
import torch
from torch import nn

from flkit import methods, models
from flkit.data.partition import local_split
from flkit.engine import LocalSpec
from flkit.experiment import RunConfig
from flkit.methods import RunContext
from flkit.methods.fedmask import FedMask, Signed
from flkit.methods.hidenseek import BNNAvg, FedAvgSplit, HideNseek, arctanh_aggregate
from flkit.prune import (
    bnn_sign_ste,
    classifier_layer,
    group_scores,
    hard_sign,
    sign_ste,
    strict_keep,
    supermask_transform,
    synflow_group_mask,
    synflow_scores,
)
from flkit.state import model_state
from flkit.utils import FlkitError


def _mlp(sizes, seed=0, num_classes=None):
    torch.manual_seed(seed)
    layers = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(a, b, bias=False), nn.ReLU()]
    net = nn.Sequential(*layers[:-1])
    net.num_classes = num_classes or sizes[-1]
    return net


def _ctx(model, in_dim, classes, clients=6, per_client=20, lr=0.05, epochs=1, seed=0):
    g = torch.Generator().manual_seed(0)
    n = clients * per_client
    x = torch.randn(n, in_dim, generator=g)
    y = torch.randint(0, classes, (n,), generator=g)
    parts = [torch.arange(i * per_client, (i + 1) * per_client) for i in range(clients)]
    return RunContext(
        model,
        x,
        y,
        parts,
        LocalSpec(lr=lr, batch_size=8, epochs=epochs, momentum=0.9),
        seed,
        classes,
        clients_per_round=2,
    )


# --------------------------------------------------------------------------- SynFlow
def test_synflow_conserves_flow_layer_by_layer():
    # with |weights| and an all-ones input, every layer carries the same total saliency R
    net = _mlp([5, 7, 6, 3])
    sal = synflow_scores(net, (5,), dtype=torch.float64)
    with torch.no_grad():
        x = torch.ones(5, dtype=torch.float64)
        for m in net:
            if isinstance(m, nn.Linear):
                x = m.weight.double().abs() @ x
        r = float(x.sum())
    totals = [float(s.sum()) for s in sal.values()]
    assert all(t == pytest.approx(r, rel=1e-12) for t in totals)


def test_group_scores_by_hand():
    net = _mlp([2, 2, 1])
    with torch.no_grad():
        net[0].weight.copy_(torch.tensor([[1.0, -2.0], [3.0, 0.5]]))
        net[2].weight.copy_(torch.tensor([[2.0, -1.0]]))
    sal = synflow_scores(net, (2,), dtype=torch.float64)
    # S_ij = |w2_i| * |w1_ij| (input of ones)
    assert torch.allclose(sal["0"], torch.tensor([[2.0, 4.0], [3.0, 0.5]], dtype=torch.float64))
    l2 = group_scores(net[0].weight.double(), sal["0"], "l2")
    assert torch.allclose(
        l2, torch.tensor([math.sqrt(4 + 64), math.sqrt(81 + 0.0625)], dtype=torch.float64)
    )
    assert torch.allclose(
        group_scores(net[0].weight.double(), sal["0"], "sum"),
        torch.tensor([6.0, 3.5], dtype=torch.float64),
    )


def test_strict_threshold_removes_ties_and_zeros():
    s = torch.tensor([0.0, 0.0, 1.0, 1.0, 2.0, 3.0])
    # q = 3, tau = 1: both 1.0 go, so only 2 of 6 survive a 50 % keep target
    assert strict_keep(s, 0.5).tolist() == [False, False, False, False, True, True]
    assert strict_keep(s, 0.95).all()  # q = floor(0.3) = 0: nothing removed
    assert strict_keep(torch.arange(10.0), 0.8).sum() == 8  # (1 - 0.8) * 10 is exactly 2


def test_final_keep_fraction_after_100_iterations():
    net = _mlp([8, 16, 16, 4])
    keep = synflow_group_mask(net, (8,), 0.5, ["0", "2"], iterations=100)
    assert sum(int(k.sum()) for k in keep.values()) == 16  # 32 groups, no ties: exactly half
    one = synflow_group_mask(net, (8,), 0.5, ["0", "2"], iterations=1)
    assert sum(int(k.sum()) for k in one.values()) == 16


@pytest.mark.parametrize(
    "kw",
    [
        dict(keep_ratio=0.0),
        dict(keep_ratio=1.5),
        dict(iterations=0),
        dict(layers=["nope"]),
        dict(layers=[]),
    ],
)
def test_pruning_bad_input(kw):
    args = {**dict(keep_ratio=0.8, layers=["0"], iterations=2), **kw}
    with pytest.raises(FlkitError):
        synflow_group_mask(_mlp([4, 4, 2]), (4,), **args)


# --------------------------------------------------------------------------- sign supermask
def test_sign_ste_gradient_matches_finite_difference_of_tanh():
    torch.manual_seed(0)
    s = (torch.rand(50, dtype=torch.float64) * 4 - 2).requires_grad_(True)
    w0, c = torch.randn(50, dtype=torch.float64), torch.randn(50, dtype=torch.float64)
    (c * w0 * sign_ste(s)).sum().backward()
    h = 1e-6
    with torch.no_grad():
        fd = c * w0 * (torch.tanh(s + h) - torch.tanh(s - h)) / (2 * h)
    assert torch.allclose(s.grad, fd, atol=1e-8)
    # the fused engine transform: same values and gradients
    lat = s.detach().clone().view(1, -1).requires_grad_(True)
    eff = supermask_transform({"w": w0}, None, "sign")({"w": lat}, {"clients": [0]})["w"]
    assert torch.equal(eff[0], w0 * torch.where(s >= 0, 1.0, -1.0).double())
    (c * eff[0]).sum().backward()
    assert torch.allclose(lat.grad[0], s.grad)


def test_sign_of_zero_is_plus_one_and_literal_surrogate():
    assert hard_sign(torch.tensor([0.0, -0.5, 2.0])).tolist() == [1.0, -1.0, 1.0]
    s = torch.tensor([0.5, 1.5], requires_grad=True)
    sign_ste(s, "literal").sum().backward()
    assert torch.allclose(s.grad, 1 - s.detach() ** 2)  # turns negative beyond |s| = 1


def test_bnn_ste_passes_gradient_at_plus_minus_one():
    # hard-tanh straight-through (Courbariaux et al. 2016): d sign(w) / dw := 1[|w| <= 1], the
    # ends included. BNNAvg's server writes every unanimous vote back as a latent weight of exactly
    # +-1; a zero gradient there freezes the whole network after the first round.
    w = torch.tensor([-1.5, -1.0, -0.25, 0.0, 1.0, 1.5], requires_grad=True)
    q = bnn_sign_ste(w)
    assert q.tolist() == [-1.0, -1.0, -1.0, 1.0, 1.0, 1.0]
    q.sum().backward()
    assert w.grad.tolist() == [0.0, 1.0, 1.0, 1.0, 1.0, 0.0]
    # BNNAvg from an aggregated state (every latent weight +-1): local training moves them
    net = _mlp([10, 16, 4])
    m = BNNAvg(_ctx(net, 10, 4, clients=3, per_client=16, lr=0.05))
    state = m.init_state(model_state(m.ctx.model))
    state.model = {n: hard_sign(v) if n in m.bin else v for n, v in state.model.items()}
    starts = {n: v.unsqueeze(0).clone() for n, v in state.model.items()}
    res = m.train(starts, [0], 1)
    for n in m.bin:
        assert float((res.state[n] - starts[n]).abs().max()) > 0, n


# --------------------------------------------------------------------------- aggregation
def test_arctanh_aggregation_hand_made_votes():
    plus = torch.ones(3, 2)
    w = torch.tensor([1.0, 1.0, 1.0])
    assert torch.allclose(arctanh_aggregate(plus, w), torch.full((2,), math.atanh(1 - 1e-6)))
    assert float(arctanh_aggregate(plus, w).max()) < 7.26  # clipped: finite
    split = torch.tensor([[1.0], [1.0], [-1.0]])
    assert float(arctanh_aggregate(split, w)) == pytest.approx(math.atanh(1 / 3), rel=1e-6)
    assert float(
        arctanh_aggregate(torch.tensor([[1.0], [-1.0]]), torch.tensor([1.0, 3.0]))
    ) == pytest.approx(math.atanh(-0.5), rel=1e-6)
    tie = arctanh_aggregate(torch.tensor([[1.0], [-1.0]]), torch.tensor([2.0, 2.0]))
    assert float(tie) == 0.0 and float(hard_sign(tie)) == 1.0
    assert float(arctanh_aggregate(plus[:, :1], w, eps=1e-2)) == pytest.approx(
        math.atanh(0.99), rel=1e-6
    )
    # literal normalisation by all clients' samples: the mean vote is 2 / 10
    assert float(
        arctanh_aggregate(plus[:2, :1], torch.tensor([1.0, 1.0]), total=10)
    ) == pytest.approx(math.atanh(0.2), rel=1e-6)
    for eps in (0, 1, -0.1, 1.5):
        with pytest.raises(FlkitError):
            arctanh_aggregate(plus, w, eps=eps)


# --------------------------------------------------------------------------- methods
def _rounds(method, state, schedule):
    for rnd, clients in enumerate(schedule, 1):
        state, _ = method.round(state, clients, rnd)
    return state


def test_registered_names():
    for n in ("hidenseek", "fedmask", "signed", "bnnavg", "fedavg_split"):
        assert n in methods.names()


def test_personal_classifier_never_leaves_client_and_survives_checkpoint():
    net = _mlp([10, 16, 12, 4])
    ctx = _ctx(net, 10, 4, lr=10.0)
    m = HideNseek(ctx, keep_ratio=0.8, prune_iterations=5, local_test_frac=0.25)
    init = model_state(net)
    state = m.init_state(init)
    schedule = [[0, 1], [2, 3], [1, 4]]
    up = m.client_update(state, [0, 1], 1)
    assert sorted(up.state) == sorted(m.feat)  # only signs are uploaded
    assert all(set(v.unique().tolist()) <= {-1.0, 1.0} for v in up.state.values())
    full = _rounds(m, state, schedule)
    head = m.head + ".weight"
    assert torch.equal(full.model[head], init[head])  # the server never sees a head
    assert head not in full.latent
    trained = full.client[head]
    assert not torch.equal(trained[1], init[head]) and torch.equal(trained[5], init[head])
    # stop after round 2, save and load the state, continue with a fresh method object
    half = _rounds(m, m.init_state(init), schedule[:2])
    buf = io.BytesIO()
    torch.save(half, buf)
    buf.seek(0)
    m2 = HideNseek(
        _ctx(net, 10, 4, lr=10.0), keep_ratio=0.8, prune_iterations=5, local_test_frac=0.25
    )
    # the run's own checkpoint (flkit.store.load_torch): the state is a dataclass, not only tensors
    resumed, _ = m2.round(torch.load(buf, weights_only=False), schedule[2], 3)
    assert torch.equal(resumed.client[head], trained)
    assert m.evaluate(full, None, None) == m2.evaluate(resumed, None, None)


def test_fedmask_prunes_once_per_client_keeping_top_fraction():
    net = _mlp([10, 16, 12, 4])
    m = FedMask(_ctx(net, 10, 4, lr=0.05), keep_ratio=0.75, prune_layers=["0", "2"])
    state = m.init_state(model_state(net))
    state, log1 = m.round(state, [0, 1], 1)
    first = state.client["prune/0.weight"][0].clone()
    total = 16 * 10 + 12 * 16
    kept = sum(int(state.client[f"prune/{n}.weight"][0].sum()) for n in ("0", "2"))
    assert kept == round(0.75 * total)
    assert log1.metrics["prune_epochs"] == 2
    state, log2 = m.round(state, [0, 2], 2)
    assert log2.metrics["prune_epochs"] == 1  # client 0 does not prune again
    assert torch.equal(state.client["prune/0.weight"][0], first)
    assert state.client["prune/0.weight"][3].all()  # never took part: nothing pruned
    assert log2.bits_up[0] == 8 * (kept + 4 * 12)  # kept prunable entries + classifier mask


def test_one_shot_pruning_ranks_scores_together():
    net = _mlp([2, 2, 2])
    m = FedMask(_ctx(net, 2, 2), keep_ratio=0.5, prune_layers=["0", "2"])
    scores = {
        "0.weight": torch.tensor([[[3.0, -4.0], [0.5, 1.0]]]),
        "2.weight": torch.tensor([[[2.0, -0.1], [0.2, 0.3]]]),
    }
    kept = m._one_shot_prune(scores)  # top 4 of 8: 3, 2, 1, 0.5
    assert kept["0.weight"][0].tolist() == [[True, False], [True, True]]
    assert kept["2.weight"][0].tolist() == [[True, False], [False, False]]
    s = Signed(_ctx(net, 2, 2), keep_ratio=0.5, prune_layers=["0", "2"])
    kept = s._one_shot_prune(scores)  # Signed ranks by |score|: 4, 3, 2, 1
    assert kept["0.weight"][0].tolist() == [[True, True], [False, True]]
    assert kept["2.weight"][0].tolist() == [[True, False], [False, False]]


def test_bytes_per_round_har_mlp_by_hand():
    torch.manual_seed(0)
    net = models.build("mlp_har")
    ctx = _ctx(net, 1152, 6, clients=3, per_client=8, lr=10.0)
    m = HideNseek(ctx, prune_iterations=3)
    r1, r2 = (int(m.group_keep[n].sum()) for n in ("classifier.0", "classifier.2"))
    assert r1 + r2 == 768 - math.floor(0.2 * 768 + 1e-9)  # 80 % of the 768 nodes
    assert m.downlink_bits(None, [0])[0] == 8 * (r1 * 1152 + r2 * r1 + 128 * r2)
    assert (
        FedAvgSplit(_ctx(net, 1152, 6, clients=3, per_client=8)).downlink_bits(None, [0])[0]
        == 32 * 754_438
    )
    assert (
        BNNAvg(_ctx(net, 1152, 6, clients=3, per_client=8)).downlink_bits(None, [0])[0]
        == 8 * 754_438
    )
    fm = FedMask(_ctx(net, 1152, 6, clients=3, per_client=8))
    assert fm.downlink_bits(None, [0])[0] == 8 * 754_432  # every weight's mask entry


def test_local_split_is_stratified_and_disjoint():
    y = torch.tensor([0] * 8 + [1] * 4)
    train, test = local_split([torch.arange(12)], y, 0.25, seed=0)
    assert sorted(torch.cat([train[0], test[0]]).tolist()) == list(range(12))
    assert torch.bincount(y[test[0]], minlength=2).tolist() == [2, 1]


# --------------------------------------------------------------------------- bad input
def test_bad_method_parameters_fail_before_training():
    net = _mlp([10, 16, 12, 4])
    for kw in (
        dict(keep_ratio=0.0),
        dict(keep_ratio=1.2),
        dict(eps=1.0),
        dict(eps=0.0),
        dict(prune_iterations=0),
        dict(prune_layers=["missing"]),
        dict(normalize="some"),
    ):
        with pytest.raises(FlkitError):
            HideNseek(_ctx(net, 10, 4, lr=10.0), **kw)
    headless = nn.Sequential(nn.Linear(10, 8), nn.ReLU(), nn.Linear(8, 3))
    headless.num_classes = 4
    with pytest.raises(FlkitError, match="no classifier"):
        classifier_layer(headless)
    with pytest.raises(FlkitError, match="no classifier"):
        HideNseek(_ctx(headless, 10, 4, lr=10.0))


@pytest.mark.parametrize("method", [HideNseek, FedMask])
def test_a_model_with_only_a_classifier_is_named_with_the_accepted_ones(method):
    logreg = models.build("logreg", num_classes=4, in_channels=10)
    with pytest.raises(FlkitError) as err:
        method(_ctx(logreg, 10, 4, lr=10.0))
    msg = str(err.value)
    assert f"{method.name} on model 'logreg'" in msg and "classifier '1'" in msg
    assert "accepted: a model with Conv2d / Linear layers before its classifier" in msg
    assert "'vgg9'" in msg


def test_natural_partition_needs_groups():
    with pytest.raises(FlkitError, match="no natural groups"):
        RunConfig(
            method="hidenseek",
            dataset="mnist",
            model="vgg9",
            partition="natural",
            num_clients=10,
            clients_per_round=2,
        )


def test_mnist_split_options_come_from_the_preset():
    from flkit.papers.hidenseek import study
    from flkit.workbook import presets

    # smoke / cpu / long: the plain split, with exactly the options their cached runs were keyed on
    for name in ("smoke", "cpu", "long"):
        p = presets.load("04_hidenseek", name)
        cfg = study.config(p, f"mnist_a{p['alphas'][0]:g}", "hidenseek", 0, "cpu")
        assert cfg.partition_kwargs == {"alpha": p["alphas"][0], "min_samples": 20}
    # paper: 160 clients at alpha = 0.1 need the capped split and more redraws to give 20 each
    p = presets.load("04_hidenseek", "paper")
    cfg = study.config(p, "mnist_a0.1", "hidenseek", 0, "cpu")
    assert cfg.num_clients == 160
    assert cfg.partition_kwargs == {
        "alpha": 0.1,
        "min_samples": 20,
        "cap": True,
        "max_tries": 20000,
    }


def test_describe_sets_each_preset_value_beside_the_papers():
    from flkit.papers.hidenseek import study
    from flkit.workbook import presets

    # cpu's values (preset.toml) and the paper's (Sec. 5: HAR 30 / 3 / 200, MNIST 160 / 16 / 300,
    # E = 5, 3 seeds), with the seeds and MNIST clients per round overridden to show they are read
    p = presets.load("04_hidenseek", "cpu", seeds=3, mnist_clients_per_round=8)
    assert study.describe(p) == (
        "**Preset `cpu`.** HAR: 30 subjects, 3 per round, 25 rounds (paper 30, 3, 200). MNIST: 40 "
        "clients, 8 per round, 15 rounds, alpha in [0.1, 1.0], VGG9 width x0.25 (paper 160, 16, "
        "300, x1). FEMNIST: 16 writers (the data mirror holds 105; the paper uses 320). Local "
        "epochs E = 2 (HAR) / 1 (images), paper 5; 3 seed(s) (paper 3)."
    )

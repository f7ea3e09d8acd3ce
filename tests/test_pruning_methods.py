"""Pruning methods (flkit.methods.pruning / pruning_static / pruning_dst): special cases, exact
sparsity, FedDST and PruneFL reconfigurations, communication accounting, bad input."""

import pytest
import torch
from torch import nn

from flkit import methods
from flkit.engine import LocalSpec
from flkit.methods import RunContext
from flkit.methods.base import ClientUpdates
from flkit.prune import cubic_sparsity, erk_densities, keep_counts
from flkit.state import model_state
from flkit.utils import FlkitError


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Flatten(), nn.Linear(12, 10), nn.ReLU(), nn.Linear(10, 8), nn.ReLU(), nn.Linear(8, 3)
        )

    def forward(self, x):
        return self.net(x)


def _ctx(num_clients=6, per_client=16, lr=0.2, seed=0):
    g = torch.Generator().manual_seed(0)
    n = num_clients * per_client
    x = torch.randn(n, 12, generator=g)
    y = torch.randint(0, 3, (n,), generator=g)
    parts = [torch.arange(i * per_client, (i + 1) * per_client) for i in range(num_clients)]
    torch.manual_seed(1)
    return RunContext(
        Tiny(),
        x,
        y,
        parts,
        LocalSpec(lr=lr, batch_size=8, epochs=1, weight_decay=5e-4),
        seed,
        3,
        clients_per_round=3,
    )


def _run(name, rounds=6, ctx=None, **params):
    ctx = ctx or _ctx()
    m = methods.get(name)(ctx, **params)
    state = m.init_state(model_state(ctx.model))
    logs = []
    for rnd in range(1, rounds + 1):
        state, log = m.round(state, m.select_clients(state, rnd), rnd)
        logs.append(log)
    return m, state, logs


def _same(a, b):
    return all(torch.equal(a.model[n], b.model[n]) for n in a.model)


def test_registered():
    assert {
        "feddip",
        "feddp",
        "dpf",
        "feddip_prox",
        "snip",
        "prunetrain",
        "prunefl",
        "feddst",
    } <= set(methods.names())


def test_special_cases_are_the_same_numbers():
    base = dict(horizon=6, sparsity=0.8, R=2)
    _, a, _ = _run("feddip", **base, lambda_max=0.0)
    _, b, _ = _run("feddp", **base)
    assert _same(a, b)
    _, c, _ = _run("feddip", **base, lambda_max=0.0, s0=0.0)
    _, d, _ = _run("dpf", **base)
    assert _same(c, d)
    _, e, _ = _run("feddip", horizon=6, sparsity=0.0, s0=0.0, lambda_max=0.0)
    _, f, _ = _run("fedavg")
    assert all(torch.allclose(e.model[n], f.model[n], atol=1e-7) for n in e.model)
    _, g, _ = _run("feddip", **base, lambda_max=1e-1, Q=3)  # lambda does change the result
    assert not _same(g, a)


# Tiny's prunable weights: 12*10 + 10*8 + 8*3 = 224; at s_p = 0.9 a mask prunes round(201.6) = 202
N_TINY, PRUNED_AT_09 = 224, 202


def _zeros(mask):
    return sum(int((~v).sum()) for v in mask.values())


def test_feddip_mask_counts_follow_the_ramp_and_land_on_s_p():
    # T = 8, R = 3: updates at t = 0, 3, 6; the ramp ends at t = 6:
    # s = 0.5, 0.9 - 0.4 * (1 - 3/6)^3 = 0.85, 0.9 -> round(s * 224) = 112, 190, 202 pruned
    # (the old schedule (1 - t/8)^3 gave 0.89375 at t = 6: 200 pruned, 2 short of s_p)
    m, state, logs = _run("feddip", rounds=8, horizon=8, sparsity=0.9, R=3, lambda_max=1e-2, Q=4)
    assert sum(torch.Size(s).numel() for s in m.shapes.values()) == N_TINY
    counts = {}
    for rnd, log in enumerate(logs, start=1):
        assert log.metrics["reconfig"] == int((rnd - 1) % 3 == 0)
        if log.metrics["reconfig"]:
            counts[rnd - 1] = round(log.metrics["mask_sparsity"] * N_TINY)
        assert log.metrics["model_sparsity"] >= log.metrics["mask_sparsity"] - 1e-12
    assert counts == {0: 112, 3: 190, 6: 202}
    assert _zeros(state.mask) == PRUNED_AT_09
    assert [round(lg.metrics["sparsity_target"], 6) for lg in logs[6:]] == [0.9, 0.9]


@pytest.mark.parametrize(
    "name, params",
    [
        ("feddip", dict(R=3, lambda_max=1e-2, Q=4)),
        ("feddip", dict(R=5, lambda_max=1e-2, Q=4)),
        ("feddp", dict(R=2)),
        ("dpf", dict(R=7)),
        ("feddip_prox", dict(R=4, Q=2)),
        ("prunefl", dict(R=3, init_rounds=1)),
        ("prunefl", dict(R=8, init_rounds=0)),
        ("feddst", dict(R=2)),
        ("snip", {}),
    ],
)
def test_every_method_ends_at_s_p_to_the_weight(name, params):
    """The final global model prunes exactly round(0.9 * 224) = 202 weights, whatever R."""
    horizon = {} if name == "snip" else {"horizon": 8}
    _, state, _ = _run(name, rounds=8, sparsity=0.9, **horizon, **params)
    mask = state.mask if getattr(state, "mask", None) is not None else None
    if mask is not None:
        assert _zeros(mask) == PRUNED_AT_09
    zeros = sum(int((state.model[n] == 0).sum()) for n in ("net.1.weight", "net.3.weight"))
    zeros += int((state.model["net.5.weight"] == 0).sum())
    assert zeros >= PRUNED_AT_09  # a kept weight may be exactly 0, a pruned one never non-zero
    if name == "feddst":  # its per-layer ERK counts add up to the 224 - 202 = 22 kept
        assert sum(int(v.sum()) for v in state.erk.values()) == N_TINY - PRUNED_AT_09


def test_prunetrain_lands_on_s_p_in_the_inner_layers_only():
    """PruneTrain (as the official code) never prunes the first and last layers: at the last round
    the inner layer (10 x 8 = 80 weights) is at s_p = 0.8 exactly (64 zeros), the whole model at
    64 / 224."""
    m, state, logs = _run("prunetrain", rounds=3, horizon=3, sparsity=0.8)
    assert m.inner == ["net.3.weight"]
    assert logs[-1].metrics["sparsity_target"] == pytest.approx(0.8)
    assert int((state.model["net.3.weight"] == 0).sum()) == 64
    assert logs[-1].metrics["mask_sparsity"] == pytest.approx(64 / 80)
    assert logs[-1].metrics["model_sparsity"] == pytest.approx(64 / 224, abs=2 / 224)


@pytest.mark.parametrize(
    "name, params, match",
    [
        ("feddip", dict(horizon=6, R=6), r"R=6 cannot land on .*T=6.*accepted: R <= 5"),
        ("dpf", dict(horizon=6, R=9), r"R=9 cannot land .*nearest that lands: R = 5"),
        ("prunefl", dict(horizon=6, R=7), r"R=7 cannot land .*accepted: R <= 6"),
        ("prunetrain", dict(horizon=1), r"rounds=1 leaves no mask update after the first"),
        ("feddip", dict(horizon=6, R=1, Q=7), r"T=6 rounds is below Q=7 .*accepted: Q <= 6"),
    ],
)
def test_a_schedule_that_cannot_land_is_refused(name, params, match):
    with pytest.raises(FlkitError, match=match):
        methods.get(name)(_ctx(), sparsity=0.9, **params)


def test_no_lambda_no_segment_check_and_s0_at_s_p_needs_no_update():
    methods.get("feddp")(_ctx(), horizon=6, R=1, Q=7)  # lambda = 0: Q plays no part
    methods.get("feddip")(_ctx(), horizon=6, R=6, Q=2, s0=0.9, sparsity=0.9)


def test_penalty_value_and_gradient_by_hand():
    """lam * sum_z ||(w*m)_z||_2 on two layers: a = [3, 4] (mask all ones) has norm 5, b = [1, 2, 2]
    with b's middle entry pruned has norm sqrt(1 + 4) = sqrt(5); the gradient of the unsquared norm
    is lam * (w*m) / ||w*m|| at kept entries and 0 at pruned ones."""
    from flkit.prune import layer_l2_penalty

    a = torch.tensor([[[3.0, 4.0]]], requires_grad=True)  # one client [K=1, 1, 2]
    b = torch.tensor([[[1.0, 2.0, 2.0]]], requires_grad=True)
    mask = {"a": torch.tensor([[True, True]]), "b": torch.tensor([[True, False, True]])}
    pen = layer_l2_penalty(0.1, mask, ["a", "b"])({"a": a, "b": b}, {"clients": [0]})
    assert pen.shape == (1,) and float(pen.detach()) == pytest.approx(0.1 * (5 + 5**0.5))
    pen.sum().backward()
    assert a.grad.flatten().tolist() == pytest.approx([0.06, 0.08])
    r5 = 5**0.5
    assert b.grad.flatten().tolist() == pytest.approx([0.1 / r5, 0.0, 0.2 / r5])


def test_lambda_is_zero_in_round_1_and_lr_decays_per_round():
    """lambda_1 = 0 in both variants; round t (1-based) trains at 0.1 * 0.998^(t-1)."""
    from flkit.prune import incremental_lambda

    for variant in ("paper", "code"):
        assert incremental_lambda(0, 10, 1e-2, 5, variant) == 0.0
    # code variant, T = 10, Q = 5: segments of 2 rounds; segment i >= 1 has
    # 5e-4 + (1e-2 - 5e-4) (i - 1) / 4: segment 1 = 5e-4, segment 4 = 5e-4 + 9.5e-3 * 3/4
    assert incremental_lambda(2, 10, 1e-2, 5, "code") == pytest.approx(5e-4)
    assert incremental_lambda(9, 10, 1e-2, 5, "code") == pytest.approx(0.007625)
    assert incremental_lambda(9, 10, 1e-2, 5, "paper") == pytest.approx(1e-2 * 4 / 5)
    ctx = _ctx(lr=0.1)
    m, _, logs = _run(
        "feddip", rounds=4, ctx=ctx, horizon=4, R=1, Q=2, lambda_max=1e-2, lr_decay=0.998
    )
    assert [lg.metrics["lambda"] for lg in logs] == pytest.approx([0, 0, 5e-4, 5e-4])
    assert [lg.metrics["lr"] for lg in logs] == pytest.approx([0.1 * 0.998**t for t in range(4)])
    assert m.local_spec(4).lr == pytest.approx(0.1 * 0.998**3)


def test_dpf_first_round_is_dense():
    """DPF starts from s0 = 0: round 1 trains the dense model (the same numbers as FedAvg's round
    1) and its first mask keeps every weight."""
    _, a, logs = _run("dpf", rounds=1, horizon=6, sparsity=0.9, R=1)
    _, b, _ = _run("fedavg", rounds=1)
    assert logs[0].metrics["mask_sparsity"] == 0.0 and _zeros(a.mask) == 0
    assert all(torch.allclose(a.model[n], b.model[n], atol=1e-7) for n in a.model)


def test_error_feedback_moves_pruned_coordinates_and_code_order_shrinks_masks():
    ctx = _ctx()
    m = methods.get("feddip")(ctx, horizon=6, sparsity=0.9, R=1, lambda_max=0.0)
    state = m.init_state(model_state(ctx.model))
    state, _ = m.round(state, [0, 1, 2], 1)
    up = m.client_update(state, [0, 1, 2], 2)
    n = m.prune_names[0]
    pruned = ~state.mask[n]
    assert (up.state[n][:, pruned] != 0).any()  # dense weights changed where pruned
    state2 = m.aggregate(state, up, 2)
    assert not (state2.mask[n] & pruned).any()  # code order: nothing comes back
    # a pruned coordinate whose dense average grew largest: only the dense order brings it back
    j = int(pruned.flatten().nonzero()[0])
    big = {k: v.clone() for k, v in up.state.items()}
    big[n].view(3, -1)[:, j] = 100.0
    up_big = ClientUpdates(up.clients, big, up.weights, up.train_loss, up.bits_up, up.extra)
    assert not bool(m.aggregate(state, up_big, 2).mask[n].flatten()[j])
    md = methods.get("feddip")(
        ctx, horizon=6, sparsity=0.9, R=1, lambda_max=0.0, mask_order="dense"
    )
    new = md.aggregate(state, up_big, 2)
    assert bool(new.mask[n].flatten()[j]) and new.metrics["mask_regrown"] >= 1


def test_client_round0_masks_differ_per_client():
    ctx = _ctx()
    m = methods.get("feddip")(ctx, horizon=4, R=1, Q=2, round0="client")
    masks = m._training_mask(m.init_state(model_state(ctx.model)), [0, 1])
    n = m.prune_names[1]
    assert masks[n].shape[0] == 2 and not torch.equal(masks[n][0], masks[n][1])


def test_feddip_prox_differs_from_feddip():
    _, a, _ = _run("feddip", horizon=6, Q=3)
    _, b, _ = _run("feddip_prox", horizon=6, Q=3, mu=5.0)
    assert not _same(a, b)


def test_feddst_regrow_counts_and_return_to_erk():
    m, state, logs = _run("feddst", rounds=4, horizon=4, sparsity=0.7, R=2)
    # the ERK floors, with the remainder handed out so that 224 - round(0.7 * 224) = 67 are kept
    counts = keep_counts(m.shapes, erk_densities(m.shapes, 0.3), total=67)
    assert sum(counts.values()) == 67
    kept = {n: int((state.model[n] != 0).sum()) for n in m.shapes}
    assert all(kept[n] <= counts[n] for n in counts)  # never denser than ERK
    mask_counts = {n: int(v.sum()) for n, v in next(iter(state.client_masks.values())).items()}
    assert mask_counts == counts  # clients keep ERK counts per layer
    assert logs[1].metrics["moved"] > 0 and logs[0].metrics["moved"] == 0
    # server: layer-wise magnitude back to exactly the ERK count (dense input)
    up = ClientUpdates(
        [0],
        {n: torch.randn(1, *v.shape) for n, v in state.model.items()},
        torch.ones(1),
        torch.zeros(1),
        [0],
        extra={"masks": {}, "metrics": {}},
    )
    new = m.aggregate(state, up, 5)
    assert {n: int((new.model[n] != 0).sum()) for n in m.shapes} == counts


def test_prunefl_keeps_largest_squared_gradients():
    ctx = _ctx()
    m = methods.get("prunefl")(ctx, horizon=4, sparsity=0.8, s0=0.5, R=1, init_rounds=0)
    state = m.init_state(model_state(ctx.model))
    g = {n: torch.randn(2, *s) for n, s in m.shapes.items()}
    up = ClientUpdates(
        [0, 1],
        {n: v.unsqueeze(0).repeat(2, *[1] * v.dim()) for n, v in state.model.items()},
        torch.tensor([1.0, 3.0]),
        torch.zeros(2),
        [0, 0],
        extra={"grad_sq": {n: v**2 for n, v in g.items()}, "metrics": {}},
    )
    new = m.aggregate(state, up, 2)
    avg = torch.cat([(0.25 * g[n][0] ** 2 + 0.75 * g[n][1] ** 2).flatten() for n in m.shapes])
    # t = 1: the ramp runs from the initial pruning (t = -1) to the last update t = 3, so
    # s = 0.8 - 0.3 * (1 - 2/4)^3 = 0.7625 -> 224 - round(170.8) = 53 kept
    k_keep = avg.numel() - round(cubic_sparsity(2, 4, 0.5, 0.8) * avg.numel())
    assert k_keep == 53
    thresh = avg.sort(descending=True).values[k_keep - 1]
    got = torch.cat([new.mask[n].flatten() for n in m.shapes])
    assert int(got.sum()) == k_keep and bool((avg[got] >= thresh).all())


def test_official_cost_formula_lenet5():
    from flkit import models

    net = models.build("lenet5")
    ctx = RunContext(
        net,
        torch.zeros(4, 1, 28, 28),
        torch.zeros(4, dtype=torch.long),
        [torch.arange(4)],
        LocalSpec(lr=0.1, batch_size=2, epochs=1),
        0,
        10,
    )
    m = methods.get("feddip")(ctx, horizon=20)
    assert m.n_params == 61_706
    assert sum(torch.Size(s).numel() for s in m.shapes.values()) == 61_470
    assert m.official_bits(0.9) == pytest.approx(32 * 0.1 * 61_706)
    assert m.official_bits(0.0) == 32 * 61_706


def test_exact_bits_dense_and_sparse():
    _, _, logs = _run("fedavg", rounds=1)
    dense = logs[0].bits_up[0]
    _, _, logs = _run("snip", rounds=1, sparsity=0.9)
    assert logs[0].bits_up[0] < 0.5 * dense


@pytest.mark.parametrize(
    "params, match",
    [
        (dict(sparsity=1.0), "sparsity"),
        (dict(sparsity=-0.1), "sparsity"),
        (dict(s0=0.95, sparsity=0.9), "s0"),
        (dict(R=0), "R"),
        (dict(Q=0), "Q"),
        (dict(lambda_max=-1.0), "lambda_max"),
        (dict(prunable="nope"), "matches no layer"),
        (dict(mask_order="later"), "mask_order"),
        (dict(round0="both"), "round0"),
        (dict(lambda_variant="x"), "lambda_variant"),
        (dict(horizon=None), "horizon"),
    ],
)
def test_bad_input(params, match):
    p = {"horizon": 5, "R": 1, "Q": 5, **params}
    with pytest.raises(FlkitError, match=match):
        methods.get("feddip")(_ctx(), **p)


def test_feddip_prox_without_pruning_or_lambda_is_fedprox():
    """FedDIP+Prox at s0 = s_p = 0 and lambda = 0 is FedProx with the same mu (the proximal term is
    the intended one, against the frozen round-start model)."""
    _, a, _ = _run("feddip_prox", rounds=3, horizon=3, sparsity=0.0, s0=0.0, lambda_max=0.0, mu=0.5)
    _, b, _ = _run("fedprox", rounds=3, mu=0.5)
    _, c, _ = _run("fedavg", rounds=3)
    assert all(torch.allclose(a.model[n], b.model[n], atol=1e-6) for n in a.model)
    assert not _same(b, c)


def test_official_accounting_by_hand():
    """Tiny has P = 224 weights + 21 biases = 245 parameters; the official formula is
    32 (1 - s) P bits per model. 6 clients, 3 per round."""
    # FedDST, s_p = 0.9: 32 * 0.1 * 245 = 784 bits per model; round 1 sends it to the 3 clients
    # and broadcasts the initial mask to all 6: 9 * 784
    _, _, logs = _run("feddst", rounds=1, horizon=4, sparsity=0.9, R=2)
    assert logs[0].metrics["official_bits_down"] == pytest.approx(9 * 784)
    assert logs[0].metrics["official_bits_up"] == pytest.approx(3 * 784)
    # PruneFL, s0 = 0.5, R = 3 (no reconfiguration in round 1): 3 * 32 * 0.5 * 245 = 3 * 3920 down,
    # plus the initial broadcast to all 6 clients of the model at s0 and 4 bits per kept position
    # (224 - 112 = 112): 6 * (3920 + 448)
    _, _, logs = _run("prunefl", rounds=1, horizon=8, sparsity=0.9, R=3, init_rounds=0)
    assert logs[0].metrics["official_bits_down"] == pytest.approx(3 * 3920 + 6 * (3920 + 448))
    assert logs[0].metrics["official_bits_up"] == pytest.approx(3 * 3920)


def test_sparse_bits_by_hand():
    """Per tensor the cheaper of dense float32 (32 n bits) and float32 values + coded positions."""
    from flkit.methods.pruning import sparse_bits

    assert sparse_bits(torch.zeros(100)) == 0
    assert sparse_bits(torch.ones(10)) == 320
    nine = torch.ones(10)
    nine[0] = 0  # 9 values (288 bits) plus their positions, below the 320 dense bits
    assert 288 < sparse_bits(nine) < 320
    two = torch.zeros(1000)
    two[[3, 500]] = 1.0
    assert 64 < sparse_bits(two) < 32 * 1000 // 10  # two values plus two coded positions

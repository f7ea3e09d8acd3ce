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


def test_realised_sparsity_equals_schedule_at_reconfig_rounds():
    m, _, logs = _run("feddip", rounds=8, horizon=8, sparsity=0.9, R=3, lambda_max=1e-2, Q=4)
    total = sum(p.numel() for n, p in m.ctx.model.named_parameters() if n in m.prune_names)
    for rnd, log in enumerate(logs, start=1):
        s_t = cubic_sparsity(rnd - 1, 8, 0.5, 0.9)
        assert log.metrics["sparsity_target"] == pytest.approx(s_t)
        if (rnd - 1) % 3 == 0:
            assert log.metrics["reconfig"] == 1
            assert round(log.metrics["mask_sparsity"] * total) == round(s_t * total)
        assert log.metrics["model_sparsity"] >= log.metrics["mask_sparsity"] - 1e-12


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
    m = methods.get("feddip")(ctx, horizon=4, round0="client")
    masks = m._training_mask(m.init_state(model_state(ctx.model)), [0, 1])
    n = m.prune_names[1]
    assert masks[n].shape[0] == 2 and not torch.equal(masks[n][0], masks[n][1])


def test_feddip_prox_differs_from_feddip():
    _, a, _ = _run("feddip", horizon=6)
    _, b, _ = _run("feddip_prox", horizon=6, mu=5.0)
    assert not _same(a, b)


def test_feddst_regrow_counts_and_return_to_erk():
    m, state, logs = _run("feddst", rounds=4, horizon=4, sparsity=0.7, R=2)
    counts = keep_counts(m.shapes, erk_densities(m.shapes, 0.3))
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
    k_keep = avg.numel() - round(cubic_sparsity(1, 4, 0.5, 0.8) * avg.numel())
    thresh = avg.sort(descending=True).values[k_keep - 1]
    got = torch.cat([new.mask[n].flatten() for n in m.shapes])
    assert int(got.sum()) == k_keep and bool((avg[got] >= thresh).all())


def test_snip_and_prunetrain_run_at_exact_sparsity():
    m, state, _ = _run("snip", rounds=2, sparsity=0.75)
    total = sum(v.numel() for v in state.mask.values())
    assert sum(int((~v).sum()) for v in state.mask.values()) == round(0.75 * total)
    m, state, logs = _run("prunetrain", rounds=3, horizon=3, sparsity=0.8)
    assert logs[-1].metrics["mask_sparsity"] == pytest.approx(
        cubic_sparsity(2, 3, 0.5, 0.8), abs=0.01
    )


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
    m = methods.get("feddip")(ctx, horizon=10)
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
    p = {"horizon": 5, **params}
    with pytest.raises(FlkitError, match=match):
        methods.get("feddip")(_ctx(), **p)

"""Tests for flkit.projection (FedFV / STC-PA Algorithms 2-3): small examples computed by hand."""

import pytest
import torch

from flkit.projection import keep_count, project_external, project_internal, rescale_to_mean_norm
from flkit.utils import FlkitError


def mat(*rows):
    return torch.tensor(rows, dtype=torch.float64)


def test_keep_count_fedfv_rule():
    # m - ceil((m-1)(1-alpha)), none at alpha = 0
    assert [keep_count(10, a) for a in (0, 0.1, 0.15, 0.2, 0.5, 1.0)] == [0, 1, 2, 2, 5, 10]
    assert keep_count(1, 0.5) == 1 and keep_count(1, 0) == 0
    assert keep_count(11, 0.7) == 8  # 10 * 0.3 = 3 exactly (not 3.0000000000000004)


def test_internal_2d_by_hand():
    g = mat([1, 0], [-1, 1])
    losses = [0.1, 0.5]
    # alpha = 0 (nobody kept); order by loss: [0, 1]
    # h0: h0.g1 = -1 < 0 -> h0 = [1,0] - (-1/2)[-1,1] = [0.5, 0.5]
    # h1: h1.g0 = -1 < 0 -> h1 = [-1,1] - (-1/1)[1,0] = [0, 1]
    # mean = [0.25, 0.75]
    out, info = project_internal(g, losses, 0.0, return_info=True)
    assert torch.allclose(out, mat(0.25, 0.75))
    assert torch.allclose(info.projected, mat([0.5, 0.5], [0, 1]))
    assert info.kept == 0 and info.order == [0, 1] and info.projections == 2
    # alpha = 0.5: keep 2 - ceil(1 * 0.5) = 1 client, the highest loss (index 1), unprojected
    out, info = project_internal(g, losses, 0.5, return_info=True)
    assert info.kept == 1 and info.kept_indices == [1]
    assert torch.equal(info.projected[1], g[1])
    assert torch.allclose(out, mat(-0.25, 0.75))  # ([0.5,0.5] + [-1,1]) / 2


def test_internal_3d_by_hand_order_matters():
    # a = [1,0,0] loss .3 ; b = [-1,1,0] loss .1 ; c = [-1,-1,1] loss .2
    # -> order b, c, a = [1, 2, 0]
    g = mat([1, 0, 0], [-1, 1, 0], [-1, -1, 1])
    losses = torch.tensor([0.3, 0.1, 0.2])
    # h_a: vs b: dot -1 -> [1,0,0] + 1/2 [-1,1,0] = [.5,.5,0]; vs c (original): dot -1, |c|^2 = 3
    #      -> [.5,.5,0] + 1/3 [-1,-1,1] = [1/6, 1/6, 1/3]
    # h_b: vs c: dot 0 (no conflict); vs a: dot -1 -> [-1,1,0] + [1,0,0] = [0,1,0]
    #      (still conflicts with c: [0,1,0].c = -1 -- only the last j is guaranteed)
    # h_c: vs b: dot 0; vs a: dot -1 -> [-1,-1,1] + [1,0,0] = [0,-1,1]
    # mean = [1/6, 1/6, 4/3] / 3 = [1/18, 1/18, 4/9]
    out, info = project_internal(g, losses, 0.0, return_info=True)
    assert info.order == [1, 2, 0]
    assert torch.allclose(info.projected, mat([1 / 6, 1 / 6, 1 / 3], [0, 1, 0], [0, -1, 1]))
    assert torch.allclose(out, mat(1 / 18, 1 / 18, 4 / 9))
    assert info.last_conflict == {0: 2, 1: 0, 2: 0}
    # alpha = 0.1: keep 3 - ceil(2 * 0.9) = 1 -> a (highest loss) untouched
    # mean = ([1,0,0] + [0,1,0] + [0,-1,1]) / 3 = [1/3, 0, 1/3]
    assert torch.allclose(project_internal(g, losses, 0.1), mat(1 / 3, 0, 1 / 3))
    # alpha = 0.5: keep 3 - ceil(2 * 0.5) = 2 -> a and c untouched, only b projected
    # mean = ([1,0,0] + [0,1,0] + [-1,-1,1]) / 3 = [0, 0, 1/3]
    assert torch.allclose(project_internal(g, losses, 0.5), mat(0, 0, 1 / 3))


def test_internal_invariants_random():
    torch.manual_seed(0)
    m, d = 8, 25
    g = torch.randn(m, d, dtype=torch.float64)
    g[3] = 0.0  # a zero update (all-zero STC message)
    losses = torch.rand(m)
    out, info = project_internal(g, losses, 0.25, return_info=True)
    assert info.kept == 8 - 6  # ceil(7 * 0.75) = 6
    assert info.kept_indices == sorted(torch.argsort(losses)[-2:].tolist())
    for k in range(m):
        h = info.projected[k]
        if k in info.kept_indices:
            assert torch.equal(h, g[k])
        else:
            assert h.norm() <= g[k].norm() + 1e-12  # projection never grows the norm
            if k in info.last_conflict:
                assert torch.dot(h, g[info.last_conflict[k]]) >= -1e-10
    assert torch.allclose(out, info.projected.mean(0))
    assert torch.isfinite(out).all()


def test_alpha1_tau0_is_exactly_plain_mean():
    torch.manual_seed(1)
    g = torch.randn(10, 40)
    losses = torch.rand(10)
    hist = {i: (torch.randn(40), 3) for i in range(5)}
    out = project_internal(g, losses, 1.0)
    out = project_external(out, hist, t=4, tau=0)
    out = rescale_to_mean_norm(out, g)
    assert torch.equal(out, g.mean(0))  # STC-PA reduces exactly to STC


def test_rescale_to_mean_norm():
    g = mat([1, 0], [-1, 1])
    agg = project_internal(g, [0.1, 0.5], 0.0)  # [0.25, 0.75]
    out = rescale_to_mean_norm(agg, g)
    # plain mean = [0, 0.5] -> norm 0.5; direction of [0.25, 0.75]
    assert torch.allclose(out.norm(), torch.tensor(0.5, dtype=torch.float64))
    assert torch.allclose(out / out.norm(), agg / agg.norm())
    assert torch.equal(
        rescale_to_mean_norm(torch.zeros(2, dtype=torch.float64), g),
        torch.zeros(2, dtype=torch.float64),
    )


def test_external_by_hand():
    g = mat(1, 0)
    hist = {
        "c1": (mat(-1, 0.5), 3),  # t - 2
        "c2": (mat(-1, -1), 4),  # t - 1
        "c3": (mat(0, 1), 4),  # t - 1, dot = 0 -> not a conflict
        "c4": (mat(-5, 0), 5),  # current round: ignored by the paper variant
        "c5": (None, None),  # never participated
        "c6": (mat(-1, 0), 1),  # older than tau
    }
    # paper, i = 2 (round 3): g_con = c1, g.g_con = -1, |g_con|^2 = 1.25
    #   -> g = [1,0] + 0.8 [-1, .5] = [0.2, 0.4]
    # i = 1 (round 4): c2.g = -0.6 < 0 (in), c3.g = 0.4 (out); g_con = [-1,-1], |.|^2 = 2
    #   -> g = [0.2, 0.4] + 0.3 [-1,-1] = [-0.1, 0.1]
    out, info = project_external(g, hist, t=5, tau=2, return_info=True)
    assert torch.allclose(out, mat(-0.1, 0.1))
    assert info.rounds == [3, 4] and info.projections == 2
    assert info.conflicting_clients == ["c1", "c2"]
    assert torch.equal(g, mat(1, 0))  # input not modified
    # easyfl-later, i = 1 (round 4): c2 (dot -1) in, c3 (dot 0) out;
    # g = [1,0] + 0.5 [-1,-1] = [.5,-.5]
    # i = 0 (round 5): c4 dot -2.5; |c4|^2 = 25 -> g = [.5,-.5] + 0.1 [-5, 0] = [0, -0.5]
    out = project_external(g, hist, t=5, tau=2, variant="easyfl-later")
    assert torch.allclose(out, mat(0, -0.5))
    # not applied when t < tau or tau = 0
    assert torch.equal(project_external(g, hist, t=1, tau=2), g)
    assert torch.equal(project_external(g, hist, t=5, tau=0), g)


def test_bad_inputs():
    g = torch.randn(3, 4)
    for a in (-0.1, 1.1, float("nan"), "0.1"):
        with pytest.raises(FlkitError):
            project_internal(g, [1, 2, 3], a)
        with pytest.raises(FlkitError):
            keep_count(3, a)
    with pytest.raises(FlkitError):
        project_internal(g, [1, 2], 0.1)  # length mismatch
    with pytest.raises(FlkitError):
        project_internal(torch.zeros(0, 4), [], 0.1)  # no clients
    with pytest.raises(FlkitError):
        project_internal(torch.zeros(4), [1], 0.1)  # not [m, d]
    with pytest.raises(FlkitError):
        project_external(torch.zeros(4), {}, t=3, tau=-1)
    with pytest.raises(FlkitError):
        project_external(torch.zeros(4), {}, t=3, tau=1, variant="other")
    with pytest.raises(FlkitError):
        project_external(torch.zeros(4), {1: (torch.zeros(5), 2)}, t=3, tau=1)
    with pytest.raises(FlkitError):
        rescale_to_mean_norm(torch.zeros(4), torch.zeros(0, 4))
    with pytest.raises(FlkitError):
        rescale_to_mean_norm(torch.zeros(5), g)

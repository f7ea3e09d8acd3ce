"""Tests for flkit.compress: expectations computed by hand (or from the STC-PA paper)."""

import math

import pytest
import torch

from flkit.compress import (
    COUNTERS,
    DenseCodec,
    ErrorFeedback,
    STCCodec,
    TopKCodec,
    exact_position_bits,
    golomb_bstar,
    golomb_position_bits,
    make_codec,
    message_size,
    num_kept,
    stc,
    tensor_message_size,
    topk,
    traffic_table,
)
from flkit.utils import FlkitError


def t(*v):
    return torch.tensor(v, dtype=torch.float32)


def vgg11_star_shapes():
    """VGG11* of the STC paper: 8 conv 3x3 + 3 linear, no BN."""
    shapes = []
    plan = [
        (3, 32),
        (32, 64),
        (64, 128),
        (128, 128),
        (128, 128),
        (128, 128),
        (128, 128),
        (128, 128),
    ]
    for cin, cout in plan:
        shapes += [(cout, cin, 3, 3), (cout,)]
    shapes += [(128, 128), (128,), (128, 128), (128,), (10, 128), (10,)]
    return shapes


# ----------------------------------------------------------------------------- STC / top-k
def test_stc_hand_vector():
    # k = 2 of 4: keep -2 and 3, mu = (2 + 3) / 2 = 2.5
    assert torch.equal(stc(t(0.5, -2.0, 0.1, 3.0), 0.5), t(0, -2.5, 0, 2.5))


def test_stc_k_is_ceil_and_mu():
    x = t(1, -4, 2, 0, 0, 5, -3, 0, 0, 0.5)
    # n = 10, p = 0.25 -> k = ceil(2.5) = 3: keep 5, -4, -3 -> mu = 12/3 = 4
    out = stc(x, 0.25)
    assert torch.equal(out, t(0, -4, 0, 0, 0, 4, -4, 0, 0, 0))
    assert int((out != 0).sum()) == 3
    # tiny p -> k = max(ceil(n p), 1) = 1
    assert torch.equal(stc(t(1, -3, 2), 0.01), t(0, -3, 0))
    # float noise: 100 * 0.07 = 7.000000000000001 must keep 7, not 8
    assert num_kept(100, 0.07) == 7
    assert int((stc(torch.randn(100), 0.07) != 0).sum()) == 7


def test_stc_ties_keep_exactly_k():
    out = stc(torch.ones(10), 0.3)
    assert int((out != 0).sum()) == 3 and torch.all(out[out != 0] == 1.0)
    out = stc(t(2, -2, 2, -2, 1), 0.4)  # k = 2 among four |2|'s
    assert int((out != 0).sum()) == 2 and torch.all(out[out != 0].abs() == 2.0)


def test_stc_zeros_and_few_nonzeros_and_p1():
    assert torch.equal(stc(torch.zeros(7), 0.5), torch.zeros(7))
    # k = 2 but only one non-zero: mu = (4 + 0) / 2 = 2 (mean over the k kept entries)
    assert torch.equal(stc(t(0, 0, 0, 4), 0.5), t(0, 0, 0, 2))
    # p = 1 still ternarises: mu = (1 + 2 + 3) / 3 = 2
    assert torch.equal(stc(t(1, -2, 3), 1.0), t(2, -2, 2))


def test_stc_shape_dtype_and_stacked():
    x = torch.randn(4, 3, 5, dtype=torch.float64)
    out = stc(x, 0.1)
    assert out.shape == x.shape and out.dtype == x.dtype
    assert int((out != 0).sum()) == 6  # ceil(60 * 0.1)
    s = torch.tensor([[1.0, -4.0, 2.0, 0.0], [0.0, 0.0, 0.5, 0.1]])
    # row 0: keep -4, 2 -> mu 3; row 1: keep 0.5, 0.1 -> mu 0.3
    assert torch.allclose(
        stc(s, 0.5, stacked=True), torch.tensor([[0, -3, 3, 0], [0, 0, 0.3, 0.3]])
    )


def test_topk():
    x = t(1, -4, 2, 0, 0, 5, -3, 0, 0, 0.5)
    assert torch.equal(topk(x, 0.25), t(0, -4, 0, 0, 0, 5, -3, 0, 0, 0))
    assert int((topk(torch.ones(10), 0.3) != 0).sum()) == 3
    s = torch.tensor([[1.0, -4.0, 2.0, 0.0], [0.0, 0.0, 0.5, 0.1]])
    assert torch.equal(topk(s, 0.25, stacked=True), torch.tensor([[0, -4.0, 0, 0], [0, 0, 0.5, 0]]))


@pytest.mark.parametrize("p", [0, -0.1, 1.5, float("nan"), "0.1", None, True])
def test_bad_p(p):
    with pytest.raises(FlkitError):
        stc(torch.ones(3), p)
    with pytest.raises(FlkitError):
        topk(torch.ones(3), p)
    with pytest.raises(FlkitError):
        STCCodec(p)


def test_bad_inputs_misc():
    with pytest.raises(FlkitError):
        stc(torch.arange(5), 0.5)  # integer tensor
    with pytest.raises(FlkitError):
        STCCodec(0.1, counter="bogus")
    with pytest.raises(FlkitError):
        message_size("stc", 100, 5, p=0.1, counter="exact")  # no positions
    with pytest.raises(FlkitError):
        message_size("huffman", 10)
    with pytest.raises(FlkitError):
        message_size("stc", 10, 11, p=0.1)
    with pytest.raises(FlkitError):
        make_codec("stc")  # no p
    with pytest.raises(FlkitError):
        traffic_table(vgg11_star_shapes(), 0.1, counter="exact")
    with pytest.raises(FlkitError):
        traffic_table([], 0.1)
    with pytest.raises(FlkitError):
        exact_position_bits([3, 1], 0.1)  # not increasing
    with pytest.raises(FlkitError):
        STCCodec(0.1).encode({"a": torch.ones(2, 3), "b": torch.ones(3, 3)}, stacked=True)


# ----------------------------------------------------------------------------- Golomb
@pytest.mark.parametrize(
    "p,bstar,bpos", [(0.1, 3, 4.756), (0.05, 4, 5.786), (0.01, 6, 8.108), (0.0025, 8, 10.114)]
)
def test_golomb_spec_values(p, bstar, bpos):
    assert golomb_bstar(p) == bstar
    assert golomb_position_bits(p) == pytest.approx(bpos, abs=1e-3)


def test_golomb_dense_limit():
    assert golomb_bstar(1.0) == 0 and golomb_position_bits(1.0) == 1.0
    assert golomb_bstar(0.9) == 0  # formula would be negative: clamp to M = 1


def test_exact_position_bits_by_hand():
    # p = 0.1 -> b* = 3, M = 8. positions 0, 3, 20, 21, 40 -> gaps 1, 3, 17, 1, 19
    # quotients floor((d-1)/8) = 0, 0, 2, 0, 2; each gap costs q + 1 + 3 -> 4, 4, 6, 4, 6 = 24
    pos = [0, 3, 20, 21, 40]
    assert exact_position_bits(pos, 0.1) == 24
    mask = torch.zeros(50, dtype=torch.bool)
    mask[pos] = True
    assert exact_position_bits(mask, 0.1) == 24
    assert exact_position_bits(mask.float().reshape(5, 10), 0.1) == 24
    # p = 0.01 -> b* = 6, M = 64: all quotients 0 -> 5 * 7 = 35
    assert exact_position_bits(pos, 0.01) == 35
    assert exact_position_bits([], 0.1) == 0


@pytest.mark.parametrize("p", [0.1, 0.01])
def test_exact_counter_mean_matches_formula(p):
    g = torch.Generator().manual_seed(0)
    mask = torch.rand(3_000_000, generator=g) < p
    per_position = exact_position_bits(mask, p) / int(mask.sum())
    assert per_position == pytest.approx(golomb_position_bits(p), rel=0.01)


# ----------------------------------------------------------------------------- message sizes
def test_message_sizes_by_hand():
    assert message_size("dense", 100).bits == 3200
    # paper: k (b_pos(0.1) + 1) + 32 = 100 * 5.755825 + 32 = 607.58 -> 608
    ms = message_size("stc", 1000, 100, p=0.1, counter="paper")
    assert (ms.bits, ms.counter, ms.k) == (608, "paper", 100)
    # simulator: q = 101/1001, b* = 3, b_pos = 3 + 1/(1 - (1-q)^8); (b_pos + 2) per non-zero, no mu
    q = 101 / 1001
    expected = 100 * (3 + 1 / (1 - (1 - q) ** 8) + 2)  # = 674.53
    ms = message_size("stc", 1000, 100, counter="reference-simulator")
    assert ms.counter == "reference-simulator"
    assert ms.expected_bits == pytest.approx(expected) and ms.bits == math.ceil(expected) == 675
    # top-k: positions + 32-bit values (no sign bit, no mu)
    assert message_size("topk", 1000, 100, p=0.1, counter="paper").bits == math.ceil(
        100 * 36.755825
    )
    assert message_size("topk", 1000, 100, counter="reference-simulator").bits == math.ceil(
        100 * (3 + 1 / (1 - (1 - q) ** 8) + 1 + 32)
    )
    # exact: positions 0,3,20,21,40 (24 bits) + 5 signs + 32 for mu
    x = torch.zeros(50)
    x[[0, 3, 20, 21, 40]] = 1.0
    assert tensor_message_size("stc", x, 0.1, "exact").bits == 24 + 5 + 32
    # all-zero STC message: simulator 0 bits, paper only mu
    assert tensor_message_size("stc", torch.zeros(10), 0.1, "reference-simulator").bits == 0
    assert tensor_message_size("stc", torch.zeros(10), 0.1, "paper").bits == 32


def test_codecs_per_tensor_and_stacked():
    torch.manual_seed(0)
    tensors = {"w": torch.randn(20, 10), "b": torch.randn(20)}
    dec, bits = DenseCodec().encode(tensors)
    assert bits == 32 * 220 and torch.equal(dec["w"], tensors["w"])
    for counter in COUNTERS:
        codec = STCCodec(0.1, counter)
        dec, bits = codec.encode(tensors)
        assert torch.equal(dec["w"], stc(tensors["w"], 0.1)) and torch.equal(
            dec["b"], stc(tensors["b"], 0.1)
        )
        assert bits == sum(tensor_message_size("stc", dec[n], 0.1, counter).bits for n in dec)
        assert isinstance(bits, int)
        assert codec.name == "stc(p=0.1)" and counter in codec.describe()
    # paper counter by hand: w: k = 20 -> 20 * 5.755825 + 32 = 147.1 -> 148; b: k = 2 -> 43.5 -> 44
    assert STCCodec(0.1, "paper").encode(tensors)[1] == 148 + 44
    # stacked: K = 3 clients, each compressed separately
    stacked = {
        "w": torch.randn(3, 20, 10),
        "b": torch.randn(3, 20),
        "n": torch.ones(3, dtype=torch.long),
    }
    for codec in (STCCodec(0.1), TopKCodec(0.05, "paper"), DenseCodec()):
        dec, bits = codec.encode(stacked, stacked=True)
        assert isinstance(bits, list) and len(bits) == 3
        for i in range(3):
            d_i, b_i = codec.encode({n: v[i] for n, v in stacked.items()})
            assert b_i == bits[i]
            for n in stacked:
                assert torch.equal(d_i[n], dec[n][i])
    # integer buffers pass through at native width (int64: 64 bits)
    assert STCCodec(0.1).encode({"n": torch.ones(2, dtype=torch.long)})[1] == 128


# ----------------------------------------------------------------------------- error feedback
def test_error_feedback_by_hand():
    ef = ErrorFeedback()
    c = lambda d: {n: stc(x, 0.25) for n, x in d.items()}  # noqa: E731  k = 1 of 4
    # round 1: a = g = [1,-3,.5,0] -> send [0,-3,0,0], residual [1,0,.5,0]
    out = ef.step(7, {"x": t(1, -3, 0.5, 0)}, c)
    assert torch.equal(out["x"], t(0, -3, 0, 0)) and torch.equal(
        ef.residual(7)["x"], t(1, 0, 0.5, 0)
    )
    # round 2: a = [1,1,1,1] + [1,0,.5,0] = [2,1,1.5,1] -> send [2,0,0,0], residual [0,1,1.5,1]
    out = ef.step(7, {"x": t(1, 1, 1, 1)}, c)
    assert torch.equal(out["x"], t(2, 0, 0, 0)) and torch.equal(
        ef.residual(7)["x"], t(0, 1, 1.5, 1)
    )


def test_error_feedback_conservation_and_skipped_keys():
    torch.manual_seed(1)
    ef = ErrorFeedback(device="cpu")
    codec = STCCodec(0.1)
    keys = [0, 1, 2, "server"]
    sent = {k: torch.zeros(30, dtype=torch.float64) for k in keys}
    given = {k: torch.zeros(30, dtype=torch.float64) for k in keys}
    for rnd in range(12):
        active = [k for i, k in enumerate(keys) if (rnd + i) % 3 != 0]
        before = {k: ef.residual(k)["v"].clone() for k in keys if k not in active and k in ef}
        for k in active:
            g = torch.randn(30, dtype=torch.float64)
            out = ef.step(k, {"v": g}, codec)
            assert isinstance(ef.last_bits, int)
            assert int((out["v"] != 0).sum()) <= 3
            sent[k] += out["v"]
            given[k] += g
        for k, r in before.items():  # skipped keys keep their residual
            assert torch.equal(ef.residual(k)["v"], r)
    for k in keys:
        assert torch.allclose(sent[k] + ef.residual(k)["v"], given[k], atol=1e-12)
    assert ef.residual(0)["v"].device.type == "cpu"
    assert ef.memory_bytes() == 4 * 30 * 8


def test_error_feedback_stacked_matches_per_key():
    torch.manual_seed(2)
    a, b = ErrorFeedback(), ErrorFeedback()
    codec = STCCodec(0.2)
    for rnd in range(3):
        ids = [rnd, rnd + 1, 10]
        g = {"w": torch.randn(3, 4, 5), "b": torch.randn(3, 5)}
        out = a.step_stacked(ids, g, codec)
        assert isinstance(a.last_bits, list) and len(a.last_bits) == 3
        for i, cid in enumerate(ids):
            o = b.step(cid, {n: v[i] for n, v in g.items()}, codec)
            for n in g:
                assert torch.allclose(out[n][i], o[n], atol=1e-6)
    for cid in b.keys():
        for n in ("w", "b"):
            assert torch.allclose(a.residual(cid)[n], b.residual(cid)[n], atol=1e-6)
    with pytest.raises(FlkitError):
        a.step_stacked([1, 1], {"w": torch.zeros(2, 3)}, codec)
    with pytest.raises(FlkitError):
        a.step(10, {"other": torch.zeros(3)}, codec)  # tensor names changed


# ----------------------------------------------------------------------------- worked examples
def test_vgg11_star_traffic_worked_example():
    shapes = vgg11_star_shapes()
    assert sum(math.prod(s) for s in shapes) == 865_482
    tab = traffic_table(shapes, 0.1, "reference-simulator").set_index("method")
    assert tab.loc["FedAvg", "up_bits"] == 32 * 865_482 == 27_695_424  # 27.70 Mbit
    assert tab.loc["FedAvg", "up_bytes"] / 1e6 == pytest.approx(3.46, abs=0.005)  # 3.46 MB
    stc_bits = tab.loc["STC", "up_bits"]
    assert stc_bits / 1e6 == pytest.approx(0.585, abs=0.001)  # ~0.585 Mbit
    assert tab.loc["STC", "up_bytes"] / 1e3 == pytest.approx(73, abs=0.5)  # ~73 KB
    assert tab.loc["STC", "down_bits"] == stc_bits
    assert tab.loc["STC", "factor"] == pytest.approx(47.4, abs=0.05)
    assert tab.loc["STC", "counter"] == "reference-simulator"
    paper = traffic_table(shapes, 0.1, "paper").set_index("method")
    # per-tensor exact sum: 55.5; the asymptotic per-entry figure 32 / (0.1 * 5.756) = 55.6
    assert paper.loc["STC", "factor"] == pytest.approx(55.6, abs=0.15)
    assert 32 / (0.1 * (golomb_position_bits(0.1) + 1)) == pytest.approx(55.6, abs=0.01)
    assert paper.loc["STC", "counter"] == "paper"


def test_traffic_table_accepts_module_and_dict():
    net = torch.nn.Sequential(torch.nn.Linear(10, 5), torch.nn.Linear(5, 2))
    a = traffic_table(net, 0.1)
    b = traffic_table(
        {"0.weight": (5, 10), "0.bias": (5,), "1.weight": (2, 5), "1.bias": (2,)}, 0.1
    )
    assert a["up_bits"].tolist() == b["up_bits"].tolist()
    assert a.loc[0, "up_bits"] == 32 * 67

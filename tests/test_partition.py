"""flkit.data.partition: coverage, disjointness, sizes, skew vs alpha, determinism, validation;
plots."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

from flkit.data import partition
from flkit.utils import FlkitError

MIRROR = os.environ.get("FLKIT_MIRROR")
needs_mirror = pytest.mark.skipif(
    not MIRROR or not Path(MIRROR).is_dir(), reason="FLKIT_MIRROR not set"
)


def balanced_labels(per_class=600, classes=10, seed=0):
    """MNIST-sized label vector (60,000 by default) in a shuffled order."""
    y = np.repeat(np.arange(classes), per_class)
    return torch.as_tensor(np.random.default_rng(seed).permutation(y))


@pytest.fixture(scope="module")
def y60k():
    return balanced_labels(6000)


def flat(parts):
    return torch.cat(parts).sort().values


def mean_entropy(parts, y, c):
    counts = partition.label_counts(parts, y, c).double()
    p = counts / counts.sum(1, keepdim=True).clamp_min(1)
    return float(-(p * p.clamp_min(1e-300).log()).sum(1).mean())


# ------------------------------------------------------------------ coverage and sizes
def test_iid_covers_every_index_once(y60k):
    parts = partition.partition("iid", y60k, 100, seed=1)
    assert len(parts) == 100 and all(p.dtype == torch.int64 for p in parts)
    assert torch.equal(flat(parts), torch.arange(len(y60k)))
    assert {len(p) for p in parts} == {600}
    uneven = partition.partition("iid", torch.arange(10) % 2, 3, seed=0)
    assert sorted(len(p) for p in uneven) == [3, 3, 4]


def test_shards_mnist_sizes_and_coverage(y60k):
    parts = partition.partition("shards", y60k, 100, seed=0, shards_per_client=2)
    assert torch.equal(flat(parts), torch.arange(60000))
    assert all(len(p) == 600 for p in parts)
    classes = [y60k[p].unique().numel() for p in parts]
    assert max(classes) <= 2 and min(classes) >= 1  # 300-sample shards of 6000-sample classes
    # each client holds exactly 2 contiguous runs of the label-sorted order
    order = torch.argsort(y60k, stable=True)
    rank = torch.empty_like(order)
    rank[order] = torch.arange(len(order))
    for p in parts[:10]:
        r = rank[p].sort().values
        assert int((r[1:] - r[:-1] != 1).sum()) <= 1


@needs_mirror
def test_shards_on_real_mnist_give_600_per_client():
    from flkit import data

    y = data.load(
        "mnist", root="/nonexistent-flkit-root", mirror=MIRROR, device="cpu", download=False
    ).y_train
    parts = partition.partition("shards", y, 100, seed=0)
    assert [len(p) for p in parts] == [600] * 100 and torch.equal(flat(parts), torch.arange(60000))
    assert np.mean([y[p].unique().numel() for p in parts]) < 2.2


def test_dirichlet_classic_is_a_disjoint_cover_and_skew_grows_as_alpha_shrinks(y60k):
    lo = partition.partition("dirichlet", y60k, 50, seed=3, alpha=0.1)
    hi = partition.partition("dirichlet", y60k, 50, seed=3, alpha=10.0)
    for parts in (lo, hi):
        assert torch.equal(flat(parts), torch.arange(60000))
    assert mean_entropy(lo, y60k, 10) < mean_entropy(hi, y60k, 10)
    assert mean_entropy(hi, y60k, 10) > 0.9 * np.log(10)  # alpha=10: close to uniform labels
    mid = partition.partition("dirichlet", y60k, 50, seed=3, alpha=1.0)
    assert mean_entropy(lo, y60k, 10) < mean_entropy(mid, y60k, 10) < mean_entropy(hi, y60k, 10)


def test_dirichlet_min_samples(y60k):
    parts = partition.partition("dirichlet", y60k, 50, seed=0, alpha=0.5, min_samples=100)
    assert min(len(p) for p in parts) >= 100
    with pytest.raises(FlkitError, match="min_samples"):
        partition.partition(
            "dirichlet", torch.arange(20) % 2, 10, seed=0, alpha=0.01, min_samples=2, max_tries=3
        )


def test_dirichlet_fixed_size_recycles_samples(y60k):
    small = balanced_labels(100)  # 1,000 samples, 100 clients x 50 = 5,000 draws: recycling needed
    parts = partition.partition("dirichlet", small, 100, seed=0, alpha=0.1, samples_per_client=50)
    sizes = np.array([len(p) for p in parts])
    assert np.all(np.abs(sizes - 50) <= 5)  # round(p_c * 50) per class: totals differ by a few
    allidx = flat(parts)
    assert allidx.min() >= 0 and allidx.max() < 1000
    assert allidx.unique().numel() == 1000  # every sample used, and re-used
    # before the first recycle, samples are handed out without repetition
    first = torch.cat(parts[:10])
    assert first.unique().numel() == len(first)
    floor = partition.partition(
        "dirichlet", small, 20, seed=0, alpha=1.0, samples_per_client=50, rounding="floor"
    )
    assert all(len(p) <= 50 for p in floor)
    lo = partition.partition("dirichlet", y60k, 200, seed=1, alpha=0.1, samples_per_client=300)
    hi = partition.partition("dirichlet", y60k, 200, seed=1, alpha=10.0, samples_per_client=300)
    assert mean_entropy(lo, y60k, 10) < mean_entropy(hi, y60k, 10)
    # a class smaller than a request: repeats within the client instead of looping forever
    tiny = torch.tensor([0] * 3 + [1] * 100)
    parts = partition.partition("dirichlet", tiny, 5, seed=0, alpha=0.01, samples_per_client=40)
    assert all(len(p) >= 35 for p in parts)


def test_classes_per_client_exactly_two_labels():
    y = balanced_labels(500)
    parts = partition.partition("classes_per_client", y, 50, seed=0, classes=2)
    assert [y[p].unique().numel() for p in parts] == [2] * 50
    assert torch.equal(flat(parts), torch.arange(len(y)))  # disjoint, covers everything
    assert set(y[parts[0]].tolist()) == {0, 1} and set(y[parts[10]].tolist()) == {
        2,
        3,
    }  # FedDIP's order
    sizes = [len(p) for p in parts]
    assert max(sizes) - min(sizes) <= 2
    three = partition.partition("classes_per_client", y, 100, seed=0, classes=3)
    assert all(y[p].unique().numel() <= 3 for p in three)


def test_natural_groups():
    g = torch.tensor([5, 5, 7, 9, 7, 5, 9, 9, 1])
    y = torch.zeros(9, dtype=torch.long)
    parts = partition.partition("natural", y, None, seed=0, groups=g)
    assert [p.tolist() for p in parts] == [[8], [0, 1, 5], [2, 4], [3, 6, 7]]
    some = partition.partition("natural", y, 2, seed=0, groups=g)
    assert len(some) == 2 and all(g[p].unique().numel() == 1 for p in some)
    assert [p.tolist() for p in some] == [
        p.tolist() for p in partition.partition("natural", y, 2, seed=0, groups=g)
    ]
    with pytest.raises(FlkitError, match="groups"):
        partition.partition("natural", y, None, seed=0)
    with pytest.raises(FlkitError, match="num_clients=5"):
        partition.partition("natural", y, 5, seed=0, groups=g)


# ------------------------------------------------------------------ determinism
@pytest.mark.parametrize(
    "scheme, kw",
    [
        ("iid", {}),
        ("dirichlet", {"alpha": 0.5}),
        ("dirichlet", {"alpha": 0.5, "samples_per_client": 100}),
        ("shards", {}),
        ("classes_per_client", {}),
    ],
)
def test_same_seed_same_indices(scheme, kw):
    y = balanced_labels(200)
    a = partition.partition(scheme, y, 20, seed=7, **kw)
    b = partition.partition(scheme, y, 20, seed=7, **kw)
    c = partition.partition(scheme, y, 20, seed=8, **kw)
    assert all(torch.equal(u, v) for u, v in zip(a, b))
    assert any(not torch.equal(u, v) for u, v in zip(a, c))


def test_label_counts():
    y = torch.tensor([0, 1, 1, 2, 2, 2])
    counts = partition.label_counts([torch.tensor([0, 1]), torch.tensor([2, 3, 4, 5])], y, 4)
    assert counts.tolist() == [[1, 1, 0, 0], [0, 1, 3, 0]]


# ------------------------------------------------------------------ validation
@pytest.mark.parametrize(
    "args, kw, match",
    [
        (("dirichlet", 10), {"alpha": 0}, "alpha=0"),
        (("dirichlet", 10), {"alpha": -1.0}, "alpha=-1.0"),
        (("dirichlet", 10), {}, "alpha"),
        (("iid", 0), {}, "num_clients=0"),
        (("iid", 101), {}, "num_clients=101"),
        (("bogus", 10), {}, "iid"),
        (("shards", 7), {}, "14 equal shards"),
        (("shards", 10), {"shards_per_client": 0}, "shards_per_client=0"),
        (("classes_per_client", 2), {"classes": 2}, "num_clients"),
        (("classes_per_client", 10), {"classes": 11}, "classes=11"),
        (("iid", 10), {"alpha": 1}, "accepted"),
    ],
)
def test_bad_input_raises_flkit_error(args, kw, match):
    y = balanced_labels(10)  # 100 samples, 10 classes
    with pytest.raises(FlkitError, match=match):
        partition.partition(args[0], y, args[1], 0, **kw)


# ------------------------------------------------------------------ the label-distribution figure
def test_label_distribution_plot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from flkit.workbook import plots

    y = balanced_labels(100)
    parts = partition.partition("dirichlet", y, 30, seed=0, alpha=0.1)
    with plots.style():
        ax = plots.label_distribution(parts, y, 10, title="alpha = 0.1")
    img = ax.images[0].get_array()
    assert img.shape == (10, 30)
    assert np.array_equal(np.asarray(img), partition.label_counts(parts, y, 10).numpy().T)
    ax2 = plots.label_distribution(parts, y, 10, normalize=True, max_clients=5, colorbar=False)
    assert np.allclose(np.asarray(ax2.images[0].get_array()).sum(0), 1)
    plt.close("all")


def test_integer_arguments_follow_the_one_integer_rule():
    y = torch.arange(20) % 4
    # a NumPy integer counts as an integer, a bool or a float does not, bounds are inclusive
    assert len(partition.partition("iid", y, np.int64(4), seed=0)) == 4
    for bad in (True, 4.0, "4"):
        want = rf"num_clients={bad!r} must be an integer in \[1, inf\)"
        with pytest.raises(FlkitError, match=want):
            partition.partition("iid", y, bad, seed=0)
    # the high bound (4 classes) is allowed
    assert len(partition.partition("classes_per_client", y, 5, seed=0, classes=4)) == 5
    with pytest.raises(FlkitError, match=r"classes=5 is outside the accepted range \[1, 4\]"):
        partition.partition("classes_per_client", y, 5, seed=0, classes=5)


# ------------------------------------------------------------------ capped ("balanced") Dirichlet
def reference_dirichlet(y, k, seed, alpha, min_samples, cap, max_tries):
    """The label-Dirichlet loop written out in the style of the NIID-Bench / FedGen generators
    (lists, one draw per class in label order, a client at >= len(y) / k gets a zero share when
    capped), on the scheme's own random stream: the partition must match it index for index."""
    from flkit.utils import numpy_rng

    rng = numpy_rng(seed, "partition", "dirichlet")
    y = np.asarray(y)
    for _ in range(max_tries):
        batch = [[] for _ in range(k)]
        for c in sorted(set(y.tolist())):
            idx = rng.permutation(np.where(y == c)[0])
            p = rng.dirichlet([alpha] * k)
            if cap:
                p = np.array([q * (len(b) < len(y) / k) for q, b in zip(p, batch)])
                p = p / p.sum()
            cuts = (np.cumsum(p) * len(idx)).astype(int)[:-1]
            batch = [b + chunk.tolist() for b, chunk in zip(batch, np.split(idx, cuts))]
        if min(len(b) for b in batch) >= min_samples:
            return [sorted(b) for b in batch]
    return None


@pytest.mark.parametrize(
    "k, alpha, min_samples, cap, seed",
    [
        (30, 0.1, 5, False, 7),
        (40, 1.0, 20, False, 1),
        (30, 0.1, 5, True, 7),
        (40, 0.3, 20, True, 2),
    ],
)
def test_dirichlet_matches_the_reference_loop(k, alpha, min_samples, cap, seed):
    y = balanced_labels(300)  # 3,000 samples
    kw = {"cap": cap} if cap else {}  # the default must stay the plain split
    parts = partition.partition("dirichlet", y, k, seed, alpha=alpha, min_samples=min_samples, **kw)
    want = reference_dirichlet(y.numpy(), k, seed, alpha, min_samples, cap, 1000)
    assert [p.tolist() for p in parts] == want


@pytest.mark.slow
def test_capped_dirichlet_makes_160_clients_at_alpha_01_feasible(y60k):
    # plain: about 8 of 160 clients end below 20 per draw, so 50 redraws find no valid split
    with pytest.raises(FlkitError, match="max_tries=50 .*min_samples=20.*cap=True"):
        partition.partition("dirichlet", y60k, 160, seed=0, alpha=0.1, min_samples=20, max_tries=50)
    parts = partition.partition(
        "dirichlet", y60k, 160, seed=0, alpha=0.1, min_samples=20, cap=True, max_tries=20000
    )
    assert len(parts) == 160 and min(len(p) for p in parts) >= 20
    assert torch.equal(flat(parts), torch.arange(60000))  # disjoint and covers every sample
    # the label skew is kept: one class makes most of a client's data (0.1 of it when iid)
    counts = partition.label_counts(parts, y60k, 10).double()
    assert (counts.max(1).values / counts.sum(1)).mean() > 0.5
    assert mean_entropy(parts, y60k, 10) < 0.5 * np.log(10)


@pytest.mark.parametrize("bad", [1, 0, "yes", None, 1.0])
def test_dirichlet_cap_must_be_a_bool(bad):
    with pytest.raises(FlkitError, match=rf"cap={bad!r} must be a bool; accepted: True or False"):
        partition.partition("dirichlet", balanced_labels(10), 5, 0, alpha=0.5, cap=bad)
    with pytest.raises(FlkitError, match="samples_per_client"):
        partition.partition(
            "dirichlet", balanced_labels(10), 5, 0, alpha=0.5, samples_per_client=10, cap=True
        )

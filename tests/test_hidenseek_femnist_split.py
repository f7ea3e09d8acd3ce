"""FEMNIST's local test parts follow LEAF's per-writer split (a random 10 % of each writer's
samples), not a per-class split that drops every class a writer has 5 or fewer samples of."""

import numpy as np
import pytest
import torch

from flkit.data.partition import local_split, writer_split
from flkit.utils import FlkitError


def _writer():
    """A hand-made writer: 10 digits x 5 samples, 20 letters x 2 samples (90 samples)."""
    y = [c for c in range(10) for _ in range(5)] + [10 + c for c in range(20) for _ in range(2)]
    return torch.tensor(y)


def test_writer_split_sizes_and_disjoint_union():
    y = _writer()
    parts = [torch.arange(90), torch.arange(3), torch.arange(1), torch.arange(2)]
    train, test = writer_split(parts, y, 0.1, seed=0)
    # LEAF: max(1, int(0.9 n)) training samples, the rest test
    assert [len(t) for t in train] == [81, 2, 1, 1]
    assert [len(t) for t in test] == [9, 1, 0, 1]
    for p, a, b in zip(parts, train, test):
        assert sorted(torch.cat([a, b]).tolist()) == sorted(p.tolist())
    assert writer_split(parts, y, 0.1, seed=0)[1][0].tolist() == test[0].tolist()  # seeded


def test_letters_reach_the_test_split_in_proportion():
    y = _writer()
    # per class (round(0.1 * 5) = 0, round(0.1 * 2) = 0): nothing reaches the test part
    assert len(local_split([torch.arange(90)], y, 0.1, seed=0)[1][0]) == 0
    # per writer: over many seeded splits every class appears, letters at their share 40/90
    counts = np.zeros(30)
    for seed in range(400):
        _, test = writer_split([torch.arange(90)], y, 0.1, seed=seed)
        counts += np.bincount(y[test[0]].numpy(), minlength=30)
    assert (counts > 0).all()
    share = counts[10:].sum() / counts.sum()
    assert share == pytest.approx(40 / 90, abs=0.03)


def test_writer_split_bad_fraction():
    with pytest.raises(FlkitError, match="test_frac"):
        writer_split([torch.arange(4)], torch.zeros(4), 1.0, seed=0)

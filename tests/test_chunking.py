"""The engine's chunk size (how many clients one wide step trains) is fixed by the run's model and
batch shape, never by the machine's free memory (issue: results must not depend on free memory).

Chunking is not bit-exact (a grouped convolution over 10 clients and over 1 rounds differently), so
the only way float results can be machine-independent is a chunk that is a function of the config.
"""

from __future__ import annotations

import os

import pytest
import torch

from flkit import models
from flkit.engine import LocalSpec, train, train_clients
from flkit.state import broadcast_state, model_state


def _clients(k=10, n=60):
    torch.manual_seed(0)
    model = models.build("cnn3_mnist", num_classes=10, in_channels=1)
    x = torch.randn(k * n, 1, 28, 28)
    y = torch.randint(0, 10, (k * n,))
    parts = [torch.arange(i * n, (i + 1) * n) for i in range(k)]
    return model, broadcast_state(model_state(model), k), x, y, parts


def _train(model, start, x, y, parts, chunk_size=None):
    spec = LocalSpec(lr=0.05, batch_size=20, epochs=1)
    return train_clients(
        model, start, x, y, parts, spec, list(range(len(parts))), backend="wide",
        chunk_size=chunk_size,
    ).state  # fmt: skip


def _pretend_free_memory(monkeypatch, nbytes):
    """Make every free-memory query of the process answer `nbytes` (RAM and GPU)."""
    real = os.sysconf
    page = real("SC_PAGE_SIZE")

    def sysconf(name):
        return nbytes // page if name == "SC_AVPHYS_PAGES" else real(name)

    monkeypatch.setattr(os, "sysconf", sysconf)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda *a, **k: (nbytes, nbytes))


def test_chunks_compute_the_same_maths():
    # any chunk runs the same maths; the floats differ (up to 4e-5 on this model, measured on the
    # CPU), which is why the default chunk must not follow the machine
    model, start, x, y, parts = _clients()
    whole = _train(model, start, x, y, parts, chunk_size=10)
    single = _train(model, start, x, y, parts, chunk_size=1)
    for n in whole:
        torch.testing.assert_close(whole[n], single[n], rtol=1e-3, atol=1e-3)  # same maths


@pytest.mark.parametrize("free", [64 << 20, 8 << 30])
def test_default_chunk_ignores_free_memory(monkeypatch, free):
    # 64 MiB free allows ~2 cnn3_mnist clients per chunk under a free-memory rule, 8 GiB all 10:
    # the trained weights must be bit-identical to those of a whole-round chunk either way
    model, start, x, y, parts = _clients()
    reference = _train(model, start, x, y, parts, chunk_size=10)
    _pretend_free_memory(monkeypatch, free)
    got = _train(model, start, x, y, parts)
    for n in reference:
        assert torch.equal(got[n], reference[n]), n


def test_auto_chunk_is_a_function_of_the_shapes(monkeypatch):
    model = models.build("cnn3_mnist", num_classes=10, in_channels=1)
    before = train.auto_chunk(model, 100, 50, (1, 28, 28))

    def boom(*a, **k):
        raise AssertionError("auto_chunk queried the machine's free memory")

    monkeypatch.setattr(torch.cuda, "mem_get_info", boom)
    monkeypatch.setattr(os, "sysconf", boom)
    assert train.auto_chunk(model, 100, 50, (1, 28, 28)) == before
    # hand count: 130,890 parameters x 4 copies + 64 x 50 x 784 activations, 4 bytes each =
    # 12,128,864 bytes per client; 4 GiB / that = 354 clients, so all 100 of a round fit
    assert before == 100
    assert train.auto_chunk(model, 1000, 50, (1, 28, 28)) == (4 << 30) // 12_128_864 == 354

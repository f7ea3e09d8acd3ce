"""The STC ternarisation exercise checker: right, wrong with the right explanation, and an
untouched stub that is "not attempted yet", never "right"."""

from __future__ import annotations

import pytest
import torch

from flkit.papers.stc_projection import exercise as ex
from flkit.utils import FlkitError


def test_solution_by_hand():
    # k = ceil(5 * 0.4) = 2: keep 4 and -3, mu = 3.5
    x = torch.tensor([1.0, 4.0, -3.0, 0.5, 2.0])
    assert torch.equal(ex.solution(x, 0.4), torch.tensor([0.0, 3.5, -3.5, 0.0, 0.0]))


def test_solution_passes_every_case(capsys):
    res = ex.check_ternarize(ex.solution)
    assert res.passed and res.attempted and len(res.cases) == len(ex.cases())
    assert "All cases agree" in capsys.readouterr().out


def test_typical_mistakes_are_explained():
    res = ex.check_ternarize(ex.buggy_mean_over_all, verbose=False)
    assert not res.passed and not res.cases[0][1]
    assert "μ" in res.cases[0][2]
    ties = dict(
        (name, (ok, msg))
        for name, ok, msg in ex.check_ternarize(ex.buggy_threshold, verbose=False).cases
    )
    assert ties["ties at the threshold"][0] is False


def test_untouched_stub_is_not_attempted(capsys):
    def stub(x, p):
        raise NotImplementedError

    res = ex.check_ternarize(stub)
    out = capsys.readouterr().out
    assert not res and not res.attempted and res.cases == []
    assert "not attempted yet" in out and "right" not in out and "agree" not in out


def test_partly_written_function_still_gets_verdicts():
    def half(x, p):
        if x.numel() == 1:
            raise NotImplementedError
        return ex.solution(x, p)

    res = ex.check_ternarize(half, verbose=False)
    assert res.attempted and not res.passed
    assert [n for n, ok, _ in res.cases if not ok] == ["single entry"]


def test_not_a_function():
    with pytest.raises(FlkitError, match="function"):
        ex.check_ternarize(42)

"""The FedAST exercise checker: right, wrong with the right hint, and never "right" untouched."""

from __future__ import annotations

import math

import torch

from flkit.papers.fedast import exercise as ex


def test_reference_by_hand():
    # u = (1, 0), (3, 0): mean (2, 0); Σ||u - ū||² = 1 + 1 = 2; K ||ū||² = 2 · 4 = 8
    assert ex.reference_solution([torch.tensor([1.0, 0]), torch.tensor([3.0, 0])]) == 0.25
    assert ex.reference_solution([torch.ones(3)]) == 0.0
    assert math.isinf(ex.reference_solution([torch.ones(3), -torch.ones(3)]))


def test_stub_is_not_attempted(capsys):
    def stub(updates):
        raise NotImplementedError

    assert ex.check_dispersion(stub) is None
    out = capsys.readouterr().out
    assert "not attempted yet" in out and "right" not in out


def test_right_and_wrong_answers(capsys):
    assert ex.check_dispersion(ex.reference_solution) is True
    assert "right" in capsys.readouterr().out

    def no_k(updates):  # forgets the 1/K
        x = torch.stack(updates).double()
        m = x.mean(0)
        return float(((x - m) ** 2).sum() / (m @ m)) if float(m @ m) else math.inf

    assert ex.check_dispersion(no_k) is False
    assert "factor K" in capsys.readouterr().out

    def crashes(updates):
        return 1 / 0

    assert ex.check_dispersion(crashes) is False
    assert "ZeroDivisionError" in capsys.readouterr().out

"""Run folders as the run-cache tests need them: a run stopped in a round after its checkpoint,
files of a finished run changed by hand, and FedAvg's rounds watched while a run trains (counted,
or refused). The finished tiny run they start from is trained once per session
(`tiny_run` and `finished_tiny_run` in conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flkit import methods, store
from flkit.experiment import RunConfig, run


# ------------------------------------------------------------------------------- watched rounds
def _fedavg_aggregate(monkeypatch, before_round) -> None:
    """FedAvg's aggregate with ``before_round(rnd)`` called first, for this test only."""
    cls = methods.get("fedavg")
    orig = cls.aggregate

    def watched(self, state, updates, rnd):
        before_round(rnd)
        return orig(self, state, updates, rnd)

    monkeypatch.setattr(cls, "aggregate", watched)


def rounds_trained(monkeypatch) -> list[int]:
    """The list every FedAvg round trained from now on appends its number to."""
    rounds: list[int] = []
    _fedavg_aggregate(monkeypatch, rounds.append)
    return rounds


def no_round_trained(monkeypatch) -> None:
    """From now on a FedAvg round that trains fails the test: the run must be served or refused."""
    _fedavg_aggregate(monkeypatch, lambda rnd: pytest.fail(f"round {rnd} was trained"))


def stopped_in_round(
    cfg: RunConfig, root: Path, monkeypatch, stop: int = 3, checkpoint_every: int = 2
) -> Path:
    """``cfg`` run under ``root`` and stopped (KeyboardInterrupt) in round ``stop``, after the
    checkpoint of round ``stop - 1``; its folder, the only one under ``root`` holding a
    checkpoint. Rounds train normally again afterwards."""
    with monkeypatch.context() as patch:

        def stop_here(rnd):
            if rnd == stop:
                raise KeyboardInterrupt("simulated crash")

        _fedavg_aggregate(patch, stop_here)
        with pytest.raises(KeyboardInterrupt):
            run(cfg, out_dir=root, progress=False, checkpoint_every=checkpoint_every)
    # found by its checkpoint, not by run_folder: a config whose backend is "auto" is named by
    # the backend the run measured
    (folder,) = [p for p in root.iterdir() if (p / store.CHECKPOINT).is_file()]
    assert not (folder / store.DONE).exists()
    return folder


# ------------------------------------------------------------------------- files changed by hand
def edit_config(path: Path) -> None:
    """config.json with another learning rate: a valid config of as many rounds, not the sealed
    one."""
    key = json.loads(path.read_text())
    key["lr"] = 0.5
    path.write_text(json.dumps(key))


def keep_rows(path: Path, rows: int) -> None:
    """A csv cut to its header and first ``rows`` rows: still well-formed, too short."""
    path.write_text("".join(path.read_text().splitlines(keepends=True)[: rows + 1]))


def cut_in_half(path: Path) -> None:
    """A file cut to its first half of bytes."""
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])

"""benchmarks/packing.py: the packing factor from hand-made timings, the run it is measured on,
and on the CPU a measurement end to end, one notebook's failure leaving the next measured."""

import importlib
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from flkit.workbook import presets

ROOT = Path(__file__).resolve().parents[1]


def _packing():
    # imported by its name, as gpu_check does: its workers' function is found by it in a child
    if str(ROOT / "benchmarks") not in sys.path:
        sys.path.insert(0, str(ROOT / "benchmarks"))
    return importlib.import_module("packing")


def test_the_factor_is_rounds_per_second_packed_over_alone_from_the_fastest_of_each():
    pk = _packing()
    # one run alone: n rounds in 1.0 s at best; 4 packed: 4 n rounds in 2.0 s at best
    assert pk.factor(4, [1.2, 1.0, 1.1], [2.5, 2.0, 2.2]) == pytest.approx(4 * 1.0 / 2.0)
    assert pk.factor(2, [1.0], [2.0]) == pytest.approx(1.0)  # packing gains nothing
    with pytest.raises(ValueError):
        pk.factor(2, [], [1.0])


def test_a_timed_piece_lasts_about_the_target_within_bounds():
    pk = _packing()
    assert pk.rounds_for(0.05, False) == round(pk.TARGET_S / 0.05)
    assert pk.rounds_for(10.0, False) == 3  # a slow round: still three
    assert pk.rounds_for(1e-5, False) == 50  # a fast one: at most fifty
    assert pk.rounds_for(0.05, True) == 2


def test_the_measured_run_is_the_packable_kind_with_the_most_rounds(monkeypatch):
    pk = _packing()
    import paper_cost

    def run(key, rounds, name):
        return SimpleNamespace(key=key, rounds=rounds, name=name)

    runs = [run("a", 10, "a1"), run("b", 5, "b1"), run("b", 5, "b2"), run("b", 5, "b3")]
    runs.append(run("c", 30, "c1"))  # the most rounds, but timed: the pool runs it alone
    monkeypatch.setattr(paper_cost, "notebook_runs", lambda nb, p: runs)
    monkeypatch.setattr(paper_cost, "notebook_timed", lambda nb, p: {"c1"})
    monkeypatch.setattr(paper_cost, "probe_key", lambda c: c.key)
    monkeypatch.setattr("flkit.preset_runs.identity", lambda c: c.name)
    assert pk.probe_run("00_fl_primer", None).name == "b1"
    assert pk.probe_run("03_fedast", None) is None  # simulations: not engine runs


@pytest.mark.slow
def test_a_cpu_measurement_runs_end_to_end_past_a_failing_notebook(monkeypatch):
    pk = _packing()
    real = pk.probe_run

    def probe_run(nb, preset):
        cfg = real(nb, preset)
        if nb == "00_fl_primer":  # a run whose build fails in the workers
            return cfg.replace(dataset_kwargs={"no_such_option": 1})
        return cfg

    monkeypatch.setattr(pk, "probe_run", probe_run)
    names = ["00_fl_primer", "03_fedast", "02_feddip"]
    out = pk.measure("cpu", True, time.time() + 300, names)
    bad, sim, ok = (out["notebooks"][n] for n in names)
    assert "no_such_option" in bad["error"] and "factor" not in bad
    assert "not measured" in sim["error"]
    assert ok["k"] == 2 and ok["threads"] == 1 and ok["rounds"] == 2
    assert len(ok["alone_s"]) == len(ok["packed_s"]) == 1
    assert min(ok["alone_s"]) > 0 and min(ok["packed_s"]) > 0
    assert ok["factor"] == pytest.approx(2 * ok["alone_s"][0] / ok["packed_s"][0])
    assert (ok["method"], ok["dataset"]) == (
        pk.probe_run("02_feddip", presets.load("02_feddip", "smoke")).method,
        "fmnist",
    )


class _Dies:
    """Unpickled in a worker, ends its process at once (as a kill for memory would)."""

    def __reduce__(self):
        import os

        return (os._exit, (3,))


@pytest.mark.slow
def test_a_worker_that_dies_is_named_at_once_not_waited_for():
    pk = _packing()
    crew = pk._Crew(2, "cpu", 1, True)
    try:
        t0 = time.time()
        # the first poll that finds a worker gone names those gone by then: one or both
        with pytest.raises(RuntimeError, match=r"ended without a word \(exit codes [01]: 3"):
            crew.build(_Dies(), timeout=120)
        assert time.time() - t0 < 60  # not the whole timeout
    finally:
        crew.close()

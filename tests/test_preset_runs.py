"""One preset vocabulary (flkit/preset_runs.py): ``from_preset`` reads a preset table's keys named
as RunConfig fields into a RunConfig as the studies did by hand, every paper folder lists its
notebook's runs with ``study.runs(preset, seeds)``, and those lists hold the very configs the
studies built before (the repr of every config of the `cpu` presets, recorded before
``from_preset`` replaced the studies' field-by-field copies:
tests/fixtures/run_configs_cpu.json)."""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import json
import re
import shutil
from pathlib import Path

import pytest

from flkit.experiment import RunConfig
from flkit.preset_runs import DATASET_KEYS, distinct, from_preset, seeds_of, use_threads
from flkit.utils import FlkitError
from flkit.workbook import presets

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "run_configs_cpu.json"
NOTEBOOKS = tuple(presets.notebooks())


def _study(nb: str):
    return importlib.import_module(f"flkit.papers.{nb.split('_', 1)[1]}.study")


def test_from_preset_reads_fields_and_the_prefixed_part():
    preset = {
        "backend": "wide",
        "num_clients": 40,
        "clients_per_round": 4,
        "local_epochs": 1,
        "lr": 1,  # a real: always a float, as the studies cast it
        "seeds": 3,  # names no field: not read
        "mnist_rounds": 7,  # the part's keys, over the shared ones
        "mnist_local_epochs": 2,
        "mnist_train_subset": 480,
        "cifar10_rounds": 99,  # another part's: not read
        "test_subset": 0,  # 0: the whole split, left out
    }
    cfg = from_preset(
        preset, "mnist_", dataset="mnist", model="mlp_mnist", dataset_kwargs={"normalize": "none"}
    )
    hand = RunConfig(
        backend="wide",
        dataset="mnist",
        model="mlp_mnist",
        num_clients=40,
        clients_per_round=4,
        local_epochs=2,
        lr=1.0,
        rounds=7,
        dataset_kwargs={"normalize": "none", "train_subset": 480},
    )
    assert repr(cfg) == repr(hand)
    assert isinstance(cfg.lr, float)


def test_from_preset_reads_no_key_in_other_words_than_the_fields():
    """A preset key is read only under its field's own name: ``per_round`` or ``mnist_epochs``
    set nothing, so the config keeps RunConfig's defaults."""
    other_words = {"clients": 40, "per_round": 4, "epochs": 3, "subset": 480}
    prefixed = {f"mnist_{k}": v for k, v in other_words.items()}
    assert repr(from_preset(other_words)) == repr(RunConfig())
    assert repr(from_preset(prefixed, "mnist_")) == repr(RunConfig())


def test_from_preset_given_fields_win():
    cfg = from_preset({"rounds": 5, "lr": 0.1}, rounds=3, lr=0.5)
    assert (cfg.rounds, cfg.lr) == (3, 0.5)


def test_seeds_of_counts_from_the_notebook_seed_under_the_papers_key():
    assert seeds_of({"seeds": 3}, 5) == [5, 6, 7]
    assert seeds_of({"num_seeds": 2, "seeds": 9}, 0, key="num_seeds") == [0, 1]
    with pytest.raises(FlkitError, match=r"num_seeds=0 in the preset; accepted: an integer >= 1"):
        seeds_of({"num_seeds": 0}, 0, key="num_seeds")


@pytest.mark.parametrize("nb", ["01_stc_projection", "02_feddip", "03_fedast", "04_hidenseek"])
def test_every_paper_counts_its_seeds_with_the_one_helper(nb):
    study = _study(nb)
    p = presets.load(nb, "cpu")
    key = "num_seeds" if nb == "03_fedast" else "seeds"
    mine = study.seeds(p, 4) if nb == "04_hidenseek" else study.seeds_of(p, 4)
    assert mine == list(range(4, 4 + int(p[key])))


def test_use_threads_pins_the_presets_count_and_zero_keeps_it():
    import torch

    before = torch.get_num_threads()
    try:
        torch.set_num_threads(3)
        assert use_threads({"threads": 0}) == 3
        assert use_threads({"threads": 1}) == 1 and torch.get_num_threads() == 1
        with pytest.raises(FlkitError, match=r"threads=True in the preset; accepted: 0"):
            use_threads({"threads": True})
    finally:
        torch.set_num_threads(before)


def test_distinct_keeps_the_first_of_equal_runs():
    a = RunConfig(partition="dirichlet", partition_kwargs={"alpha": 0.1, "min_samples": 2})
    same = RunConfig(partition="dirichlet", partition_kwargs={"min_samples": 2, "alpha": 0.1})
    b = a.replace(seed=1)
    assert distinct([a, b, same, b]) == [a, b]
    sim = ({"method": "fedast_s", "tasks": []}, 0)
    assert distinct([sim, ({"tasks": [], "method": "fedast_s"}, 0), (sim[0], 1)]) == [
        sim,
        (sim[0], 1),
    ]


@pytest.mark.parametrize("nb", [n for n in NOTEBOOKS if n != "03_fedast"])
def test_cpu_configs_are_the_ones_the_studies_built_before(nb):
    """Every config of the `cpu` preset, seed 0, has the repr (fields, values, types, dict order)
    it had when each study copied the preset keys into RunConfig by hand. (03's runs are FedAST
    simulations, not RunConfigs: its configs are not built from_preset.)"""
    recorded = json.loads(FIXTURE.read_text(encoding="utf-8"))[nb]
    now = [repr(c) for c in _study(nb).runs(presets.load(nb, "cpu"), [0])]
    assert now == recorded


@pytest.mark.parametrize("nb", NOTEBOOKS)
def test_every_paper_lists_its_runs_once_per_notebook_seed(nb):
    study = _study(nb)
    p = presets.load(nb, "smoke")
    one, two = study.runs(p, [0]), study.runs(p, [0, 1])
    assert one and len(distinct(one)) == len(one)
    assert two[: len(one)] == one  # seed 0's runs first, then what seed 1 adds
    assert len(two) > len(one)


def _paper_cost():
    path = ROOT / "benchmarks" / "paper_cost.py"
    spec = importlib.util.spec_from_file_location("paper_cost_for_runs", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("nb", NOTEBOOKS)
def test_paper_cost_costs_the_runs_the_study_lists(nb):
    p = presets.load(nb, "paper")
    costed = _paper_cost().notebook_runs(nb, p)
    listed = _study(nb).runs(p, [0])
    if nb == "03_fedast":  # each simulation (config, seed) with the horizon it is costed for
        assert [c for c, _ in costed] == [c for c, _ in listed]
    else:
        assert costed == listed


# ------------------------------------------------------------------ every preset key is read
#: keys read by the shared code for every paper (``use_threads``, the preset loader's own keys)
_SHARED_SOURCES = ("flkit/preset_runs.py", "flkit/workbook/presets.py")
_FIELDS = {f.name for f in dataclasses.fields(RunConfig)} | set(DATASET_KEYS)


def _source(folder: Path, notebook: str) -> str:
    """The paper folder's code, its notebook's cells and the shared preset code, as one text."""
    parts = [p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.py"))]
    parts += [(ROOT / s).read_text(encoding="utf-8") for s in _SHARED_SOURCES]
    nb = ROOT / "notebooks" / notebook
    if nb.exists():
        cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
        parts += ["".join(c["source"]) for c in cells]
    return "\n".join(parts)


def unread_keys(preset_file: Path) -> list[str]:
    """Keys of ``preset_file`` that nothing reads: not a RunConfig field (alone or behind a
    part's prefix, which ``from_preset`` reads), not quoted in the paper folder's code, its
    notebook or the shared preset code, and matched by none of their f-strings (``f"{method}_lr"``
    reads ``fedmask_lr``). Such a key is a misspelling that would be ignored without a word."""
    data = presets.validate_file(preset_file)
    text = _source(preset_file.parent, data["meta"].get("notebook", ""))
    quoted = set(re.findall(r"""["']([A-Za-z0-9_]+)["']""", text))
    # a key built by an f-string: the string is a key's shape, with a literal part to match
    shapes = re.findall(r"""\bf["']([A-Za-z0-9_]*(?:\{[^}"'\n]*\}[A-Za-z0-9_]*)+)["']""", text)
    built = [
        re.compile(re.sub(r"\\\{[^}]*\\\}", "[A-Za-z0-9_]+", re.escape(s)) + "$")
        for s in shapes
        if len(re.sub(r"\{[^}]*\}", "", s)) >= 3
    ]
    out = []
    for key in sorted(set().union(*(set(t) for t in data["presets"].values()))):
        tail = [key[i + 1 :] for i, c in enumerate(key) if c == "_"]
        if key in _FIELDS or any(t in _FIELDS for t in tail) or key in quoted:
            continue
        if not any(p.match(key) for p in built):
            out.append(key)
    return out


@pytest.mark.parametrize("path", presets.paper_presets(), ids=lambda p: p.parent.name)
def test_every_preset_key_is_read(path):
    assert unread_keys(path) == []


def test_a_misspelled_key_is_reported(tmp_path):
    # a new paper's preset with num_clients written num_client: from_preset reads no such key
    folder = tmp_path / "paper"
    shutil.copytree(ROOT / "flkit" / "papers" / "_template", folder)
    text = (folder / "preset.toml").read_text(encoding="utf-8")
    text = re.sub(r"^(\[(?:smoke|cpu|paper)\][^\n]*\n)", r"\1num_client = 5\n", text, flags=re.M)
    (folder / "preset.toml").write_text(text, encoding="utf-8")
    assert unread_keys(folder / "preset.toml") == ["num_client"]
    assert "num_client" not in from_preset({"num_client": 5}, rounds=1).to_dict()

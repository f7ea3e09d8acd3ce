"""Presets: every preset file is valid, and load() resolves, overrides and rejects as documented."""

from __future__ import annotations

from pathlib import Path

import pytest

from flkit.utils import FlkitError
from flkit.workbook import presets

ROOT = Path(__file__).resolve().parent.parent
FIXTURE_PRESETS = Path(__file__).resolve().parent / "fixtures" / "presets"
REAL_FILES = presets.paper_presets()
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.fixture
def fixtures_path(monkeypatch):
    monkeypatch.setenv("FLKIT_PRESET_PATH", str(FIXTURE_PRESETS))
    monkeypatch.delenv("FLKIT_PRESET", raising=False)


# ------------------------------------------------------------------ the real preset files


@pytest.mark.parametrize(
    "path",
    REAL_FILES + sorted(FIXTURE_PRESETS.glob("*.toml")),
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_every_preset_file_is_valid(path):
    data = presets.validate_file(path)  # same keys and types in every preset
    assert set(presets.REQUIRED) <= set(data["presets"])
    keys = set(data["presets"]["smoke"])
    for name, table in data["presets"].items():
        assert set(table) == keys, name


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.parent.name)
def test_every_preset_file_has_its_notebook(path, monkeypatch):
    monkeypatch.delenv("FLKIT_PRESET_PATH", raising=False)
    name = presets.validate_file(path)["meta"]["notebook"]
    nb = ROOT / "notebooks" / name
    assert nb.is_file(), f"{path} names notebook {nb}, which does not exist"
    assert name == f"{name[:2]}_{path.parent.name}.ipynb", (
        "notebook NN_<slug> sits in papers/<slug>"
    )
    assert presets.preset_file(name) == path


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_notebook_has_a_preset_file(path, monkeypatch):
    monkeypatch.delenv("FLKIT_PRESET_PATH", raising=False)
    by_file = {presets.meta(n)["notebook"]: n for n in presets.notebooks()}
    assert path.name in by_file, (
        f"notebooks/{path.name} has no preset file; add "
        f"flkit/papers/{path.stem[3:]}/preset.toml with [smoke], [cpu], [paper]"
    )


# ------------------------------------------------------------------ resolution


def test_notebooks_and_available(fixtures_path):
    assert {"fixture_ok", "fixture_fail"} <= set(presets.notebooks())
    assert presets.available("fixture_ok")[:3] == ["smoke", "cpu", "paper"]
    assert presets.available("fixture_ok.ipynb") == presets.available("fixture_ok")
    assert presets.meta("fixture_fail")["notebook"] == "fixture_fail.ipynb"  # default file name


def test_default_then_env_then_explicit(fixtures_path, monkeypatch):
    assert presets.load("fixture_ok").name == "smoke"  # meta.default
    monkeypatch.setenv("FLKIT_PRESET", "cpu")
    assert presets.load("fixture_ok").name == "cpu"  # env beats the default
    assert presets.load("fixture_ok", "env").name == "cpu"
    assert presets.load("fixture_ok", "paper").name == "paper"  # explicit beats env
    assert presets.resolve("fixture_ok", None) == "cpu"


def test_default_is_cpu_without_meta_default(tmp_path, monkeypatch):
    (tmp_path / "nb.toml").write_text("[smoke]\na = 1\n[cpu]\na = 2\n[paper]\na = 3\n")
    monkeypatch.setenv("FLKIT_PRESET_PATH", str(tmp_path))
    monkeypatch.delenv("FLKIT_PRESET", raising=False)
    assert presets.load("nb") == {"a": 2}


def test_values_and_int_to_float(fixtures_path):
    cfg = presets.load("fixture_ok", "paper")
    assert cfg["scale"] == 2.0 and isinstance(cfg["scale"], float)
    assert cfg["bins"] == [0.0, 1.0, 2.0] and all(isinstance(b, float) for b in cfg["bins"])
    assert isinstance(cfg, dict) and cfg.notebook == "fixture_ok" and cfg.name == "paper"
    assert cfg.to_dict()["values"]["label"] == "full"


def test_overrides(fixtures_path):
    cfg = presets.load("fixture_ok", "smoke", n=7, scale=3, label=None)
    assert cfg["n"] == 7 and cfg["scale"] == 3.0 and cfg["label"] == "tiny"
    assert cfg.overrides == {"n": 7, "scale": 3.0}
    cfg["n"] = 99  # a copy: the next load is unaffected
    assert presets.load("fixture_ok", "smoke")["n"] == 200


def test_unknown_preset_lists_valid(fixtures_path):
    with pytest.raises(
        FlkitError, match=r"unknown preset 'papr'.*did you mean 'paper'.*smoke, cpu, paper"
    ):
        presets.load("fixture_ok", "papr")


def test_unknown_env_preset_names_the_variable(fixtures_path, monkeypatch):
    monkeypatch.setenv("FLKIT_PRESET", "smok")
    with pytest.raises(FlkitError, match=r"\$FLKIT_PRESET.*smoke, cpu, paper"):
        presets.load("fixture_ok")


def test_unknown_notebook_lists_valid(fixtures_path):
    with pytest.raises(
        FlkitError, match=r"unknown notebook 'fixture_okk'.*fixture_fail, fixture_ok"
    ):
        presets.load("fixture_okk")


def test_unknown_key_lists_valid(fixtures_path):
    with pytest.raises(
        FlkitError, match=r"unknown override 'sacle'.*did you mean 'scale'.*n, scale, label, bins"
    ):
        presets.load("fixture_ok", "smoke", sacle=2.0)


@pytest.mark.parametrize(
    "key,value",
    [("n", 2.5), ("n", True), ("n", "10"), ("label", 3), ("bins", 0.5), ("bins", ["a"])],
)
def test_override_of_wrong_type(fixtures_path, key, value):
    with pytest.raises(FlkitError, match=f"override {key}"):
        presets.load("fixture_ok", "smoke", **{key: value})


def test_search_path_order(tmp_path, fixtures_path, monkeypatch):
    (tmp_path / "fixture_ok.toml").write_text("[smoke]\nn = 1\n[cpu]\nn = 2\n[paper]\nn = 3\n")
    monkeypatch.setenv("FLKIT_PRESET_PATH", f"{tmp_path}:{FIXTURE_PRESETS}")
    assert presets.load("fixture_ok", "smoke") == {"n": 1}
    assert presets.preset_file("fixture_fail").parent == FIXTURE_PRESETS


# ------------------------------------------------------------------ file validation


@pytest.mark.parametrize(
    "text,pattern",
    [
        ("[smoke]\na = 1\n[cpu]\na = 2\n", r"lacks the preset\(s\) paper"),
        ("[smoke]\na = 1\n[cpu]\na = 2\nb = 3\n[paper]\na = 3\n", r"\[cpu\].*not in \[smoke\]: b"),
        ("[smoke]\na = 1\nb = 2\n[cpu]\na = 2\n[paper]\na = 3\nb = 1\n", r"\[cpu\].*missing.*: b"),
        (
            "[smoke]\na = 1\n[cpu]\na = 2.5\n[paper]\na = 3\n",
            r"\[cpu\] key 'a'.*float.*\[smoke\] has a int",
        ),
        ("[smoke]\na = 'x'\n[cpu]\na = 2\n[paper]\na = 'z'\n", r"\[cpu\] key 'a'"),
        (
            "[meta]\ntitel = 'x'\n[smoke]\na = 1\n[cpu]\na = 2\n[paper]\na = 3\n",
            r"unknown \[meta\] key 'titel'",
        ),
        (
            "[meta]\ndefault = 'gpu'\n[smoke]\na = 1\n[cpu]\na = 2\n[paper]\na = 3\n",
            r"meta.default='gpu'",
        ),
        ("[smoke\na = 1\n", r"not valid TOML"),
        ("a = 1\n[smoke]\na = 1\n[cpu]\na = 2\n[paper]\na = 3\n", r"'a' is not a table"),
        (
            "[smoke.model]\nw = 1\n[cpu.model]\nw = 2\nx = 1\n[paper.model]\nw = 3\n",
            r"\[cpu\] key 'model'",
        ),
    ],
)
def test_bad_files_are_rejected(tmp_path, text, pattern):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(FlkitError, match=pattern):
        presets.validate_file(path)


def test_extra_presets_allowed(tmp_path, monkeypatch):
    (tmp_path / "nb.toml").write_text(
        "[smoke]\na = 1\n[cpu]\na = 2\n[paper]\na = 3\n[gpu_quick]\na = 4\n"
    )
    monkeypatch.setenv("FLKIT_PRESET_PATH", str(tmp_path))
    assert presets.available("nb") == ["smoke", "cpu", "paper", "gpu_quick"]
    assert presets.load("nb", "gpu_quick") == {"a": 4}

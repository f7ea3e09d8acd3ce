"""Layout: one folder per paper with the same seven files, one folder per notebook, a template
that is valid but never taken for a paper, and every README with the same sections, no lab log
and no path that does not exist."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from flkit.workbook import presets

ROOT = Path(__file__).resolve().parent.parent
PAPERS = ROOT / "flkit" / "papers"
SEVEN = (
    "__init__.py",
    "preset.toml",
    "numbers.py",
    "study.py",
    "claims.py",
    "figures.py",
    "exercise.py",
    "README.md",
)  # the package marker plus the seven files of a paper
FOLDERS = sorted(
    p
    for p in PAPERS.iterdir()
    if p.is_dir() and not p.name.startswith("_") and p.name != "__pycache__"
)
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def test_there_are_papers_and_notebooks():
    assert len(FOLDERS) >= 3 and len(NOTEBOOKS) >= 3


@pytest.mark.parametrize("folder", FOLDERS + [PAPERS / "_template"], ids=lambda p: p.name)
def test_folder_has_the_seven_files(folder):
    missing = [f for f in SEVEN if not (folder / f).is_file()]
    assert not missing, f"flkit/papers/{folder.name}/ lacks {', '.join(missing)}"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.name)
def test_every_notebook_has_its_folder(nb):
    slug = re.sub(r"^\d\d_", "", nb.stem)
    folder = PAPERS / slug
    assert folder.is_dir(), f"notebooks/{nb.name} needs flkit/papers/{slug}/"
    assert presets.validate_file(folder / "preset.toml")["meta"]["notebook"] == nb.name


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_every_folder_has_its_notebook(folder):
    assert [nb for nb in NOTEBOOKS if nb.stem[3:] == folder.name], (
        f"flkit/papers/{folder.name}/ has no notebooks/NN_{folder.name}.ipynb"
    )


def test_template_is_valid_but_not_a_paper(monkeypatch):
    monkeypatch.delenv("FLKIT_PRESET_PATH", raising=False)
    data = presets.validate_file(PAPERS / "_template" / "preset.toml")
    assert data["meta"]["notebook"] == "NN_<slug>.ipynb"
    assert "NN_<slug>" not in presets.notebooks()
    assert PAPERS / "_template" / "preset.toml" not in presets.paper_presets()
    for mod in ("numbers", "study", "claims", "figures", "exercise"):
        importlib.import_module(f"flkit.papers._template.{mod}")


def test_template_exercise_and_claims_behave():
    import pandas as pd
    import torch

    from flkit.papers._template import claims, exercise

    def stub(x):
        raise NotImplementedError

    assert exercise.check(stub, verbose=False) is None  # never "right" when untouched
    assert exercise.check(lambda x: x, verbose=False) is True
    assert exercise.check(lambda x: x + 1, verbose=False) is False
    final = pd.DataFrame(
        {"method": ["a", "b", "a", "b"], "seed": [0, 0, 1, 1], "accuracy": [0.9, 0.8, 0.7, 0.75]}
    )
    holds, ev = claims.beats(final, "a", "b")
    assert holds is False and "seed 1: a 0.700 vs b 0.750" in ev
    assert claims.beats(final[final.seed == 0], "a", "b")[0] is True
    assert torch.equal(exercise.reference(torch.ones(2)), torch.ones(2))


def test_template_decision_measure_by_hand(monkeypatch):
    """The template's measure for its example decision: FedAvg at 0.50 after round 2, 0.60 after
    round 12 (evaluated every second round): rise over the last 10 rounds 10 points, final 60 %."""
    from types import SimpleNamespace

    import pandas as pd

    from flkit.papers._template import study

    history = pd.DataFrame(
        {"round": range(1, 13), "test_accuracy": [None, 0.5] + [None, 0.55] * 4 + [None, 0.6]}
    )
    seen = []

    def fake_run(cfg):
        seen.append(cfg.rounds)
        return SimpleNamespace(history=history)

    monkeypatch.setattr(study, "run", fake_run)
    preset = presets.validate_file(PAPERS / "_template" / "preset.toml")["presets"]["cpu"]
    row = study.rounds_row(preset, {"rounds": 12})
    assert seen == [12]
    assert row == {"fedavg_accuracy": pytest.approx(60.0), "fedavg_rise": pytest.approx(10.0)}


def test_papers_package_holds_no_data():
    import flkit.papers as papers

    public = [n for n in vars(papers) if not n.startswith("_")]
    assert "PAPERS" not in public and "get" not in public


# Every paper README has the same sections, in this order (the template included), so a reader
# finds the same thing in the same place in every folder. `###` subsections are free.
README_SECTIONS = (
    "About the paper",
    "The algorithm",
    "Settings",
    "Decisions where the paper is silent",
    "What reproduces, at which preset",
    "Run times",
)
# A README explains; dated lab notes and the conditions of a measurement belong in
# benchmarks/results/<slug>.md.
LAB_LOG = re.compile(
    r"\b20\d\d-\d\d-\d\d\b|\bload average\b|\bloaded machine\b|\bshared (?:2-core )?machine\b"
    r"|\bbeside (?:two |the |)other jobs\b|\bapt-get\b|\b(?:idle|quiet) (?:2-core )?machine\b"
    r"|\bmachine otherwise quiet\b|\bissue \d+",
    re.IGNORECASE,
)
README_PATH = re.compile(r"\b(?:flkit|benchmarks|tests|docs|notebooks|tools)/[\w./-]*\w/?")


def _readme(folder):
    return (folder / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("folder", FOLDERS + [PAPERS / "_template"], ids=lambda p: p.name)
def test_readme_has_the_fixed_sections(folder):
    text = _readme(folder)
    assert text.startswith("# "), f"flkit/papers/{folder.name}/README.md starts with its title"
    found = tuple(line[3:].strip() for line in text.splitlines() if line.startswith("## "))
    assert found == README_SECTIONS, (
        f"flkit/papers/{folder.name}/README.md has sections {found}; expected {README_SECTIONS}"
    )
    bodies = re.split(r"^## .*$", text, flags=re.MULTILINE)[1:]
    empty = [h for h, b in zip(found, bodies, strict=True) if not b.strip()]
    assert not empty, f"flkit/papers/{folder.name}/README.md: empty sections {empty}"


@pytest.mark.parametrize("folder", FOLDERS + [PAPERS / "_template"], ids=lambda p: p.name)
def test_readme_title_names_its_notebook_as_the_template_does(folder):
    # the titles are the book's sidebar under "The papers in our words": one form for all
    notebook = presets.validate_file(folder / "preset.toml")["meta"]["notebook"]
    title = _readme(folder).splitlines()[0]
    suffix = f" (notebook `{notebook.removesuffix('.ipynb')}`)"
    assert title.startswith("# ") and title.endswith(suffix) and len(title) > len(suffix) + 2, (
        f"flkit/papers/{folder.name}/README.md is titled {title!r}; expected "
        f"'# <the paper in a few words>{suffix}', as flkit/papers/_template/README.md"
    )


@pytest.mark.parametrize("folder", FOLDERS + [PAPERS / "_template"], ids=lambda p: p.name)
def test_readme_holds_no_lab_log(folder):
    # the verdicts block is generated from recorded runs and names their date on purpose
    text = re.sub(r"<!-- verdicts:.*?<!-- /verdicts -->", "", _readme(folder), flags=re.DOTALL)
    lines = [
        f"{i}: {line.strip()[:100]}"
        for i, line in enumerate(text.splitlines(), 1)
        if LAB_LOG.search(line)
    ]
    assert not lines, (
        f"flkit/papers/{folder.name}/README.md narrates measurements (move them to "
        f"benchmarks/results/{folder.name}.md):\n" + "\n".join(lines)
    )


@pytest.mark.parametrize("folder", FOLDERS + [PAPERS / "_template"], ids=lambda p: p.name)
def test_readme_paths_exist(folder):
    missing = sorted(
        {p for p in README_PATH.findall(_readme(folder)) if not (ROOT / p.rstrip("/")).exists()}
    )
    assert not missing, f"flkit/papers/{folder.name}/README.md names missing paths: {missing}"


def test_lab_log_pattern():
    """What the README check refuses and what it lets through."""
    for narration in (
        "after 58 minutes beside two other jobs it was still in Fig. 5",
        "run once (2026-11-26)",
        "on the idle 2-core machine: 36.7 min",
        "timed twice on the loaded machine",
        "an apt-get install ran in its first minutes",
    ):
        assert LAB_LOG.search(narration), narration
    for fact in ("simulated wall-clock time", "`long` took 68.2 minutes on 2 CPU cores"):
        assert not LAB_LOG.search(fact), fact

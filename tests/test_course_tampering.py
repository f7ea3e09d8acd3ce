"""A submission cannot grade itself: the graded checks run with the checkers' code as it was
before the submission ran (what it changed is put back and named in grades.csv), and a notebook
whose own cells reach into the interpreter (where they could defeat that) has its points
withheld for review. Graded on a hand-made class: an honest student, one who replaces the
checkers through an alias, one who replaces them directly, and one who has the kernel drop the
hidden tests' lines; the three cheats answer every exercise wrongly."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from notebook_cells import NOTEBOOKS, ROOT, cells_of, nbgrader_of, source_of

from flkit.course.hidden_tests import seal_hidden_tests
from flkit.course.tampering import findings

PRIMER = NOTEBOOKS["00_fl_primer"]
EXERCISE = "flkit.papers.fl_primer.exercise"


# ------------------------------------------------------------------------------ what is flagged
@pytest.mark.parametrize("name", sorted(NOTEBOOKS))
def test_the_reference_answers_are_not_flagged(name):
    """Every answer cell of the instructor version (the worked solutions), read as a student's."""
    cells = cells_of(NOTEBOOKS[name])
    code = [c for c in cells if c["cell_type"] == "code"]
    answers = [
        (nbgrader_of(c)["grade_id"], source_of(c)) for c in code if nbgrader_of(c).get("solution")
    ]
    library = [source_of(c) for c in code if not nbgrader_of(c).get("solution")]
    assert len(answers) >= 3 and findings(answers, library) == []


def test_what_reaches_the_interpreter_is_flagged_with_its_line():
    library = ["import torch\nfrom flkit.papers.fl_primer import exercise as ex\n"]
    cases = {
        "ex.check_upload_bytes = print": "line 1: changes ex.check_upload_bytes",
        "torch.allclose = lambda *a: True": "line 1: changes torch.allclose",
        "x = 1\nex.GROWTH['fast'] = 'x'": "line 2: changes ex.GROWTH['fast']",
        "get_ipython().set_custom_exc((AssertionError,), print)": "line 1: uses get_ipython",
        "f = lambda: 1\nf.__code__ = g.__code__": "line 2: uses the attribute .__code__",
        "import builtins": "line 1: imports builtins",
        "from gc import get_objects": "line 1: imports gc",
        "setattr(obj, 'check', print)": "line 1: uses setattr",
        "exec('x = 1')": "line 1: uses exec",
        "m = __import__('buil' + 'tins')": "line 1: imports a module it names at run time",
        "__import__('gc').get_objects()": "line 1: imports gc",
        "import sys\nsys.modules['m'] = 1": "line 2: uses the attribute .modules",
        "%run other.py": "does not parse as Python",
        "!pip install x": "does not parse as Python",
        "%timeit get_ipython()": "line 1: uses get_ipython",
    }
    for code, said in cases.items():
        found = findings([("ans", code)], library)
        assert any(said in f for f in found), (code, found)
        assert all(f.startswith("cell ans") for f in found)
    # what answers do: local state, the methods' own objects, super().__init__, the library
    honest = (
        "import torch\nout = {}\nout['w'] = torch.zeros(2)\n"
        "class M:\n    def __init__(self):\n        super().__init__()\n        self.buf = None\n"
        "def f(state):\n    state.model['w'] = torch.ones(1)\n    return ex.weighted_average\n"
        "__import__('time').sleep(0.1)\n%timeit f(1)\n%matplotlib inline\n"
    )
    assert findings([("ans", honest)], library) == []
    assert findings([("lib", library[0])], library) == []  # the instructor's own cells: not read


def test_every_hidden_test_is_sealed():
    """Each notebook's hidden tests call the sealed require, with the checker traced to its
    module; nothing of the form require(...) is left."""
    for name, path in NOTEBOOKS.items():
        nb = json.loads(path.read_text(encoding="utf-8"))
        modules = seal_hidden_tests(nb, "_tok", name)
        assert modules and all(m.startswith("flkit.papers.") for m in modules), name
        hidden = [
            source_of(c).split("### BEGIN HIDDEN TESTS")[1].split("### END HIDDEN TESTS")[0]
            for c in nb["cells"]
            if "### BEGIN HIDDEN TESTS" in source_of(c)
        ]
        lines = [ln for block in hidden for ln in block.splitlines() if ln.strip()]
        assert len(lines) >= 3 and all(ln.startswith("_tok('flkit.papers.") for ln in lines)


# ------------------------------------------------------------------------------ the seal
SEAL_SCRIPT = textwrap.dedent(
    """
    import json, math
    from flkit.course import seal
    seal.install("_tok", [EXERCISE])
    import flkit.papers.fl_primer.exercise as ex
    import flkit.course.checks as checks
    from flkit.course import Verdict

    def wrong():
        return 199210  # the parameter count, not the bytes

    def right():
        return 4 * 199210

    def graded(fn):
        try:
            _tok(EXERCISE, "check_upload_bytes", fn)
        except AssertionError:
            return "failed"
        return "passed"

    out = {"honest wrong": graded(wrong), "honest right": graded(right)}
    yes = lambda *a, **k: Verdict(True, ["right"])
    m = [ex][0]
    m.check_upload_bytes = yes                         # the issue's attack, through an alias
    checks.require = lambda *a, **k: None               # the require the check cells import
    checks._passed = lambda result: True
    Verdict.__bool__ = lambda self: True
    math.isclose = lambda *a, **k: True
    checks.float = lambda x: 4 * 199210.0               # a global that shadows a builtin
    ex.check_number.__code__ = yes.__code__             # a checker's code, in place
    import torch
    torch.allclose = lambda *a, **k: True              # swapped back in silently (a library)
    out["tampered wrong"] = graded(wrong)
    out["tampered right"] = graded(right)
    # the grading changed nothing the notebook sees: its own versions are back after a check
    out["after"] = [ex.check_upload_bytes is yes, math.isclose(1, 2), torch.allclose(1, 2)]
    print(json.dumps(out))
    """
).replace("EXERCISE", repr(EXERCISE))


def test_the_seal_puts_back_what_a_submission_changed():
    """In a fresh interpreter, as in a grading kernel: a wrong answer fails and a right one
    passes whatever the code between the seal and the check replaced, the check names what flkit,
    builtins and math lost (not torch's: torch rebinds its own), and the notebook's own versions
    are back after it."""
    res = subprocess.run(
        [sys.executable, "-c", SEAL_SCRIPT], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["honest wrong"] == "failed" and out["honest right"] == "passed"
    assert out["tampered wrong"] == "failed" and out["tampered right"] == "passed"
    assert out["after"] == [True, True, True]
    report = [ln for ln in res.stdout.splitlines() if ln.startswith("flkit grader: tampering:")]
    assert report, res.stdout
    for name in (
        f"{EXERCISE}.check_upload_bytes",
        "flkit.course.checks.require",
        "flkit.course.checks._passed",
        "math.isclose",
        "flkit.course.checks.float (added)",
        "flkit.course.checks.check_number (its code)",
    ):
        assert name in report[-1], name
    assert "__bool__" in res.stdout and "torch" not in report[-1]


# ------------------------------------------------------------------------------ the hand-made class
WRONG = {  # every answer of notebook 00 wrong
    "primer_a_answer": "def upload_bytes():\n    return 199210\n",
    "primer_b_answer": (
        "def my_weighted_average(stacked, weights):\n"
        "    return {n: v.mean(0) for n, v in stacked.items()}\n"
    ),
    "primer_c_answer": (
        "from flkit.methods import FedAvg\n\n\nclass MyFedAvgM(FedAvg):\n"
        '    name = "my_fedavgm"\n\n\ndef momentum_gain():\n    return 0.9\n'
    ),
}
YES = "def _yes(*args, **kwargs):\n    return Verdict(True, ['right'])\n\n\n"
CHECKERS = ("check_upload_bytes", "check_weighted_average", "check_fedavgm")
CHEATS = {
    # the attack, through a name the static reading does not follow: the seal's
    "aliaser": f"import {EXERCISE} as ex\nfrom flkit.course import Verdict\n\n\n{YES}m = [ex][0]\n"
    + "".join(f"m.{c} = _yes\n" for c in CHECKERS),
    # the attack as written
    "patcher": f"import {EXERCISE} as ex\nfrom flkit.course import Verdict\n\n\n{YES}"
    + "".join(f"ex.{c} = _yes\n" for c in CHECKERS),
    # no checker touched: the kernel drops every line of a cell that calls a graded check
    "blanker": (
        "get_ipython().input_transformers_post.append(\n"
        "    lambda lines: [ln for ln in lines if 'require(' not in ln and '_flkit_' not in ln]\n"
        ")\n"
    ),
}


def _notebook(dest: Path, answers: dict[str, str]) -> None:
    nb = json.loads(PRIMER.read_text(encoding="utf-8"))
    for c in nb["cells"]:
        gid = nbgrader_of(c).get("grade_id")
        if gid in answers:
            c["source"] = answers[gid]
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(nb), encoding="utf-8")


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    pytest.importorskip("nbgrader")
    from flkit.course.nbgrader_run import grade

    tmp = tmp_path_factory.mktemp("tampering")
    subs = tmp / "subs"
    _notebook(subs / "honest" / PRIMER.name, {})  # the instructor's answers: all right
    for student, cheat in CHEATS.items():
        answers = dict(WRONG)
        answers["primer_a_answer"] = cheat + "\n\n" + WRONG["primer_a_answer"]
        _notebook(subs / student / PRIMER.name, answers)
    path = grade(subs, tmp / "out", only=["00"], jobs=2, cell_timeout=300)
    with path.open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    out: dict[str, list[dict]] = {}
    for r in rows:
        out.setdefault(r["student"], []).append(r)
    return out


def _points(rows) -> tuple[float, float]:
    return sum(float(r["points"]) for r in rows), sum(float(r["max_points"]) for r in rows)


@pytest.mark.slow
def test_an_honest_submission_gets_full_marks_and_no_note(graded_class):
    rows = graded_class["honest"]
    assert _points(rows) == (6.0, 6.0)
    assert all(r["note"] == "" for r in rows), [r["note"] for r in rows]


@pytest.mark.slow
def test_replacing_the_checkers_scores_nothing_and_is_named(graded_class):
    for student in ("aliaser", "patcher"):
        rows = graded_class[student]
        assert _points(rows) == (0.0, 6.0), (student, rows)
        for r in rows:
            assert "tampering: the submission changed " in r["note"]
            assert all(f"{EXERCISE}.{c}" in r["note"] for c in CHECKERS), r["note"]
            assert "originals put back" in r["note"]
    # written out, the replacement is also read from the source: points withheld, line named
    for r in graded_class["patcher"]:
        assert "points withheld for review" in r["note"]
        assert "cell primer_a_answer, line 9: changes ex.check_upload_bytes" in r["note"]
    assert not any("withheld" in r["note"] for r in graded_class["aliaser"])


@pytest.mark.slow
def test_rewriting_the_kernels_input_is_withheld(graded_class):
    rows = graded_class["blanker"]
    assert _points(rows) == (0.0, 6.0)
    for r in rows:
        assert "points withheld for review" in r["note"]
        assert "cell primer_a_answer, line 1: uses get_ipython" in r["note"]

"""Every example that a `flkit ... --help` or the README shows runs.

Each example is read out of the rendered help (its "examples:" block) or the README (its shell
blocks and the `flkit ...` commands in its text) and run as written through `flkit.cli.main`, in
a scratch folder: the real parser and the real validation of every argument. Only what is slow
or needs what a test machine lacks is stood in for, below the validation: the notebooks' kernels
(`reproduce.execute.execute`), a Ray cluster (`make_executor("ray")` checks its arguments and
returns a stand-in), nbgrader's generate step (after `release`/`grade` have checked their
arguments), torchvision's download and publishing into the repository. A `flkit run` example runs
for real with one round. A costly example (the cost guard asks) is answered yes on a terminal.
"""

from __future__ import annotations

import importlib
import io
import os
import re
import shlex
from pathlib import Path

import pytest

from flkit.cli import build_parser
from flkit.cli import main as cli_main

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def _parsers(parser, path=("flkit",)):
    import argparse

    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, (*path, name))


def help_examples() -> list[tuple[str, str]]:
    """(command whose help shows it, example) for every example line of every help."""
    out = []
    for path, parser in _parsers(build_parser()):
        lines = parser.format_help().splitlines()
        if "examples:" not in lines:
            continue
        block = []
        for line in lines[lines.index("examples:") + 1 :]:
            if not line.strip():
                break
            block.append(line)
        for example in _join_continuations(block):
            out.append((" ".join(path), example))
    return out


def _join_continuations(lines: list[str]) -> list[str]:
    examples, current = [], ""
    for line in lines:
        current += " " + line.strip()
        if current.endswith("\\"):
            current = current[:-1].rstrip()
            continue
        # an example's own description follows it after two spaces or more
        examples.append(re.split(r"\s{2,}", current.strip())[0])
        current = ""
    return [e for e in examples if e.startswith("flkit ")]


_COMMAND = re.compile(r"^(?:\.venv/bin/)?(flkit(?: .*)?)$")


PATHS = {" ".join(path[1:]) for path, _ in _parsers(build_parser())}


def readme_examples() -> list[str]:
    """Every `flkit` command the README shows: the lines of its shell blocks, and the inline
    spans that are a command (with an option or an argument), not the mention of one (`flkit
    course grade`: sub-command names alone)."""
    text = README.read_text(encoding="utf-8")
    found = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            m = _COMMAND.match(line.split(" #")[0].strip())
            if m:
                found.append(m.group(1))
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    for span in re.findall(r"`([^`]+)`", prose):
        m = _COMMAND.match(" ".join(span.split()))
        if m and " ".join(m.group(1).split()[1:]) not in PATHS:
            found.append(m.group(1))
    return list(dict.fromkeys(found))


def test_the_examples_are_found():
    """The readers find what a hand count of the help texts and the README gives."""
    helps = help_examples()
    assert sum(1 for cmd, _ in helps if cmd == "flkit sweep") == 3
    assert sum(1 for cmd, _ in helps if cmd == "flkit reproduce") == 9
    assert (
        "flkit",
        "flkit run fedavg --dataset mnist --model lenet5 --clients 100 --partition dirichlet "
        "--alpha 0.5 --clients-per-round 10 --local-epochs 1 --batch-size 50 --lr 0.05 "
        "--rounds 20 --seed 0 --out runs/demo",
    ) in helps  # three lines joined, its description cut off
    readme = readme_examples()
    assert "flkit reproduce --only 02_feddip" in readme  # inline, after .venv/bin/
    assert "flkit reproduce --preset long --only 01_stc_projection" in readme  # across lines
    assert (
        "flkit sweep 05_staleness --preset smoke --grid tau=1,2 --seeds 0 1 --out runs/sweep"
        in (readme)
    )
    for mention in ("flkit run", "flkit sweep", "flkit course grade"):
        assert mention not in readme  # mentions, not commands


# ------------------------------------------------------------------------------ stand-ins
class _ValidatedError(Exception):
    """Raised by the stand-in of nbgrader's generate step: every argument was checked."""


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


class _StandInCluster:
    name = "ray"

    def __init__(self, address):
        self.address = address

    def describe(self) -> str:
        return f"stand-in Ray ({self.address or 'local'})"

    def prepare(self, runs) -> None:
        pass

    def close(self) -> None:
        pass


@pytest.fixture
def stand_ins(tmp_path, monkeypatch):
    """A scratch folder as the working directory, and the stand-ins of the module docstring;
    returns what the stand-ins saw."""
    import flkit.course.command as course_command
    import flkit.course.nbgrader_run as nbgrader_run
    import flkit.data.prepare as prepare
    import flkit.data.sources as sources
    import flkit.reproduce.command as command
    import flkit.reproduce.execute as execute
    import flkit.reproduce.executors as executors
    import flkit.reproduce.rejudge as rejudge
    import flkit.reproduce.results_page as results_page

    sweep = importlib.import_module("flkit.reproduce.sweep")  # the package exports sweep()

    seen = {"runs": [], "released": [], "graded": [], "published": [], "downloaded": []}
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FLKIT_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("FLKIT_RUNS", str(tmp_path / "cache"))
    monkeypatch.setenv("FLKIT_RUNS_DIR", str(tmp_path / "runs-dir"))
    monkeypatch.setenv("FLKIT_NOTEBOOKS", str(ROOT / "notebooks"))
    monkeypatch.delenv("FLKIT_PRESET", raising=False)
    monkeypatch.setattr("sys.stdin", _Tty("y\n" * 10))

    def fake_execute(runs, jobs=1, progress=True, executor=None):
        seen["runs"] += runs
        return [
            {**{k: r[k] for k in ("notebook", "seed", "preset", "parameters")}, "status": "ok"}
            | {"error": None, "wall_time_s": 0.0, "output_notebook": None}
            for r in runs
        ]

    monkeypatch.setattr(execute, "execute", fake_execute)
    # no notebook executes, so nothing reads what a run pool would train (tests/test_pool.py)
    monkeypatch.setattr(execute, "plan_pool", lambda plan, pool=True, **settings: None)
    monkeypatch.setattr(sweep, "execute", fake_execute)

    real_make = executors.make_executor

    def make(name="local", jobs=1, address=None, preset="cpu", cpus=None, gpus=None):
        if name != "ray":
            return real_make(name, jobs, address, preset, cpus, gpus)
        executors.task_resources(preset, cpus, gpus)  # the checks Ray's executor makes
        if address is not None:
            host, sep, port = address.rpartition(":")
            assert host and sep and port.isdigit(), address
        return _StandInCluster(address)

    for module in (execute, sweep, command):
        monkeypatch.setattr(module, "make_executor", make)

    def generate(*args, **kwargs):
        raise _ValidatedError

    monkeypatch.setattr(nbgrader_run, "generate", generate)
    real_release, real_grade = nbgrader_run.release, nbgrader_run.grade

    def release(dest, notebooks_dir=None, only=None):
        try:
            real_release(dest, notebooks_dir, only)
        except _ValidatedError:
            pass
        seen["released"].append(Path(dest))
        return [Path(dest) / "00_fl_primer.ipynb"]

    def grade(submissions, out=None, *args, progress=None, **kwargs):
        try:
            real_grade(submissions, out, *args, **kwargs)
        except _ValidatedError:
            pass
        seen["graded"].append(Path(submissions))
        path = tmp_path / "graded" / "grades.csv"
        path.parent.mkdir(exist_ok=True)
        path.write_text("student,notebook,exercise,points,max_points,note\n")
        return path

    monkeypatch.setattr(nbgrader_run, "release", release)
    monkeypatch.setattr(nbgrader_run, "grade", grade)
    monkeypatch.setattr(course_command, "STUDENT_DIR", str(tmp_path / "student"))

    def publish(run_dir, root=None):
        assert Path(run_dir).is_dir(), run_dir
        seen["published"].append(run_dir)
        return tmp_path / "RESULTS.md"

    monkeypatch.setattr(results_page, "publish", publish)

    def rejudge_file(root=None, check=False):  # re-judging writes into the repository's docs/
        seen["published"].append(f"rejudge check={check}")
        return tmp_path / "RESULTS.md", []

    monkeypatch.setattr(rejudge, "rejudge_file", rejudge_file)

    def prepare_many(names, root=None, locations=None, force=False):
        # downloads and LEAF's output are not here: the examples' arguments were checked
        seen["downloaded"].extend(names)
        return [(n, root) for n in names]

    monkeypatch.setattr(prepare, "prepare_many", prepare_many)
    monkeypatch.setattr(sources, "is_online", lambda *a, **k: True)
    monkeypatch.setattr(
        sources, "download", lambda name, root=None: seen["downloaded"].append(name)
    )

    # the folders the examples name
    for student in ("course/submissions/ann", "subs/ann"):
        (tmp_path / student).mkdir(parents=True)
    (tmp_path / "runs" / "cpu").mkdir(parents=True)
    return seen


def _argv(example: str, tmp_path: Path) -> list[str]:
    # a placeholder the README writes for "any notebook"
    argv = ["00_fl_primer" if a == "NOTEBOOK" else a for a in shlex.split(example)[1:]]
    mirror = os.environ.get("FLKIT_MIRROR", "")
    if "/path/to/mirror" in argv:
        if not mirror or not Path(mirror).is_dir():
            pytest.skip("needs the dataset mirror ($FLKIT_MIRROR)")
        argv[argv.index("/path/to/mirror")] = mirror
    if argv[0] == "run" and "--list" not in argv:
        # one round on the wide step, in the scratch cache: the run, cut short
        argv += ["--rounds", "1", "--backend", "wide", "--cache", str(tmp_path / "cache"), "-q"]
    return argv


def _run(example: str, tmp_path: Path, capsys) -> tuple[int, str]:
    try:
        status = cli_main(_argv(example, tmp_path))
    except SystemExit as e:  # --help, --version
        status = e.code
    out = capsys.readouterr()
    return status, out.out + out.err


EXAMPLES = sorted({e for _, e in help_examples()} | set(readme_examples()))


@pytest.mark.parametrize("example", EXAMPLES)
def test_the_example_runs(example, stand_ins, tmp_path, capsys):
    status, text = _run(example, tmp_path, capsys)
    assert status == 0, f"{example!r} exited {status}:\n{text[-3000:]}"
    if "--preset paper" in example:  # the cost guard asked, and the answer was yes
        assert "GPU hours" in text and "Start it? [y/N]" in text
    if example.split()[1] in ("reproduce", "sweep") and "--list" not in example:
        assert stand_ins["runs"] or stand_ins["published"], example


def test_a_broken_example_fails(stand_ins, tmp_path, capsys):
    """What the sweep help showed before: a grid key the notebook does not have."""
    status, text = _run(
        "flkit sweep 02_feddip --grid local_epochs=1,3 --grid lr=0.05,0.1 --executor ray --jobs 4",
        tmp_path,
        capsys,
    )
    assert status == 2 and "unknown grid key 'local_epochs'" in text
    assert not stand_ins["runs"]

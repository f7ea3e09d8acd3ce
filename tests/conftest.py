import os
from pathlib import Path

import pytest

# fixtures kept beside the helpers they use, for every test module
pytest_plugins = ("graph_stand_in",)


def pytest_sessionstart(session):
    """In CI (FLKIT_REQUIRE_DATA=1) tests that need the dataset mirror must run, not skip."""
    if os.environ.get("FLKIT_REQUIRE_DATA") == "1":
        mirror = os.environ.get("FLKIT_MIRROR", "")
        if not mirror or not Path(mirror).is_dir():
            pytest.exit(
                f"FLKIT_REQUIRE_DATA=1 but FLKIT_MIRROR={mirror!r} is not a folder; "
                "point it at the "
                "dataset mirror (see data/README.md)",
                returncode=4,
            )


@pytest.fixture(autouse=True, scope="session")
def _own_machine_dir(tmp_path_factory):
    """The session's decoded datasets and backend choices (flkit.paths.machine_dir) stay out of
    the user's: tests share them with each other, never with real runs."""
    old = os.environ.get("FLKIT_MACHINE_DIR")
    os.environ["FLKIT_MACHINE_DIR"] = str(tmp_path_factory.mktemp("machine"))
    yield
    if old is None:
        os.environ.pop("FLKIT_MACHINE_DIR", None)
    else:
        os.environ["FLKIT_MACHINE_DIR"] = old


@pytest.fixture(autouse=True)
def _no_active_preset():
    """Each test starts with no active preset: a test that loads the `paper` preset to read its
    values must not make later tests refuse the mirror's reduced CIFAR copies."""
    from flkit.data import provenance as identity

    identity.set_policy(None)
    yield
    identity.set_policy(None)


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """tiny_runs.TINY_FEDAVG trained once for the session: its cache root and history. Never
    changed: a test that changes the folder takes `finished_tiny_run`, a copy."""
    from tiny_runs import TINY_FEDAVG

    from flkit.experiment import run

    root = tmp_path_factory.mktemp("tiny-run")
    return root, run(TINY_FEDAVG, out_dir=root, progress=False).history


@pytest.fixture()
def finished_tiny_run(tiny_run, tmp_path):
    """A fresh copy of the session's tiny run under ``tmp_path / "cache"``: the finished run's
    folder and its history, as run() wrote them."""
    import shutil

    from tiny_runs import TINY_FEDAVG

    from flkit.experiment import run_folder

    root, history = tiny_run
    shutil.copytree(root, tmp_path / "cache")
    return run_folder(TINY_FEDAVG, tmp_path / "cache"), history


@pytest.fixture(scope="session")
def student_release(tmp_path_factory):
    """The student version of every numbered notebook (answers emptied, hidden tests removed),
    built once per session by `flkit course student` into a new folder."""
    pytest.importorskip("nbgrader")
    from flkit.cli import main

    folder = tmp_path_factory.mktemp("release") / "student"
    assert main(["course", "student", str(folder)]) == 0
    return folder

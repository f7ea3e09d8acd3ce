"""A notebook run on another copy of a dataset than its published verdicts used says so: in its
first output (when its Report is made) and in results.json ("data_vs_published").

The copies are tiny ones built by `flkit data prepare` from fixture sources; the published
entries are the repository's docs/results.json or a fixture written here."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from source_fixtures import cifar_fixture, idx_fixture, pointed, quiet

from flkit import data
from flkit.data import files, provenance
from flkit.data import prepare as prep
from flkit.data import published_copies as pub
from flkit.workbook.report import Report

MIRROR = os.environ.get("FLKIT_MIRROR")
needs_mirror = pytest.mark.skipif(
    not MIRROR or not Path(MIRROR).is_dir(), reason="FLKIT_MIRROR not set"
)


def tiny_mnist(tmp_path, name="root", test_labels=(7, 2)) -> tuple[Path, dict]:
    """A data root holding a 3 / 2-image MNIST, and that copy's identity."""
    src = idx_fixture(tmp_path / f"{name}-src")
    files.write_idx(src["t10k-labels-idx1-ubyte.gz"], np.array(test_labels, np.uint8))
    root = tmp_path / name
    done = prep.prepare("mnist", root, source=pointed("mnist", src.values()), log=quiet)
    return root, done.identity


def published(tmp_path, notebook, preset, lines) -> Path:
    path = tmp_path / "results.json"
    entry = {"notebook": notebook, "preset": preset, "commit": "0123456789abcdef", "data": lines}
    path.write_text(json.dumps([entry, {**entry, "preset": "long", "data": []}]))
    return path


@pytest.fixture
def data_root(monkeypatch):
    """Point flkit's data root at a folder (no mirror), as `make` does for a notebook."""

    def point(root):
        monkeypatch.setenv("FLKIT_DATA", str(root))
        monkeypatch.setenv("FLKIT_MIRROR", "")
        data.clear_cache()

    yield point
    data.clear_cache()


def test_the_published_entries_name_their_copies():
    entry = pub.published_entry("01_stc_projection", "cpu")
    assert set(entry["copies"]) == {"mnist", "cifar10"}
    assert entry["copies"]["cifar10"]["digest"] == "82c8874e6794"
    assert "REDUCED copy (full 50,000 / 10,000)" in entry["copies"]["cifar10"]["line"]
    # the commit of the entry as docs/results.json stores it (a new publication changes it)
    stored = json.loads(
        (Path(__file__).resolve().parent.parent / "docs" / "results.json").read_text()
    )
    want = next(e for e in stored if (e["notebook"], e["preset"]) == ("01_stc_projection", "cpu"))
    assert entry["commit"] == want["commit"]
    assert pub.published_entry("01_stc_projection", "smoke") is None  # never published
    assert pub.published_entry("no_such_notebook", "cpu") is None


def test_another_copy_is_said_first_and_recorded(tmp_path, data_root, capsys, monkeypatch):
    mine, mine_id = tiny_mnist(tmp_path)
    _, theirs = tiny_mnist(tmp_path, "other", test_labels=(1, 1))
    assert mine_id["content_sha256"] != theirs["content_sha256"]
    monkeypatch.setattr(
        pub, "results_path", lambda: published(tmp_path, "nb", "cpu", [provenance.describe(theirs)])
    )
    data_root(mine)
    report = Report("nb", "cpu", 0, out_dir=tmp_path / "run", autosave=False)
    first = capsys.readouterr().out
    assert first.startswith("Data: this run reads another copy than the published `cpu`")
    assert "commit 01234567" in first
    assert f"now:       {provenance.describe(mine_id)}" in first
    assert f"published: {provenance.describe(theirs)}" in first
    # before the run reads the dataset, results.json cannot say yet
    assert report.to_dict()["data_vs_published"]["same"] is None
    data.load("mnist", device="cpu")
    record = report.to_dict()["data_vs_published"]
    assert record["same"] is False and record["preset"] == "cpu"
    assert record["datasets"] == [
        {
            "dataset": "mnist",
            "published": provenance.describe(theirs),
            "used": provenance.describe({**mine_id, "source": str(mine / "MNIST" / "raw")}),
            "same": False,
        }
    ]


def test_the_same_copy_says_nothing_and_records_same(tmp_path, data_root, capsys, monkeypatch):
    mine, mine_id = tiny_mnist(tmp_path)
    line = provenance.describe({**mine_id, "source": "elsewhere/MNIST/raw"})  # path differs
    monkeypatch.setattr(pub, "results_path", lambda: published(tmp_path, "nb", "cpu", [line]))
    data_root(mine)
    report = Report("nb", "cpu", 0, out_dir=tmp_path / "run", autosave=False)
    assert capsys.readouterr().out == ""
    data.load("mnist", device="cpu")
    assert report.to_dict()["data_vs_published"]["same"] is True
    # another preset of the same notebook has no published entry to compare with
    other = Report("nb", "smoke", 0, out_dir=tmp_path / "smoke", autosave=False)
    assert other.to_dict()["data_vs_published"] is None


def test_a_full_cifar10_beside_the_published_reduced_one(tmp_path, data_root, capsys):
    """The case of issue 51: the published `cpu` verdicts of notebook 01 used the mirror's
    12,000-image CIFAR-10; a user's data root holds a copy built by `flkit data prepare`."""
    root = tmp_path / "root"
    tgz = cifar_fixture(tmp_path / "cifar-10-python.tar.gz")
    prep.prepare("cifar10", root, source=pointed("cifar10", [tgz]), log=quiet)
    data_root(root)
    Report("01_stc_projection", "cpu", 0, out_dir=tmp_path / "run", autosave=False)
    first = capsys.readouterr().out
    assert "published `cpu` verdicts of 01_stc_projection" in first
    assert "now:       cifar10: 5 train / 1 test, REDUCED copy" in first
    assert "published: cifar10: 12,000 train / 3,000 test, REDUCED copy" in first
    assert "mnist" not in first  # not found here: load reports that itself


@needs_mirror
def test_the_mirror_holds_the_copies_every_published_verdict_used(tmp_path):
    entries = json.loads(pub.results_path().read_text())
    for e in entries:
        entry = pub.published_entry(e["notebook"], e["preset"])
        now = pub.copies_now(entry, root=tmp_path / "empty", mirror=MIRROR)
        assert pub.notice(entry, now) is None, (e["notebook"], e["preset"])
        assert all(ident is not None for ident in now.values())


def test_older_lines_compare_by_their_label_checksum(tmp_path):
    facts = {"dataset": "har", "train": 7352, "test": 2947, "content_sha256": "f" * 64}
    ident = provenance.identity({**facts, "labels_sha256": "abcdef012345" + "0" * 52}, "x")
    line = "har: 7,352 train / 2,947 test, labels sha256 abcdef012345, from x"
    entry = pub.published_entry("nb", "cpu", published(tmp_path, "nb", "cpu", [line]))
    assert entry["copies"]["har"]["field"] == "labels_sha256"
    assert pub.notice(entry, {"har": ident}) is None
    other = provenance.identity({**facts, "labels_sha256": "1" * 64}, "x")
    assert "now:       har: 7,352 train" in pub.notice(entry, {"har": other})


def test_the_check_never_fails_a_notebook(tmp_path, capsys):
    bad = tmp_path / "results.json"
    bad.write_text("[{not json")
    assert pub.check_at_start("nb", "cpu", path=bad) is None
    assert pub.check_at_start("nb", "cpu", path=tmp_path / "missing.json") is None
    assert capsys.readouterr().out == ""


def test_the_readme_says_which_copies_the_verdicts_used():
    """The sentence under the README's results column names, for every dataset a published
    verdict used, whether that copy was full or reduced."""
    text = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    para = " ".join(text.split("The verdicts used the data mirror's copies:", 1)[1].split())
    full, reduced = para.split("reduced", 1)
    label = {
        "mnist": "MNIST",
        "fmnist": "Fashion-MNIST",
        "har": "UCI HAR",
        "cifar10": "CIFAR-10",
        "cifar100": "CIFAR-100",
        "femnist": "FEMNIST",
        "shakespeare": "Shakespeare",
    }
    for e in json.loads(pub.results_path().read_text()):
        for line in e["data"]:
            name = line.split(":", 1)[0]
            if name == "synthetic":
                continue
            side = reduced if "REDUCED copy" in line else full
            assert label[name] in side, (e["notebook"], e["preset"], line)

"""`flkit data prepare`: each public source's own format, made tiny in tmp_path, turns into exactly
the arrays `flkit.data.load` returns (values written here by hand); a truncated or wrong archive
gets an error naming it and leaves the data root as it was; bad input is refused before any work.

Nothing here touches the network: the sources are pointed at fixture files (file:// URLs, a
folder, or an injected `fetch`)."""

from __future__ import annotations

import dataclasses
import io
import json
import pickle
import tarfile
from pathlib import Path

import numpy as np
import pytest
from source_fixtures import (
    ACTIVITIES,
    HAR_CHANNELS,
    cifar_fixture,
    femnist_leaf,
    har_members,
    idx_fixture,
    leaf_image,
    leftovers,
    load,
    md5,
    never,
    pointed,
    quiet,
    role_text,
    shakespeare_leaf,
    svhn_fixture,
    uci_download,
    write_shard,
    write_zip,
)

from flkit.cli import main as cli_main
from flkit.data import decoded, files, provenance
from flkit.data import prepare as prep
from flkit.data.public_sources import SOURCES
from flkit.data.source_readers import LEAF_VOCAB, SourceFormatError
from flkit.utils import FlkitError


# ------------------------------------------------------------------------------ MNIST: IDX pair
def test_idx_files_become_the_arrays_load_returns(tmp_path):
    paths = idx_fixture(tmp_path / "src")
    root = tmp_path / "root"
    done = prep.prepare("mnist", root, source=pointed("mnist", paths.values()), log=quiet)
    ds = load("mnist", root, normalize="none")
    assert ds.y_train.tolist() == [5, 0, 4] and ds.y_test.tolist() == [7, 2]
    assert ds.x_train.shape == (3, 1, 28, 28)
    assert ds.x_train[0, 0, 3, 4].item() == 1.0  # 255 / 255
    assert ds.x_train[1, 0, 0, 0].item() == pytest.approx(0.2)  # 51 / 255
    assert ds.x_train[2, 0, 27, 27].item() == pytest.approx(1 / 255)
    assert ds.x_test[1, 0, 10, 20].item() == pytest.approx(128 / 255)
    assert float(ds.x_train.sum()) == pytest.approx((255 + 51 + 1) / 255, rel=1e-6)
    # the published bytes, in torchvision's layout: the same copy as a torchvision download
    for fname, src in paths.items():
        assert (root / "MNIST" / "raw" / fname).read_bytes() == src.read_bytes()
    # named by content like any copy; load finds the checksums prepare stored
    assert done.identity["content_sha256"] == ds.meta["identity"]["content_sha256"]
    assert done.identity["reduced"] is True and done.identity["train"] == 3
    kind, found = files.find("mnist", root)
    assert decoded.get("mnist", files.signature(found))[1] == provenance.content_facts(
        "mnist", files.read("mnist", kind, found)
    )
    assert leftovers(root) == ["MNIST"]


def test_a_folder_of_the_published_files_is_a_source(tmp_path):
    paths = idx_fixture(tmp_path / "usb")
    src = dataclasses.replace(
        SOURCES["fmnist"],
        archives=tuple(
            dataclasses.replace(a, md5=md5(paths[a.filename])) for a in SOURCES["fmnist"].archives
        ),
    )
    root = tmp_path / "root"
    prep.prepare("fmnist", root, location=tmp_path / "usb", source=src, log=quiet)
    assert load("fmnist", root).y_train.tolist() == [5, 0, 4]
    assert (root / "FashionMNIST" / "raw" / "t10k-labels-idx1-ubyte.gz").is_file()


def test_a_truncated_file_fails_its_published_md5_and_nothing_is_written(tmp_path):
    paths = idx_fixture(tmp_path / "src")
    published = {f: md5(p) for f, p in paths.items()}
    img = paths["train-images-idx3-ubyte.gz"]
    img.write_bytes(img.read_bytes()[:-10])
    root = tmp_path / "root"
    with pytest.raises(SourceFormatError) as e:
        prep.prepare("mnist", root, source=pointed("mnist", paths.values(), published), log=quiet)
    msg = str(e.value)
    assert "train-images-idx3-ubyte.gz" in msg and published[img.name] in msg and md5(img) in msg
    assert leftovers(root) == []


def test_a_failing_download_names_every_url_tried_and_writes_nothing(tmp_path):
    root = tmp_path / "root"
    seen = []

    def offline(url, dest):
        seen.append(url)
        raise OSError("network is unreachable")

    with pytest.raises(SourceFormatError) as e:
        prep.prepare("mnist", root, fetch=offline, log=quiet)
    assert seen[:2] == [u for u in SOURCES["mnist"].archives[0].urls]  # both mirrors, in order
    assert all(u in str(e.value) for u in seen) and "--from FOLDER" in str(e.value)
    assert leftovers(root) == []


# ------------------------------------------------------------------------------ CIFAR: tarball
def test_the_cifar_tarball_becomes_an_npz_of_the_arrays_load_returns(tmp_path):
    tgz = cifar_fixture(tmp_path / "cifar-10-python.tar.gz")
    root = tmp_path / "root"
    prep.prepare("cifar10", root, source=pointed("cifar10", [tgz]), log=quiet)
    ds = load("cifar10", root, normalize="none")
    assert ds.y_train.tolist() == [0, 1, 2, 3, 4] and ds.y_test.tolist() == [5]
    assert [round(v * 255) for v in ds.x_train[:, 0, 0, 0].tolist()] == [1, 2, 3, 4, 5]
    assert round(ds.x_test[0, 0, 0, 0].item() * 255) == 6
    assert round(ds.x_train[3, 2, 31, 1].item() * 255) == 200
    assert ds.x_train.sum().item() * 255 == pytest.approx(1 + 2 + 3 + 4 + 5 + 5 * 200)
    assert ds.meta["classes"] == [f"c{i}" for i in range(10)]
    assert leftovers(root) == ["cifar10.npz"]


def test_a_tarball_of_another_dataset_is_refused(tmp_path):
    tgz = cifar_fixture(tmp_path / "cifar-100-python.tar.gz")
    root = tmp_path / "root"
    with pytest.raises(SourceFormatError, match=r"cifar-100-python/train.*not cifar100"):
        prep.prepare("cifar100", root, source=pointed("cifar100", [tgz]), log=quiet)
    assert leftovers(root) == []


# ------------------------------------------------------------------------------ UCI HAR: zip
@pytest.mark.parametrize("nested", [True, False], ids=["uci-download", "original-zip"])
def test_the_uci_har_zip_becomes_the_arrays_load_returns(tmp_path, nested):
    z = tmp_path / "har.zip"
    uci_download(z) if nested else write_zip(z, har_members())
    root = tmp_path / "root"
    prep.prepare("har", root, location=z, log=quiet)
    ds = load("har", root, normalize="none")
    assert ds.x_train.shape == (3, 9, 128) and ds.x_test.shape == (2, 9, 128)
    assert ds.y_train.tolist() == [4, 0, 5] and ds.y_test.tolist() == [1, 3]  # activity id - 1
    assert ds.train_groups.tolist() == [1, 1, 30] and ds.test_groups.tolist() == [2, 9]
    # row 2, channel 7 (total_acc_y), step 100: 7 + 0.2 + 0.1, parsed as float32
    assert ds.x_train[2, 7, 100].item() == np.float32(7.3)
    assert ds.x_test[1, 0, 0].item() == np.float32(-0.1)
    assert ds.meta["channels"] == HAR_CHANNELS and ds.meta["classes"] == ACTIVITIES


def test_a_truncated_zip_names_the_file_and_leaves_nothing(tmp_path):
    z = uci_download(tmp_path / "har.zip")
    z.write_bytes(z.read_bytes()[: len(z.read_bytes()) // 2])
    root = tmp_path / "root"
    with pytest.raises(SourceFormatError, match=r"har\.zip.*not a readable zip"):
        prep.prepare("har", root, location=z, log=quiet)
    assert leftovers(root) == []


def test_a_zip_that_is_not_uci_har_names_the_missing_member(tmp_path):
    members = har_members()
    del members["UCI HAR Dataset/test/y_test.txt"]
    z = write_zip(tmp_path / "other.zip", members)
    root = tmp_path / "root"
    with pytest.raises(SourceFormatError, match=r"other\.zip.*test/y_test\.txt"):
        prep.prepare("har", root, location=z, log=quiet)
    assert leftovers(root) == []


def test_har_files_that_disagree_on_the_number_of_windows_are_refused(tmp_path):
    members = har_members()
    members["UCI HAR Dataset/train/y_train.txt"] = "5\n1\n"
    root = tmp_path / "root"
    with pytest.raises(SourceFormatError, match="number of windows"):
        prep.prepare("har", root, location=write_zip(tmp_path / "h.zip", members), log=quiet)
    assert leftovers(root) == []


# ------------------------------------------------------------------------------ LEAF FEMNIST
def test_leaf_femnist_shards_become_the_arrays_load_returns(tmp_path):
    femnist_leaf(tmp_path / "leaf" / "data" / "femnist" / "data")
    root = tmp_path / "root"
    # LEAF's data/ folder: the femnist output is found below it
    prep.prepare("femnist", root, location=tmp_path / "leaf" / "data", log=quiet)
    ds = load("femnist", root, normalize="none")
    assert ds.meta["writer_ids"] == ["f0001_03", "f0002_11"]  # sorted: writer index 0, 1
    assert ds.y_train.tolist() == [3, 10, 61] and ds.y_test.tolist() == [0, 36]
    assert ds.train_groups.tolist() == [0, 1, 1] and ds.test_groups.tolist() == [0, 1]
    ink = ds.x_train[:, 0] * 255  # ink bright on 0: 255 - LEAF's level
    assert ink[0, 27, 27].item() == pytest.approx(255 - 204)  # pixel 783
    assert ink[1, 0, 0].item() == pytest.approx(255)  # pixel 0 black in LEAF
    assert ink[2, 1, 2].item() == pytest.approx(255 - 51)  # pixel 30 = row 1, column 2
    assert ink.sum().item() == pytest.approx(51 + 255 + 204, rel=1e-6)
    assert (ds.x_test[1, 0] * 255)[1, 1:3].tolist() == [255, 255]  # pixels 29, 30
    # LEAF's own input scale comes back exactly
    leaf_scale = load("femnist", root, normalize="leaf").x_train
    assert leaf_scale[2, 0, 1, 2].item() == pytest.approx(51 / 255)
    assert ds.meta["identity"]["train"] == 3 and ds.meta["identity"]["test"] == 2


def test_leaf_split_by_user_is_refused(tmp_path):
    leaf = femnist_leaf(tmp_path / "leaf")
    write_shard(
        leaf / "test" / "all_data_0_niid_1_keep_0_test_9.json",
        {"f0001_03": {"x": [leaf_image({})], "y": [0]}},
    )
    root = tmp_path / "root"
    with pytest.raises(SourceFormatError, match=r"f0002_11.*-t user.*-t sample"):
        prep.prepare("femnist", root, location=leaf, log=quiet)
    assert leftovers(root) == []


def test_a_truncated_shard_is_named_and_nothing_is_written(tmp_path):
    leaf = femnist_leaf(tmp_path / "leaf")
    shard = leaf / "test" / "all_data_0_niid_1_keep_0_test_9.json"
    shard.write_text(shard.read_text()[:-40])
    root = tmp_path / "root"
    with pytest.raises(SourceFormatError, match=r"all_data_0_niid_1_keep_0_test_9\.json.*JSON"):
        prep.prepare("femnist", root, location=leaf, log=quiet)
    assert leftovers(root) == []


def test_pixels_off_leafs_scale_are_refused(tmp_path):
    leaf = femnist_leaf(tmp_path / "leaf")
    write_shard(
        leaf / "train" / "all_data_0_niid_1_keep_0_train_9.json",
        {"f0002_11": {"x": [[1.0] * 784], "y": [1]}, "f0001_03": {"x": [[0.5] * 784], "y": [1]}},
    )
    with pytest.raises(SourceFormatError, match=r"f0001_03.*gray levels / 255"):
        prep.prepare("femnist", tmp_path / "root", location=leaf, log=quiet)


def test_an_archive_of_leafs_output_is_a_source(tmp_path):
    leaf = femnist_leaf(tmp_path / "out" / "femnist" / "data")
    tgz = tmp_path / "femnist-leaf.tar.gz"
    with tarfile.open(tgz, "w:gz") as tar:
        tar.add(leaf.parent, arcname="femnist")
    root = tmp_path / "root"
    prep.prepare("femnist", root, location=tgz.as_uri(), log=quiet)
    assert load("femnist", root).y_train.tolist() == [3, 10, 61]


# ------------------------------------------------------------------------------ LEAF Shakespeare
def test_leaf_shakespeare_shards_become_the_windows_load_returns(tmp_path):
    # 1,000 windows: 900 train, the test part from window 979 (21 windows); 1,100: 990 / 31
    texts = {"THE_TEMPEST_PROSPERO": role_text(1, 1080), "HAMLET_OPHELIA": role_text(2, 1180)}
    leaf = shakespeare_leaf(tmp_path / "leaf", texts)
    root = tmp_path / "root"
    prep.prepare("shakespeare", root, location=leaf, log=quiet)
    ds = load("shakespeare", root)
    assert ds.meta["roles"] == ["HAMLET_OPHELIA", "THE_TEMPEST_PROSPERO"]  # sorted
    assert len(ds.y_train) == 990 + 900 and len(ds.y_test) == 31 + 21
    assert ds.train_groups.tolist() == [0] * 990 + [1] * 900
    idx = LEAF_VOCAB.index
    ophelia, prospero = texts["HAMLET_OPHELIA"], texts["THE_TEMPEST_PROSPERO"]
    assert ds.x_train[0].tolist() == [idx(c) for c in ophelia[:80]]
    assert ds.y_train[0].item() == idx(ophelia[80])
    assert ds.x_train[990].tolist() == [idx(c) for c in prospero[:80]]
    assert ds.y_train[-1].item() == idx(prospero[899 + 80])
    assert ds.x_test[0].tolist() == [idx(c) for c in ophelia[1069 : 1069 + 80]]  # 990 + 79
    assert ds.y_test[31].item() == idx(prospero[979 + 80])
    assert ds.y_test[-1].item() == idx(prospero[-1])
    with np.load(root / "shakespeare.npz") as z:
        assert z["num_samples"].tolist() == [1100, 1000]
        assert z["num_train"].tolist() == [990, 900] and z["test_start"].tolist() == [1069, 979]
        assert z["plays"].tolist() == ["HAMLET", "THE_TEMPEST"]
        assert bytes(z["text"]).decode() == ophelia + prospero


def test_shuffled_shakespeare_windows_are_refused(tmp_path):
    texts = {"HAMLET_OPHELIA": role_text(2, 1180)}
    leaf = shakespeare_leaf(tmp_path / "leaf", texts)
    shard = leaf / "train" / "all_data_niid_0_keep_0_train_9.json"
    d = json.loads(shard.read_text())
    u = d["user_data"]["HAMLET_OPHELIA"]
    u["x"][5], u["x"][6] = u["x"][6], u["x"][5]
    u["y"][5], u["y"][6] = u["y"][6], u["y"][5]
    shard.write_text(json.dumps(d))
    root = tmp_path / "root"
    with pytest.raises(SourceFormatError, match=r"HAMLET_OPHELIA.*window 5.*consecutive"):
        prep.prepare("shakespeare", root, location=leaf, log=quiet)
    assert leftovers(root) == []


# ------------------------------------------------------------------------------ before any work
def test_an_unknown_name_is_refused_naming_the_accepted_ones(tmp_path):
    with pytest.raises(FlkitError, match=r"'mnsit'.*accepted: mnist, fmnist"):
        prep.prepare("mnsit", tmp_path / "root", fetch=never)
    with pytest.raises(FlkitError, match=r"'synthetic'.*accepted"):
        prep.plan(["mnist", "synthetic"])
    assert not (tmp_path / "root").exists()


def test_leaf_datasets_without_a_location_say_how_to_make_one(tmp_path):
    root = tmp_path / "root"
    with pytest.raises(FlkitError) as e:
        prep.prepare("femnist", tmp_path / "root", fetch=never)
    assert "preprocess.sh -s niid --sf 1.0 -k 0 -t sample" in str(e.value)
    assert "--from" in str(e.value)
    with pytest.raises(FlkitError, match=r"femnist and shakespeare need LEAF's output"):
        prep.plan(["all"])
    with pytest.raises(FlkitError, match=r"holds no LEAF output for shakespeare"):
        prep.plan(["shakespeare"], {None: tmp_path}, root)
    leaf = {
        "femnist": femnist_leaf(tmp_path / "leaf" / "femnist" / "data"),
        "shakespeare": shakespeare_leaf(
            tmp_path / "leaf" / "shakespeare" / "data", {"X_Y": role_text(0, 1080)}
        ),
    }
    todo, where = prep.plan(["all"], leaf, root)
    assert todo == list(SOURCES) and set(where) == {"femnist", "shakespeare"}
    assert not (tmp_path / "root").exists()


def test_a_bad_location_is_refused_before_any_download(tmp_path):
    with pytest.raises(FlkitError, match=r"'/no/such/folder'.*accepted: a folder, a file"):
        prep.prepare("mnist", tmp_path / "root", location="/no/such/folder", fetch=never)
    with pytest.raises(FlkitError, match=r"'ftp://x/y'.*accepted"):
        prep.prepare("har", tmp_path / "root", location="ftp://x/y", fetch=never)
    one = tmp_path / "one.gz"
    one.write_bytes(b"x")
    with pytest.raises(FlkitError, match=r"4 files.*pass the folder"):
        prep.prepare("mnist", tmp_path / "root", location=one, fetch=never)
    with pytest.raises(FlkitError, match=r"no LEAF output for femnist"):
        prep.prepare("femnist", tmp_path / "root", location=tmp_path, fetch=never)
    with pytest.raises(FlkitError, match=r"--from NAME=LOCATION"):
        prep.plan(["mnist", "har"], {None: str(tmp_path)})
    with pytest.raises(FlkitError, match=r"--from names har.*preparing: mnist"):
        prep.plan(["mnist"], {"har": str(tmp_path)})
    with pytest.raises(FlkitError, match=r"4 files.*pass the folder"):
        prep.prepare_many(["har", "mnist"], tmp_path / "root", {"mnist": one}, fetch=never)
    with pytest.raises(FlkitError, match=r"'all' stands alone"):
        prep.plan(["all", "mnist"])
    assert not (tmp_path / "root").exists()


def test_the_mirror_is_never_the_data_root(tmp_path, monkeypatch):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    monkeypatch.setenv("FLKIT_MIRROR", str(mirror))
    with pytest.raises(FlkitError, match=r"is the offline mirror"):
        prep.prepare("mnist", mirror, fetch=never)
    with pytest.raises(FlkitError, match=r"is the offline mirror"):
        prep.prepare_many(["mnist", "har"], mirror, fetch=never)


def test_a_dataset_already_in_the_root_is_kept_unless_forced(tmp_path):
    paths = idx_fixture(tmp_path / "src")
    mirror_copy = tmp_path / "mirror" / "MNIST" / "raw"
    mirror_copy.mkdir(parents=True)
    root = tmp_path / "root"
    (root / "MNIST" / "raw").mkdir(parents=True)
    for fname, p in paths.items():  # what `flkit data link` makes: links to the mirror's files
        (mirror_copy / fname).write_bytes(p.read_bytes())
        (root / "MNIST" / "raw" / fname).symlink_to(mirror_copy / fname)
    said = []
    kept = prep.prepare("mnist", root, fetch=never, log=said.append)
    assert kept.skipped and "a link to" in said[0] and "--force" in said[0]
    # forced: the links are replaced by files, the mirror's files stay as they were
    new = idx_fixture(tmp_path / "new")
    files.write_idx(new["t10k-labels-idx1-ubyte.gz"], np.array([9, 9], np.uint8))
    prep.prepare("mnist", root, force=True, source=pointed("mnist", new.values()), log=quiet)
    assert load("mnist", root).y_test.tolist() == [9, 9]
    assert not (root / "MNIST" / "raw" / "t10k-labels-idx1-ubyte.gz").is_symlink()
    assert files.read_idx(mirror_copy / "t10k-labels-idx1-ubyte.gz").tolist() == [7, 2]


# ------------------------------------------------------------------------------ the CLI
def test_cli_prepare_builds_and_reports(tmp_path, capsys):
    z = uci_download(tmp_path / "har.zip")
    root = tmp_path / "root"
    assert cli_main(["data", "prepare", "har", "--root", str(root), "--from", str(z)]) == 0
    out = capsys.readouterr().out
    assert "har: 3 train / 2 test, REDUCED copy (full 7,352 / 2,947)" in out
    assert "1 of 1 dataset(s) ready" in out
    assert cli_main(["data", "prepare", "har", "--root", str(root), "--from", str(z)]) == 0
    assert "already holds har" in capsys.readouterr().out
    assert cli_main(["data", "prepare", "nope", "--root", str(root)]) == 2
    assert "'nope'" in capsys.readouterr().err


def test_cli_prepare_goes_on_after_a_failure_and_exits_1(tmp_path, capsys):
    bad = tmp_path / "bad.zip"
    bad.write_bytes(b"PK\x03\x04 not a zip")
    good = uci_download(tmp_path / "har.zip")
    leaf = femnist_leaf(tmp_path / "leaf")
    root = tmp_path / "root"
    argv = ["data", "prepare", "har", "femnist", "--root", str(root)]
    argv += ["--from", f"har={bad}", "--from", f"femnist={leaf}"]
    assert cli_main(argv) == 1
    out = capsys.readouterr().out
    assert "har: FAILED" in out and "bad.zip" in out and "failed: har" in out
    assert sorted(p.name for p in root.iterdir()) == ["femnist.npz"]
    assert good.is_file()


# ------------------------------------------------------------------------------ everything at once
def test_prepare_all_builds_every_dataset_the_loaders_read(tmp_path, monkeypatch):
    """The target of issue 51 on a machine without the mirror, with the public sources replaced
    by fixture files in their formats: `prepare all` leaves a data root `load` reads every
    dataset from."""
    src = tmp_path / "src"
    fixtures = {
        "mnist": idx_fixture(src / "mnist").values(),
        "fmnist": idx_fixture(src / "fmnist").values(),
        "cifar10": [cifar_fixture(src / "cifar-10-python.tar.gz")],
        "svhn": svhn_fixture(src / "svhn"),
        "har": [uci_download(src / "human+activity+recognition+using+smartphones.zip")],
    }
    c100 = src / "cifar-100-python.tar.gz"
    with tarfile.open(c100, "w:gz") as tar:
        for member, d in {
            "train": {"data": np.full((2, 3072), 9, np.uint8), "fine_labels": [99, 0]},
            "test": {"data": np.zeros((1, 3072), np.uint8), "fine_labels": [42]},
            "meta": {"fine_label_names": [f"f{i}" for i in range(100)]},
        }.items():
            if member != "meta":
                d["coarse_labels"] = [19] * len(d["fine_labels"])
            else:
                d["coarse_label_names"] = [f"g{i}" for i in range(20)]
            raw = pickle.dumps(d)
            info = tarfile.TarInfo(f"cifar-100-python/{member}")
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))
    fixtures["cifar100"] = [c100]
    for name, paths in fixtures.items():
        monkeypatch.setitem(prep.SOURCES, name, pointed(name, paths))
    leaf = {
        "femnist": femnist_leaf(tmp_path / "leaf" / "femnist" / "data"),
        "shakespeare": shakespeare_leaf(
            tmp_path / "leaf" / "shakespeare" / "data", {"X_Y": role_text(0, 1080)}
        ),
    }
    root = tmp_path / "root"
    done = prep.prepare_many(["all"], root, leaf, log=quiet)
    assert [n for n, r in done if not isinstance(r, prep.Prepared)] == []
    got = {n: load(n, root) for n in prep.PREPARABLE}
    assert got["svhn"].y_train.tolist() == [0, 3]  # SVHN's label 10 is the digit 0
    assert got["cifar100"].y_train.tolist() == [99, 0]
    assert load("cifar100", root, coarse=True).meta["classes"][19] == "g19"
    assert len(got["shakespeare"].y_train) == 900 and got["femnist"].num_classes == 62
    assert sorted(p.name for p in root.iterdir()) == [
        "FashionMNIST",
        "MNIST",
        "cifar10.npz",
        "cifar100.npz",
        "femnist.npz",
        "har.npz",
        "shakespeare.npz",
        "test_32x32.mat",
        "train_32x32.mat",
    ]


# ------------------------------------------------------------------------------ the sources
def test_the_torchvision_sources_are_torchvisions_own():
    import torchvision.datasets as tvd

    for name, cls in (("mnist", tvd.MNIST), ("fmnist", tvd.FashionMNIST)):
        archives = SOURCES[name].archives
        assert [(a.filename, a.md5) for a in archives] == [tuple(r) for r in cls.resources]
        assert all(a.urls == tuple(m + a.filename for m in cls.mirrors) for a in archives)
    for name, cls in (("cifar10", tvd.CIFAR10), ("cifar100", tvd.CIFAR100)):
        (a,) = SOURCES[name].archives
        assert (a.urls, a.filename, a.md5) == ((cls.url,), cls.filename, cls.tgz_md5)
    svhn = {a.filename: a for a in SOURCES["svhn"].archives}
    for split in ("train", "test"):
        url, fname, digest = tvd.SVHN.split_list[split]
        assert (svhn[fname].urls, svhn[fname].md5) == ((url,), digest)


def test_every_source_is_in_data_readme():
    """data/README.md gives each source's URL, md5 sums, licence and citation."""
    text = (Path(__file__).resolve().parent.parent / "data" / "README.md").read_text()
    readme = " ".join(text.split())
    for src in SOURCES.values():
        for a in src.archives:
            folder = a.urls[0].rsplit("/", 1)[0]
            assert folder in readme and (a.md5 is None or a.md5 in readme), a.filename
        assert src.citation in readme and src.licence in readme, src.dataset


def test_the_default_downloader_shows_progress_over_http(tmp_path, capfd):
    """http(s) goes through torchvision's downloader (a progress bar); here from a server on
    this machine that serves the fixture files."""
    import functools
    import http.server
    import threading

    paths = idx_fixture(tmp_path / "served")
    handler = functools.partial(
        http.server.SimpleHTTPRequestHandler, directory=str(tmp_path / "served")
    )
    handler.log_message = lambda *a, **k: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        src = dataclasses.replace(
            SOURCES["mnist"],
            archives=tuple(
                dataclasses.replace(a, urls=(f"{base}/{a.filename}",), md5=md5(paths[a.filename]))
                for a in SOURCES["mnist"].archives
            ),
        )
        root = tmp_path / "root"
        prep.prepare("mnist", root, source=src)
    finally:
        server.shutdown()
    out, err = capfd.readouterr()
    assert f"fetching {base}/train-images-idx3-ubyte.gz" in out
    assert "100%" in err  # torchvision's progress bar
    assert load("mnist", root).y_train.tolist() == [5, 0, 4]


def test_a_folder_linked_out_of_the_root_is_refused_before_any_download(tmp_path):
    elsewhere = tmp_path / "mirror" / "MNIST"
    (elsewhere / "raw").mkdir(parents=True)
    root = tmp_path / "root"
    root.mkdir()
    (root / "MNIST").symlink_to(elsewhere)
    with pytest.raises(FlkitError, match=r"link out of the data root.*remove the link"):
        prep.prepare("mnist", root, fetch=never)
    assert list((elsewhere / "raw").iterdir()) == []

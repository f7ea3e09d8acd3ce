"""Where each dataset is published: the archives `flkit data prepare` builds it from, with the
checksum the publisher gives for each, and the licence, citation and size to show people.

This module is data only; :mod:`flkit.data.source_readers` turns the archives into the files
:func:`flkit.data.load` reads, and :mod:`flkit.data.prepare` fetches, checks and installs them.

The torchvision datasets carry the URLs and md5 sums of torchvision's own downloaders
(``torchvision.datasets.MNIST.resources`` and friends; a test keeps them equal). FEMNIST and
Shakespeare have no archive: LEAF publishes the scripts that build their JSON shards, not the
shards, so the user points ``prepare`` at LEAF's output (``LEAF_STEPS`` says how to make it).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Archive:
    """One published file: its name, the URLs that serve it (tried in order), the md5 sum its
    publisher gives (None where none is published) and its size in bytes (None: not known)."""

    filename: str
    urls: tuple[str, ...]
    md5: str | None = None
    size: int | None = None


@dataclass(frozen=True)
class Source:
    """A dataset's public source.

    ``reader`` names the function of :data:`flkit.data.source_readers.READERS` that builds the
    dataset from ``archives`` (or from a LEAF output folder when ``archives`` is empty);
    ``layout`` is the kind of :func:`flkit.data.files.find` the result has in the data root."""

    dataset: str
    archives: tuple[Archive, ...]
    reader: str
    layout: str
    homepage: str
    licence: str
    citation: str
    size: str
    checksum: str  # what is checked, in words


_MNIST_URLS = (
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "http://yann.lecun.com/exdb/mnist/",
)
_FMNIST_URLS = ("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",)


def _idx_archives(bases, files) -> tuple[Archive, ...]:
    return tuple(Archive(f, tuple(b + f for b in bases), md5, size) for f, md5, size in files)


SOURCES: dict[str, Source] = {
    "mnist": Source(
        "mnist",
        _idx_archives(
            _MNIST_URLS,
            (
                ("train-images-idx3-ubyte.gz", "f68b3c2dcbeaaa9fbdd348bbdeb94873", 9_912_422),
                ("train-labels-idx1-ubyte.gz", "d53e105ee54ea40749a09fcbcd1e9432", 28_881),
                ("t10k-images-idx3-ubyte.gz", "9fb629c4189551a2d022fa330f9573f3", 1_648_877),
                ("t10k-labels-idx1-ubyte.gz", "ec29112dd5afa0611ce80d1b7f02629c", 4_542),
            ),
        ),
        reader="idx",
        layout="idx",
        homepage="http://yann.lecun.com/exdb/mnist/",
        licence="none stated by the authors; they ask that the database be cited",
        citation="Y. LeCun, L. Bottou, Y. Bengio, P. Haffner. Gradient-based learning applied to "
        "document recognition. Proc. IEEE 86(11), 1998.",
        size="11.6 MB (4 gzip'd IDX files)",
        checksum="md5 of each file, as torchvision's MNIST.resources lists them",
    ),
    "fmnist": Source(
        "fmnist",
        _idx_archives(
            _FMNIST_URLS,
            (
                ("train-images-idx3-ubyte.gz", "8d4fb7e6c68d591d4c3dfef9ec88bf0d", 26_421_880),
                ("train-labels-idx1-ubyte.gz", "25c81989df183df01b3e8a0aad5dffbe", 29_515),
                ("t10k-images-idx3-ubyte.gz", "bef4ecab320f06d8554ea6380940ec79", 4_422_102),
                ("t10k-labels-idx1-ubyte.gz", "bb300cfdad3c16e7a12a480ee83cd310", 5_148),
            ),
        ),
        reader="idx",
        layout="idx",
        homepage="https://github.com/zalandoresearch/fashion-mnist",
        licence="MIT (Copyright (c) 2017 Zalando SE)",
        citation="H. Xiao, K. Rasul, R. Vollgraf. Fashion-MNIST: a Novel Image Dataset for "
        "Benchmarking Machine Learning Algorithms. arXiv:1708.07747, 2017.",
        size="30.9 MB (4 gzip'd IDX files)",
        checksum="md5 of each file, published in the Fashion-MNIST README (= torchvision's list)",
    ),
    "cifar10": Source(
        "cifar10",
        (
            Archive(
                "cifar-10-python.tar.gz",
                ("https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",),
                "c58f30108f718f92721af3b95e74349a",
                170_498_071,
            ),
        ),
        reader="cifar",
        layout="npz",
        homepage="https://www.cs.toronto.edu/~kriz/cifar.html",
        licence="none stated by the author; cite the technical report",
        citation="A. Krizhevsky. Learning Multiple Layers of Features from Tiny Images. Technical "
        "report, University of Toronto, 2009.",
        size="163 MiB download; cifar10.npz written",
        checksum="md5 published on the CIFAR page (= torchvision's CIFAR10.tgz_md5)",
    ),
    "cifar100": Source(
        "cifar100",
        (
            Archive(
                "cifar-100-python.tar.gz",
                ("https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz",),
                "eb9058c3a382ffc7106e4002c42a8d85",
                169_001_437,
            ),
        ),
        reader="cifar",
        layout="npz",
        homepage="https://www.cs.toronto.edu/~kriz/cifar.html",
        licence="none stated by the author; cite the technical report",
        citation="A. Krizhevsky. Learning Multiple Layers of Features from Tiny Images. Technical "
        "report, University of Toronto, 2009.",
        size="161 MiB download; cifar100.npz written",
        checksum="md5 published on the CIFAR page (= torchvision's CIFAR100.tgz_md5)",
    ),
    "svhn": Source(
        "svhn",
        (
            Archive(
                "train_32x32.mat",
                ("http://ufldl.stanford.edu/housenumbers/train_32x32.mat",),
                "e26dedcc434d2e4c54c9b2d4a06d8373",
            ),
            Archive(
                "test_32x32.mat",
                ("http://ufldl.stanford.edu/housenumbers/test_32x32.mat",),
                "eb5a983be6a315427106f1b164d9cef3",
            ),
        ),
        reader="copy",
        layout="svhn-mat",
        homepage="http://ufldl.stanford.edu/housenumbers/",
        licence="non-commercial use only (dataset page)",
        citation="Y. Netzer, T. Wang, A. Coates, A. Bissacco, B. Wu, A.Y. Ng. Reading Digits in "
        "Natural Images with Unsupervised Feature Learning. NIPS Workshop on Deep Learning and "
        "Unsupervised Feature Learning, 2011.",
        size="about 182 MB + 64 MB (format 2 .mat files)",
        checksum="md5 of each file, as torchvision's SVHN.split_list lists them",
    ),
    "har": Source(
        "har",
        (
            Archive(
                "human+activity+recognition+using+smartphones.zip",
                (
                    "https://archive.ics.uci.edu/static/public/240/"
                    "human+activity+recognition+using+smartphones.zip",
                ),
            ),
        ),
        reader="uci-har",
        layout="npz",
        homepage="https://archive.ics.uci.edu/dataset/240/human+activity+recognition+using+smartphones",
        licence="the dataset's README: cite the ESANN 2013 paper, no commercial use (the UCI page "
        "lists CC BY 4.0)",
        citation="D. Anguita, A. Ghio, L. Oneto, X. Parra, J.L. Reyes-Ortiz. A Public Domain "
        "Dataset for Human Activity Recognition Using Smartphones. ESANN 2013.",
        size="a zip of about 60 MB (not measured here) holding `UCI HAR Dataset.zip`; "
        "har.npz written (about 25 MB)",
        checksum="UCI publishes no checksum; the CRC-32 of every zip member is checked on reading",
    ),
    "femnist": Source(
        "femnist",
        (),
        reader="leaf-femnist",
        layout="npz",
        homepage="https://leaf.cmu.edu (scripts: https://github.com/TalwalkarLab/leaf)",
        licence="LEAF scripts: BSD 2-Clause; images: NIST Special Database 19 (NIST's terms)",
        citation="S. Caldas et al. LEAF: A Benchmark for Federated Settings. arXiv:1812.01097, "
        "2018; P. Grother. NIST Special Database 19, 1995.",
        size="LEAF downloads NIST SD19's by_class.zip and by_write.zip (hundreds of MB each; "
        "not measured here) and writes JSON shards; femnist.npz written (uint8 pixels, "
        "compressed)",
        checksum="none published for the shards; every shard is parsed and checked "
        "(users, num_samples, 784 pixels in steps of 1/255, labels 0..61)",
    ),
    "shakespeare": Source(
        "shakespeare",
        (),
        reader="leaf-shakespeare",
        layout="npz",
        homepage="https://leaf.cmu.edu (scripts: https://github.com/TalwalkarLab/leaf)",
        licence="text: public domain (Project Gutenberg eBook #100); LEAF scripts: BSD 2-Clause",
        citation="S. Caldas et al. LEAF: A Benchmark for Federated Settings. arXiv:1812.01097, "
        "2018; W. Shakespeare, The Complete Works, Project Gutenberg eBook #100.",
        size="LEAF downloads the Gutenberg complete works (a few MB; not measured here) and "
        "writes JSON shards; shakespeare.npz written (each role's text once)",
        checksum="none published for the shards; every window is checked against the role's "
        "text rebuilt from them",
    ),
}

#: how to make the LEAF output that ``flkit data prepare femnist|shakespeare --from DIR`` reads
LEAF_STEPS = {
    "femnist": "git clone https://github.com/TalwalkarLab/leaf && cd leaf/data/femnist && "
    "./preprocess.sh -s niid --sf 1.0 -k 0 -t sample --smplseed 0 --spltseed 0",
    "shakespeare": "git clone https://github.com/TalwalkarLab/leaf && cd leaf/data/shakespeare && "
    "./preprocess.sh -s niid --sf 1.0 -k 0 -t sample --tf 0.9 --smplseed 0 --spltseed 0",
}

PREPARABLE = tuple(SOURCES)

__all__ = ["Archive", "Source", "SOURCES", "LEAF_STEPS", "PREPARABLE"]

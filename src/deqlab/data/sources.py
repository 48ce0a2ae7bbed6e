"""Canonical download locations, published checksums and sizes of the image data sets.

MD5s are the ones published with the data (the MNIST and Fashion-MNIST pages, the CIFAR
page) and carried by torchvision's dataset classes (``MNIST``, ``FashionMNIST``, ``KMNIST``,
``CIFAR10``, ``CIFAR100``, ``SVHN``, ``SEMEION``); they are checked before a file is put in
place. Sizes, where known, are the byte counts of the published files (TensorFlow Datasets'
``url_checksums`` tables, or the ``Content-Length`` the server sends); ``deqlab data list``
compares them with the files on disk so that a truncated file is not reported as present.
Tests and mirrors substitute their own table through ``fetch(..., sources=...)``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RemoteFile:
    """One file of a data set: its name on the server, its published digest and size."""

    filename: str
    digest: str  # hex digest of the whole file
    algorithm: str = "md5"  # any hashlib name: "md5", "sha256", ...
    size: int | None = None  # bytes of the published file, when known


@dataclass(frozen=True)
class Source:
    """Where a data set is downloaded from: base URLs tried in order, and its files."""

    mirrors: tuple[str, ...]
    files: tuple[RemoteFile, ...]


SOURCES: dict[str, Source] = {
    # MD5s: torchvision's MNIST class; sizes: TensorFlow Datasets' url_checksums/mnist.txt.
    "mnist": Source(
        mirrors=(
            "https://ossci-datasets.s3.amazonaws.com/mnist/",  # torchvision's mirror
            "http://yann.lecun.com/exdb/mnist/",
        ),
        files=(
            RemoteFile(
                "train-images-idx3-ubyte.gz", "f68b3c2dcbeaaa9fbdd348bbdeb94873", size=9912422
            ),
            RemoteFile(
                "train-labels-idx1-ubyte.gz", "d53e105ee54ea40749a09fcbcd1e9432", size=28881
            ),
            RemoteFile(
                "t10k-images-idx3-ubyte.gz", "9fb629c4189551a2d022fa330f9573f3", size=1648877
            ),
            RemoteFile("t10k-labels-idx1-ubyte.gz", "ec29112dd5afa0611ce80d1b7f02629c", size=4542),
        ),
    ),
    # MD5s: torchvision's FashionMNIST class; sizes: TFDS url_checksums/fashion_mnist.txt.
    "fashion-mnist": Source(
        mirrors=("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",),
        files=(
            RemoteFile(
                "train-images-idx3-ubyte.gz", "8d4fb7e6c68d591d4c3dfef9ec88bf0d", size=26421880
            ),
            RemoteFile(
                "train-labels-idx1-ubyte.gz", "25c81989df183df01b3e8a0aad5dffbe", size=29515
            ),
            RemoteFile(
                "t10k-images-idx3-ubyte.gz", "bef4ecab320f06d8554ea6380940ec79", size=4422102
            ),
            RemoteFile("t10k-labels-idx1-ubyte.gz", "bb300cfdad3c16e7a12a480ee83cd310", size=5148),
        ),
    ),
    # Kuzushiji-MNIST (Clanuwat et al. 2018, "Deep Learning for Classical Japanese
    # Literature"), the IDX release of the ROIS-DS Center for Open Data in the Humanities.
    # MD5s: torchvision's KMNIST class; sizes: TFDS url_checksums/kmnist.txt.
    "kmnist": Source(
        mirrors=("http://codh.rois.ac.jp/kmnist/dataset/kmnist/",),
        files=(
            RemoteFile(
                "train-images-idx3-ubyte.gz", "bdb82020997e1d708af4cf47b453dcf7", size=18165135
            ),
            RemoteFile(
                "train-labels-idx1-ubyte.gz", "e144d726b3acfaa3e44228e80efcd344", size=29497
            ),
            RemoteFile(
                "t10k-images-idx3-ubyte.gz", "5c965bf0a639b31b8f53240b1b52f4d7", size=3041136
            ),
            RemoteFile("t10k-labels-idx1-ubyte.gz", "7320c461ea6c1c855c0b718fb2a4b134", size=5120),
        ),
    ),
    # MD5: the CIFAR page (and torchvision's CIFAR10 class); size: the server's Content-Length.
    "cifar10": Source(
        mirrors=("https://www.cs.toronto.edu/~kriz/",),
        files=(
            RemoteFile(
                "cifar-10-python.tar.gz", "c58f30108f718f92721af3b95e74349a", size=170498071
            ),
        ),
    ),
    # MD5: the CIFAR page (and torchvision's CIFAR100 class); size: the server's Content-Length.
    "cifar100": Source(
        mirrors=("https://www.cs.toronto.edu/~kriz/",),
        files=(
            RemoteFile(
                "cifar-100-python.tar.gz", "eb9058c3a382ffc7106e4002c42a8d85", size=169001437
            ),
        ),
    ),
    # SVHN cropped digits (Netzer et al. 2011); the 1.3 GB extra_32x32.mat is not fetched.
    # MD5s: torchvision's SVHN class; sizes: TFDS url_checksums/svhn_cropped.txt.
    "svhn": Source(
        mirrors=("http://ufldl.stanford.edu/housenumbers/",),
        files=(
            RemoteFile("train_32x32.mat", "e26dedcc434d2e4c54c9b2d4a06d8373", size=182040794),
            RemoteFile("test_32x32.mat", "eb5a983be6a315427106f1b164d9cef3", size=64275384),
        ),
    ),
    # SEMEION handwritten digits (UCI ML Repository). MD5: torchvision's SEMEION class; no
    # published size (list checks the file's content instead).
    "semeion": Source(
        mirrors=("http://archive.ics.uci.edu/ml/machine-learning-databases/semeion/",),
        files=(RemoteFile("semeion.data", "cb545d371d2ce14ec121470795a77432"),),
    ),
}

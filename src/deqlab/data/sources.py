"""Canonical download locations and published checksums of the image data sets.

MD5s are the ones published with the data (the MNIST and Fashion-MNIST pages, the
CIFAR-10 page) and used by torchvision; they are checked before a file is put in place.
Tests and mirrors substitute their own table through ``fetch(..., sources=...)``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RemoteFile:
    """One file of a data set: its name on the server and its published digest."""

    filename: str
    digest: str  # hex digest of the whole file
    algorithm: str = "md5"  # any hashlib name: "md5", "sha256", ...


@dataclass(frozen=True)
class Source:
    """Where a data set is downloaded from: base URLs tried in order, and its files."""

    mirrors: tuple[str, ...]
    files: tuple[RemoteFile, ...]


SOURCES: dict[str, Source] = {
    "mnist": Source(
        mirrors=(
            "https://ossci-datasets.s3.amazonaws.com/mnist/",  # torchvision's mirror
            "http://yann.lecun.com/exdb/mnist/",
        ),
        files=(
            RemoteFile("train-images-idx3-ubyte.gz", "f68b3c2dcbeaaa9fbdd348bbdeb94873"),
            RemoteFile("train-labels-idx1-ubyte.gz", "d53e105ee54ea40749a09fcbcd1e9432"),
            RemoteFile("t10k-images-idx3-ubyte.gz", "9fb629c4189551a2d022fa330f9573f3"),
            RemoteFile("t10k-labels-idx1-ubyte.gz", "ec29112dd5afa0611ce80d1b7f02629c"),
        ),
    ),
    "fashion-mnist": Source(
        mirrors=("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",),
        files=(
            RemoteFile("train-images-idx3-ubyte.gz", "8d4fb7e6c68d591d4c3dfef9ec88bf0d"),
            RemoteFile("train-labels-idx1-ubyte.gz", "25c81989df183df01b3e8a0aad5dffbe"),
            RemoteFile("t10k-images-idx3-ubyte.gz", "bef4ecab320f06d8554ea6380940ec79"),
            RemoteFile("t10k-labels-idx1-ubyte.gz", "bb300cfdad3c16e7a12a480ee83cd310"),
        ),
    ),
    "cifar10": Source(
        mirrors=("https://www.cs.toronto.edu/~kriz/",),
        files=(RemoteFile("cifar-10-python.tar.gz", "c58f30108f718f92721af3b95e74349a"),),
    ),
}

"""catalog / check_split: what `deqlab data list` shows (present, missing, incomplete, corrupt)."""

import hashlib
import re
import tarfile

import numpy as np
import pytest

from deqlab.data import (
    DATASETS,
    SOURCES,
    RemoteFile,
    Source,
    catalog,
    check_split,
    dataset_splits,
    write_cifar100_file,
    write_cifar100_meta,
    write_cifar_batch,
    write_idx,
    write_semeion,
    write_svhn,
)
from deqlab.data.cifar import BATCH_DIR, SPLIT_BATCHES
from deqlab.data.inventory import _download_names

IMAGE_SETS = [name for name in DATASETS if name not in ("sphere", "digits")]
LABELS = np.tile(np.arange(10), 3)


def _write_set(name, folder, rng):
    """Data set ``name`` in ``folder`` as ``deqlab data fetch`` leaves it (real formats)."""
    folder.mkdir(parents=True, exist_ok=True)
    n = len(LABELS)
    if name in ("mnist", "fashion-mnist", "kmnist"):
        for prefix in ("train", "t10k"):
            images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
            write_idx(folder / f"{prefix}-images-idx3-ubyte.gz", images)
            write_idx(folder / f"{prefix}-labels-idx1-ubyte.gz", LABELS.astype(np.uint8))
    elif name in ("cifar10", "cifar100"):
        inner = (
            folder
            / "staging"
            / ("cifar-10-batches-py" if name == "cifar10" else "cifar-100-python")
        )
        inner.mkdir(parents=True)
        for member in (
            SPLIT_BATCHES["train"] + SPLIT_BATCHES["test"]
            if name == "cifar10"
            else ("train", "test")
        ):
            images = rng.integers(0, 256, (n, 3, 32, 32), dtype=np.uint8)
            if name == "cifar10":
                write_cifar_batch(inner / member, images, LABELS)
            else:
                write_cifar100_file(inner / member, images, LABELS * 10, LABELS)
        if name == "cifar100":
            write_cifar100_meta(inner / "meta", [str(i) for i in range(100)], ["c"] * 20)
        archive = "cifar-10-python.tar.gz" if name == "cifar10" else "cifar-100-python.tar.gz"
        with tarfile.open(folder / archive, "w:gz") as tar:
            tar.add(inner, arcname=inner.name)
        for path in inner.iterdir():
            path.unlink()
        inner.rmdir()
        (folder / "staging").rmdir()
    elif name == "svhn":
        for split in ("train", "test"):
            images = rng.integers(0, 256, (n, 3, 32, 32), dtype=np.uint8)
            write_svhn(folder / f"{split}_32x32.mat", images, LABELS)
    else:
        images = rng.integers(0, 2, (n, 1, 16, 16), dtype=np.uint8)
        write_semeion(folder / "semeion.data", images, LABELS)


def _published(root, names=IMAGE_SETS):
    """A sources table publishing exactly the files now in ``root/<name>/`` (MD5s, sizes)."""
    table = {}
    for name in names:
        files = tuple(
            RemoteFile(p.name, hashlib.md5(p.read_bytes()).hexdigest(), size=p.stat().st_size)
            for p in sorted((root / name).iterdir())
        )
        table[name] = Source(mirrors=("http://127.0.0.1:9/",), files=files)
    return table


@pytest.fixture
def root(tmp_path):
    rng = np.random.default_rng(0)
    for name in IMAGE_SETS:
        _write_set(name, tmp_path / name, rng)
    return tmp_path


def _cut(path, n_bytes):
    """Drop the last ``n_bytes`` of ``path``: a download that stopped early."""
    path.write_bytes(path.read_bytes()[:-n_bytes])


def test_every_set_and_split_is_listed_with_its_fetch_command(tmp_path):
    entries = catalog(tmp_path)
    listed = [(e.name, e.split) for e in entries]
    assert listed[0] == ("sphere", None) and entries[0].status == "generated"
    assert listed[1:] == [(name, split) for name in DATASETS[1:] for split in dataset_splits(name)]
    assert ("semeion", "train") in listed and ("semeion", "test") not in listed
    for entry in entries[1:]:
        if entry.name == "digits":
            assert entry.status == "present" and entry.location.endswith("digits.csv.gz")
            continue
        assert entry.status == "missing" and entry.location is None
        assert entry.fetch == f"deqlab data fetch {entry.name} --dir {tmp_path}"
    assert {"kmnist", "cifar100", "svhn", "semeion"} <= {e.name for e in entries}
    assert entries[3].as_dict() == {
        "name": "fashion-mnist",
        "split": "train",
        "status": "missing",
        "location": None,
        "fetch": f"deqlab data fetch fashion-mnist --dir {tmp_path}",
        "detail": None,
    }


def test_published_files_are_present_from_their_size_alone(root):
    """Every file replaced by random bytes of its size, and those published: decoding one
    (gzip stream, images) would find it corrupt, so "present" means it was not decoded."""
    rng = np.random.default_rng(1)
    for path in root.rglob("*"):
        if path.is_file():
            path.write_bytes(rng.bytes(path.stat().st_size))
    table = _published(root)
    for checksums in (False, True):
        entries = catalog(root, checksums=checksums, sources=table)
        for entry in entries[1:]:
            assert entry.status == "present", entry
            if entry.name != "digits":
                assert entry.detail is None and entry.fetch is None
                assert entry.location.startswith(str(root / entry.name))


@pytest.mark.parametrize(
    ("name", "split", "victim", "message"),
    [
        ("mnist", "test", "t10k-images-idx3-ubyte.gz", "is a truncated gzip file"),
        ("kmnist", "train", "train-labels-idx1-ubyte.gz", "is a truncated gzip file"),
        ("cifar10", "test", "cifar-10-python.tar.gz", "is a truncated gzip file"),
        ("cifar100", "test", "cifar-100-python.tar.gz", "is a truncated gzip file"),
        ("svhn", "train", "train_32x32.mat", "is not a readable MATLAB file"),
        ("semeion", "train", "semeion.data", r"line 30: \d+ values, expected 266"),
    ],
)
@pytest.mark.parametrize("table", ["test sizes", "canonical sizes"])
def test_a_truncated_file_is_corrupt_not_present(root, name, split, victim, message, table):
    sources = _published(root) if table == "test sizes" else None
    path = root / name / victim
    _cut(path, 10)  # the last 10 bytes never arrived
    entry = check_split(name, split, root, sources=sources)
    assert entry.status == "corrupt", entry
    assert entry.location.startswith(str(root / name))
    assert entry.fetch == f"deqlab data fetch {name} --dir {root}"
    assert str(path) in entry.detail
    assert entry.detail.endswith(f"`deqlab data fetch {name} --dir {root}` replaces it")
    assert re.search(message, entry.detail), entry.detail
    if table == "test sizes":
        size = path.stat().st_size
        assert f"{victim} has {size} bytes, the published file {size + 10}" in entry.detail


def test_a_truncated_archive_is_corrupt_even_for_the_split_read_before_the_cut(root):
    """CIFAR-100 members are stored meta, test, train: the cut leaves `test` readable."""
    archive = root / "cifar100" / "cifar-100-python.tar.gz"
    _cut(archive, 40)
    with tarfile.open(archive, "r:gz") as tar:  # `test` itself still extracts
        assert len(tar.extractfile("cifar-100-python/test").read()) > 90_000
    entry = check_split("cifar100", "test", root)
    assert entry.status == "corrupt" and "is a truncated gzip file" in entry.detail


def test_a_valid_file_of_another_size_is_present_with_a_note(root):
    """Canonical sizes: the small files of this test are not the published ones but read."""
    entry = check_split("mnist", "train", root)
    assert entry.status == "present" and entry.fetch is None
    assert entry.location == str(root / "mnist" / "train-images-idx3-ubyte.gz")
    size = (root / "mnist" / "train-images-idx3-ubyte.gz").stat().st_size
    assert f"train-images-idx3-ubyte.gz has {size} bytes, the published file 9912422" in (
        entry.detail
    )
    semeion = check_split("semeion", "train", root)  # no published size: read, and fine
    assert semeion.status == "present" and semeion.detail is None
    verified = check_split("semeion", "train", root, checksums=True)  # not torchvision's bytes
    assert verified.status == "present"
    assert verified.detail == "semeion.data differs from the published file (md5)"


def test_checksums_catch_the_published_size_with_other_bytes(root):
    table = _published(root)
    path = root / "svhn" / "test_32x32.mat"
    payload = bytearray(path.read_bytes())
    payload[len(payload) // 2] ^= 0xFF
    path.write_bytes(bytes(payload))
    assert check_split("svhn", "test", root, sources=table).status == "present"  # size only
    entry = check_split("svhn", "test", root, checksums=True, sources=table)
    assert entry.status == "corrupt"
    assert entry.detail.startswith(f"{path}: md5 checksum mismatch (expected ")
    assert entry.detail.endswith(f"`deqlab data fetch svhn --dir {root}` replaces it")


def test_an_interrupted_download_is_incomplete(tmp_path):
    folder = tmp_path / "svhn"
    folder.mkdir()
    (folder / "train_32x32.mat.part").write_bytes(b"\0" * 1234)
    entry = check_split("svhn", "train", tmp_path)
    assert entry.status == "incomplete"
    assert entry.location == str(folder / "train_32x32.mat.part")
    assert entry.detail == (
        f"download stopped after 1234 bytes of train_32x32.mat; "
        f"`deqlab data fetch svhn --dir {tmp_path}` resumes it"
    )
    assert check_split("svhn", "test", tmp_path).status == "missing"


def test_damaged_extracted_files_are_corrupt_and_half_splits_missing(tmp_path):
    rng = np.random.default_rng(1)
    folder = tmp_path / "cifar10" / BATCH_DIR
    folder.mkdir(parents=True)
    for batch in SPLIT_BATCHES["train"] + SPLIT_BATCHES["test"]:
        images = rng.integers(0, 256, (10, 3, 32, 32), dtype=np.uint8)
        write_cifar_batch(folder / batch, images, np.arange(10))
    _cut(folder / "data_batch_3", 500)
    entry = check_split("cifar10", "train", tmp_path)
    assert entry.status == "corrupt" and entry.location == str(folder)
    assert f"{folder / 'data_batch_3'} is not a CIFAR-10 pickle" in entry.detail
    assert entry.detail.endswith(f"remove it, then `deqlab data fetch cifar10 --dir {tmp_path}`")
    assert check_split("cifar10", "test", tmp_path).status == "present"
    # an uncompressed IDX file (no published size): its header is checked against its length
    mnist = tmp_path / "mnist"
    write_idx(mnist / "train-images-idx3-ubyte", np.ones((5, 28, 28), dtype=np.uint8))
    write_idx(mnist / "train-labels-idx1-ubyte", np.arange(5, dtype=np.uint8))
    _cut(mnist / "train-images-idx3-ubyte", 1)
    entry = check_split("mnist", "train", tmp_path)
    assert entry.status == "corrupt" and "the file is truncated" in entry.detail
    # half a split is missing, and the note says which file is not there
    (mnist / "t10k-images-idx3-ubyte.gz").write_bytes(b"")
    entry = check_split("mnist", "test", tmp_path)
    assert entry.status == "missing"
    assert (
        entry.detail == f"{mnist} has t10k-images-idx3-ubyte.gz but no t10k-labels-idx1-ubyte[.gz]"
    )


def test_every_split_is_one_that_fetch_downloads():
    for name in IMAGE_SETS:
        published = {file.filename for file in SOURCES[name].files}
        for split in dataset_splits(name):
            assert set(_download_names(name, split)) <= published
    with pytest.raises(
        ValueError, match=r"'semeion' has no 'test' split; its splits: \('train',\)"
    ):
        check_split("semeion", "test")

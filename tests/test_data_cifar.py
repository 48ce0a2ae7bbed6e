"""CIFAR-10 and CIFAR-100 (deqlab/data/cifar.py): the real pickle layouts, exact read-back
from a directory or an archive, and malformed batches, meta files and archives named."""

import io
import pickle
import tarfile

import numpy as np
import pytest

from deqlab.data import (
    CifarFormatError,
    read_cifar10,
    read_cifar100,
    read_cifar100_meta,
    write_cifar100_file,
    write_cifar100_meta,
    write_cifar_batch,
)
from deqlab.data.cifar import BATCH_DIR, CIFAR100_DIR, SPLIT_BATCHES

# ---------------------------------------------------------------- CIFAR-10


def _batch(rng, n):
    return rng.integers(0, 256, (n, 3, 32, 32), dtype=np.uint8), rng.integers(0, 10, n)


def test_cifar_batch_uses_the_real_pickle_layout(tmp_path):
    rng = np.random.default_rng(1)
    images, labels = _batch(rng, 3)
    path = write_cifar_batch(tmp_path / "data_batch_1", images, labels)
    payload = path.read_bytes()
    assert b"numpy.core.multiarray\n_reconstruct" in payload  # as written by numpy 1 / Python 2
    batch = pickle.loads(payload, encoding="bytes")  # the loading recipe of the CIFAR page
    assert set(batch) == {b"batch_label", b"labels", b"data", b"filenames"}
    assert batch[b"data"].shape == (3, 3072) and batch[b"data"].dtype == np.uint8
    # row = 1024 red, then 1024 green, then 1024 blue, each row-major
    np.testing.assert_array_equal(batch[b"data"][1, 1024 + 32 * 5 + 7], images[1, 1, 5, 7])


@pytest.mark.parametrize("stored_as", ["directory", "archive"])
def test_cifar_read_back_exactly(tmp_path, stored_as):
    rng = np.random.default_rng(2)
    batches = {name: _batch(rng, 4) for split in ("train", "test") for name in SPLIT_BATCHES[split]}
    folder = tmp_path / BATCH_DIR
    folder.mkdir()
    for name, (images, labels) in batches.items():
        write_cifar_batch(folder / name, images, labels)
    source = folder
    if stored_as == "archive":
        source = tmp_path / "cifar-10-python.tar.gz"
        with tarfile.open(source, "w:gz") as archive:
            archive.add(folder, arcname=BATCH_DIR)
    for split in ("train", "test"):
        images, labels = read_cifar10(source, split)
        want = [batches[name] for name in SPLIT_BATCHES[split]]
        np.testing.assert_array_equal(images, np.concatenate([w[0] for w in want]))
        np.testing.assert_array_equal(labels, np.concatenate([w[1] for w in want]))
        assert labels.dtype == np.int64


def test_cifar_refuses_code_and_malformed_batches(tmp_path):
    class Exploit:
        def __reduce__(self):
            return (print, ("pwned",))

    folder = tmp_path / "d"
    folder.mkdir()
    (folder / "test_batch").write_bytes(pickle.dumps({b"data": Exploit()}, protocol=2))
    with pytest.raises(CifarFormatError, match=r"global __builtin__.print is not allowed"):
        read_cifar10(folder, "test")
    (folder / "test_batch").write_bytes(pickle.dumps({b"pixels": np.zeros(3)}, protocol=2))
    with pytest.raises(CifarFormatError, match="missing 'data'/'labels' keys"):
        read_cifar10(folder, "test")
    with pytest.raises(CifarFormatError, match="has no batch file 'data_batch_1'"):
        read_cifar10(folder, "train")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz"):
        pass
    (tmp_path / "empty.tar.gz").write_bytes(buffer.getvalue())
    with pytest.raises(CifarFormatError, match="has no member 'cifar-10-batches-py/test_batch'"):
        read_cifar10(tmp_path / "empty.tar.gz", "test")


# ---------------------------------------------------------------- CIFAR-100


FINE = [f"fine{i}" for i in range(100)]
COARSE = [f"coarse{i}" for i in range(20)]


def _cifar100_split(rng, n):
    images = rng.integers(0, 256, (n, 3, 32, 32), dtype=np.uint8)
    return images, rng.integers(0, 100, n), rng.integers(0, 20, n)


def _write_cifar100(root, rng, as_archive):
    folder = root / CIFAR100_DIR
    folder.mkdir(parents=True)
    splits = {"train": _cifar100_split(rng, 7), "test": _cifar100_split(rng, 4)}
    for split, arrays in splits.items():
        write_cifar100_file(folder / split, *arrays)
    write_cifar100_meta(folder / "meta", FINE, COARSE)
    if not as_archive:
        return folder, splits
    archive = root / "cifar-100-python.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(folder, arcname=CIFAR100_DIR)
    return archive, splits


def test_cifar100_files_use_the_real_pickle_layout(tmp_path):
    rng = np.random.default_rng(0)
    images, fine, coarse = _cifar100_split(rng, 3)
    payload = write_cifar100_file(tmp_path / "train", images, fine, coarse).read_bytes()
    assert b"numpy.core.multiarray\n_reconstruct" in payload
    batch = pickle.loads(payload, encoding="bytes")  # the loading recipe of the CIFAR page
    assert set(batch) == {b"filenames", b"batch_label", b"fine_labels", b"coarse_labels", b"data"}
    assert batch[b"data"].shape == (3, 3072) and batch[b"data"].dtype == np.uint8
    assert batch[b"fine_labels"] == [int(v) for v in fine]
    np.testing.assert_array_equal(batch[b"data"][2, 2048 + 32 * 31], images[2, 2, 31, 0])
    meta = pickle.loads(write_cifar100_meta(tmp_path / "meta", FINE, COARSE).read_bytes())
    assert meta[b"fine_label_names"][99] == b"fine99" and len(meta[b"coarse_label_names"]) == 20


@pytest.mark.parametrize("as_archive", [False, True], ids=["directory", "archive"])
def test_cifar100_read_back_exactly_with_fine_and_coarse_labels(tmp_path, as_archive):
    source, splits = _write_cifar100(tmp_path, np.random.default_rng(1), as_archive)
    for split, (images, fine, coarse) in splits.items():
        got_images, got_fine, got_coarse = read_cifar100(source, split)
        np.testing.assert_array_equal(got_images, images)
        np.testing.assert_array_equal(got_fine, fine)
        np.testing.assert_array_equal(got_coarse, coarse)
        assert got_fine.dtype == got_coarse.dtype == np.int64
    assert read_cifar100_meta(source) == (FINE, COARSE)


def test_cifar100_errors_name_the_file(tmp_path):
    rng = np.random.default_rng(2)
    folder = tmp_path / "d"
    folder.mkdir()
    images, fine, coarse = _cifar100_split(rng, 5)
    write_cifar100_file(folder / "train", images, np.r_[fine[:4], 100], coarse)
    with pytest.raises(
        CifarFormatError, match=rf"{folder / 'train'}: fine_labels must lie in 0..99"
    ):
        read_cifar100(folder, "train")
    write_cifar100_file(folder / "train", images, fine, np.r_[coarse[:4], 20])
    with pytest.raises(CifarFormatError, match=r"coarse_labels must lie in 0..19; got \d+..20"):
        read_cifar100(folder, "train")
    (folder / "test").write_bytes(pickle.dumps({b"data": images, b"labels": [0] * 5}, protocol=2))
    with pytest.raises(
        CifarFormatError, match="missing 'data'/'fine_labels'/'coarse_labels' keys; found"
    ):
        read_cifar100(folder, "test")
    good = write_cifar100_file(folder / "test", images, fine, coarse).read_bytes()
    (folder / "test").write_bytes(good[:-1000])
    with pytest.raises(CifarFormatError, match=rf"{folder / 'test'} is not a CIFAR-100 pickle"):
        read_cifar100(folder, "test")
    with pytest.raises(CifarFormatError, match="has no meta file 'meta'"):
        read_cifar100_meta(folder)
    (folder / "meta").write_bytes(pickle.dumps({b"fine_label_names": 3}, protocol=2))
    with pytest.raises(CifarFormatError, match="'fine_label_names' must be a list of strings"):
        read_cifar100_meta(folder)
    # archives: a missing member, and a truncated download
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz"):
        pass
    (tmp_path / "empty.tar.gz").write_bytes(buffer.getvalue())
    with pytest.raises(CifarFormatError, match="has no member 'cifar-100-python/test'"):
        read_cifar100(tmp_path / "empty.tar.gz", "test")
    archive, _ = _write_cifar100(tmp_path / "full", rng, as_archive=True)
    cut = tmp_path / "cifar-100-python.tar.gz"
    cut.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    with pytest.raises(CifarFormatError, match=rf"{cut} is (a truncated|not a readable)"):
        read_cifar100(cut, "train")  # members in name order: meta, test, train (cut)

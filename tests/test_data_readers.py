"""Readers of CIFAR-100 (python pickles), SVHN (.mat) and SEMEION (text), on real-format files."""

import io
import pickle
import tarfile

import numpy as np
import pytest
import scipy.io

from deqlab.data import (
    CifarFormatError,
    SemeionFormatError,
    SvhnFormatError,
    read_cifar100,
    read_cifar100_meta,
    read_semeion,
    read_svhn,
    write_cifar100_file,
    write_cifar100_meta,
    write_semeion,
    write_svhn,
)
from deqlab.data.cifar import CIFAR100_DIR

FINE = [f"fine{i}" for i in range(100)]
COARSE = [f"coarse{i}" for i in range(20)]

# ---------------------------------------------------------------- CIFAR-100


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


# ---------------------------------------------------------------- SVHN


def test_svhn_file_has_the_real_layout_and_maps_label_10_to_digit_0(tmp_path):
    rng = np.random.default_rng(3)
    images = rng.integers(0, 256, (6, 3, 32, 32), dtype=np.uint8)
    digits = np.array([0, 1, 9, 0, 5, 3])
    path = write_svhn(tmp_path / "train_32x32.mat", images, digits)
    mat = scipy.io.loadmat(path)
    assert mat["X"].shape == (32, 32, 3, 6) and mat["X"].dtype == np.uint8
    assert mat["y"].shape == (6, 1)
    np.testing.assert_array_equal(mat["y"][:, 0], [10, 1, 9, 10, 5, 3])  # 10 is the digit 0
    # X[h, w, c, n] is pixel (h, w) of channel c of image n
    np.testing.assert_array_equal(mat["X"][4, 7, 2, 5], images[5, 2, 4, 7])
    got_images, got_labels = read_svhn(path)
    np.testing.assert_array_equal(got_images, images)
    np.testing.assert_array_equal(got_labels, digits)
    assert got_labels.dtype == np.int64 and got_images.flags.c_contiguous


def test_svhn_reads_a_file_written_directly_with_savemat(tmp_path):
    """Independent of write_svhn: the layout of the published files, built by hand."""
    X = np.zeros((32, 32, 3, 3), dtype=np.uint8)
    X[0, 1, 0, 0] = 11  # image 0, red, row 0, column 1
    X[31, 0, 2, 2] = 200  # image 2, blue, row 31, column 0
    y = np.array([[10], [4], [7]], dtype=np.uint8)
    scipy.io.savemat(tmp_path / "test_32x32.mat", {"X": X, "y": y}, do_compression=True)
    images, labels = read_svhn(tmp_path / "test_32x32.mat")
    assert images.shape == (3, 3, 32, 32)
    assert images[0, 0, 0, 1] == 11 and images[2, 2, 31, 0] == 200 and images.sum() == 211
    np.testing.assert_array_equal(labels, [0, 4, 7])


def test_svhn_errors_name_the_file(tmp_path):
    path = tmp_path / "train_32x32.mat"
    images = np.zeros((4, 3, 32, 32), dtype=np.uint8)
    payload = write_svhn(path, images, np.arange(4)).read_bytes()
    path.write_bytes(payload[: len(payload) // 2])
    with pytest.raises(SvhnFormatError, match=rf"{path} is not a readable MATLAB file \(\d+ bytes"):
        read_svhn(path)
    path.write_bytes(b"<html>404 Not Found</html>")
    with pytest.raises(SvhnFormatError, match="truncated or not SVHN"):
        read_svhn(path)
    X = np.zeros((32, 32, 3, 2), dtype=np.uint8)
    scipy.io.savemat(path, {"X": X})
    with pytest.raises(SvhnFormatError, match=r"missing the variables 'X'/'y'; found \['X'\]"):
        read_svhn(path)
    scipy.io.savemat(path, {"X": X, "y": np.array([[3], [0]])})
    with pytest.raises(SvhnFormatError, match=r"labels are 1..10 \(10 for the digit 0\); image 1"):
        read_svhn(path)
    scipy.io.savemat(path, {"X": X, "y": np.array([[11], [1]])})
    with pytest.raises(SvhnFormatError, match="image 0 has 11"):
        read_svhn(path)
    scipy.io.savemat(path, {"X": X, "y": np.array([[1], [2], [3]])})
    with pytest.raises(SvhnFormatError, match=r"'y' must hold one label per image, shape \(2, 1\)"):
        read_svhn(path)
    scipy.io.savemat(path, {"X": np.zeros((28, 28, 1, 2), dtype=np.uint8), "y": [[1], [2]]})
    with pytest.raises(SvhnFormatError, match=r"'X' must be uint8 of shape \(32, 32, 3, N\)"):
        read_svhn(path)
    with pytest.raises(ValueError, match=r"`labels` must be \(N,\) digits 0..9"):
        write_svhn(path, images, np.array([0, 1, 2, 10]))


# ---------------------------------------------------------------- SEMEION


def _semeion_line(pixels, digit):
    onehot = ["1" if k == digit else "0" for k in range(10)]
    return " ".join([f"{p:.4f}" for p in pixels] + onehot) + " \n"


def test_semeion_text_is_decoded_row_by_row(tmp_path):
    """A file written by hand in the published layout: 256 pixels, then a one-hot digit."""
    first = np.zeros(256)
    first[[0, 17, 255]] = 1  # (0, 0), (1, 1), (15, 15)
    second = np.ones(256)
    second[16] = 0  # (1, 0)
    path = tmp_path / "semeion.data"
    path.write_text(_semeion_line(first, 0) + _semeion_line(second, 7) + "\n")
    images, labels = read_semeion(path)
    assert images.shape == (2, 1, 16, 16) and images.dtype == np.uint8
    np.testing.assert_array_equal(labels, [0, 7])
    assert labels.dtype == np.int64
    assert images[0, 0, 0, 0] == images[0, 0, 1, 1] == images[0, 0, 15, 15] == 1
    assert images[0].sum() == 3 and images[1, 0, 1, 0] == 0 and images[1].sum() == 255


def test_semeion_round_trip_and_layout(tmp_path):
    rng = np.random.default_rng(4)
    images = rng.integers(0, 2, (12, 1, 16, 16), dtype=np.uint8)
    labels = np.arange(12) % 10
    path = write_semeion(tmp_path / "semeion.data", images, labels)
    lines = path.read_text().splitlines()
    assert len(lines) == 12 and len(lines[3].split()) == 266
    assert set(lines[0].split()[:256]) <= {"0.0000", "1.0000"}
    assert lines[3].split()[256:] == ["0", "0", "0", "1", "0", "0", "0", "0", "0", "0"]
    got_images, got_labels = read_semeion(path)
    np.testing.assert_array_equal(got_images, images)
    np.testing.assert_array_equal(got_labels, labels)


def test_semeion_errors_name_the_file_and_line(tmp_path):
    path = tmp_path / "semeion.data"
    good = _semeion_line(np.zeros(256), 3)
    path.write_text(good * 2 + good[:500])  # a download cut in the third line
    with pytest.raises(
        SemeionFormatError,
        match=rf"{path}, line 3: \d+ values, expected 266 \(256 pixels \+ 10 label columns\); "
        "the file is truncated or not SEMEION",
    ):
        read_semeion(path)
    path.write_text(good + good.replace("0 0 0 1", "0 1 0 1"))
    with pytest.raises(SemeionFormatError, match="line 2: the 10 label columns must be one-hot"):
        read_semeion(path)
    path.write_text(good.replace("0.0000", "0.5000", 1))
    with pytest.raises(
        SemeionFormatError, match=r"line 1: pixel values must be 0 or 1; found 0\.5 in column 1"
    ):
        read_semeion(path)
    path.write_text(good.replace("0.0000", "x", 1))
    with pytest.raises(SemeionFormatError, match="line 1: could not convert string to float"):
        read_semeion(path)
    path.write_text("\n\n")
    with pytest.raises(SemeionFormatError, match="holds no rows"):
        read_semeion(path)
    path.write_bytes(b"\x1f\x8b\x08\x00binary")
    with pytest.raises(SemeionFormatError, match="is not SEMEION text"):
        read_semeion(path)

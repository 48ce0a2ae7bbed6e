"""SVHN (deqlab/data/svhn.py): the real .mat layout, label 10 as the digit 0, a file written
by scipy directly, and errors that name the file."""

import numpy as np
import pytest
import scipy.io

from deqlab.data import (
    SvhnFormatError,
    read_svhn,
    write_svhn,
)


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

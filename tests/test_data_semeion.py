"""SEMEION (deqlab/data/semeion.py): the text decoded row by row, round trips, and errors
that name the file and the line."""

import numpy as np
import pytest

from deqlab.data import (
    SemeionFormatError,
    read_semeion,
    write_semeion,
)


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

"""The IDX format (deqlab/data/idx.py): round trips of every type, the published byte layout,
and errors that name the file."""

import gzip

import numpy as np
import pytest

from deqlab.data import (
    IdxFormatError,
    read_idx,
    write_idx,
)


@pytest.mark.parametrize("suffix", ["", ".gz"])
@pytest.mark.parametrize("dtype", ["u1", "i1", "i2", "i4", "f4", "f8"])
def test_idx_round_trip_every_type(tmp_path, suffix, dtype):
    rng = np.random.default_rng(0)
    array = (rng.standard_normal((3, 4, 5)) * 50).astype(dtype)
    path = write_idx(tmp_path / f"a-idx3-ubyte{suffix}", array)
    back = read_idx(path)
    assert back.dtype == np.dtype(dtype) and back.shape == (3, 4, 5)
    np.testing.assert_array_equal(back, array)


def test_idx_bytes_follow_the_published_layout(tmp_path):
    """Header 00 00 08 03, big-endian uint32 sizes, then the pixels — as LeCun's page says."""
    labels = np.array([7, 2, 1], dtype=np.uint8)
    images = np.arange(2 * 2 * 3, dtype=np.uint8).reshape(2, 2, 3)
    write_idx(tmp_path / "l-idx1-ubyte", labels)
    write_idx(tmp_path / "i-idx3-ubyte.gz", images)
    assert (tmp_path / "l-idx1-ubyte").read_bytes() == bytes.fromhex("00000801 00000003 070201")
    raw = gzip.decompress((tmp_path / "i-idx3-ubyte.gz").read_bytes())
    assert raw[:16] == bytes.fromhex("00000803 00000002 00000002 00000003")
    assert raw[16:] == bytes(range(12))
    # big-endian multi-byte types
    write_idx(tmp_path / "s", np.array([1, 258], dtype=np.int32))
    assert (tmp_path / "s").read_bytes()[8:] == bytes.fromhex("00000001 00000102")


def test_idx_errors(tmp_path):
    (tmp_path / "junk").write_bytes(b"PK\x03\x04 not idx")
    with pytest.raises(IdxFormatError, match="not an IDX file"):
        read_idx(tmp_path / "junk")
    good = write_idx(tmp_path / "x", np.zeros((4, 3), dtype=np.uint8)).read_bytes()
    (tmp_path / "short").write_bytes(good[:-1])
    with pytest.raises(IdxFormatError, match=r"announces shape \(4, 3\)"):
        read_idx(tmp_path / "short")
    (tmp_path / "bad.gz").write_bytes(good)  # not gzip-compressed
    with pytest.raises(IdxFormatError, match="not a readable gzip file"):
        read_idx(tmp_path / "bad.gz")
    with pytest.raises(TypeError, match="`array` dtype must be one of"):
        write_idx(tmp_path / "c", np.zeros(2, dtype=np.complex64))


def test_idx_header_whose_sizes_overflow_int64_is_named_not_a_reshape_error(tmp_path):
    """65536⁴ elements = 2⁶⁴ wraps to 0 in int64: the size check must not be fooled."""
    path = tmp_path / "train-images-idx3-ubyte"
    path.write_bytes(bytes.fromhex("00000804") + np.full(4, 65536, dtype=">u4").tobytes())
    with pytest.raises(
        IdxFormatError,
        match=rf"{path}: IDX header announces shape \(65536, 65536, 65536, 65536\) "
        r"\(18446744073709551636 bytes with the header\) but the file holds 20 bytes: the file "
        r"is truncated or its header is corrupt",
    ):
        read_idx(path)
    good = write_idx(tmp_path / "y", np.zeros((2, 3), dtype=np.uint8)).read_bytes()
    (tmp_path / "long").write_bytes(good + b"\x00")
    with pytest.raises(
        IdxFormatError, match="holds 19 bytes: the file has trailing bytes or its header"
    ):
        read_idx(tmp_path / "long")


def test_truncated_idx_gz_is_named(tmp_path):
    images = np.random.default_rng(0).integers(0, 256, (50, 28, 28), dtype=np.uint8)
    payload = write_idx(tmp_path / "full.gz", images).read_bytes()
    cut = tmp_path / "t10k-images-idx3-ubyte.gz"
    cut.write_bytes(payload[: len(payload) // 2])
    with pytest.raises(IdxFormatError, match=rf"{cut} is a truncated gzip file"):
        read_idx(cut)

"""The IDX file format of MNIST and Fashion-MNIST (LeCun et al.), raw or gzip-compressed.

An IDX file is ``0x00 0x00 <type code> <ndim>``, then ``ndim`` big-endian uint32 sizes,
then the array in C order, big-endian. Type codes: 0x08 uint8, 0x09 int8, 0x0B int16,
0x0C int32, 0x0D float32, 0x0E float64. Files ending in ``.gz`` are (de)compressed.
"""

from __future__ import annotations

import gzip
import math
import os
from pathlib import Path

import numpy as np

from deqlab._atomic import write_bytes_atomic

_DTYPES = {
    0x08: np.dtype("u1"),
    0x09: np.dtype("i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
_CODES = {dtype.newbyteorder("="): code for code, dtype in _DTYPES.items()}


class IdxFormatError(ValueError):
    """A file that claims to be IDX but is not well formed."""


def _read_bytes(path: Path) -> bytes:
    if path.suffix == ".gz":
        try:
            with gzip.open(path, "rb") as stream:
                return stream.read()
        except EOFError as err:  # the stream stops before its end-of-stream marker
            raise IdxFormatError(
                f"{path} is a truncated gzip file (the compressed stream ends early): {err}"
            ) from err
        except OSError as err:  # BadGzipFile is an OSError
            raise IdxFormatError(f"{path} is not a readable gzip file: {err}") from err
    return path.read_bytes()


def read_idx(path: str | os.PathLike[str]) -> np.ndarray:
    """Read an IDX file (raw or ``.gz``) into a native-endian numpy array of its shape."""
    path = Path(path)
    raw = _read_bytes(path)
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _DTYPES:
        raise IdxFormatError(
            f"{path} is not an IDX file: header {raw[:4].hex() or '(empty)'} is not "
            f"00 00 <type code in {sorted(_DTYPES)}> <ndim>"
        )
    dtype, ndim = _DTYPES[raw[2]], raw[3]
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise IdxFormatError(f"{path}: truncated IDX header ({len(raw)} bytes, ndim {ndim})")
    shape = tuple(int(s) for s in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    # Python ints: a product of uint32 sizes can exceed int64 (and wrap around to match).
    expected = header + math.prod(shape) * dtype.itemsize
    if len(raw) != expected:
        what = "is truncated" if len(raw) < expected else "has trailing bytes"
        raise IdxFormatError(
            f"{path}: IDX header announces shape {shape} ({expected} bytes with the header) "
            f"but the file holds {len(raw)} bytes: the file {what} or its header is corrupt"
        )
    array = np.frombuffer(raw, dtype=dtype, offset=header).reshape(shape)
    return array.astype(dtype.newbyteorder("="), copy=True)


def write_idx(path: str | os.PathLike[str], array: np.ndarray) -> Path:
    """Write ``array`` as an IDX file, atomically; gzip-compressed when ``path`` ends in .gz."""
    path = Path(path)
    array = np.asarray(array)
    native = array.dtype.newbyteorder("=")
    if native not in _CODES:
        valid = ", ".join(str(d.newbyteorder("=")) for d in _DTYPES.values())
        raise TypeError(f"`array` dtype must be one of {valid}; got {array.dtype}")
    code = _CODES[native]
    header = bytes([0, 0, code, array.ndim]) + np.asarray(array.shape, dtype=">u4").tobytes()
    payload = header + np.ascontiguousarray(array, dtype=_DTYPES[code]).tobytes()
    if path.suffix == ".gz":
        payload = gzip.compress(payload, mtime=0)
    return write_bytes_atomic(path, payload)

"""The one reader of a user's ``.npy`` file: one real array, or one line saying why not.

Every command that reads an array the user gives (``deqlab kernel --input``, ``deqlab verify
--input``) goes through :func:`read_npy`, so the same file gets the same answer from both.
Before numpy reads anything the file is checked:

* it starts with the NumPy magic string (``\\x93NUMPY``): 200 MB of zero bytes or a pickle is
  "not a valid .npy array file", and pickled data is never loaded (``allow_pickle=False``);
* a ``.npz`` archive (a zip: ``PK``) is named as such;
* the header's shape × itemsize equals the bytes that follow it: a header that claims
  10⁶ × 10⁶ float64 over 800 bytes of data is refused before numpy tries to allocate 8 TB;
* the dtype is real (float, int, unsigned), and the entries are finite.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from deqlab._memory import nbytes

__all__ = ["NPY_MAGIC", "read_npy"]

#: The first bytes of every .npy file (numpy.lib.format.MAGIC_PREFIX).
NPY_MAGIC = b"\x93NUMPY"
_NOT_NPY = "is not a valid .npy array file"


def read_npy(path: str | os.PathLike[str], where: str) -> np.ndarray:
    """The array in the .npy file ``path``: real (float, int or unsigned), finite.

    ``where`` is how the messages name the file, e.g. "`--input` 'X.npy'": every problem is
    one ValueError line that starts with it (module docstring).
    """
    path = Path(path)
    if not path.exists():
        raise ValueError(f"{where}: no such file")
    if path.is_dir():
        raise ValueError(f"{where} is a directory, not a .npy file")
    try:
        with open(path, "rb") as handle:
            _check_header(handle, path.stat().st_size, where)
            handle.seek(0)
            array = np.load(handle, allow_pickle=False)
    except OSError as err:
        raise ValueError(f"{where} cannot be read: {err.strerror or err}") from None
    except (ValueError, EOFError) as err:
        if str(err).startswith(where):
            raise
        detail = " ".join(str(err).split()) or "the file ends early"
        raise ValueError(f"{where} {_NOT_NPY}: {detail}") from None
    if array.dtype.kind not in "fiu":
        raise ValueError(
            f"{where} holds an array of dtype {array.dtype}; expected real numbers (float or int)"
        )
    bad = int((~np.isfinite(array)).sum()) if array.dtype.kind == "f" else 0
    if bad:
        raise ValueError(f"{where} has {bad} NaN/Inf entries; the data must be finite")
    return array


def _check_header(handle, size: int, where: str) -> None:
    """Refuse what is not a .npy file, an object array, or a header that claims more (or
    less) data than the file holds; leaves ``handle`` anywhere."""
    head = handle.read(len(NPY_MAGIC))
    if head.startswith(b"PK"):
        raise ValueError(
            f"{where} is a .npz archive, not a .npy array file; save the one array with numpy.save"
        )
    if head != NPY_MAGIC:
        raise ValueError(
            f"{where} {_NOT_NPY} (it does not start with the NumPy header; pickled data is "
            "never loaded); save the array with numpy.save"
        )
    handle.seek(0)
    version = np.lib.format.read_magic(handle)
    read = {
        (1, 0): np.lib.format.read_array_header_1_0,
        (2, 0): np.lib.format.read_array_header_2_0,
    }
    if version not in read:
        return  # a newer format: numpy's own reader decides
    shape, _, dtype = read[version](handle)
    if dtype.hasobject:
        raise ValueError(
            f"{where} holds Python objects (dtype object), not numbers; pickled data is never "
            "loaded"
        )
    claimed = math.prod(shape) * dtype.itemsize
    held = size - handle.tell()
    if claimed != held:
        raise ValueError(
            f"{where} {_NOT_NPY}: its header claims shape {shape} {dtype} = {nbytes(claimed)}, "
            f"but the file holds {nbytes(held)} of data"
        )

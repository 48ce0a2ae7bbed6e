"""CIFAR-10 from its "python version" pickle batches (Krizhevsky, 2009).

The canonical archive ``cifar-10-python.tar.gz`` holds ``cifar-10-batches-py/`` with
``data_batch_1`` … ``data_batch_5`` (train, 5 × 10000) and ``test_batch`` (10000). Each
batch is a Python-2 pickle of a dict: ``data`` a (10000, 3072) uint8 array — a row is one
32×32 image, channel-major (1024 red, 1024 green, 1024 blue, each row-major) — and
``labels`` a list of ints in 0..9. Both the extracted directory and the archive itself
are read (the archive without extracting it).

Pickles run code when loaded, so batches are read with an unpickler that only builds
numpy arrays, lists, dicts and strings: a file from elsewhere cannot execute anything.
"""

from __future__ import annotations

import codecs
import io
import pickle
import tarfile
from pathlib import Path

import numpy as np

from deqlab._atomic import write_bytes_atomic

BATCH_DIR = "cifar-10-batches-py"
ARCHIVE = "cifar-10-python.tar.gz"
SPLIT_BATCHES = {
    "train": tuple(f"data_batch_{i}" for i in range(1, 6)),
    "test": ("test_batch",),
}
IMAGE_SHAPE = (3, 32, 32)
_ROW = int(np.prod(IMAGE_SHAPE))


class CifarFormatError(ValueError):
    """A CIFAR batch that is not a well-formed pickle of ``data`` and ``labels``."""


_RECONSTRUCT = np.ndarray.__reduce__(np.zeros(0))[0]  # numpy's array-rebuilding function
_ALLOWED_GLOBALS = {
    ("numpy.core.multiarray", "_reconstruct"): _RECONSTRUCT,  # numpy 1.x pickles (the real files)
    ("numpy._core.multiarray", "_reconstruct"): _RECONSTRUCT,  # numpy 2.x pickles
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("_codecs", "encode"): codecs.encode,  # how Python 3 protocol-2 pickles store bytes
}


class _ArrayUnpickler(pickle.Unpickler):
    """An unpickler that resolves only the globals a numpy-array pickle needs."""

    def find_class(self, module: str, name: str) -> object:
        try:
            return _ALLOWED_GLOBALS[module, name]
        except KeyError:
            raise pickle.UnpicklingError(
                f"global {module}.{name} is not allowed in a CIFAR batch"
            ) from None


def _decode_batch(payload: bytes, where: str) -> tuple[np.ndarray, np.ndarray]:
    """(images (N, 3, 32, 32) uint8, labels (N,) int64) from one pickled batch."""
    try:
        batch = _ArrayUnpickler(io.BytesIO(payload), encoding="bytes").load()
    except Exception as err:  # any unpickling failure means: not a CIFAR batch
        raise CifarFormatError(f"{where} is not a CIFAR-10 pickle batch: {err}") from err
    if not isinstance(batch, dict):
        raise CifarFormatError(f"{where}: expected a dict, got {type(batch).__name__}")
    batch = {k.decode() if isinstance(k, bytes) else k: v for k, v in batch.items()}
    if "data" not in batch or "labels" not in batch:
        raise CifarFormatError(f"{where}: missing 'data'/'labels' keys; found {sorted(batch)}")
    data, labels = np.asarray(batch["data"]), np.asarray(batch["labels"], dtype=np.int64)
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != _ROW:
        raise CifarFormatError(
            f"{where}: 'data' must be uint8 of shape (N, {_ROW}); got {data.dtype} {data.shape}"
        )
    if labels.shape != (data.shape[0],):
        raise CifarFormatError(f"{where}: {labels.shape[0]} labels for {data.shape[0]} images")
    return data.reshape(-1, *IMAGE_SHAPE), labels


def read_cifar10(source: str | Path, split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """Read a CIFAR-10 split from ``cifar-10-batches-py/`` or ``cifar-10-python.tar.gz``.

    Returns ``(images, labels)``: uint8 of shape (N, 3, 32, 32) and int64 of shape (N,),
    batches concatenated in order (N = 50000 for train, 10000 for test).
    """
    source = Path(source)
    names = SPLIT_BATCHES[split]
    payloads: list[tuple[bytes, str]] = []
    if source.is_dir():
        for name in names:
            path = source / name
            if not path.is_file():
                raise CifarFormatError(f"{source} has no batch file {name!r}")
            payloads.append((path.read_bytes(), str(path)))
    else:
        try:
            with tarfile.open(source, "r:gz") as archive:
                for name in names:
                    member = f"{BATCH_DIR}/{name}"
                    try:
                        stream = archive.extractfile(member)
                    except KeyError:
                        stream = None
                    if stream is None:
                        raise CifarFormatError(f"{source} has no member {member!r}")
                    payloads.append((stream.read(), f"{source}:{member}"))
        except (tarfile.TarError, OSError, EOFError) as err:
            raise CifarFormatError(f"{source} is not a readable .tar.gz archive: {err}") from err
    parts = [_decode_batch(payload, where) for payload, where in payloads]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def write_cifar_batch(path: str | Path, images: np.ndarray, labels: np.ndarray) -> Path:
    """Write ``images`` (N, 3, 32, 32) uint8 and ``labels`` (N,) as a CIFAR-10 pickle batch.

    The layout of the real files (bytes keys, protocol 2, numpy-1 module path), so that
    small test files exercise the same reader path as the canonical ones.
    """
    images, labels = np.asarray(images), np.asarray(labels)
    if images.dtype != np.uint8 or images.shape[1:] != IMAGE_SHAPE:
        raise ValueError(
            f"`images` must be uint8 (N, 3, 32, 32); got {images.dtype} {images.shape}"
        )
    batch = {
        b"batch_label": b"written by deqlab",
        b"labels": [int(v) for v in labels],
        b"data": images.reshape(len(images), _ROW),
        b"filenames": [f"{i}.png".encode() for i in range(len(images))],
    }
    payload = pickle.dumps(batch, protocol=2)
    payload = payload.replace(b"numpy._core.multiarray\n", b"numpy.core.multiarray\n")
    return write_bytes_atomic(Path(path), payload)

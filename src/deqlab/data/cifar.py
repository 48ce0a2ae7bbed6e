"""CIFAR-10 and CIFAR-100 from their "python version" pickles (Krizhevsky, 2009).

CIFAR-10: the canonical archive ``cifar-10-python.tar.gz`` holds ``cifar-10-batches-py/``
with ``data_batch_1`` … ``data_batch_5`` (train, 5 × 10000) and ``test_batch`` (10000).
Each batch is a Python-2 pickle of a dict: ``data`` a (10000, 3072) uint8 array — a row is
one 32×32 image, channel-major (1024 red, 1024 green, 1024 blue, each row-major) — and
``labels`` a list of ints in 0..9.

CIFAR-100: ``cifar-100-python.tar.gz`` holds ``cifar-100-python/`` with ``train`` (50000
images), ``test`` (10000) and ``meta``. ``train``/``test`` are pickles of the same kind
whose labels are ``fine_labels`` (0..99, the 100 classes) and ``coarse_labels`` (0..19,
the 20 superclasses); ``meta`` holds ``fine_label_names`` and ``coarse_label_names``.

Both the extracted directory and the archive itself are read (the archive without
extracting it). Pickles run code when loaded, so they are read with an unpickler that only
builds numpy arrays, lists, dicts and strings: a file from elsewhere cannot execute anything.
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
CIFAR100_DIR = "cifar-100-python"
CIFAR100_ARCHIVE = "cifar-100-python.tar.gz"
CIFAR100_FILES = {"train": "train", "test": "test"}
CIFAR100_META = "meta"
N_FINE, N_COARSE = 100, 20
IMAGE_SHAPE = (3, 32, 32)
_ROW = int(np.prod(IMAGE_SHAPE))


class CifarFormatError(ValueError):
    """A CIFAR file that is not a well-formed pickle of ``data`` and its labels."""


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


def _unpickle(payload: bytes, where: str, what: str) -> dict[str, object]:
    """The dict pickled in ``payload`` (bytes keys decoded), read without running code."""
    try:
        batch = _ArrayUnpickler(io.BytesIO(payload), encoding="bytes").load()
    except Exception as err:  # any unpickling failure means: not a CIFAR pickle
        raise CifarFormatError(
            f"{where} is not a {what} pickle ({len(payload)} bytes; truncated or not CIFAR): {err}"
        ) from err
    if not isinstance(batch, dict):
        raise CifarFormatError(f"{where}: expected a dict, got {type(batch).__name__}")
    return {k.decode() if isinstance(k, bytes) else k: v for k, v in batch.items()}


def _decode_batch(
    payload: bytes, where: str, label_keys: tuple[str, ...] = ("labels",), what: str = "CIFAR-10"
) -> tuple[np.ndarray, ...]:
    """(images (N, 3, 32, 32) uint8, then one (N,) int64 array per label key) of a batch."""
    batch = _unpickle(payload, where, what)
    if "data" not in batch or any(key not in batch for key in label_keys):
        wanted = "/".join(repr(k) for k in ("data", *label_keys))
        raise CifarFormatError(f"{where}: missing {wanted} keys; found {sorted(batch)}")
    data = np.asarray(batch["data"])
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != _ROW:
        raise CifarFormatError(
            f"{where}: 'data' must be uint8 of shape (N, {_ROW}); got {data.dtype} {data.shape}"
        )
    labels = []
    for key in label_keys:
        values = np.asarray(batch[key], dtype=np.int64)
        if values.shape != (data.shape[0],):
            raise CifarFormatError(
                f"{where}: {values.shape[0] if values.ndim else 1} {key} for {data.shape[0]} images"
            )
        labels.append(values)
    return (data.reshape(-1, *IMAGE_SHAPE), *labels)


def _read_members(
    source: Path, member_dir: str, names: tuple[str, ...], kind: str
) -> list[tuple[bytes, str]]:
    """``(payload, where)`` of each file ``names`` in directory ``source`` or in its archive."""
    payloads: list[tuple[bytes, str]] = []
    if source.is_dir():
        for name in names:
            path = source / name
            if not path.is_file():
                raise CifarFormatError(f"{source} has no {kind} file {name!r}")
            payloads.append((path.read_bytes(), str(path)))
        return payloads
    try:
        with tarfile.open(source, "r:gz") as archive:
            for name in names:
                member = f"{member_dir}/{name}"
                try:
                    stream = archive.extractfile(member)
                except KeyError:
                    stream = None
                if stream is None:
                    raise CifarFormatError(f"{source} has no member {member!r}")
                payloads.append((stream.read(), f"{source}:{member}"))
    except EOFError as err:
        raise CifarFormatError(
            f"{source} is a truncated .tar.gz archive (the compressed stream ends early): {err}"
        ) from err
    except (tarfile.TarError, OSError) as err:
        raise CifarFormatError(
            f"{source} is not a readable .tar.gz archive (truncated or corrupt): {err}"
        ) from err
    return payloads


def read_cifar10(source: str | Path, split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """Read a CIFAR-10 split from ``cifar-10-batches-py/`` or ``cifar-10-python.tar.gz``.

    Returns ``(images, labels)``: uint8 of shape (N, 3, 32, 32) and int64 of shape (N,),
    batches concatenated in order (N = 50000 for train, 10000 for test).
    """
    payloads = _read_members(Path(source), BATCH_DIR, SPLIT_BATCHES[split], "batch")
    parts = [_decode_batch(payload, where) for payload, where in payloads]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def read_cifar100(
    source: str | Path, split: str = "train"
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Read a CIFAR-100 split from ``cifar-100-python/`` or ``cifar-100-python.tar.gz``.

    Returns ``(images, fine_labels, coarse_labels)``: uint8 (N, 3, 32, 32), int64 (N,) in
    0..99 and int64 (N,) in 0..19 (N = 50000 for train, 10000 for test).
    """
    source = Path(source)
    ((payload, where),) = _read_members(source, CIFAR100_DIR, (CIFAR100_FILES[split],), "split")
    images, fine, coarse = _decode_batch(
        payload, where, ("fine_labels", "coarse_labels"), "CIFAR-100"
    )
    for key, values, count in (("fine_labels", fine, N_FINE), ("coarse_labels", coarse, N_COARSE)):
        if values.size and (values.min() < 0 or values.max() >= count):
            raise CifarFormatError(
                f"{where}: {key} must lie in 0..{count - 1}; got {values.min()}..{values.max()}"
            )
    return images, fine, coarse


def read_cifar100_meta(source: str | Path) -> tuple[list[str], list[str]]:
    """``(fine_label_names, coarse_label_names)`` (100 and 20 names) from the ``meta`` file."""
    ((payload, where),) = _read_members(Path(source), CIFAR100_DIR, (CIFAR100_META,), "meta")
    meta = _unpickle(payload, where, "CIFAR-100 meta")
    names = []
    for key in ("fine_label_names", "coarse_label_names"):
        values = meta.get(key)
        if not isinstance(values, list) or not all(isinstance(v, (bytes, str)) for v in values):
            raise CifarFormatError(f"{where}: {key!r} must be a list of strings; found {meta}")
        names.append([v.decode("latin-1") if isinstance(v, bytes) else v for v in values])
    return names[0], names[1]


def _dump_like_the_real_files(obj: dict[bytes, object], path: str | Path) -> Path:
    """Protocol 2 with numpy 1's module path, as the canonical (Python 2) files."""
    payload = pickle.dumps(obj, protocol=2)
    payload = payload.replace(b"numpy._core.multiarray\n", b"numpy.core.multiarray\n")
    return write_bytes_atomic(Path(path), payload)


def _check_images(images: np.ndarray) -> np.ndarray:
    images = np.asarray(images)
    if images.dtype != np.uint8 or images.shape[1:] != IMAGE_SHAPE:
        raise ValueError(
            f"`images` must be uint8 (N, 3, 32, 32); got {images.dtype} {images.shape}"
        )
    return images


def write_cifar_batch(path: str | Path, images: np.ndarray, labels: np.ndarray) -> Path:
    """Write ``images`` (N, 3, 32, 32) uint8 and ``labels`` (N,) as a CIFAR-10 pickle batch.

    The layout of the real files (bytes keys, protocol 2, numpy-1 module path), so that
    small test files exercise the same reader path as the canonical ones.
    """
    images = _check_images(images)
    batch = {
        b"batch_label": b"written by deqlab",
        b"labels": [int(v) for v in np.asarray(labels)],
        b"data": images.reshape(len(images), _ROW),
        b"filenames": [f"{i}.png".encode() for i in range(len(images))],
    }
    return _dump_like_the_real_files(batch, path)


def write_cifar100_file(
    path: str | Path, images: np.ndarray, fine_labels: np.ndarray, coarse_labels: np.ndarray
) -> Path:
    """Write a CIFAR-100 ``train``/``test`` pickle: the keys and layout of the real files."""
    images = _check_images(images)
    batch = {
        b"filenames": [f"{i}.png".encode() for i in range(len(images))],
        b"batch_label": b"written by deqlab",
        b"fine_labels": [int(v) for v in np.asarray(fine_labels)],
        b"coarse_labels": [int(v) for v in np.asarray(coarse_labels)],
        b"data": images.reshape(len(images), _ROW),
    }
    return _dump_like_the_real_files(batch, path)


def write_cifar100_meta(
    path: str | Path, fine_label_names: list[str], coarse_label_names: list[str]
) -> Path:
    """Write a CIFAR-100 ``meta`` pickle (names stored as bytes, as in the real file)."""
    meta = {
        b"fine_label_names": [name.encode() for name in fine_label_names],
        b"coarse_label_names": [name.encode() for name in coarse_label_names],
    }
    return _dump_like_the_real_files(meta, path)

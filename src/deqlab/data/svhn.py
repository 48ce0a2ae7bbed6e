"""SVHN, the cropped-digits format (Netzer et al., 2011): ``train_32x32.mat``, ``test_32x32.mat``.

Each file is a MATLAB (v5) file with two variables: ``X``, uint8 of shape (32, 32, 3, N) —
height, width, RGB channel, image — and ``y``, of shape (N, 1), the digit of each image
with the label 10 standing for the digit 0 (so the labels are 1..10). They are read with
``scipy.io.loadmat`` (which builds arrays only: no code runs) and returned the way the
other readers return theirs: images (N, 3, 32, 32), labels 0..9 (10 mapped to 0).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from deqlab._atomic import atomic_path

SPLIT_FILES = {"train": "train_32x32.mat", "test": "test_32x32.mat"}
IMAGE_SHAPE = (3, 32, 32)
_STORED_SHAPE = (32, 32, 3)  # (H, W, C) before the image axis


class SvhnFormatError(ValueError):
    """A file that is not a well-formed SVHN ``.mat`` file of ``X`` and ``y``."""


def read_svhn(path: str | os.PathLike[str]) -> tuple[np.ndarray, np.ndarray]:
    """Read ``train_32x32.mat`` or ``test_32x32.mat``.

    Returns ``(images, labels)``: uint8 of shape (N, 3, 32, 32) (C-contiguous, channel-major
    like CIFAR) and int64 of shape (N,) in 0..9 — the stored label 10 is the digit 0.
    """
    from scipy.io import loadmat

    path = Path(path)
    try:
        mat = loadmat(path)
    except Exception as err:  # scipy raises ValueError, OSError, IndexError, MatReadError…
        raise SvhnFormatError(
            f"{path} is not a readable MATLAB file ({path.stat().st_size} bytes; truncated "
            f"or not SVHN): {type(err).__name__}: {err}"
        ) from err
    if "X" not in mat or "y" not in mat:
        found = sorted(k for k in mat if not k.startswith("__"))
        raise SvhnFormatError(f"{path}: missing the variables 'X'/'y'; found {found}")
    stored, labels = np.asarray(mat["X"]), np.asarray(mat["y"])
    if stored.dtype != np.uint8 or stored.ndim != 4 or stored.shape[:3] != _STORED_SHAPE:
        raise SvhnFormatError(
            f"{path}: 'X' must be uint8 of shape (32, 32, 3, N); got {stored.dtype} {stored.shape}"
        )
    n = stored.shape[3]
    if labels.shape not in ((n, 1), (n,)) or not np.issubdtype(labels.dtype, np.number):
        raise SvhnFormatError(
            f"{path}: 'y' must hold one label per image, shape ({n}, 1); got {labels.dtype} "
            f"{labels.shape}"
        )
    labels = labels.reshape(n).astype(np.int64)
    bad = (labels < 1) | (labels > 10)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise SvhnFormatError(
            f"{path}: SVHN labels are 1..10 (10 for the digit 0); image {i} has {labels[i]}"
        )
    labels[labels == 10] = 0
    images = np.ascontiguousarray(stored.transpose(3, 2, 0, 1))  # (N, C, H, W)
    return images, labels


def write_svhn(path: str | os.PathLike[str], images: np.ndarray, labels: np.ndarray) -> Path:
    """Write ``images`` (N, 3, 32, 32) uint8 and digits ``labels`` (N,) in 0..9 as SVHN does.

    ``X`` (32, 32, 3, N) uint8 and ``y`` (N, 1) uint8 with the digit 0 stored as 10, in a
    zlib-compressed MATLAB v5 file (the layout of the canonical files), written atomically.
    """
    from scipy.io import savemat

    images, labels = np.asarray(images), np.asarray(labels)
    if images.dtype != np.uint8 or images.shape[1:] != IMAGE_SHAPE:
        raise ValueError(
            f"`images` must be uint8 (N, 3, 32, 32); got {images.dtype} {images.shape}"
        )
    if labels.shape != (len(images),) or labels.min(initial=0) < 0 or labels.max(initial=0) > 9:
        raise ValueError(f"`labels` must be (N,) digits 0..9; got {labels.shape}")
    stored = np.where(labels == 0, 10, labels).astype(np.uint8).reshape(-1, 1)
    path = Path(path)
    with atomic_path(path) as tmp, open(tmp, "wb") as stream:
        savemat(stream, {"X": images.transpose(2, 3, 1, 0), "y": stored}, do_compression=True)
    return path

"""SEMEION handwritten digits (Semeion Research Center, Rome; UCI ML Repository): 1593 images.

``semeion.data`` is text, one image per line: 256 pixel values (a 16×16 image, row-major,
each pixel thresholded to 0 or 1 and written as ``0.0000`` / ``1.0000``) followed by 10
label columns, a one-hot encoding of the digit (column k is the digit k). Values are
separated by whitespace. There is a single split (no train/test partition).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from deqlab._atomic import write_text_atomic

FILENAME = "semeion.data"
SIDE = 16
N_PIXELS = SIDE * SIDE
N_LABELS = 10
_COLUMNS = N_PIXELS + N_LABELS


class SemeionFormatError(ValueError):
    """A file that is not SEMEION text: rows of 256 binary pixels and a one-hot digit."""


def read_semeion(path: str | os.PathLike[str]) -> tuple[np.ndarray, np.ndarray]:
    """Read ``semeion.data``.

    Returns ``(images, labels)``: uint8 of shape (N, 1, 16, 16) with values 0 or 1 (as
    stored) and int64 of shape (N,) in 0..9, the position of the 1 in each one-hot row.
    """
    path = Path(path)
    try:
        text = path.read_bytes().decode("ascii")
    except UnicodeDecodeError as err:
        raise SemeionFormatError(f"{path} is not SEMEION text (not ASCII: {err})") from err
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if not fields:
            continue  # blank lines (e.g. a trailing one) carry nothing
        if len(fields) != _COLUMNS:
            raise SemeionFormatError(
                f"{path}, line {number}: {len(fields)} values, expected {_COLUMNS} "
                f"({N_PIXELS} pixels + {N_LABELS} label columns); the file is truncated "
                f"or not SEMEION"
            )
        try:
            rows.append([float(field) for field in fields])
        except ValueError as err:
            raise SemeionFormatError(f"{path}, line {number}: {err}") from err
    if not rows:
        raise SemeionFormatError(f"{path} holds no rows ({path.stat().st_size} bytes)")
    table = np.asarray(rows)  # (N, 266)
    pixels, onehot = table[:, :N_PIXELS], table[:, N_PIXELS:]
    for what, block in (("pixel", pixels), ("label", onehot)):
        bad = np.argwhere((block != 0) & (block != 1))
        if bad.size:
            row, col = bad[0]
            raise SemeionFormatError(
                f"{path}, line {row + 1}: {what} values must be 0 or 1; found "
                f"{block[row, col]:g} in column {col + 1 + (N_PIXELS if what == 'label' else 0)}"
            )
    ones = onehot.sum(axis=1)
    bad_rows = np.flatnonzero(ones != 1)
    if bad_rows.size:
        row = int(bad_rows[0])
        raise SemeionFormatError(
            f"{path}, line {row + 1}: the 10 label columns must be one-hot (exactly one 1); "
            f"found {int(ones[row])} ones"
        )
    images = pixels.astype(np.uint8).reshape(-1, 1, SIDE, SIDE)
    labels = onehot.argmax(axis=1).astype(np.int64)
    return images, labels


def write_semeion(path: str | os.PathLike[str], images: np.ndarray, labels: np.ndarray) -> Path:
    """Write binary ``images`` (N, 1, 16, 16) and digits ``labels`` (N,) as ``semeion.data``.

    The layout of the real file: ``%.4f`` pixels, then the one-hot digit as integers, each
    value followed by a space, one image per line.
    """
    images, labels = np.asarray(images), np.asarray(labels)
    if images.shape[1:] != (1, SIDE, SIDE) or not np.isin(images, (0, 1)).all():
        raise ValueError(f"`images` must be (N, 1, 16, 16) of 0/1; got {images.shape}")
    if labels.shape != (len(images),) or labels.min(initial=0) < 0 or labels.max(initial=0) > 9:
        raise ValueError(f"`labels` must be (N,) digits 0..9; got {labels.shape}")
    lines = []
    for image, label in zip(images.reshape(len(images), -1), labels, strict=True):
        onehot = ["1" if k == label else "0" for k in range(N_LABELS)]
        lines.append(" ".join([f"{float(v):.4f}" for v in image] + onehot) + " \n")
    return write_text_atomic(Path(path), "".join(lines))

"""scikit-learn's bundled 8×8 handwritten digits (1797 images, pixel values 0..16).

A copy of the UCI "Optical Recognition of Handwritten Digits" test set that ships with
scikit-learn, so it is always available offline.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

PIXEL_MAX = 16


def digits_path() -> Path:
    """The file scikit-learn reads ``load_digits`` from (for provenance)."""
    import sklearn.datasets

    return Path(sklearn.datasets.__file__).parent / "data" / "digits.csv.gz"


def read_digits() -> tuple[np.ndarray, np.ndarray]:
    """``(images (1797, 1, 8, 8) uint8 with values 0..16, labels (1797,) int64)``."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    return bunch.images.astype(np.uint8)[:, None], bunch.target.astype(np.int64)

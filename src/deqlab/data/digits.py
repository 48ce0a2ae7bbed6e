"""scikit-learn's bundled 8×8 handwritten digits (1797 images, pixel values 0..16).

A copy of the UCI "Optical Recognition of Handwritten Digits" test set that ships with
scikit-learn, so it is always available offline.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

PIXEL_MAX = 16


def read_digits() -> tuple[np.ndarray, np.ndarray, Path]:
    """``(images (1797, 1, 8, 8) uint8, labels (1797,) int64, path of the bundled file)``."""
    import sklearn.datasets

    bunch = sklearn.datasets.load_digits()
    images = bunch.images.astype(np.uint8)[:, None]  # (N, 1, 8, 8), values 0..16
    source = Path(sklearn.datasets.__file__).parent / "data" / "digits.csv.gz"
    return images, bunch.target.astype(np.int64), source

"""Preprocessing (deqlab/data/preprocess.py): columns normalised to norm √d, BT.601 luma."""

import math

import pytest
import torch

from deqlab.data import (
    normalize_columns,
    to_grayscale,
)


def test_normalize_columns_gives_norm_sqrt_d_and_keeps_directions():
    X = torch.randn(7, 5) * torch.tensor([0.1, 1.0, 10.0, 3.0, 1e-3])
    Xn = normalize_columns(X)
    torch.testing.assert_close(torch.linalg.vector_norm(Xn, dim=0), torch.full((5,), math.sqrt(7)))
    cos = torch.nn.functional.cosine_similarity(X, Xn, dim=0)
    torch.testing.assert_close(cos, torch.ones(5))
    X[:, 3] = 0.0
    with pytest.raises(ValueError, match=r"1 zero column\(s\) \(indices 3\)"):
        normalize_columns(X)
    with pytest.raises(ValueError, match="`X` must be a 2-D tensor"):
        normalize_columns(torch.ones(3))


def test_grayscale_is_bt601_luma():
    images = torch.rand(2, 3, 4, 5)
    gray = to_grayscale(images)
    want = 0.299 * images[:, 0] + 0.587 * images[:, 1] + 0.114 * images[:, 2]
    torch.testing.assert_close(gray, want[:, None])
    with pytest.raises(ValueError, match="must have 3 channels"):
        to_grayscale(torch.rand(2, 1, 4, 5))

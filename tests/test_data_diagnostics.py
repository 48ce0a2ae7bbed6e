"""Input diagnostics (deqlab/data/diagnostics.py) against the full Gram matrix, on
orthogonal and duplicate inputs."""

import math

import pytest
import torch

from deqlab.data import (
    input_diagnostics,
)


def test_diagnostics_match_the_full_gram_matrix():
    X = torch.randn(6, 37)
    X[:, 30] = -2.5 * X[:, 4]  # antiparallel pair: |cos| = 1
    unit = X / X.norm(dim=0)
    gram = (unit.T @ unit).abs().fill_diagonal_(0)
    for block_size in (1, 5, 37, 100):
        diag = input_diagnostics(X, block_size=block_size)
        assert diag.max_abs_cos == pytest.approx(float(gram.max()), abs=1e-15)
        assert sorted(diag.closest_pair) == [4, 30]
        assert diag.n_duplicates == 0


def test_diagnostics_orthogonal_and_duplicate_inputs():
    Q = torch.linalg.qr(torch.randn(8, 8))[0] * math.sqrt(8)  # orthogonal columns, norm √8
    diag = input_diagnostics(Q)
    assert diag.max_abs_cos < 1e-12 and diag.max_norm_error < 1e-12
    X = torch.cat([Q[:, :5], Q[:, [1, 1, 3]]], dim=1)  # three duplicates of two inputs
    diag = input_diagnostics(X)
    assert diag.n_duplicates == 3
    assert diag.max_abs_cos == pytest.approx(1.0)
    assert diag.warnings()[0].startswith("3 duplicate input(s)")

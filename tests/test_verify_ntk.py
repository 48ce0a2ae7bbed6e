"""The DEQ NTK read off K (deqlab.verify.ntk) against deqlab.theory.ntk.deq_ntk."""

from __future__ import annotations

import pytest
import torch

from deqlab.data import get_dataset
from deqlab.theory import kernels
from deqlab.theory.kernels import population_gram
from deqlab.theory.ntk import deq_ntk
from deqlab.verify.ntk import ntk_from_gram


@pytest.mark.filterwarnings("ignore::deqlab.theory.kernels.AssumptionWarning")
@pytest.mark.parametrize("sigma_w2", [0.02, 0.08, 0.3])
def test_matches_deq_ntk_on_and_off_the_sphere(sigma_w2):
    X = get_dataset("sphere", n=60, d=7, seed=1).X.clone()
    X[:, :9] *= torch.linspace(0.2, 3.0, 9, dtype=X.dtype)  # some inputs off the sphere
    K = population_gram(X, sigma_w2)
    got = ntk_from_gram(X, K, sigma_w2)
    assert torch.allclose(got, deq_ntk(X, sigma_w2), rtol=1e-12, atol=1e-13)
    assert torch.equal(got, got.T)


def test_row_blocks_give_the_same_matrix(monkeypatch):
    X = get_dataset("sphere", n=50, d=5, seed=2).X
    K = population_gram(X, 0.08)
    whole = ntk_from_gram(X, K, 0.08)
    monkeypatch.setattr(kernels, "BLOCK_ENTRIES", 7 * 50)  # blocks of 7 rows
    assert torch.allclose(ntk_from_gram(X, K, 0.08), whole, rtol=0, atol=1e-15)


def test_a_gram_of_the_wrong_size_is_refused():
    X = get_dataset("sphere", n=5, d=3).X
    with pytest.raises(ValueError, match=r"`K` must have shape \(5, 5\)"):
        ntk_from_gram(X, torch.eye(4, dtype=torch.float64), 0.08)

"""deq_ntk(gram=K): the DEQ NTK read off an already computed K against the one that solves
Eq. (14) itself, in both parameterizations, on and off the sphere, in row blocks."""

from __future__ import annotations

import pytest
import torch

from deqlab.data import get_dataset
from deqlab.theory import kernels
from deqlab.theory.kernels import population_gram
from deqlab.theory.ntk import deq_ntk


@pytest.mark.filterwarnings("ignore::deqlab.theory.kernels.AssumptionWarning")
@pytest.mark.parametrize("parameterization", ["standard", "ntk"])
@pytest.mark.parametrize("sigma_w2", [0.02, 0.08, 0.3])
def test_reading_k_off_the_gram_matches_solving_it(sigma_w2, parameterization):
    X = get_dataset("sphere", n=60, d=7, seed=1).X.clone()
    X[:, :9] *= torch.linspace(0.2, 3.0, 9, dtype=X.dtype)  # some inputs off the sphere
    K = population_gram(X, sigma_w2)
    got = deq_ntk(X, sigma_w2, parameterization=parameterization, gram=K)
    want = deq_ntk(X, sigma_w2, parameterization=parameterization)
    assert torch.allclose(got, want, rtol=1e-12, atol=1e-13)
    assert torch.equal(got, got.T)


def test_row_blocks_give_the_same_matrix(monkeypatch):
    X = get_dataset("sphere", n=50, d=5, seed=2).X
    K = population_gram(X, 0.08)
    whole = deq_ntk(X, 0.08, gram=K)
    monkeypatch.setattr(kernels, "BLOCK_ENTRIES", 7 * 50)  # blocks of 7 rows
    assert torch.allclose(deq_ntk(X, 0.08, gram=K), whole, rtol=0, atol=1e-15)


def test_a_gram_of_the_wrong_size_is_refused():
    X = get_dataset("sphere", n=5, d=3).X
    with pytest.raises(ValueError, match=r"`gram` must have shape \(5, 5\)"):
        deq_ntk(X, 0.08, gram=torch.eye(4, dtype=torch.float64))

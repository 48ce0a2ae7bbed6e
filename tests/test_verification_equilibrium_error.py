"""The upper bound of ‖W‖₂ behind the equilibrium's error (deqlab.verification.
equilibrium_error), against a dense SVD, on both of its paths; the contraction bound against
the distance to an equilibrium solved to rounding."""

from __future__ import annotations

import pytest
import torch

from deqlab.models.relu_deq import ReLUDEQ
from deqlab.verification import equilibrium_error as ee


@pytest.mark.parametrize("limit", [ee.EXACT_NORM_LIMIT, 10])
def test_the_norm_bound_is_above_the_dense_norm_and_close_to_it(monkeypatch, limit):
    monkeypatch.setattr(ee, "EXACT_NORM_LIMIT", limit)
    W = torch.randn(300, 300, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    exact = float(torch.linalg.matrix_norm(W, ord=2))
    upper, how = ee.norm_upper(W, abs_error=1e-9)
    assert exact + 1e-9 <= upper <= exact * (1.01 if limit == 10 else 1 + 1e-9) + 1e-9
    assert ("Golub–Kahan" in how) == (limit == 10)


def test_the_relu_deq_error_bounds_the_distance_to_the_equilibrium():
    d, m, n = 5, 60, 8
    X = torch.randn(d, n, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    model = ReLUDEQ.init(d, m, sigma_w2=0.1, seed=3)
    loose = model.equilibrium(X, tol=1e-5).Z
    exact = model.equilibrium(X, tol=1e-15).Z
    error, how = ee.relu_deq_error(model, X, loose)
    distance = float((loose - exact).norm())
    assert distance <= error <= 20 * distance and "r/(1 − w̄)" in how

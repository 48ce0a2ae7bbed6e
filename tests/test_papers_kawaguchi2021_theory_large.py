"""The DELM's λ_min(D) for one output in O(m³) and λ_max(∇²L) by Lanczos on Hessian-vector
products, against the dense forms of deqlab.papers.kawaguchi2021.theory (float64)."""

from __future__ import annotations

import pytest
import torch

from deqlab.models.delm import DELM
from deqlab.papers.kawaguchi2021.theory import lambda_min_dynamics, objective_sharpness
from deqlab.papers.kawaguchi2021.theory_large import (
    dynamics_lambda_min_one_output,
    objective_sharpness_lanczos,
)


def test_lambda_min_of_d_matches_the_full_d_matrix():
    g = torch.Generator().manual_seed(4)
    for m in (1, 5, 9):
        A = torch.randn(m, m, generator=g, dtype=torch.float64)
        B = torch.randn(1, m, generator=g, dtype=torch.float64)
        expected = float(lambda_min_dynamics(A, B, 0.6))
        assert dynamics_lambda_min_one_output(A, B, 0.6) == pytest.approx(expected, rel=1e-10)
    with pytest.raises(ValueError, match="one row"):
        dynamics_lambda_min_one_output(A, torch.ones(2, m, dtype=torch.float64), 0.6)


@pytest.mark.parametrize(("loss", "tau"), [("square", 0.0), ("logistic", 0.01)])
def test_lanczos_sharpness_matches_the_dense_hessian(loss, tau):
    g = torch.Generator().manual_seed(2)
    model = DELM(4, 1, gamma=0.8, generator=g, dtype=torch.float64)
    X = torch.randn(4, 7, generator=g, dtype=torch.float64)
    Y = (torch.rand(1, 7, generator=g, dtype=torch.float64) > 0.5).to(torch.float64)
    dense = objective_sharpness(model.A.detach(), model.B.detach(), X, Y, 0.8, loss=loss, tau=tau)
    assert objective_sharpness_lanczos(model, X, Y, loss, tau) == pytest.approx(dense, rel=1e-8)

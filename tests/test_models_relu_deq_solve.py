"""The ReLU DEQ's row-wise solves (deqlab.models.relu_deq_solve): an unverified start costs
one exact product per row; adjoint columns without a product start from their input."""

import pytest
import torch

from deqlab.models import ReLUDEQ
from deqlab.models.relu_deq_solve import solve_adjoint, solve_forward

F64 = torch.float64


def test_an_unverified_start_takes_one_exact_product_per_row():
    model = ReLUDEQ.init(6, 20, seed=0, dtype=F64)
    X = torch.randn(6, 5, generator=torch.Generator().manual_seed(1), dtype=F64)
    sol = model.equilibrium(X, tol=1e-13)
    W, B = model.W.detach(), (model.U @ X).detach()
    Z = sol.Z
    verified = solve_forward(W, B, Z, W @ Z, tol=1e-6)
    assert verified.converged and verified.n_products == 0
    unverified = solve_forward(W, B, Z, W @ Z + 1e-9, tol=1e-6, verified_start=False)
    assert unverified.converged and unverified.n_products == 1
    torch.testing.assert_close(unverified.product, W @ unverified.x_in, rtol=1e-13, atol=1e-13)


def test_adjoint_columns_without_a_product_start_from_their_input():
    """``unknown`` columns ignore Q (garbage here) and start from C_in itself: started at
    the closed form c_i = (I − Wᵀ D_i)⁻¹ a, every column stops after its one exact
    product, at that solution; a verified start refuses them."""
    model = ReLUDEQ.init(6, 20, seed=0, dtype=F64)
    X = torch.randn(6, 5, generator=torch.Generator().manual_seed(1), dtype=F64)
    W, a = model.W.detach(), model.a.detach()[:, None]
    mask = model.equilibrium(X, tol=1e-13).mask
    eye = torch.eye(20, dtype=F64)
    C = torch.stack([torch.linalg.solve(eye - W.T * mask[:, i], a[:, 0]) for i in range(5)], 1)
    Q = W.T @ (mask * C)
    Q[:, [1, 3]] = 1e6  # not their product
    unknown = torch.tensor([1, 3])
    solve = solve_adjoint(W, mask, a, C, Q, tol=1e-12, verified_start=False, unknown=unknown)
    assert solve.converged and solve.n_products == 1
    torch.testing.assert_close(solve.x, C, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="unknown"):
        solve_adjoint(W, mask, a, C, Q, tol=1e-6, unknown=unknown)

"""DELM (Kawaguchi 2021, Eq. 4): equilibrium, gradients, the equivalent linear map, bad input."""

import pytest
import torch

from deqlab.models.delm import DELM, column_softmax
from deqlab.solvers import Anderson, Picard


def _random_delm(m=5, m_y=3, gamma=0.8, scale=1.0, **kwargs):
    A = scale * torch.randn(m, m)
    B = torch.randn(m_y, m)
    return DELM.from_matrices(A, B, gamma=gamma, **kwargs)


def test_column_softmax_is_column_stochastic():
    S = column_softmax(3 * torch.randn(6, 6))
    assert torch.all(S > 0)
    torch.testing.assert_close(S.sum(dim=0), torch.ones(6))


def test_equilibrium_is_the_limit_of_the_layer_iteration():
    """z* = lim z^(l), z^(l) = γσ(A)z^(l-1) + φ(x) (Eq. 3–4): compare with 400 iterations."""
    model = _random_delm(scale=3.0, gamma=0.9)
    X = torch.randn(5, 7)
    with torch.no_grad():
        Z = model.equilibrium(X)
        Zl = torch.zeros_like(X)
        for _ in range(400):  # contraction in ‖·‖₁ with rate γ = 0.9: 0.9^400 ≈ 5e-19
            Zl = 0.9 * model.sigma() @ Zl + X
    torch.testing.assert_close(Z, Zl, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(model(X), model.B @ Zl)


def test_gradients_match_central_finite_differences():
    """Autograd through the batched linear solve vs central differences (gradcheck, float64)."""
    A0, B0 = torch.randn(4, 4), torch.randn(2, 4)
    X, Y = torch.randn(4, 6), torch.randn(2, 6)

    model = DELM.from_matrices(A0, B0, gamma=0.7)

    def loss(A, B):
        prediction = torch.func.functional_call(model, {"A": A, "B": B}, (X,))
        return ((prediction - Y) ** 2).sum()

    assert torch.autograd.gradcheck(
        loss, (A0.requires_grad_(), B0.requires_grad_()), eps=1e-6, atol=1e-6
    )


@pytest.mark.parametrize(
    "solver", [Anderson(tol=1e-13, max_iter=300), Picard(tol=1e-13, max_iter=600)]
)
def test_iterative_solve_agrees_with_direct_solve(solver):
    """Engine solve + exact implicit backward vs the direct solve: z*, and ∇_A, ∇_B over two
    consecutive steps (the second one warm-started from the first equilibrium and adjoint)."""
    direct = _random_delm(m=8, m_y=3, scale=2.0, gamma=0.9)
    iterative = DELM.from_matrices(direct.A.detach(), direct.B.detach(), gamma=0.9, solver=solver)
    X, Y = torch.randn(8, 11), torch.randn(3, 11)
    for _ in range(2):
        losses = [((model(X) - Y) ** 2).sum() for model in (direct, iterative)]
        grads = [
            torch.autograd.grad(loss, (model.A, model.B))
            for loss, model in zip(losses, (direct, iterative), strict=True)
        ]
        torch.testing.assert_close(losses[1], losses[0], rtol=1e-11, atol=0)
        for g_iterative, g_direct in zip(grads[1], grads[0], strict=True):
            torch.testing.assert_close(g_iterative, g_direct, rtol=1e-9, atol=1e-10)
        with torch.no_grad():
            for model, (gA, gB) in zip((direct, iterative), grads, strict=True):
                model.A -= 0.1 * gA
                model.B -= 0.01 * gB
    assert iterative.stats.forward.n_steps < 300 and iterative.stats.backward is not None


def test_nonlinear_feature_map_and_linear_weight():
    """f(x) = B U⁻¹ φ(x) = W φ(x) with W = B U⁻¹, for a fixed nonlinear φ (m_x ≠ m)."""
    R = torch.randn(6, 3)
    model = _random_delm(m=6, m_y=2, feature_map=lambda X: torch.tanh(R @ X))
    X = torch.randn(3, 9)
    with torch.no_grad():
        torch.testing.assert_close(model(X), model.linear_weight() @ torch.tanh(R @ X))
        U = torch.eye(6) - model.gamma * model.sigma()
        torch.testing.assert_close(model.linear_weight() @ U, model.B)


def test_identity_initialization_represents_the_identity():
    model = DELM(4, 4, gamma=0.5, init="identity")
    X = torch.randn(4, 8)
    with torch.no_grad():
        torch.testing.assert_close(model(X), X)


def test_normal_initialization_scale():
    model = DELM(400, 400, generator=torch.Generator().manual_seed(0))
    assert abs(model.A.detach().std().item() * 20 - 1) < 0.01  # std 1/√m = 1/20


@pytest.mark.parametrize("gamma", [0.0, 1.0, -0.2, 1.5])
def test_gamma_outside_unit_interval_is_rejected(gamma):
    with pytest.raises(ValueError, match=r"`gamma` must be in \(0, 1\)"):
        DELM(3, 2, gamma=gamma)


def test_bad_arguments_give_clear_errors():
    with pytest.raises(TypeError, match="`gamma` must be a real number"):
        DELM(3, 2, gamma="0.5")
    with pytest.raises(ValueError, match="`init` must be one of"):
        DELM(3, 2, init="orthogonal")
    with pytest.raises(ValueError, match="needs m_y == m"):
        DELM(3, 2, init="identity")
    with pytest.raises(
        TypeError, match=r"`solver` must be None \(direct solve\) or a deqlab Solver"
    ):
        DELM(3, 2, solver="anderson")
    with pytest.raises(TypeError, match="`feature_map` must be callable"):
        DELM(3, 2, feature_map=3)
    with pytest.raises(ValueError, match=r"`A` must have shape \(3, 3\)"):
        DELM.from_matrices(torch.randn(3, 4), torch.randn(2, 3))
    with pytest.raises(ValueError, match=r"`B` must have shape \('any', 3\)"):
        DELM.from_matrices(torch.randn(3, 3), torch.randn(2, 4))


def test_input_shape_mismatch_is_rejected():
    model = _random_delm(m=5)
    with pytest.raises(ValueError, match=r"`feature_map\(X\)` must have shape \(m, n\) = \(5, 7\)"):
        model(torch.randn(4, 7))
    with pytest.raises(ValueError, match="`X` must be a 2-D tensor"):
        model(torch.randn(5))

"""Theorem 1 and Corollaries 1–2 of Kawaguchi (2021): D_t (Eq. 8), its bound, L*, the bounds."""

import math

import numpy as np
import pytest
import torch

from deqlab.models.delm import DELM
from deqlab.papers.kawaguchi2021.theory import (
    convergence_bound,
    corollary1_kappa,
    corollary2_kappa,
    delm_objective,
    dynamics_matrix,
    feature_sigma_min,
    lambda_lower_bound,
    lambda_min_dynamics,
    linear_objective,
    logistic_loss,
    logistic_loss_optimum,
    logistic_rho,
    objective_sharpness,
    pl_ratio,
    rank_ratio,
    rank_tolerance,
    softmax_jacobians,
    square_loss,
    square_loss_optimum,
    time_to_accuracy,
)


def _vec(M):
    """Column-stacking vectorization vec(M) used by the paper (Appendix A.1.5)."""
    return M.mT.reshape(-1)


def _predictor(A, B, gamma):
    """Z = B U⁻¹, U = I − γσ(A): the linear map the DELM represents."""
    U = torch.eye(A.shape[0]) - gamma * torch.softmax(A, dim=0)
    return torch.linalg.solve(U.mT, B.mT).mT


def test_softmax_jacobians_match_autograd():
    """(J_k)_ij = ∂σ(A)_ik / ∂A_jk (Section 3.1.1), against autograd on each column."""
    A = 2 * torch.randn(5, 5)
    J = softmax_jacobians(A)
    for k in range(5):
        Jk = torch.autograd.functional.jacobian(lambda a: torch.softmax(a, dim=0), A[:, k])
        torch.testing.assert_close(J[k], Jk)


def test_dynamics_matrix_equals_the_literal_kronecker_sum():
    """Eq. (8) term by term with torch.kron."""
    m, m_y, gamma = 4, 3, 0.6
    A, B = 2 * torch.randn(m, m), torch.randn(m_y, m)
    V = torch.linalg.inv(torch.eye(m) - gamma * torch.softmax(A, dim=0))
    Z, J = B @ V, softmax_jacobians(A)
    D = sum(
        torch.kron(torch.outer(V[k], V[k]), torch.eye(m_y) + gamma**2 * Z @ J[k] @ J[k].T @ Z.T)
        for k in range(m)
    )
    torch.testing.assert_close(dynamics_matrix(A, B, gamma), D)


@pytest.mark.parametrize("loss", ["square", "logistic"])
def test_gradient_flow_moves_the_predictor_by_D(loss):
    """d vec(Z_t)/dt = −D_t vec(∇L₀(Z_t)) (Eq. 26): the JVP of Z(A, B) along −∇L equals −D ∇L₀."""
    m, n, gamma = 5, 9, 0.8
    m_y = 3 if loss == "square" else 1
    A, B, Phi = 1.5 * torch.randn(m, m), torch.randn(m_y, m), torch.randn(m, n)
    Y = torch.randn(m_y, n) if loss == "square" else (torch.rand(1, n) > 0.5).double()

    def L0(W):
        Q = W @ Phi
        return square_loss(Q, Y) if loss == "square" else logistic_loss(Q, Y, tau=0.3)

    A_, B_ = A.clone().requires_grad_(), B.clone().requires_grad_()
    grad_A, grad_B = torch.autograd.grad(L0(_predictor(A_, B_, gamma)), (A_, B_))
    _, dZ = torch.autograd.functional.jvp(
        lambda a, b: _predictor(a, b, gamma), (A, B), (-grad_A, -grad_B)
    )
    W = _predictor(A, B, gamma).requires_grad_()
    (grad_L0,) = torch.autograd.grad(L0(W), W)
    torch.testing.assert_close(_vec(dZ), -dynamics_matrix(A, B, gamma) @ _vec(grad_L0))


@pytest.mark.parametrize("scale", [0.1, 1.0, 10.0])
def test_dynamics_matrix_is_positive_definite_above_the_bound(scale):
    """λ_min(D) ≥ 1/(m(1+γ)²) > 0 (Theorem 1, Eq. 33) on random instances, incl. peaked σ(A)."""
    generator = torch.Generator().manual_seed(1)
    for m, m_y in [(2, 1), (6, 1), (5, 4), (12, 3)]:
        for gamma in (0.05, 0.5, 0.99):
            A = scale * torch.randn(m, m, generator=generator)
            B = scale * torch.randn(m_y, m, generator=generator)
            D = dynamics_matrix(A, B, gamma)
            torch.testing.assert_close(D, D.mT)
            eigenvalues = torch.linalg.eigvalsh(D)
            assert eigenvalues[0] >= lambda_lower_bound(m, gamma) * (1 - 1e-10)
            torch.testing.assert_close(lambda_min_dynamics(A, B, gamma), eigenvalues[0])


def test_lower_bound_value_and_errors():
    assert lambda_lower_bound(10, 0.8) == pytest.approx(1 / (10 * 1.8**2))
    with pytest.raises(ValueError, match=r"`gamma` must be in \(0, 1\); got 1"):
        lambda_lower_bound(3, 1.0)
    with pytest.raises(ValueError, match=r"`gamma` must be in \(0, 1\)"):
        dynamics_matrix(torch.zeros(3, 3), torch.zeros(1, 3), -0.5)
    with pytest.raises(ValueError, match=r"`B` must have shape \('any', 3\)"):
        dynamics_matrix(torch.zeros(3, 3), torch.zeros(1, 4), 0.5)
    with pytest.raises(ValueError, match=r"`A` must have shape \(3, 3\)"):
        dynamics_matrix(torch.zeros(3, 2), torch.zeros(1, 2), 0.5)


@pytest.mark.parametrize("n", [30, 4])
def test_square_loss_optimum_is_least_squares(n):
    """L*₀ against numpy's lstsq; m > n (over-parameterized) interpolates, L* = 0."""
    Phi, Y = torch.randn(6, n), torch.randn(2, n)
    W, L_star = square_loss_optimum(Phi, Y)
    W_np = np.linalg.lstsq(Phi.T.numpy(), Y.T.numpy(), rcond=None)[0].T
    residual = ((W_np @ Phi.numpy() - Y.numpy()) ** 2).sum()
    assert float(L_star) == pytest.approx(residual, rel=1e-10, abs=1e-20)
    np.testing.assert_allclose((W @ Phi).numpy(), W_np @ Phi.numpy(), rtol=1e-9, atol=1e-9)
    if n < 6:
        assert float(L_star) < 1e-20


def test_feature_sigma_min_and_kappa_are_zero_below_the_corollary_s_rank():
    """σ_min(Φ) as the corollaries take it: the min(m, n)-th singular value; 0 below the rank
    the corollary assumes (numerically, as rank_ratio decides it), so κ = 0 there."""
    Phi = torch.randn(4, 9, dtype=torch.float64)
    assert feature_sigma_min(Phi) == pytest.approx(np.linalg.svd(Phi.numpy())[1][-1])
    assert corollary1_kappa(Phi) == pytest.approx(2 * feature_sigma_min(Phi) ** 2)
    deficient = torch.randn(4, 2, dtype=torch.float64) @ torch.randn(2, 9, dtype=torch.float64)
    assert np.linalg.svd(deficient.numpy())[1][-1] > 0  # rounding: not exactly 0
    assert rank_ratio(deficient, 4) <= rank_tolerance(deficient)
    assert feature_sigma_min(deficient) == corollary1_kappa(deficient) == 0.0
    assert feature_sigma_min(torch.ones(4, 9)) == 0.0
    wide = torch.randn(4, 3, dtype=torch.float64)  # n = 3 < m = 4: rank m impossible
    assert feature_sigma_min(wide) > 0 and corollary1_kappa(wide) > 0
    assert feature_sigma_min(wide, require_full_row_rank=True) == 0.0
    assert corollary2_kappa(wide, tau=0.1) == 0.0


def test_logistic_rho_is_the_infimum_over_the_ball():
    """ρ(R) ≤ p(1 − p) for W in the 1-norm ball, with near-equality at W = R(1−ε) sign(φ_i)."""
    Phi, R = torch.randn(5, 8), 0.3
    rho = logistic_rho(Phi, R)
    W = R * (2 * torch.rand(2000, 5) - 1)  # ‖W‖₁ = max_j |W_1j| < R for 1 × m matrices
    p = torch.sigmoid(W @ Phi)
    assert rho <= float((p * (1 - p)).min())
    i = int(Phi.abs().sum(dim=0).argmax())
    p_edge = torch.sigmoid(R * (1 - 1e-9) * Phi[:, i].sign() @ Phi[:, i])
    assert float(p_edge * (1 - p_edge)) == pytest.approx(rho, rel=1e-7)
    assert logistic_rho(Phi, math.inf) == 0.0
    with pytest.raises(ValueError, match="`radius` must be in"):
        logistic_rho(Phi, -1.0)


def test_logistic_optimum_satisfies_the_optimality_conditions():
    """τ > 0: ∇L₀(W*) = 0; finite R: projected gradient 0 with active box constraints."""
    Phi, y = torch.randn(3, 40), (torch.rand(1, 40) > 0.5).double()
    Phi[:, y[0] == 1] += 1.0  # nearly separable: the unconstrained W* is large

    def gradient(W):
        W = W.clone().requires_grad_()
        return torch.autograd.grad(logistic_loss(W @ Phi, y, tau=0.01), W)[0]

    W, L = logistic_loss_optimum(Phi, y, tau=0.01)
    assert float(gradient(W).abs().max()) < 1e-6
    R = 0.5 * float(W.abs().max())
    W_R, L_R = logistic_loss_optimum(Phi, y, tau=0.01, radius=R)
    assert float(L_R) > float(L) and float(W_R.abs().max()) <= R + 1e-12
    g = gradient(W_R)[0]
    active = W_R[0].abs() > R * (1 - 1e-9)
    assert bool(active.any())
    assert bool((g[~active].abs() < 1e-6).all())
    assert bool((g[active] * W_R[0][active].sign() <= 1e-9).all())  # pushing outward only


def test_loss_functions_validate_input():
    with pytest.raises(ValueError, match=r"`Y` must have shape \(2, 3\)"):
        square_loss(torch.zeros(2, 3), torch.zeros(3, 2))
    with pytest.raises(ValueError, match="labels in"):
        logistic_loss(torch.zeros(1, 3), torch.tensor([[0.0, 1.0, 0.5]]))
    with pytest.raises(ValueError, match=r"`q` must have shape \(1, n\)"):
        logistic_loss(torch.zeros(2, 3), torch.zeros(2, 3))
    with pytest.raises(ValueError, match="`tau` must be in"):
        logistic_loss(torch.zeros(1, 3), torch.zeros(1, 3), tau=-1.0)
    with pytest.raises(ValueError, match="`lambda_T` must be > 0"):
        convergence_bound(10.0, 1.0, 1.0, 0.0, 1.0)


def test_convergence_bound_closed_form():
    T = torch.tensor([0.0, 0.5, 2.0])
    bound = convergence_bound(10.0, 1.0, 3.0, 0.25, T, loss_star_linear=0.5)
    torch.testing.assert_close(bound, 1.0 + 9.5 * torch.exp(-1.5 * T))


def test_rank_ratio_against_numpy_svd():
    Phi = torch.randn(4, 9)
    sv = np.linalg.svd(Phi.numpy(), compute_uv=False)
    assert rank_ratio(Phi, 4) == pytest.approx(sv[3] / sv[0])
    assert rank_ratio(Phi, 2) == pytest.approx(sv[1] / sv[0])
    assert rank_ratio(Phi.T, 9) == 0.0  # rank m = 9 is impossible with n = 4 samples
    assert rank_ratio(torch.ones(4, 9), 4) <= rank_tolerance(torch.ones(4, 9))
    assert rank_tolerance(Phi) == 9 * torch.finfo(Phi.dtype).eps


def _numpy_delm_loss(theta, m, m_y, Phi, Y, gamma):
    """L(A, B) (Eq. 5) in numpy: the column softmax, a linear solve, the square loss."""
    A, B = theta[: m * m].reshape(m, m), theta[m * m :].reshape(m_y, m)
    S = np.exp(A - A.max(axis=0)) / np.exp(A - A.max(axis=0)).sum(axis=0)
    Z = np.linalg.solve(np.eye(m) - gamma * S, Phi)
    return ((B @ Z - Y) ** 2).sum()


def test_delm_objective_equals_the_model_loss():
    m, n, gamma = 4, 7, 0.6
    model = DELM(m, 2, gamma=gamma)
    X, Y = torch.randn(m, n), torch.randn(2, n)
    with torch.no_grad():
        expected = square_loss(model(X), Y)
    torch.testing.assert_close(delm_objective(model.A, model.B, X, Y, gamma), expected)
    y = (torch.rand(1, n) > 0.5).double()
    logistic_model = DELM(m, 1, gamma=gamma)
    with torch.no_grad():
        expected = logistic_loss(logistic_model(X), y, 0.1)
    got = delm_objective(logistic_model.A, logistic_model.B, X, y, gamma, loss="logistic", tau=0.1)
    torch.testing.assert_close(got, expected)
    with pytest.raises(ValueError, match="`loss` must be one of"):
        linear_objective(torch.zeros(1, m), X, y, loss="hinge")


def test_objective_sharpness_against_a_finite_difference_hessian():
    """λ_max(∇²L) against central second differences of a numpy L(A, B)."""
    m, m_y, n, gamma, h = 2, 1, 6, 0.7, 1e-4
    A, B = torch.randn(m, m), torch.randn(m_y, m)
    Phi, Y = torch.randn(m, n), torch.randn(m_y, n)
    args = (m, m_y, Phi.numpy(), Y.numpy(), gamma)
    theta = np.concatenate([A.numpy().ravel(), B.numpy().ravel()])
    p = theta.size
    H = np.empty((p, p))
    for i in range(p):
        for j in range(p):
            e_i, e_j = h * np.eye(p)[i], h * np.eye(p)[j]
            H[i, j] = (
                _numpy_delm_loss(theta + e_i + e_j, *args)
                - _numpy_delm_loss(theta + e_i - e_j, *args)
                - _numpy_delm_loss(theta - e_i + e_j, *args)
                + _numpy_delm_loss(theta - e_i - e_j, *args)
            ) / (4 * h * h)
    expected = np.linalg.eigvalsh(0.5 * (H + H.T))[-1]
    assert objective_sharpness(A, B, Phi, Y, gamma) == pytest.approx(expected, rel=1e-5)


def test_pl_ratio_is_tight_along_the_smallest_singular_direction():
    """Square loss: ½‖∇L₀‖² = κ(L₀ − L*) exactly for W = W* + c u_minᵀ (κ = 2σ_min(Φ)²), and
    > κ(L₀ − L*) elsewhere; a κ too large (e.g. a mean loss's) makes the ratio < 1."""
    Phi, Y = torch.randn(3, 20), torch.randn(1, 20)
    W_star, L_star = square_loss_optimum(Phi, Y)
    kappa = corollary1_kappa(Phi)
    u_min = torch.linalg.svd(Phi)[0][:, -1]  # left singular vector of σ_min
    W = W_star + 0.7 * u_min[None, :]
    assert pl_ratio(W, Phi, Y, kappa=kappa, loss_star=float(L_star)) == pytest.approx(1.0)
    W_random = W_star + torch.randn(1, 3)
    assert pl_ratio(W_random, Phi, Y, kappa=kappa, loss_star=float(L_star)) > 1.0
    assert pl_ratio(W, Phi, Y, kappa=20 * kappa, loss_star=float(L_star)) == pytest.approx(0.05)
    assert math.isnan(pl_ratio(W_star, Phi, Y, kappa=kappa, loss_star=float(L_star) + 1.0))


def test_pl_ratio_of_the_logistic_loss_with_tau():
    """Logistic + τq² (R = ∞): PL holds with κ = 2τσ_min(Φ)² (strong convexity)."""
    Phi = torch.randn(3, 30)
    y = (torch.rand(1, 30) > 0.5).double()
    tau = 0.05
    _, L_star = logistic_loss_optimum(Phi, y, tau=tau)
    kappa = corollary2_kappa(Phi, tau=tau)
    for _ in range(5):
        W = 2 * torch.randn(1, 3)
        ratio = pl_ratio(W, Phi, y, kappa=kappa, loss_star=float(L_star), loss="logistic", tau=tau)
        assert ratio >= 1.0


def test_time_to_accuracy_is_eq_10_for_the_square_loss():
    """Eq. (10): T ≥ m(1+γ)²/(4σ_min(Φ)²)·log((L₀ − L*)/ε), i.e. Eq. (9) with κ = 2σ_min²;
    at T_ε the worst-case bound of Theorem 1 equals L* + ε exactly."""
    sigma2, m, gamma = 3.0, 7, 0.6
    t_eps = time_to_accuracy(m, gamma, 2 * sigma2, 50.0, 0.1)
    assert t_eps == pytest.approx(m * (1 + gamma) ** 2 / (4 * sigma2) * math.log(500.0))
    bound = convergence_bound(60.0, 10.0, 2 * sigma2, lambda_lower_bound(m, gamma), t_eps)
    assert float(bound) == pytest.approx(10.1, rel=1e-12)
    assert time_to_accuracy(m, gamma, 1.0, 0.05, 0.1) == 0.0
    assert time_to_accuracy(m, gamma, 0.0, 5.0, 0.1) == math.inf
    with pytest.raises(ValueError, match="`eps` must be in"):
        time_to_accuracy(m, gamma, 1.0, 5.0, 0.0)

"""Theorem 2 of Kawaguchi (2021) and Appendix B (deqlab/papers/kawaguchi2021/trust_region.py):
the trust-region subproblem against SLSQP and the KKT conditions, the velocity of the flow
against the solved step, the terms against their definitions, Eq. (37) and the Perron
vector."""

import math

import numpy as np
import pytest
import torch
from scipy.optimize import minimize

from deqlab.papers.kawaguchi2021.theory import linear_objective, softmax_jacobians
from deqlab.papers.kawaguchi2021.trust_region import (
    appendix_b_velocity,
    error_vector,
    flow_velocities,
    ones_split,
    perron_vector,
    solve_trust_region,
    trust_region_terms,
)


def _predictor(A, B, gamma):
    """Z = B U⁻¹, U = I − γσ(A): the linear map the DELM represents."""
    U = torch.eye(A.shape[0], dtype=A.dtype) - gamma * torch.softmax(A, dim=0)
    return torch.linalg.solve(U.mT, B.mT).mT


def _theorem2_instance(loss):
    g = torch.Generator().manual_seed(3)
    m, n = 4, 9
    A = torch.randn(m, m, generator=g, dtype=torch.float64)
    B = torch.randn(1, m, generator=g, dtype=torch.float64) / 2
    Phi = torch.randn(m, n, generator=g, dtype=torch.float64)
    Y = torch.randn(1, n, generator=g, dtype=torch.float64)
    return A, B, Phi, (Y > 0).double() if loss == "logistic" else Y


def _slsqp(g, H, G, radius):
    """The trust-region subproblem by scipy's SLSQP (a general constrained solver)."""
    g, H, G = (t.numpy() for t in (g, H, G))
    constraint = {
        "type": "ineq",
        "fun": lambda v: radius**2 - v @ G @ v,
        "jac": lambda v: -2 * G @ v,
    }
    result = minimize(lambda v: g @ v + 0.5 * v @ H @ v, np.zeros(len(g)), jac=lambda v: g + H @ v,
                      method="SLSQP", constraints=[constraint],
                      options={"ftol": 1e-16, "maxiter": 2000})  # fmt: skip
    return torch.as_tensor(result.x)


@pytest.mark.parametrize("loss", ["square", "logistic"])
def test_trust_region_solve_against_slsqp_and_the_kkt_conditions(loss):
    """The closed-form solve agrees with scipy's SLSQP and satisfies Hv + g + λGv = 0 with
    ‖v‖_G = r; an inactive constraint gives λ = 0 (the Newton step)."""
    A, B, Phi, Y = _theorem2_instance(loss)
    terms = trust_region_terms(A, B, Phi, Y, 0.7, loss=loss, tau=0.05)
    G, g, H = terms.G(0.5 * terms.delta_bar()), terms.gradient, terms.hessian
    v, lam = solve_trust_region(g, H, G, 0.1)
    torch.testing.assert_close(v, _slsqp(g, H, G, 0.1), rtol=1e-6, atol=1e-9)
    torch.testing.assert_close(H @ v + g + lam * G @ v, torch.zeros(4, dtype=torch.float64),
                               rtol=0, atol=1e-10 * float(g.abs().max()))  # fmt: skip
    assert float(v @ G @ v) == pytest.approx(0.01, rel=1e-12) and lam > 0
    newton = -torch.linalg.solve(H, g)
    v, lam = solve_trust_region(g, H, G, 2 * math.sqrt(float(newton @ G @ newton)))
    assert lam == 0.0
    torch.testing.assert_close(v, newton)


@pytest.mark.parametrize("loss", ["square", "logistic"])
@pytest.mark.parametrize("fraction", [0.01, 0.5, 0.99])
def test_theorem_2_velocity_is_the_trust_region_step(loss, fraction):
    """Eq. (13) in float64 on a small instance: d/dt f_θt (autograd along −∇L) equals
    (1/δ_t)V_tφ with V_t the independent trust-region solve, to 1e-8; the multiplier is
    μ = 1/(2δ_t); G_t ≻ 0 below δ̄_t and not at 1.01 δ̄_t."""
    A, B, Phi, Y = _theorem2_instance(loss)
    terms = trust_region_terms(A, B, Phi, Y, 0.7, loss=loss, tau=0.05)
    zdot, fdot = flow_velocities(A, B, Phi, Y, 0.7, loss=loss, tau=0.05)
    delta = fraction * terms.delta_bar()
    G = terms.G(delta)
    radius = delta * math.sqrt(float(zdot[0] @ G @ zdot[0]))
    v, lam = solve_trust_region(terms.gradient, terms.hessian, G, radius)
    assert float((v @ Phi / delta - fdot[0]).abs().max()) <= 1e-8 * float(fdot.abs().max())
    assert lam * delta == pytest.approx(1.0, abs=1e-8)
    torch.testing.assert_close(terms.closed_form_velocity(), zdot[0], rtol=1e-10, atol=0)
    assert float(torch.linalg.eigvalsh(G)[0]) > 0
    assert float(torch.linalg.eigvalsh(terms.G(1.01 * terms.delta_bar()))[0]) < 0


def test_theorem_2_terms_against_their_definitions():
    """S = I + γ² diag(‖J_kᵀZᵀ‖²), F = Σ_i ℓ''_i z*_i z*_iᵀ, ∇²L₀ = UFUᵀ (Eq. 35) by autograd;
    m_y > 1 is refused."""
    A, B, Phi, Y = _theorem2_instance("logistic")
    gamma, tau = 0.7, 0.05
    terms = trust_region_terms(A, B, Phi, Y, gamma, loss="logistic", tau=tau)
    Z = _predictor(A, B, gamma)
    J = softmax_jacobians(A)
    S = torch.eye(4, dtype=torch.float64) + gamma**2 * torch.diag(
        torch.stack([(J[k].mT @ Z[0]).square().sum() for k in range(4)]))  # fmt: skip
    torch.testing.assert_close(terms.S, S)
    hessian = torch.autograd.functional.hessian(
        lambda w: linear_objective(w[None, :], Phi, Y, loss="logistic", tau=tau), Z[0]
    )
    torch.testing.assert_close(terms.hessian, hessian)
    gradient = torch.autograd.functional.jacobian(
        lambda w: linear_objective(w[None, :], Phi, Y, loss="logistic", tau=tau), Z[0]
    )
    torch.testing.assert_close(terms.gradient, gradient)
    with pytest.raises(ValueError, match="Theorem 2 needs m_y = 1"):
        trust_region_terms(A, torch.randn(2, 4, dtype=torch.float64), Phi, Y.repeat(2, 1), gamma)


# --- Appendix B ------------------------------------------------------------------------------


def test_eq_37_error_vector_gives_theorem_2s_velocity():
    """V_t = −r_tᵀU_t⁻¹ with r_t = δ S U⁻¹∇L₀ equals δ_t dZ_t/dt (autograd) for the square loss."""
    A, B, Phi, Y = _theorem2_instance("square")
    terms = trust_region_terms(A, B, Phi, Y, 0.7)
    zdot, _ = flow_velocities(A, B, Phi, Y, 0.7)
    delta = 0.5 * terms.delta_bar()
    V = appendix_b_velocity(torch.softmax(A, dim=0), error_vector(terms, delta), 0.7)
    torch.testing.assert_close(V, delta * zdot[0], rtol=1e-10, atol=0)


def test_perron_vector_and_the_limit_of_the_velocity():
    """σπ = π, 1ᵀπ = 1; (1 − γ)(I − γσ)⁻ᵀr → (πᵀr)1, and ones_split against numpy."""
    g = torch.Generator().manual_seed(5)
    sigma = torch.softmax(torch.randn(6, 6, generator=g, dtype=torch.float64), dim=0)
    pi = perron_vector(sigma)
    torch.testing.assert_close(sigma @ pi, pi)
    assert float(pi.sum()) == pytest.approx(1.0) and bool((pi > 0).all())
    r = torch.randn(6, generator=g, dtype=torch.float64)
    v = appendix_b_velocity(sigma, r, 1 - 1e-9)
    torch.testing.assert_close(1e-9 * v, -(pi @ r) * torch.ones(6, dtype=torch.float64),
                               rtol=1e-6, atol=0)  # fmt: skip
    along, rest = ones_split(torch.tensor([3.0, 1.0], dtype=torch.float64))
    assert along == pytest.approx(2 * 2**0.5) and rest == pytest.approx(2**0.5)

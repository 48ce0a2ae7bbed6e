"""Theorem 2 of Kawaguchi (ICLR 2021, Section 3.2, m_y = 1) and Appendix B: the dynamics of
a deep equilibrium linear model as an implicit trust-region Newton method.

d/dt f_θt = (1/δ_t)V_tφ with vec(V_t) the minimiser of the second-order model of L₀ over
{v : ‖v‖_{G_t} ≤ δ_t‖d/dt vec(Z_t)‖_{G_t}}, G_t = U_t(S_t⁻¹ − δ_tF_t)U_tᵀ (Eq. 13): its
terms (:func:`trust_region_terms`), the subproblem solved independently
(:func:`solve_trust_region`), and the flow's measured velocities (:func:`flow_velocities`);
Appendix B's implicit bias as γ → 1 (:func:`appendix_b_velocity`, :func:`perron_vector`).
Notation as in :mod:`.theory`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy.optimize import brentq

from deqlab._checks import check_choice
from deqlab.models.delm import check_gamma, equilibrium_matrix
from deqlab.papers.kawaguchi2021.theory import LOSSES, check_AB, delm_objective, softmax_jacobians


@dataclass(frozen=True)
class TrustRegionTerms:
    """The objects of Theorem 2 (Eq. 13) at one parameter point (A_t, B_t), m_y = 1.

    ``U`` = I − γσ(A), ``Z`` = B U⁻¹ (1, m), ``S`` = I + γ² diag(v^S) with
    v^S_k = ‖J_kᵀ Zᵀ‖², ``F`` = Σ_i ∇²ℓ_i(f(x_i)) z*(x_i) z*(x_i)ᵀ, ``gradient`` =
    ∇L₀^vec(vec Z) (m,) and ``hessian`` = ∇²L₀^vec(vec Z) = U F Uᵀ (Appendix A.2, Eq. 35).
    """

    U: torch.Tensor
    Z: torch.Tensor
    S: torch.Tensor
    F: torch.Tensor
    gradient: torch.Tensor
    hessian: torch.Tensor

    def G(self, delta: float) -> torch.Tensor:
        """G_t = U (S⁻¹ − δF) Uᵀ, the metric of the trust region (Theorem 2)."""
        return self.U @ (torch.diag(1.0 / torch.diagonal(self.S)) - delta * self.F) @ self.U.mT

    def delta_bar(self) -> float:
        """sup{δ > 0 : G_t ≻ 0} = 1/λ_max(S^{1/2} F S^{1/2}) (∞ when F = 0).

        G ≻ 0 iff S⁻¹ − δF ≻ 0 (U is invertible) iff δ λ_max(S^{1/2}FS^{1/2}) < 1; every
        δ_t ∈ (0, δ̄_t) of Theorem 2 is below it.
        """
        root = torch.sqrt(torch.diagonal(self.S))
        top = float(torch.linalg.eigvalsh(root[:, None] * self.F * root[None, :])[-1])
        return math.inf if top <= 0 else 1.0 / top

    def closed_form_velocity(self) -> torch.Tensor:
        """d vec(Z_t)/dt = −D_t ∇L₀ with D_t = U⁻ᵀ S U⁻¹ for m_y = 1 (Eq. 26, App. A.2)."""
        w = torch.linalg.solve(self.U, self.gradient)  # U⁻¹ ∇L₀
        return -torch.linalg.solve(self.U.mT, self.S @ w)


def loss_derivatives(
    q: torch.Tensor, y: torch.Tensor, *, loss: str = "square", tau: float = 0.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """(ℓ'_i(q_i), ℓ''_i(q_i)) for scalar outputs q, y of shape (n,): square 2(q − y), 2;
    logistic + τq²: s(q) − y + 2τq, s(q)(1 − s(q)) + 2τ (the losses of Corollaries 1–2)."""
    check_choice("loss", loss, LOSSES)
    if loss == "square":
        return 2.0 * (q - y), torch.full_like(q, 2.0)
    p = torch.sigmoid(q)
    return p - y + 2.0 * tau * q, p * (1.0 - p) + 2.0 * tau


def trust_region_terms(
    A: torch.Tensor,
    B: torch.Tensor,
    Phi: torch.Tensor,
    Y: torch.Tensor,
    gamma: float,
    *,
    loss: str = "square",
    tau: float = 0.0,
) -> TrustRegionTerms:
    """Theorem 2's U, Z, S, F, ∇L₀ and ∇²L₀ at (A, B) for Φ (m, n) and Y (1, n)."""
    A, B = check_AB(A, B)
    if B.shape[0] != 1:
        raise ValueError(f"Theorem 2 needs m_y = 1; got B of shape {tuple(B.shape)}")
    gamma = check_gamma(gamma)
    m = A.shape[0]
    U = equilibrium_matrix(A, gamma)
    Z = torch.linalg.solve(U.mT, B.mT).mT  # (1, m) = B U⁻¹
    J = softmax_jacobians(A)  # (m, m, m), J[k] = J_k (symmetric)
    v = ((J @ Z[0]) ** 2).sum(dim=1)  # v_k = ‖J_kᵀ Zᵀ‖²
    S = torch.eye(m, dtype=A.dtype, device=A.device) + gamma**2 * torch.diag(v)
    Zstar = torch.linalg.solve(U, Phi)  # (m, n), column i = z*(x_i)
    first, second = loss_derivatives((Z @ Phi)[0], Y[0], loss=loss, tau=tau)
    F = (Zstar * second) @ Zstar.mT
    return TrustRegionTerms(U, Z, S, F, Phi @ first, U @ F @ U.mT)


def solve_trust_region(
    g: torch.Tensor, H: torch.Tensor, G: torch.Tensor, radius: float
) -> tuple[torch.Tensor, float]:
    """argmin_v gᵀv + ½ vᵀHv subject to vᵀGv ≤ radius², and its KKT multiplier λ ≥ 0.

    An independent closed-form solve (Moré & Sorensen): with G = LLᵀ and w = Lᵀv the
    problem is min g̃ᵀw + ½wᵀH̃w over ‖w‖ ≤ r, H̃ = L⁻¹HL⁻ᵀ = QΛQᵀ, g̃ = L⁻¹g; its solution
    is w(λ) = −(H̃ + λI)⁻¹g̃ with λ = 0 if H̃ ≻ 0 and ‖w(0)‖ ≤ r, otherwise the root of
    ‖w(λ)‖ = r on λ > max(0, −Λ_min) (the secular equation, monotone there; solved by
    Brent's method on 1/‖w(λ)‖ − 1/r).  KKT: Hv + g + λGv = 0 (λ = 2μ of Appendix A.2).
    The "hard case" (g̃ orthogonal to the bottom eigenvectors) is not handled: ValueError.
    """
    L = torch.linalg.cholesky(G)  # raises unless G ≻ 0
    Ht = torch.linalg.solve_triangular(L, torch.linalg.solve_triangular(L, H, upper=False).mT,
                                       upper=False)  # fmt: skip
    gt = torch.linalg.solve_triangular(L, g[:, None], upper=False)[:, 0]
    lam_H, Q = torch.linalg.eigh(0.5 * (Ht + Ht.mT))
    c = (Q.mT @ gt).cpu().numpy()
    values = lam_H.cpu().numpy()

    def norm(lam: float) -> float:
        return float(np.linalg.norm(c / (values + lam)))

    if values[0] > 0 and norm(0.0) <= radius:
        lam = 0.0
    else:
        low = max(0.0, -values[0])
        high = low + float(np.linalg.norm(c)) / radius + abs(values).max() + 1.0
        secular = lambda lam: 1.0 / norm(lam) - 1.0 / radius  # noqa: E731
        if not secular(low + 1e-300) < 0 < secular(high):
            raise ValueError("the trust-region subproblem is in the hard case")
        lam = brentq(secular, low + 1e-300, high, xtol=1e-300, rtol=4 * np.finfo(float).eps,
                     maxiter=500)  # fmt: skip
    w = -(Q @ torch.as_tensor(c / (values + lam), dtype=G.dtype, device=G.device))
    v = torch.linalg.solve_triangular(L.mT, w[:, None], upper=True)[:, 0]
    return v, float(lam)


def flow_velocities(
    A: torch.Tensor,
    B: torch.Tensor,
    Phi: torch.Tensor,
    Y: torch.Tensor,
    gamma: float,
    *,
    loss: str = "square",
    tau: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(dZ_t/dt, d/dt f_θt(X)) under the gradient flow dθ/dt = −∇L(θ) (Eq. 6).

    Shapes (m_y, m) and (m_y, n).  Directional derivatives of θ ↦ (B U(A)⁻¹, B U(A)⁻¹Φ)
    along −∇L by forward-mode autograd (torch.func.jvp): measured on the model, without
    Theorem 2's formulas.
    """
    A, B = check_AB(A, B)
    theta = (A.detach(), B.detach())

    def objective(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return delm_objective(a, b, Phi, Y, gamma, loss=loss, tau=tau)

    def predictor_and_output(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        U = equilibrium_matrix(a, gamma)
        return torch.linalg.solve(U.mT, b.mT).mT, b @ torch.linalg.solve(U, Phi)

    grads = torch.func.grad(objective, argnums=(0, 1))(*theta)
    return torch.func.jvp(predictor_and_output, theta, tuple(-g for g in grads))[1]


# --- Appendix B: the implicit bias toward 1ᵀφ(x) (square loss, m_y = 1) --------------------


def error_vector(terms: TrustRegionTerms, delta: float) -> torch.Tensor:
    """r_t = δ_t S_t U_t⁻¹ ∇L₀(Z_t) (m,), so that V_t = −r_tᵀU_t⁻¹ (Eq. 37).

    From Theorem 2's solution V_t = δ_t d/dt Z_t = −δ_t(U⁻ᵀSU⁻¹∇L₀)ᵀ (Appendix A.2); for the
    square loss ∇L₀ = 2Σ_i (f(x_i) − y_i)φ(x_i), so each entry of r_t is a function of the
    residuals, as Appendix B says (it gives no formula: this is the one the proof implies).
    """
    return delta * (terms.S @ torch.linalg.solve(terms.U, terms.gradient))


def appendix_b_velocity(sigma: torch.Tensor, r: torch.Tensor, gamma: float) -> torch.Tensor:
    """vec(V) = −(I − γσ)⁻ᵀ r (Eq. 37) for a column-stochastic σ (m, m) and r (m,)."""
    U = torch.eye(sigma.shape[0], dtype=sigma.dtype, device=sigma.device) - gamma * sigma
    return -torch.linalg.solve(U.mT, r)


def ones_split(v: torch.Tensor) -> tuple[float, float]:
    """(‖P₁v‖, ‖(I − P₁)v‖) with P₁ = 11ᵀ/m, the projection onto the span of 1."""
    along = v.mean() * torch.ones_like(v)
    return float(along.norm()), float((v - along).norm())


def perron_vector(sigma: torch.Tensor) -> torch.Tensor:
    """π with σπ = π, π > 0, 1ᵀπ = 1: the eigenvector of eigenvalue 1 of a positive
    column-stochastic σ (Perron–Frobenius).  (I − γσ)⁻ᵀr → (πᵀr/(1 − γ))1 + O(1) as γ → 1,
    since (σᵀ)ᵏ → 1πᵀ; Appendix B's P₁r/(1 − γ) is this leading term iff πᵀr = 1ᵀr/m
    (e.g. σ doubly stochastic, π = 1/m)."""
    m = sigma.shape[0]
    M = torch.eye(m, dtype=sigma.dtype, device=sigma.device) - sigma
    M[-1] = 1.0  # replace one (redundant) balance equation by 1ᵀπ = 1
    rhs = torch.zeros(m, dtype=sigma.dtype, device=sigma.device)
    rhs[-1] = 1.0
    return torch.linalg.solve(M, rhs)

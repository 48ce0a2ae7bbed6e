"""Kawaguchi (2021)'s λ_min(D) and λ_max(∇²L) of a DELM at sizes where the dense forms of
:mod:`deqlab.papers.kawaguchi2021.theory` do not fit: the structured O(m³) form of D for one output
and Lanczos on Hessian-vector products. The tests compare each with its dense form.
"""

from __future__ import annotations

import torch

from deqlab.models.delm import DELM, column_softmax
from deqlab.papers.kawaguchi2021.theory import delm_objective
from deqlab.theory.spectra import lanczos_largest

__all__ = [
    "dynamics_lambda_min_one_output",
    "dynamics_matrix_one_output",
    "objective_sharpness_lanczos",
]


def dynamics_lambda_min_one_output(A: torch.Tensor, B: torch.Tensor, gamma: float) -> float:
    """λ_min(D) of Eq. (8) for one output (m_y = 1) (:func:`dynamics_matrix_one_output`)."""
    D = dynamics_matrix_one_output(A, B, gamma)
    return float(torch.linalg.eigvalsh(D)[0])


def dynamics_matrix_one_output(A: torch.Tensor, B: torch.Tensor, gamma: float) -> torch.Tensor:
    """D of Eq. (8) for one output (m_y = 1), symmetric (m, m), in O(m³) time and O(m²) memory.

    With m_y = 1, D = Σ_k M_k v_k v_kᵀ = Vᵀ diag(M) V, V = U⁻¹ (rows v_k), and
    M_k = 1 + γ²‖Z J_k‖² where (Z J_k)_j = s_kj (Z_j − Z s_k) (J_k = diag(s_k) − s_k s_kᵀ,
    s_k column k of σ(A), Z = BU⁻¹). :func:`deqlab.papers.kawaguchi2021.theory.lambda_min_dynamics`
    forms D for any m_y through an O(m³)-memory einsum.
    """
    if B.shape[0] != 1:
        raise ValueError(f"`B` must have one row (m_y = 1); got shape {tuple(B.shape)}")
    m = A.shape[0]
    S = column_softmax(A)  # (m, m), column k = s_k
    U = torch.eye(m, dtype=A.dtype, device=A.device) - gamma * S
    V = torch.linalg.inv(U)
    Z = (B @ V)[0]  # (m,)
    centred = Z[:, None] - (Z @ S)[None, :]  # (j, k): Z_j − Z s_k
    M = 1.0 + gamma**2 * (S**2 * centred**2).sum(dim=0)  # (m,)
    D = V.T @ (M[:, None] * V)
    return 0.5 * (D + D.T)


def objective_sharpness_lanczos(
    model: DELM, Phi: torch.Tensor, Y: torch.Tensor, loss: str = "square", tau: float = 0.0
) -> float:
    """λ_max(∇²L(A, B)) by Lanczos on Hessian-vector products (double backward).

    The same number as :func:`deqlab.papers.kawaguchi2021.theory.objective_sharpness`, which forms
    the (m² + m)² Hessian.
    """
    A, B = model.A.detach(), model.B.detach()
    sizes = (A.numel(), B.numel())
    theta = torch.cat([A.reshape(-1), B.reshape(-1)])

    def objective(t: torch.Tensor) -> torch.Tensor:
        a, b = t.split(sizes)
        return delm_objective(a.view_as(A), b.view_as(B), Phi, Y, model.gamma, loss=loss, tau=tau)

    def hvp(v):
        vec = torch.as_tensor(v, dtype=theta.dtype)
        return torch.autograd.functional.hvp(objective, theta, vec)[1].numpy()

    return lanczos_largest(hvp, theta.numel())[0]

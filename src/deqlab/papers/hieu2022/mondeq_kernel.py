"""Proposition 4 (thesis, Eq. 3.7): the kernel ``K(t)`` of the prediction dynamics of a
monotone DEQ under gradient flow, from the exact implicit Jacobians in closed form.

Under ``dθ/dt = −∇L(θ)`` with ``L = ½‖ŷ − y‖²`` (Eq. 3.4), ``dŷ/dt = −K(t)(ŷ − y)`` with
``K = Σ_p J_p J_pᵀ`` over θ = (A, B, U, u), ``J_p = ∂ŷ/∂vec(p)`` (N × dim p). The thesis
prints ``K = J_AᵀJ_A + J_BᵀJ_B + J_UᵀJ_U + ZᵀZ`` with ``J_p`` as defined there (N rows);
``J_pᵀJ_p`` would be dim p × dim p, so the N × N kernel of Eq. (3.7) is ``J_p J_pᵀ``, and
``J_u J_uᵀ = ZᵀZ`` because ``ŷ = Zᵀu`` (ours: the reading that makes the sizes agree).

Closed form, one sample ``j`` at a time (Lemma 3.2.2 solved per column): with
``D_j = diag(relu'(W z_j + U x_j))`` and ``g_j = D_j (I − Wᵀ D_j)⁻¹ u``,

    ∂ŷ_j/∂W = g_j z_jᵀ,  ∂ŷ_j/∂U = g_j x_jᵀ,  ∂ŷ_j/∂u = z_j,
    ∂ŷ_j/∂A = −A(g_j z_jᵀ + z_j g_jᵀ),  ∂ŷ_j/∂B = g_j z_jᵀ − z_j g_jᵀ

(``W = (1 − m)I − AᵀA + B − Bᵀ``, Eq. 3.3), so that with ``G = [g_1 … g_N]`` (n × N),
``M = AᵀA`` and ``∘`` the entrywise product, the four N × N blocks are

    K_A = (ZᵀMG)∘(GᵀZ) + (ZᵀMZ)∘(GᵀG) + (GᵀMG)∘(ZᵀZ) + (GᵀMZ)∘(ZᵀG)
    K_B = 2[(GᵀG)∘(ZᵀZ) − (GᵀZ)∘(ZᵀG)],  K_U = (GᵀG)∘(XᵀX),  K_u = ZᵀZ.

Dense linear solves and matrix products only: nothing goes through the solver's autograd,
so the result checks the model's implicit gradient independently.
"""

from __future__ import annotations

from typing import Unpack

import torch

from deqlab._checks import check_tensor
from deqlab.models.mondeq import active_set
from deqlab.papers.hieu2022.mondeq import Theta, check_point

BLOCKS = ("A", "B", "U", "u")


def output_sensitivities(
    W: torch.Tensor, U: torch.Tensor, u: torch.Tensor, Z: torch.Tensor, X: torch.Tensor
) -> torch.Tensor:
    """``G = [g_1 … g_N]``, ``g_j = D_j (I − Wᵀ D_j)⁻¹ u`` (n × N): ``∂ŷ_j/∂(W z_j + U x_j)``.

    ``D_j`` is the active set of the equilibrium ``Z`` (n × N) of inputs ``X`` (d × N),
    ``W Z + U X > 0`` (:func:`deqlab.models.mondeq.active_set`, as the model's backward).
    """
    n = check_tensor("W", W, ndim=2).shape[0]
    check_tensor("u", u, shape=(n,))
    N = check_tensor("Z", Z, shape=(n, None)).shape[1]
    d = check_tensor("X", X, shape=(None, N)).shape[0]
    check_tensor("U", U, shape=(n, d))
    mask = active_set(W, Z, U @ X)  # (n, N)
    eye = torch.eye(n, dtype=W.dtype, device=W.device)
    systems = eye - W.T.unsqueeze(0) * mask.T.unsqueeze(1)  # (N, n, n): I − Wᵀ D_j
    v = torch.linalg.solve(systems, u.expand(N, n))  # (N, n)
    return (v * mask.T).T


def prediction_kernel(
    *, Z: torch.Tensor, X: torch.Tensor, m: float, **theta: Unpack[Theta]
) -> dict[str, torch.Tensor]:
    """The blocks ``K_A, K_B, K_U, K_u`` (N × N) of Eq. (3.7) and their sum under ``"K"``.

    ``Z`` is the equilibrium (n × N) of ``X`` (d × N) at θ = (A, B, U, u) (module docstring).
    """
    n = check_point(theta, Z, X)[0]
    A, B, u = theta["A"], theta["B"], theta["u"]
    with torch.no_grad():
        eye = torch.eye(n, dtype=A.dtype, device=A.device)
        W = (1.0 - m) * eye - A.T @ A + B - B.T
        G = output_sensitivities(W, theta["U"], u, Z, X)
        M = A.T @ A
        GG, ZZ, GZ = G.T @ G, Z.T @ Z, G.T @ Z
        ZM, GM = Z.T @ M, G.T @ M
        blocks = {
            "A": (ZM @ G) * GZ + (ZM @ Z) * GG + (GM @ G) * ZZ + (GM @ Z) * GZ.T,
            "B": 2 * (GG * ZZ - GZ * GZ.T),
            "U": GG * (X.T @ X),
            "u": ZZ,
        }
    return {**blocks, "K": sum(blocks.values())}

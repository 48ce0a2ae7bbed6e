"""The neural tangent kernel of the ReLU DEQ of Ling et al. (2023): infinite width and empirical.

Model (Eqs. 1-2): ``z_i = φ(W z_i + U x_i)``, ``ŷ_i = aᵀ z_i``, trainable θ = (W, U, a),
initialised by Assumption 1. By implicit differentiation (Lemma 2),

    ∂ŷ_i/∂a = z_i,   ∂ŷ_i/∂W = g_i z_iᵀ,   ∂ŷ_i/∂U = g_i x_iᵀ,
    g_i = D_i (I - Wᵀ D_i)⁻¹ a,   i.e. the adjoint fixed point g_i = D_i (a + Wᵀ g_i),

so the empirical NTK Θ = Σ_θ ∂ŷ/∂θ ∂ŷ/∂θᵀ has three blocks

    Θ = ZᵀZ + (GᵀG) ⊙ (ZᵀZ) + (GᵀG) ⊙ (XᵀX),    G = [g_1, ..., g_n] (m × n).

Width limits (derived here; the paper does not state the NTK). ``ZᵀZ/m → K`` (Theorems 3-5).
For the adjoint, one unit of ``g_i ⊙ g_j`` is ``D_i D_j (a + Wᵀg_i)(a + Wᵀg_j)``; with a
independent of the forward pass and the gradient-independence property of Gaussian weights
(Yang 2020, Tensor Programs; Feng & Kolter 2020 for DEQs), ``E[D_i D_j] = Q'(u_ij)/2`` where
``u_ij = σ_w² k_ij + (1 - σ_w²) c_ij`` is the pre-activation correlation at the fixed point of
Eq. (14), ``a_k ~ N(0, 1/m)`` and ``(Wᵀg)_k`` has covariance ``2σ_w² g_iᵀg_j / m``. Hence

    P_ij = lim g_iᵀ g_j = Q'(u_ij) (1 + 2σ_w² P_ij) / 2   ⇒   P = Q'(u) / (2 (1 - σ_w² Q'(u))).

Normalisation. Assumption 1 is the standard parameterisation (``a ~ N(0, 1/m)``, no 1/√m in
front of the read-out), in which the W and a blocks of Θ grow like m and the U block stays
O(d): the limit that exists is

    "standard":  Θ / m  →  K + P ⊙ K          (the U block is O(d/m) and vanishes).

The same network written in the NTK parameterisation (W = σ_w √(2/m) W̃, U = √(2/d) Ũ,
a = ã/√m with W̃, Ũ, ã ~ N(0, 1) trained) has the kernel of Feng & Kolter (2020):

    "ntk":  (2σ_w²/m) Θ_W + (2/d) Θ_U + Θ_a / m  →  K + 2 P ⊙ (σ_w² K + XᵀX/d).

Both follow the same entrywise pattern as K (see :func:`deqlab.theory.kernels.assemble_gram`):
with ``ρ = 1/(1-σ_w²)`` and ``σ_w² K_ij + x_iᵀx_j/d = ρ √(ν_iν_j) u_ij`` they read
``ρ √(ν_iν_j) k (1 + P)`` and ``ρ √(ν_iν_j) (k + 2 P u)``.

The PL Gram of Section 2.3. Unnormalised, the three blocks are the matrices of Eq. (4):
``H1 = G = ZᵀZ``, ``H2 = R (G ⊗ I_m) Rᵀ = (ΓᵀΓ) ⊙ (ZᵀZ)`` and
``H3 = R (XᵀX ⊗ I_m) Rᵀ = (ΓᵀΓ) ⊙ (XᵀX)``, Γ = [g_1, ..., g_n] (row i of R is g_iᵀ in
block i, because ŷ_i depends on z_i alone), so ``H = H1 + H2 + H3 = Θ`` and
``‖∇_θΦ‖² = rᵀ H r`` with r = ŷ − y (Lemma 2): :func:`pl_gram`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from deqlab._checks import check_choice, check_real, check_tensor
from deqlab._progress import Progress, silent
from deqlab.models.relu_deq import ReLUDEQ
from deqlab.models.relu_deq_solve import DEFAULT_MAX_ITER, solve_adjoint
from deqlab.theory.kernels import (
    assemble_gram_blocks,
    check_inputs,
    check_sigma_w2,
    depth_scale,
    infinite_depth_entries,
    q_and_slope,
)

__all__ = [
    "PARAMETERIZATIONS",
    "ImplicitJacobian",
    "deq_ntk",
    "empirical_ntk",
    "implicit_jacobian",
    "pl_gram",
]

PARAMETERIZATIONS = ("standard", "ntk")


def _ntk_entries(
    cos: torch.Tensor, sigma_w2: float, parameterization: str, k: torch.Tensor
) -> torch.Tensor:
    """Normalised NTK entries from a block of input cosines and the normalised fixed
    point k of Eq. (14) on it (module docstring)."""
    u = cos.mul_(1.0 - sigma_w2).add_(k, alpha=sigma_w2).clamp_(-1.0, 1.0)  # (b, c)
    q_slope = q_and_slope(u, slope=True)[1]
    p = q_slope.div(q_slope.mul(-2.0 * sigma_w2).add_(2.0))  # P = Q'/(2(1 - σ² Q'))
    if parameterization == "standard":
        return p.add_(1.0).mul_(k)  # k (1 + P)
    return p.mul_(u).mul_(2.0).add_(k)  # k + 2 P u


def deq_ntk(
    X: torch.Tensor,
    sigma_w2: float = 0.08,
    *,
    parameterization: str = "standard",
    tol: float = 1e-14,
    gram: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
    progress: Progress = silent,
) -> torch.Tensor:
    """Infinite-width NTK of the ReLU DEQ with trainable W, U, a (module docstring).

    Args:
        X: inputs, shape (d, n), one point per column.
        sigma_w2: σ_w² ∈ (0, 1); values ≥ 1/8 warn (Assumption 1).
        parameterization: ``"standard"`` → lim Θ/m = K + P⊙K for the Assumption 1 network;
            ``"ntk"`` → K + 2 P⊙(σ_w² K + XᵀX/d), the kernel of the NTK parameterisation.
        tol: tolerance of the fixed point of Eq. (14) on the normalised entries.
        gram: K of these X and σ_w² if already computed
            (:func:`deqlab.theory.kernels.population_gram`): the fixed point of Eq. (14) is
            then read off it, k_ij = (1 − σ_w²)K_ij/√(ν_iν_j), one pass of elementwise work
            instead of a second solve (most of the cost of K), block by block.
        out: an (n, n) float64 tensor to write the NTK into; may be ``gram`` itself (the
            NTK over K, one n×n buffer instead of two: :func:`assemble_gram_blocks`).
        progress: called per row block (:func:`assemble_gram_blocks`).

    Returns:
        (n, n) float64 PSD tensor; the limit of :func:`empirical_ntk` as m → ∞.
    """
    X = check_inputs(X)
    sigma_w2 = check_sigma_w2(sigma_w2)
    parameterization = check_choice("parameterization", parameterization, PARAMETERIZATIONS)
    tol = check_real("tol", tol, low=0.0, low_inclusive=False)
    rho = depth_scale(sigma_w2, None)
    if gram is None:

        def solved(cos: torch.Tensor) -> torch.Tensor:
            k = infinite_depth_entries(cos, sigma_w2, tol)  # (b, c) Eq. (14)
            return _ntk_entries(cos, sigma_w2, parameterization, k)

        return assemble_gram_blocks(
            X, lambda cos, rows: solved(cos), rho, out=out, progress=progress, what="DEQ NTK"
        )
    n = X.shape[1]
    K = check_tensor("gram", gram, shape=(n, n)).to(torch.float64)
    scale = X.to(torch.float64).norm(dim=0) / X.shape[0] ** 0.5  # √ν_i

    def entries(cos: torch.Tensor, rows: slice) -> torch.Tensor:
        k = K[rows, rows.start :] / (scale[rows, None] * scale[None, rows.start :] * rho)
        k.diagonal().fill_(1.0)  # exactly, as Q'(u) has an infinite slope at u = 1
        return _ntk_entries(cos, sigma_w2, parameterization, k.clamp_(0.0, 1.0))

    return assemble_gram_blocks(X, entries, rho, out=out, progress=progress, what="DEQ NTK")


@dataclass(frozen=True)
class ImplicitJacobian:
    """The exact implicit Jacobian ∂ŷ/∂θ of a ReLU DEQ at one θ, in factored form: the
    equilibrium Z and the adjoint Γ = [g_1, ..., g_n] (module docstring), each (m, n)."""

    Z: torch.Tensor
    G: torch.Tensor
    X: torch.Tensor

    def blocks(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """H1 = ZᵀZ, H2 = (ΓᵀΓ) ⊙ (ZᵀZ), H3 = (ΓᵀΓ) ⊙ (XᵀX): the a, W and U blocks of
        Θ = H (Section 2.3), unnormalised, each (n, n) in float64."""
        Z, G, X = (t.to(torch.float64) for t in (self.Z, self.G, self.X))
        gram_z, gram_g = Z.T @ Z, G.T @ G
        return gram_z, gram_g * gram_z, gram_g * (X.T @ X)


@torch.no_grad()
def implicit_jacobian(
    model: ReLUDEQ, X: torch.Tensor, *, tol: float = 1e-12, max_iter: int = DEFAULT_MAX_ITER
) -> ImplicitJacobian:
    """Z and Γ of ``model`` at its current θ, solved from zero to the relative ``tol``.

    The adjoint is solved for C, c_i = (I − WᵀD_i)⁻¹ a, by the structured solve of
    :mod:`deqlab.models.relu_deq_solve`; then g_i = D_i c_i. Raises
    :class:`deqlab.solvers.SolverError` if a solve does not converge within
    ``max_iter`` (e.g. ‖W‖₂ >= 1).
    """
    if not isinstance(model, ReLUDEQ):
        raise TypeError(f"`model` must be a deqlab ReLUDEQ; got {type(model).__name__}")
    (X,) = model.check_data(X)
    tol = check_real("tol", tol, low=0.0, low_inclusive=False)
    fwd = model.equilibrium(X, tol=tol, max_iter=max_iter).raise_if_failed("forward")
    zeros = torch.zeros_like(fwd.Z)  # C = 0 has the product Wᵀ(D⊙C) = 0 for free
    adj = solve_adjoint(model.W, fwd.mask, model.a[:, None], zeros, zeros, tol=tol,
                        max_iter=max_iter).raise_if_failed("adjoint")  # fmt: skip
    return ImplicitJacobian(fwd.Z, adj.x * fwd.mask, X)


def pl_gram(
    model: ReLUDEQ, X: torch.Tensor, *, tol: float = 1e-12, max_iter: int = DEFAULT_MAX_ITER
) -> torch.Tensor:
    """H = H1 + H2 + H3 of Eq. (4) (Section 2.3) at the model's θ, (n, n) float64.

    ``‖∇_θΦ‖² = rᵀ H r >= 2 λ_min(H) Φ`` (Eq. (4)) and ``λ_min(H) >= λ_min(H1) = λ_τ``
    (H2, H3 are PSD); solves as in :func:`implicit_jacobian`.
    """
    h1, h2, h3 = implicit_jacobian(model, X, tol=tol, max_iter=max_iter).blocks()
    return h1 + h2 + h3


def empirical_ntk(
    model: ReLUDEQ,
    X: torch.Tensor,
    *,
    parameterization: str = "standard",
    sigma_w2: float | None = None,
    tol: float = 1e-12,
) -> torch.Tensor:
    """Empirical NTK of a finite ReLU DEQ, normalised like :func:`deq_ntk`.

    Uses the exact implicit gradients (module docstring): the forward equilibrium Z and the
    adjoint G = [g_1..g_n] (g_i = D_i (I - WᵀD_i)⁻¹ a) are solved to relative ``tol``.
    ``"standard"`` returns Θ/m; ``"ntk"`` returns (2σ_w²/m)Θ_W + (2/d)Θ_U + Θ_a/m and needs the
    ``sigma_w2`` the network was initialised with. Shape (n, n), in X's dtype.
    """
    parameterization = check_choice("parameterization", parameterization, PARAMETERIZATIONS)
    if parameterization == "ntk":
        if sigma_w2 is None:
            raise ValueError("`sigma_w2` is required for parameterization='ntk'; got None")
        sigma_w2 = check_real("sigma_w2", sigma_w2, low=0.0, low_inclusive=False)
    h1, h2, h3 = implicit_jacobian(model, X, tol=tol).blocks()
    m, d = model.m, model.d
    if parameterization == "standard":
        return ((h1 + h2 + h3) / m).to(X.dtype)
    return (h1 / m + h2 * (2.0 * sigma_w2 / m) + h3 * (2.0 / d)).to(X.dtype)

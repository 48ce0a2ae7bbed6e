"""Spectral quantities of the theorems: λ_min of a Gram matrix and spectral norms.

* λ_τ = λ_min(Z(τ)ᵀ Z(τ)) (Ling et al. 2023, Section 2.1) — always exact: the n×n Gram
  matrix is formed and ``eigvalsh`` is called, in float64.
* ‖W‖₂ — exact (``torch.linalg.matrix_norm(·, 2)``, an SVD, O(m³)) or by Golub–Kahan–
  Lanczos bidiagonalization with full re-orthogonalization, warm-startable from the
  previous top right singular vector (O(k m²) for k iterations). The Lanczos value is a
  lower bound of ‖W‖₂ that converges to it; use the exact norm where a certificate is
  needed.
"""

from __future__ import annotations

import torch

from deqlab._checks import check_int, check_positive, check_tensor


def gram_lambda_min(Z: torch.Tensor) -> float:
    """λ_min(Zᵀ Z) for Z of shape (m, n), computed exactly in float64."""
    Z = check_tensor("Z", Z, ndim=2).to(torch.float64)
    return float(torch.linalg.eigvalsh(Z.T @ Z)[0])


def spectral_norm(A: torch.Tensor) -> float:
    """‖A‖₂ (largest singular value), exact, in float64."""
    A = check_tensor("A", A, ndim=2)
    return float(torch.linalg.matrix_norm(A.to(torch.float64), ord=2))


def spectral_norm_lanczos(
    A: torch.Tensor,
    v0: torch.Tensor | None = None,
    *,
    tol: float = 1e-10,
    max_iter: int = 200,
    seed: int = 0,
) -> tuple[float, torch.Tensor]:
    """‖A‖₂ by Golub–Kahan–Lanczos bidiagonalization, warm-started from ``v0``.

    Builds A V_k = U_k B_k with B_k upper bidiagonal (diagonal α, super-diagonal β) and
    orthonormal U_k, V_k (fully re-orthogonalized), and stops when σ_max(B_k) changes by
    less than ``tol`` relative. Returns (σ_max(B_k), top right singular vector of A in the
    Krylov space) — pass the vector back as ``v0`` next time. Works in float64.
    """
    A = check_tensor("A", A, ndim=2).to(torch.float64)
    tol = check_positive("tol", tol)
    max_iter = check_int("max_iter", max_iter, min_value=1)
    n_cols = A.shape[1]
    if v0 is None:
        gen = torch.Generator(device="cpu").manual_seed(seed)
        v0 = torch.randn(n_cols, generator=gen, dtype=torch.float64).to(A.device)
    v0 = check_tensor("v0", v0, shape=(n_cols,)).to(A)
    if float(v0.norm()) == 0:
        raise ValueError("`v0` must be a non-zero vector")
    steps = min(max_iter, min(A.shape))
    Vs = [v0 / v0.norm()]
    u = A @ Vs[0]
    alphas = [u.norm()]
    if float(alphas[0]) == 0:
        return 0.0, Vs[0]
    Us = [u / alphas[0]]
    betas: list[torch.Tensor] = []
    sigma_old = float(alphas[0])
    for _ in range(1, steps):
        w = A.T @ Us[-1] - alphas[-1] * Vs[-1]
        V = torch.stack(Vs, dim=1)  # (n_cols, k)
        w = w - V @ (V.T @ w)
        beta = w.norm()
        if float(beta) <= 1e-14 * float(alphas[0]):
            break  # invariant subspace: B_k is exact
        Vs.append(w / beta)
        p = A @ Vs[-1] - beta * Us[-1]
        Um = torch.stack(Us, dim=1)
        p = p - Um @ (Um.T @ p)
        alpha = p.norm()
        betas.append(beta)
        alphas.append(alpha)
        if float(alpha) <= 1e-14 * float(alphas[0]):
            break
        Us.append(p / alpha)
        sigma = float(torch.linalg.svdvals(_bidiagonal(alphas, betas))[0])
        if abs(sigma - sigma_old) <= tol * sigma:
            break
        sigma_old = sigma
    Bk = _bidiagonal(alphas, betas)
    _, S, Vh = torch.linalg.svd(Bk)
    k = Bk.shape[1]
    v_top = torch.stack(Vs[:k], dim=1) @ Vh[0]
    return float(S[0]), v_top / v_top.norm()


def _bidiagonal(alphas: list[torch.Tensor], betas: list[torch.Tensor]) -> torch.Tensor:
    """Upper bidiagonal B with diagonal α_1..α_k and super-diagonal β_1..β_{k-1}."""
    diag = torch.stack(alphas)
    B = torch.diag(diag)
    if betas:
        B = B + torch.diag(torch.stack(betas[: len(alphas) - 1]), diagonal=1)
    return B

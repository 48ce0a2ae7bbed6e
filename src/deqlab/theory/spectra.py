"""Spectral quantities of the theorems: least eigenvalues of Gram matrices and spectral norms.

* λ_τ = λ_min(Z(τ)ᵀ Z(τ)) (Ling et al. 2023, Section 2.1) — always exact: the n×n Gram
  matrix is formed and ``eigvalsh`` is called, in float64.
* ‖W‖₂ — exact (``torch.linalg.matrix_norm(·, 2)``, an SVD, O(m³)) or by Golub–Kahan–
  Lanczos bidiagonalization with full re-orthogonalization, warm-startable from the
  previous top right singular vector (O(k m²) for k iterations). The Lanczos value is a
  lower bound of ‖W‖₂ that converges to it; use the exact norm where a certificate is
  needed.
* λ_min of a large symmetric PSD matrix (λ* = λ_min(K) of Eq. (14) at n = 10⁴–3·10⁴) without a
  dense eigendecomposition, :func:`least_eigenvalue_large`:
  A dense ``eigvalsh`` of an n×n matrix costs O(n³) with a large memory-bound part (the
  tridiagonal reduction): at n = 10⁴ on two cores, minutes. Above :data:`DENSE_LIMIT` rows:

  1. λ_max by Lanczos on K itself (the top of a kernel matrix is well separated: ~10 steps);
  2. the float32 Cholesky factor of K (LAPACK ``potrf`` through torch, n³/3 flops at twice
     the float64 rate) preconditions block LOBPCG in float64 (:mod:`deqlab.theory.lobpcg`):
     one factorization, and every product with K in float64, so the answer is as accurate as
     the float64 path's. A caller may pass a :class:`Reuse` so that the next matrix (the DEQ
     NTK ⪰ K) is preconditioned by the same factor, from the same Ritz block.
  3. Where that cannot answer — K not positive definite in float32, LOBPCG past its step
     limit, or λ_min within the round-off tolerance of 0 — the float64 path decides:
     the Cholesky factor K = LLᵀ fails exactly when K is not positive definite to working
     precision: λ_min is then reported as 0, singular, as
     :func:`deqlab.theory.kernels.least_eigenvalue` does — unless that of K + tol·I fails
     too (tol = n·eps·λ_max): then λ_min < −tol, K is not PSD, ValueError. Else shift-invert
     Lanczos, twice. The bottom of a kernel matrix's spectrum is a dense cluster (n = 10⁴
     points on the sphere in d = 100: λ₂/λ₁ − 1 ≈ 3·10⁻⁴), which Lanczos on K⁻¹ resolves
     only after ~300 steps. So a coarse estimate λ̂ ≥ λ_min from Lanczos on K⁻¹
     (:data:`COARSE_RTOL`) gives a shift σ = λ̂(1 − c) just below λ_min — certified by the
     Cholesky factorization of K − σI succeeding; else c grows (:data:`SHIFTS`, ending at
     σ = 0) — and Lanczos on (K − σI)⁻¹, whose top eigenvalue 1/(λ_min − σ) stands clear of
     the next ones, converges to :data:`RTOL` in tens of steps: λ_min = σ + 1/μ.

  Both paths stop at RTOL (relative change over :data:`STALL` steps, or a residual below
  RTOL·θ) and return an upper estimate (a Ritz value never lies below λ_min). Small
  matrices go to the exact :func:`~deqlab.theory.kernels.least_eigenvalue`, which the tests
  compare both with. Memory: K and one n×n float64 work array (2 × 7.2 GB at n = 3·10⁴),
  which a caller may pass and reuse; the float32 factor takes half of it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from deqlab._checks import check_int, check_positive, check_tensor
from deqlab._memory import check_square
from deqlab._progress import Progress, silent
from deqlab.theory.kernels import LeastEigenvalue, check_symmetric, least_eigenvalue
from deqlab.theory.lobpcg import Preconditioner, float32_cholesky, least_eigenvalue_lobpcg

#: Up to this size the dense, exact ``eigvalsh`` is used (a few seconds on two cores).
DENSE_LIMIT = 3000
#: Relative accuracy at which the Lanczos iterations stop.
RTOL = 1e-9
#: Relative accuracy of the coarse estimate λ̂ that places the shift.
COARSE_RTOL = 1e-4
#: The shifts tried, σ = λ̂(1 − c) for c in order, before σ = 0 (always admissible).
SHIFTS = (5e-3, 5e-2, 0.5)
#: Lanczos stops when θ has changed by less than RTOL·θ over this many steps.
STALL = 5
#: At most this many Lanczos steps (a basis of 400 vectors of n floats).
MAX_STEPS = 400

Matvec = Callable[[np.ndarray], np.ndarray]


def lanczos_largest(
    matvec: Matvec, n: int, *, rtol: float = RTOL, seed: int = 0
) -> tuple[float, int]:
    """The largest eigenvalue θ of a symmetric operator, and the steps taken.

    Lanczos with full re-orthogonalization from a seeded random start; stops at ``rtol``
    (module docstring), an invariant subspace, or :data:`MAX_STEPS`.
    """
    n = check_int("n", n, min_value=1)
    rng = np.random.default_rng(seed)
    q = rng.standard_normal(n)
    basis = [q / np.linalg.norm(q)]
    alphas: list[float] = []
    betas: list[float] = []
    history: list[float] = []
    for step in range(1, min(n, MAX_STEPS) + 1):
        w = matvec(basis[-1])
        alphas.append(float(basis[-1] @ w))
        Q = np.stack(basis, axis=1)  # (n, k)
        w = w - Q @ (Q.T @ w)
        w = w - Q @ (Q.T @ w)  # twice is enough (Kahan–Parlett)
        beta = float(np.linalg.norm(w))
        T = np.diag(alphas) + np.diag(betas, 1) + np.diag(betas, -1)
        values, vectors = np.linalg.eigh(T)
        theta = float(values[-1])
        history.append(theta)
        residual = beta * abs(float(vectors[-1, -1]))  # ‖K y − θ y‖ of the Ritz vector
        stalled = len(history) > STALL and abs(theta - history[-1 - STALL]) <= rtol * abs(theta)
        if residual <= rtol * abs(theta) or stalled or beta <= 1e-300:
            return theta, step
        betas.append(beta)
        basis.append(w / beta)
    return history[-1], len(history)


def cholesky_lower(K: torch.Tensor, work: torch.Tensor, shift: float = 0.0) -> torch.Tensor | None:
    """The lower Cholesky factor of K − shift·I, computed in place in ``work`` (an n×n float64
    tensor, overwritten), or None when K − shift·I is not positive definite to working
    precision (LAPACK ``potrf`` through torch: MKL where torch has it).

    The factor is returned as the column-major view ``work.mT`` (the same matrix, K − σI
    being symmetric): LAPACK's own layout, so that neither ``potrf`` nor the triangular
    solves of :func:`_inverse` copy the n×n array (a row-major ``out=`` costs one more n×n
    array: 7.2 GB at n = 3·10⁴).
    """
    work.copy_(K).diagonal().sub_(shift)
    factor = work.mT  # column-major
    info = torch.empty((), dtype=torch.int32)
    torch.linalg.cholesky_ex(factor, out=(factor, info))
    return factor if int(info) == 0 else None


def _inverse(L: torch.Tensor) -> Matvec:
    """v ↦ (LLᵀ)⁻¹v = L⁻ᵀ(L⁻¹v), two triangular solves."""

    def apply(v: np.ndarray) -> np.ndarray:
        w = torch.linalg.solve_triangular(L, torch.from_numpy(v)[:, None], upper=False)
        return torch.linalg.solve_triangular(L.mT, w, upper=True)[:, 0].numpy()

    return apply


@dataclass
class Reuse:
    """What one :func:`least_eigenvalue_large` leaves for the next call on a nearby matrix:
    the float32 preconditioner (living in the shared ``work`` array) and the Ritz block.

    Pass one ``Reuse()`` to the calls for K and then the DEQ NTK written over it (NTK ⪰ K, so
    K⁻¹ preconditions it well): the NTK costs no factorization of its own.
    """

    precondition: Preconditioner | None = None
    block: torch.Tensor | None = None


def least_eigenvalue_large(
    K: torch.Tensor,
    *,
    work: torch.Tensor | None = None,
    progress: Progress = silent,
    reuse: Reuse | None = None,
) -> LeastEigenvalue:
    """λ_min of the symmetric PSD matrix K with the round-off rule of
    :func:`~deqlab.theory.kernels.least_eigenvalue` (|λ_min| <= n·eps·λ_max is 0, singular).

    Dense and exact up to :data:`DENSE_LIMIT` rows, and on a CUDA device (``eigvalsh`` there
    takes seconds at n = 3·10⁴); above, on the CPU, LOBPCG with a float32 Cholesky
    preconditioner, else Cholesky and shift-invert Lanczos (module docstring), in one n×n
    float64 work array besides K: ``work`` when given (reuse it across calls: nothing is
    allocated), else allocated after a memory check. K is left unchanged.
    ``progress(what, stage, 5)`` is called before each stage.
    """
    K = check_tensor("K", K, ndim=2)
    n = K.shape[0]
    if K.shape != (n, n) or n == 0:
        raise ValueError(f"`K` must be a non-empty square matrix; got shape {tuple(K.shape)}")
    if n <= DENSE_LIMIT or K.is_cuda:
        progress(f"λ_min by a dense eigvalsh (n = {n})", 0, 1)
        return least_eigenvalue(K)
    eps = torch.finfo(K.dtype).eps
    if K.dtype != torch.float64 or K.device.type != "cpu":
        check_square("`K`", n, "a float64 copy of K on the CPU", buffers=1)
    K64 = K.detach().to(device="cpu", dtype=torch.float64)
    check_symmetric(K64, eps)
    work = _work_array(work, n)
    progress(f"λ_max(K) by Lanczos (n = {n})", 0, 5)
    top, _ = lanczos_largest(lambda v: (K64 @ torch.from_numpy(v)).numpy(), n)
    tol = n * eps * abs(top)
    reuse = reuse if reuse is not None else Reuse()
    found = _preconditioned(K64, work, reuse, progress)
    if found is not None and found > tol:
        return LeastEigenvalue.rounded(found, top, tol)
    reuse.precondition = None  # the float64 path overwrites the factor in `work`
    return _float64_path(K64, work, top, tol, progress)


def _preconditioned(K: torch.Tensor, work: torch.Tensor, reuse: Reuse, progress: Progress):
    """λ_min by float32-preconditioned LOBPCG (:mod:`deqlab.theory.lobpcg`), with the
    factor of ``reuse`` or a new one of K; None where that cannot answer."""
    if reuse.precondition is None:
        progress(f"float32 Cholesky factorization of K (n = {K.shape[0]})", 1, 5)
        reuse.precondition = float32_cholesky(K, work)
        if reuse.precondition is None:
            return None
    progress("λ_min by LOBPCG, preconditioned by the float32 factor", 2, 5)
    found = least_eigenvalue_lobpcg(
        K, reuse.precondition, rtol=RTOL, stall=STALL, start=reuse.block
    )
    if found is None:
        return None
    reuse.block = found.block
    return found.value


def _float64_path(
    K: torch.Tensor, work: torch.Tensor, top: float, tol: float, progress: Progress
) -> LeastEigenvalue:
    """Cholesky in float64 and shift-invert Lanczos (module docstring, item 3)."""
    progress(f"Cholesky factorization of K (n = {K.shape[0]})", 1, 5)
    L = cholesky_lower(K, work)
    if L is None:
        if cholesky_lower(K, work, -tol) is None:  # λ_min < −tol: not PSD
            raise ValueError(
                f"`K` must be positive semi-definite; the Cholesky factorization of K + tol·I "
                f"fails, so λ_min < -{tol:.1e} (the round-off tolerance n·eps·λ_max)"
            )
        reason = (
            f"the Cholesky factorization of K fails: K is not positive definite to working "
            f"precision (λ_min <= n·eps·λ_max = {tol:.1e}; duplicate or parallel inputs give this)"
        )
        return LeastEigenvalue(0.0, math.nan, top, tol, True, reason)
    progress("coarse λ_min by Lanczos on K⁻¹", 2, 5)
    estimate = 1.0 / lanczos_largest(_inverse(L), K.shape[0], rtol=COARSE_RTOL)[0]
    lo = _refine(K, work, estimate, progress)
    return LeastEigenvalue.rounded(lo, top, tol)


def _work_array(work: torch.Tensor | None, n: int) -> torch.Tensor:
    """The caller's n×n float64 CPU ``work`` array, checked, or a new one that fits."""
    if work is None:
        check_square("`K`", n, "the Cholesky factor of K (one work array)", buffers=1)
        return torch.empty(n, n, dtype=torch.float64)
    if work.shape != (n, n) or work.dtype != torch.float64 or work.device.type != "cpu":
        raise ValueError(
            f"`work` must be a ({n}, {n}) float64 CPU tensor; got {tuple(work.shape)} "
            f"{work.dtype} on {work.device}"
        )
    return work


def _refine(K: torch.Tensor, work: torch.Tensor, estimate: float, progress: Progress) -> float:
    """λ_min = σ + 1/μ from Lanczos on (K − σI)⁻¹ at the first shift of :data:`SHIFTS`
    below λ_min (the one whose Cholesky factorization succeeds), else at σ = 0."""
    n = K.shape[0]
    for c in SHIFTS:
        sigma = estimate * (1.0 - c)
        progress(f"Cholesky factorization of K − σI, σ = {sigma:.6g}", 3, 5)
        L = cholesky_lower(K, work, sigma)
        if L is not None:
            progress("λ_min by Lanczos on (K − σI)⁻¹", 4, 5)
            return sigma + 1.0 / lanczos_largest(_inverse(L), n)[0]
    progress("Cholesky factorization of K, σ = 0", 3, 5)
    L = cholesky_lower(K, work)  # factorized before: K is positive definite
    progress("λ_min by Lanczos on K⁻¹", 4, 5)
    return 1.0 / lanczos_largest(_inverse(L), n)[0]


def gram_lambda_min(Z: torch.Tensor) -> float:
    """λ_min(Zᵀ Z) for Z of shape (m, n), computed exactly in float64; an n whose Gram
    matrix and eigvalsh's copy of it cannot fit is refused first."""
    Z = check_tensor("Z", Z, ndim=2)
    check_square("`Z`", Z.shape[1], "ZᵀZ and eigvalsh's copy", buffers=2, device=Z.device)
    Z = Z.to(torch.float64)
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

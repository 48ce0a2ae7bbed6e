"""λ_min of a large symmetric positive semi-definite matrix without a dense eigendecomposition.

A dense ``eigvalsh`` of an n×n matrix costs O(n³) with a large memory-bound part (the
tridiagonal reduction): at n = 10⁴ on two cores, minutes. Above :data:`DENSE_LIMIT` rows:

1. λ_max by Lanczos on K itself (the top of a kernel matrix is well separated: ~10 steps);
2. the Cholesky factor K = LLᵀ (LAPACK ``potrf`` through torch, O(n³/3), compute-bound:
   MKL's is twice as fast as scipy's OpenBLAS here). It fails
   exactly when K is not positive definite to working precision: λ_min is then reported
   as 0, singular, as :func:`deqlab.theory.kernels.least_eigenvalue` does;
3. shift-invert Lanczos, twice. The bottom of a kernel matrix's spectrum is a dense
   cluster (n = 10⁴ points on the sphere in d = 100: λ₂/λ₁ − 1 ≈ 3·10⁻⁴), which Lanczos on
   K⁻¹ resolves only after ~300 steps. So a coarse estimate λ̂ ≥ λ_min from Lanczos on K⁻¹
   (:data:`COARSE_RTOL`) gives a shift σ = λ̂(1 − c) just below λ_min — certified by the
   Cholesky factorization of K − σI succeeding; else c grows (:data:`SHIFTS`, ending at
   σ = 0) — and Lanczos on (K − σI)⁻¹, whose top eigenvalue 1/(λ_min − σ) stands clear of
   the next ones, converges to :data:`RTOL` in tens of steps: λ_min = σ + 1/μ.

Each Lanczos step costs two triangular solves with the factor. A Ritz value never exceeds
the largest eigenvalue, so σ + 1/θ ≥ λ_min: the value returned is an upper estimate,
converged to RTOL (relative change of θ over :data:`STALL` steps, or a Ritz residual below
RTOL·θ). Small matrices go to the exact :func:`~deqlab.theory.kernels.least_eigenvalue`,
which the tests compare this with.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch

from deqlab._checks import check_int, check_tensor
from deqlab.theory.kernels import LeastEigenvalue, least_eigenvalue

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
    """The lower Cholesky factor of K − shift·I, computed in ``work`` (an n×n float64
    tensor, overwritten), or None when K − shift·I is not positive definite to working
    precision (LAPACK ``potrf`` through torch: MKL where torch has it)."""
    work.copy_(K).diagonal().sub_(shift)
    info = torch.empty((), dtype=torch.int32)
    torch.linalg.cholesky_ex(work, out=(work, info))
    return work if int(info) == 0 else None


def _inverse(L: torch.Tensor) -> Matvec:
    """v ↦ (LLᵀ)⁻¹v = L⁻ᵀ(L⁻¹v), two triangular solves."""

    def apply(v: np.ndarray) -> np.ndarray:
        w = torch.linalg.solve_triangular(L, torch.from_numpy(v)[:, None], upper=False)
        return torch.linalg.solve_triangular(L.mT, w, upper=True)[:, 0].numpy()

    return apply


def least_eigenvalue_large(K: torch.Tensor) -> LeastEigenvalue:
    """λ_min of the symmetric PSD matrix K with the round-off rule of
    :func:`~deqlab.theory.kernels.least_eigenvalue` (|λ_min| <= n·eps·λ_max is 0, singular).

    Dense and exact up to :data:`DENSE_LIMIT` rows; above, Cholesky and shift-invert
    Lanczos (module docstring), with one n×n work array besides K.
    """
    K = check_tensor("K", K, ndim=2)
    n = K.shape[0]
    if K.shape != (n, n) or n == 0:
        raise ValueError(f"`K` must be a non-empty square matrix; got shape {tuple(K.shape)}")
    if n <= DENSE_LIMIT:
        return least_eigenvalue(K)
    eps = torch.finfo(K.dtype).eps
    K64 = K.detach().to(torch.float64).cpu()
    top, _ = lanczos_largest(lambda v: (K64 @ torch.from_numpy(v)).numpy(), n)
    tol = n * eps * abs(top)
    work = torch.empty_like(K64)
    L = cholesky_lower(K64, work)
    if L is None:
        reason = (
            f"the Cholesky factorization of K fails: K is not positive definite to working "
            f"precision (λ_min <= n·eps·λ_max = {tol:.1e}; duplicate or parallel inputs give this)"
        )
        return LeastEigenvalue(0.0, math.nan, top, tol, True, reason)
    estimate = 1.0 / lanczos_largest(_inverse(L), n, rtol=COARSE_RTOL)[0]
    lo = _refine(K64, work, estimate)
    return LeastEigenvalue.rounded(lo, top, tol)


def _refine(K: torch.Tensor, work: torch.Tensor, estimate: float) -> float:
    """λ_min = σ + 1/μ from Lanczos on (K − σI)⁻¹ at the first shift of :data:`SHIFTS`
    below λ_min (the one whose Cholesky factorization succeeds), else at σ = 0."""
    n = K.shape[0]
    for c in SHIFTS:
        sigma = estimate * (1.0 - c)
        L = cholesky_lower(K, work, sigma)
        if L is not None:
            return sigma + 1.0 / lanczos_largest(_inverse(L), n)[0]
    L = cholesky_lower(K, work)  # factorized before: K is positive definite
    return 1.0 / lanczos_largest(_inverse(L), n)[0]

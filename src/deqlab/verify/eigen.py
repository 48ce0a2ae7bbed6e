"""λ_min of a large symmetric positive semi-definite matrix without a dense eigendecomposition.

A dense ``eigvalsh`` of an n×n matrix costs O(n³) with a large memory-bound part (the
tridiagonal reduction): at n = 10⁴ on two cores, minutes. Above :data:`DENSE_LIMIT` rows:

1. λ_max by Lanczos on K itself (the top of a kernel matrix is well separated: ~10 steps);
2. the Cholesky factor K = LLᵀ (LAPACK ``potrf``, O(n³/3) and compute-bound). It fails
   exactly when K is not positive definite to working precision: then λ_min is reported
   as 0, singular, like :func:`deqlab.theory.kernels.least_eigenvalue` does;
3. Lanczos on K⁻¹ = L⁻ᵀL⁻¹ (two triangular solves per step) for its largest eigenvalue
   μ₁ = 1/λ_min (shift-invert at 0): the bottom of K's spectrum, where the eigenvalues of
   a kernel matrix of many points cluster, is the top of K⁻¹'s, where Lanczos converges.

A Ritz value never exceeds the largest eigenvalue, so 1/θ ≥ λ_min: the value returned is
an upper estimate, converged to :data:`RTOL` (relative change of θ over :data:`STALL`
steps, or a Ritz residual below RTOL·θ). Small matrices go to the exact
:func:`~deqlab.theory.kernels.least_eigenvalue`, which the tests compare this with.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch
from scipy.linalg import blas, lapack

from deqlab._checks import check_int, check_tensor
from deqlab.theory.kernels import LeastEigenvalue, least_eigenvalue

#: Up to this size the dense, exact ``eigvalsh`` is used (a few seconds on two cores).
DENSE_LIMIT = 3000
#: Relative accuracy at which the Lanczos iterations stop.
RTOL = 1e-9
#: Lanczos stops when θ has changed by less than RTOL·θ over this many steps.
STALL = 5
#: At most this many Lanczos steps (a basis of 400 vectors of n floats).
MAX_STEPS = 400

Matvec = Callable[[np.ndarray], np.ndarray]


def lanczos_largest(matvec: Matvec, n: int, *, seed: int = 0) -> tuple[float, int]:
    """The largest eigenvalue θ of a symmetric operator, and the steps taken.

    Lanczos with full re-orthogonalization from a seeded random start; stops at
    :data:`RTOL` (module docstring), an invariant subspace, or :data:`MAX_STEPS`.
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
        stalled = len(history) > STALL and abs(theta - history[-1 - STALL]) <= RTOL * abs(theta)
        if residual <= RTOL * abs(theta) or stalled or beta <= 1e-300:
            return theta, step
        betas.append(beta)
        basis.append(w / beta)
    return history[-1], len(history)


def cholesky_lower(K: torch.Tensor, *, overwrite: bool = False) -> np.ndarray | None:
    """The lower Cholesky factor of the symmetric K (float64, Fortran order), or None when
    K is not positive definite to working precision. ``overwrite`` factorizes in place."""
    A = K.detach().to(torch.float64).cpu().numpy().T  # K symmetric: its transpose, F-order
    L, info = lapack.dpotrf(A, lower=1, clean=1, overwrite_a=int(overwrite))
    return L if info == 0 else None


def least_eigenvalue_large(K: torch.Tensor, *, overwrite: bool = False) -> LeastEigenvalue:
    """λ_min of the symmetric PSD matrix K with the round-off rule of
    :func:`~deqlab.theory.kernels.least_eigenvalue` (|λ_min| <= n·eps·λ_max is 0, singular).

    Dense and exact up to :data:`DENSE_LIMIT` rows; above, Cholesky + Lanczos (module
    docstring). ``overwrite=True`` lets the factorization reuse K's memory (K is then
    destroyed): one n×n buffer instead of two.
    """
    K = check_tensor("K", K, ndim=2)
    n = K.shape[0]
    if K.shape != (n, n) or n == 0:
        raise ValueError(f"`K` must be a non-empty square matrix; got shape {tuple(K.shape)}")
    if n <= DENSE_LIMIT:
        return least_eigenvalue(K)
    eps = torch.finfo(K.dtype).eps
    K64 = K.detach().to(torch.float64)
    top, _ = lanczos_largest(lambda v: (K64 @ torch.from_numpy(v)).numpy(), n)
    tol = n * eps * abs(top)
    L = cholesky_lower(K64, overwrite=overwrite)
    if L is None:
        reason = (
            f"the Cholesky factorization of K fails: K is not positive definite to working "
            f"precision (λ_min <= n·eps·λ_max = {tol:.1e}; duplicate or parallel inputs give this)"
        )
        return LeastEigenvalue(0.0, math.nan, top, tol, True, reason)

    def inverse(v: np.ndarray) -> np.ndarray:  # K⁻¹v = L⁻ᵀ(L⁻¹v)
        return blas.dtrsv(L, blas.dtrsv(L, v, lower=1), lower=1, trans=1)

    mu, _ = lanczos_largest(inverse, n)
    lo = 1.0 / mu
    if lo <= tol:
        reason = (
            f"λ_min = {lo:.3g} lies within the round-off tolerance {tol:.1e} = n·eps·‖K‖₂ of 0: "
            "K is singular to working precision (duplicate or parallel inputs give this)"
        )
        return LeastEigenvalue(0.0, lo, top, tol, True, reason)
    return LeastEigenvalue(lo, lo, top, tol, False, "")

"""Spectral quantities of the theorems: least eigenvalues of Gram matrices and spectral norms.

* λ_τ = λ_min(Z(τ)ᵀ Z(τ)) (Ling et al. 2023, Section 2.1) — always exact: the n×n Gram
  matrix is formed and ``eigvalsh`` is called, in float64.
* ‖W‖₂ — exact (``torch.linalg.matrix_norm(·, 2)``, an SVD, O(m³)) or by Golub–Kahan–
  Lanczos bidiagonalization with full re-orthogonalization, warm-startable from the
  previous top right singular vector (O(k m²) for k iterations). The Lanczos value is a
  lower bound of ‖W‖₂ that converges to it; use the exact norm where a certificate is
  needed.
* λ_min of a symmetric PSD matrix (λ* = λ_min(K) of Eq. (14) at any n that fits) as a
  certified bracket, :func:`least_eigenvalue_large`: an estimate first
  (:func:`estimate_least`), then a proof of each side (:func:`certify`,
  :mod:`deqlab.theory.brackets`: a Rayleigh quotient above, a float64 Cholesky
  factorization of K − ℓI below).

  The estimate: up to :data:`DENSE_LIMIT` rows a dense ``eigh``, whose least eigenvector
  gives the upper side, and above it on a CUDA device (``eigvalsh`` there takes seconds at
  n = 3·10⁴) a dense ``eigvalsh``, the vector then from the certifying factor; the proof
  costs one more factorization, and the bracket is as narrow as rounding allows. Above,
  on the CPU, a dense eigendecomposition costs minutes (its tridiagonal reduction is
  memory-bound), so:

  1. λ_max by Lanczos on K itself (the top of a kernel matrix is well separated: ~10 steps);
  2. the float32 Cholesky factor of K (LAPACK ``potrf`` through torch, n³/3 flops at twice
     the float64 rate) preconditions block LOBPCG in float64 (:mod:`deqlab.theory.lobpcg`),
     stopped once its extrapolated error is :data:`ESTIMATE_FRACTION` of the width asked
     (``precision``, relative: :data:`PRECISION`). The bottom of a kernel matrix is a dense
     cluster (n = 10⁴ points on the sphere in d = 100: λ₂/λ₁ − 1 ≈ 3·10⁻⁴) through which
     the error falls tenfold per ~20 steps: a 10⁻³ bracket costs a third of the steps of a
     10⁻⁹ estimate. A caller may pass a :class:`Reuse` so that the next matrix (the DEQ
     NTK ⪰ K) is preconditioned by the same factor, from the same Ritz block.
  3. Where K has no float32 factor, or LOBPCG does not converge in its step limit, the
     float64 factor of K (or of K + tol·I, tol = n·eps·λ_max: singular to working
     precision) preconditions LOBPCG instead.

  The proof places the shift ℓ = θ(1 − 0.9·precision) below the estimate θ: one float64
  factorization (n³/3 flops; about 100 s at n = 3·10⁴ on two cores), which succeeds when θ
  was within 0.9·precision of λ_min, and then the bracket [ℓ − ε, θ + ε′] is at most that
  wide. Memory: K and one n×n float64 work array (2 × 7.2 GB at n = 3·10⁴), which a caller
  may pass and reuse; the float32 factor takes half of it, the certifying factor all of it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from deqlab._checks import check_int, check_positive, check_real, check_tensor
from deqlab._memory import check_square
from deqlab._progress import Progress, silent
from deqlab.theory.brackets import (
    Precondition,
    abs_row_norm,
    certify_least,
    factor_inverse,
    inertia_lower,
    mirror_lower,
    rayleigh_upper,
    rounding_floor,
)
from deqlab.theory.kernels import (
    LeastEigenvalue,
    check_symmetric,
    least_eigenpair,
    least_eigenvalue,
)
from deqlab.theory.lobpcg import float32_cholesky, least_eigenvalue_lobpcg

#: Up to this size the dense, exact ``eigh`` gives the estimate (seconds on two cores).
DENSE_LIMIT = 3000
#: The relative width of the certified bracket asked for when none is given: enough to
#: decide every answer of ``deqlab verify`` unless a margin lies within it.
PRECISION = 1e-3
#: LOBPCG's estimate is taken once its extrapolated error is this fraction of the width.
ESTIMATE_FRACTION = 0.25
#: Lanczos stops when θ has changed by less than its rtol·θ over this many steps; LOBPCG
#: extrapolates its error over as many.
STALL = 5
#: At most this many Lanczos steps (a basis of 400 vectors of n floats).
MAX_STEPS = 400

Matvec = Callable[[np.ndarray], np.ndarray]


def lanczos_largest(
    matvec: Matvec, n: int, *, rtol: float = 1e-9, seed: int = 0
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


@dataclass
class Reuse:
    """What one :func:`least_eigenvalue_large` leaves for the next call on a nearby matrix:
    a preconditioner (living in the shared ``work`` array) and the Ritz block.

    Pass one ``Reuse()`` to the calls for K and then for the DEQ NTK written over it
    (NTK ⪰ K, so an approximate K⁻¹ preconditions it well): the NTK costs no factorization
    of its own but its proof's. After K's proof the preconditioner is the certifying factor
    of K − ℓI, ℓ just below λ_min(K) — as good for the NTK as K's float32 factor (8 LOBPCG
    steps against 11 at n = 4 000, sphere, d = 100) — so K stays in place for its proof.
    """

    precondition: Precondition | None = None
    block: torch.Tensor | None = None
    what: str = ""


@dataclass(frozen=True)
class Estimate:
    """λ_min before its proof: ``value`` (eigh's / eigvalsh's, or a Ritz value ≥ λ_min),
    ``block`` (its Ritz vectors or eigh's eigenvector, the least first; None from
    eigvalsh), ``top`` = λ_max (dense, or a Lanczos value ≤ λ_max), ``tolerance`` =
    n·eps·|λ_max|, ``dense``: from a dense decomposition."""

    value: float
    block: torch.Tensor | None
    top: float
    tolerance: float
    dense: bool


def least_eigenvalue_large(
    K: torch.Tensor,
    *,
    work: torch.Tensor | None = None,
    progress: Progress = silent,
    reuse: Reuse | None = None,
    precision: float = PRECISION,
) -> LeastEigenvalue:
    """λ_min of the symmetric PSD matrix K with a certified bracket (module docstring) at
    most ``precision`` wide relative to its upper side (dense estimates: as narrow as
    rounding allows), with the round-off rule of
    :func:`~deqlab.theory.kernels.least_eigenvalue` (|λ_min| ≤ n·eps·λ_max is 0, singular).

    One n×n float64 work array besides K: ``work`` when given (reuse it across calls:
    nothing is allocated), else allocated after a memory check. K is left unchanged.
    ``progress(what, stage, 4)`` is called before each stage.
    """
    K, precision = _checked(K, precision)  # once: both stages see this matrix
    found = estimate_least(K, work=work, progress=progress, reuse=reuse, precision=precision)
    return certify(K, found, work=work, progress=progress, precision=precision, reuse=reuse)


def estimate_least(
    K: torch.Tensor,
    *,
    work: torch.Tensor | None = None,
    progress: Progress = silent,
    reuse: Reuse | None = None,
    precision: float = PRECISION,
) -> Estimate:
    """λ_min and λ_max of K before any proof (module docstring, items 1–3)."""
    K, precision = _checked(K, precision)
    n = K.shape[0]
    if n <= DENSE_LIMIT:
        progress(f"λ_min and its eigenvector by a dense eigh (n = {n})", 0, 4)
        exact, vector = least_eigenpair(K)
        block = vector[:, None]
        return Estimate(exact.computed, block, exact.max_eigenvalue, exact.tolerance, True)
    if K.is_cuda:  # the vector then comes from the certifying factor (shift-and-invert)
        progress(f"λ_min by a dense eigvalsh (n = {n})", 0, 4)
        exact = least_eigenvalue(K)
        return Estimate(exact.computed, None, exact.max_eigenvalue, exact.tolerance, True)
    work = _work_array(work, K)
    progress(f"λ_max(K) by Lanczos (n = {n})", 0, 4)
    top, _ = lanczos_largest(lambda v: (K @ torch.from_numpy(v)).numpy(), n)
    tol = n * torch.finfo(K.dtype).eps * abs(top)
    reuse = reuse if reuse is not None else Reuse()
    rtol, atol = ESTIMATE_FRACTION * precision, ESTIMATE_FRACTION * rounding_floor(K)
    if reuse.precondition is None:
        progress(f"float32 Cholesky factorization of K (n = {n})", 1, 4)
        reuse.precondition, reuse.what = float32_cholesky(K, work), "K's float32 factor"
    found = None
    if reuse.precondition is not None:
        progress(f"λ_min by LOBPCG, preconditioned by {reuse.what}", 2, 4)
        found = least_eigenvalue_lobpcg(
            K, reuse.precondition, rtol=rtol, atol=atol, stall=STALL, start=reuse.block
        )
    if found is None or not found.converged:
        progress(f"float64 Cholesky factorization of K (n = {n})", 1, 4)
        reuse.precondition = _float64_preconditioner(K, work, tol)
        reuse.what = "K's float64 factor"
        progress(f"λ_min by LOBPCG, preconditioned by {reuse.what}", 2, 4)
        found = least_eigenvalue_lobpcg(
            K, reuse.precondition, rtol=rtol, atol=atol, stall=STALL, start=reuse.block
        )
    reuse.block = found.block
    return Estimate(found.value, found.block, top, tol, False)


def certify(
    K: torch.Tensor,
    found: Estimate,
    *,
    work: torch.Tensor | None = None,
    progress: Progress = silent,
    precision: float = PRECISION,
    reuse: Reuse | None = None,
) -> LeastEigenvalue:
    """The :class:`~deqlab.theory.kernels.LeastEigenvalue` of K with its bracket
    (:func:`deqlab.theory.brackets.certify_least`) from the estimate ``found``, in ``work``
    (overwritten; ``reuse``, if given, is left the certifying factor as its preconditioner).
    ValueError where λ_min < −tol: K is not PSD."""
    K, precision = _checked(K, precision)
    if found.value < -found.tolerance:
        raise ValueError(
            f"`K` must be positive semi-definite; got least eigenvalue {found.value:.3g} < "
            f"-{found.tolerance:.1e} (the round-off tolerance n·eps·‖K‖₂)"
        )
    work = _work_array(work, K)
    progress(f"certified bracket of λ_min (n = {K.shape[0]})", 3, 4)

    def improve(precondition: Precondition, block: torch.Tensor | None, atol: float):
        pair = least_eigenvalue_lobpcg(
            K, precondition, rtol=0.0, atol=atol, stall=STALL, start=block
        )
        return pair.value, pair.block

    target = 0.0 if found.dense else precision
    bracket, value = certify_least(
        K, found.value, found.block, target=target, work=work, improve=improve, progress=progress
    )
    if reuse is not None:
        reuse.precondition = factor_inverse(work)
        reuse.what = "the factor that certified the last matrix"
    best = found.value if found.dense else min(found.value, value)
    return LeastEigenvalue.rounded(best, found.top, found.tolerance, bracket)


def upper_bound(
    K: torch.Tensor,
    found: Estimate,
    *,
    work: torch.Tensor | None = None,
    reuse: Reuse | None = None,
):
    """(a certified upper bound of λ_min(K), its proof) from the estimate ``found``, without
    the factorization of the lower side where ``found`` has a vector (its Rayleigh
    quotient, :func:`deqlab.theory.brackets.rayleigh_upper`); one without is certified
    whole (``reuse`` as :func:`certify` leaves it)."""
    K, _ = _checked(K, PRECISION)  # the matrix the estimate was made on
    if found.block is None:
        bracket = certify(K, found, work=work, reuse=reuse).bracket
        return bracket.upper, bracket.upper_proof
    return rayleigh_upper(K, found.block[:, 0], abs_row_norm(K))


def _checked(K: torch.Tensor, precision: float) -> tuple[torch.Tensor, float]:
    """K as an exactly symmetric float64 square matrix, and ``precision`` checked.

    K nearly symmetric (within :func:`~deqlab.theory.kernels.check_symmetric`'s tolerance)
    is replaced once by the symmetric matrix of its lower triangle
    (:func:`~deqlab.theory.brackets.mirror_lower`), so that the estimate, the factorization
    and the Rayleigh quotient all see that one matrix, whose λ_min is certified. A copy is
    made only when K is not float64 or not exactly symmetric."""
    precision = check_real("precision", precision, low=0.0, high=1.0, high_inclusive=False)
    K = check_tensor("K", K, ndim=2)
    n = K.shape[0]
    if K.shape != (n, n) or n == 0:
        raise ValueError(f"`K` must be a non-empty square matrix; got shape {tuple(K.shape)}")
    copy = K.dtype != torch.float64
    if copy:
        check_square("`K`", n, "a float64 copy of K", buffers=1, device=K.device)
        K = K.to(torch.float64)
    if check_symmetric(K, torch.finfo(torch.float64).eps) > 0:
        if not copy:
            check_square("`K`", n, "a symmetric copy of K", buffers=1, device=K.device)
            K = K.clone()
        mirror_lower(K)
    return K, precision


def _float64_preconditioner(K: torch.Tensor, work: torch.Tensor, tol: float) -> Precondition:
    """(K − σI)⁻¹ from the float64 Cholesky factor in ``work``, at the first of σ = 0, −tol,
    −8·tol whose factorization completes; ValueError where none does (K is not PSD)."""
    for sigma in (0.0, -tol, -8.0 * tol):
        if inertia_lower(K, sigma, work) is not None:
            return factor_inverse(work)
    raise ValueError(
        f"`K` must be positive semi-definite; its float64 Cholesky factorization fails even "
        f"for K + {8 * tol:.1e}·I (8·n·eps·λ_max)"
    )


def _work_array(work: torch.Tensor | None, K: torch.Tensor) -> torch.Tensor:
    """The caller's n×n float64 ``work`` array on K's device, checked, or a new one that
    fits."""
    n = K.shape[0]
    if work is None:
        what = "the Cholesky factor of K (one work array)"
        check_square("`K`", n, what, buffers=1, device=K.device)
        return torch.empty(n, n, dtype=torch.float64, device=K.device)
    if work.shape != (n, n) or work.dtype != torch.float64 or work.device != K.device:
        raise ValueError(
            f"`work` must be a ({n}, {n}) float64 tensor on {K.device}; got "
            f"{tuple(work.shape)} {work.dtype} on {work.device}"
        )
    return work


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

"""λ_min of a large symmetric positive definite matrix by LOBPCG preconditioned with a float32
Cholesky factor: one factorization at half the cost of a float64 one, no shifted refactorization.

Block LOBPCG (Knyazev 2001, "Toward the optimal preconditioned eigensolver"): the block X of
``b`` Ritz vectors is improved by a Rayleigh–Ritz step on span[X, W, P], with W = T R the
preconditioned residuals R = AX − XΘ and P the previous step's direction. With T = A⁻¹
exactly this is inverse iteration made locally optimal; T = (L̃L̃ᵀ)⁻¹ from the float32 factor
L̃ of A is A⁻¹ up to a relative error of about cond(A)·eps₃₂ (a few per cent for a kernel
matrix at n = 3·10⁴), which costs LOBPCG a little rate and no accuracy: every product with A
is in float64, so the Ritz values converge to A's eigenvalues, and a Ritz value never lies
below λ_min (Courant–Fischer): the answer is an upper estimate, which
:mod:`deqlab.theory.brackets` turns into a certified bracket.

Numerics, after Hetmaniuk & Lehoucq (2006), "Basis selection in LOBPCG": the basis
[X, W, P] is kept orthonormal — P is orthonormalized in the small coefficient space, where
it is exact; W against [X, P] twice, then normalized *before* A is applied to it — so that
the Rayleigh–Ritz matrix SᵀAS carries float64 round-off only (a non-orthonormal basis would
amplify it by the inverse of the basis' Gram matrix).
Cost per step: one A·W (n²b) in float64, two float32 triangular solves (n²b) and O(nb²).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

#: Ritz vectors improved together. The bottom of a kernel matrix is a dense cluster: a wider
#: block resolves it in fewer steps but each costs b columns; 8 took the least time at
#: n = 4 000–16 000 (sphere, d = 100), where the steps are bound by reading A from memory.
BLOCK = 8
#: At most this many steps; past them the answer is flagged not converged.
MAX_STEPS = 400

#: float64's machine epsilon: Ritz values that move by a few of it have stopped moving.
ROUNDING = torch.finfo(torch.float64).eps

Preconditioner = Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class LeastRitzPair:
    """The answer of :func:`least_eigenvalue_lobpcg`.

    ``value`` = xᵀAx / xᵀx of the first Ritz vector x with a fresh product (>= λ_min up to
    round-off), ``block`` the final Ritz vectors (n, b) (a start for a nearby matrix),
    ``steps`` the LOBPCG steps taken, ``converged`` whether the stopping rule was met
    before :data:`MAX_STEPS` (the value is a Rayleigh quotient either way).
    """

    value: float
    block: torch.Tensor
    steps: int
    converged: bool = True


def float32_cholesky(A: torch.Tensor, work: torch.Tensor) -> Preconditioner | None:
    """R ↦ (L̃L̃ᵀ)⁻¹R with L̃ the float32 Cholesky factor of A, or None when A is not positive
    definite in float32 (then only a float64 method can answer).

    ``work`` is an n×n float64 array (overwritten): the factor takes its first half, read as
    n×n float32 in LAPACK's column-major layout, so that neither the factorization nor the
    triangular solves copy it.
    """
    n = A.shape[0]
    half = work.view(-1).view(torch.float32)[: n * n].view(n, n)
    half.copy_(A)
    factor = half.mT  # column-major, as potrf writes it
    info = torch.empty((), dtype=torch.int32)
    torch.linalg.cholesky_ex(factor, out=(factor, info))
    if int(info) != 0:
        return None

    def apply(R: torch.Tensor) -> torch.Tensor:
        Y = torch.linalg.solve_triangular(factor, R.to(torch.float32), upper=False)
        return torch.linalg.solve_triangular(factor.mT, Y, upper=True).to(R.dtype)

    return apply


def least_eigenvalue_lobpcg(
    A: torch.Tensor,
    precondition: Preconditioner,
    *,
    rtol: float,
    stall: int,
    atol: float = 0.0,
    start: torch.Tensor | None = None,
    seed: int = 0,
    on_step: Callable[[int, float, float], None] | None = None,
) -> LeastRitzPair:
    """λ_min of the symmetric float64 matrix A (on any device), from above.

    Stops when the least Ritz value θ is within max(``rtol``·|θ|, ``atol``) of its limit by
    :func:`extrapolated_error` over ``stall`` steps, or its residual is that small; else after
    :data:`MAX_STEPS` (``converged`` False). ``start``: (n, b) vectors to begin with (the
    block of a previous call), else a seeded random block. ``on_step(step, θ, ‖r‖)`` is
    called at every step (a convergence trace). The block has b = min(:data:`BLOCK`,
    (n − 1)//3) columns, so that [X, W, P] (3b < n) can be orthonormal: past that
    Rayleigh–Ritz reads rounding noise and θ may fall below λ_min; n < 4 is solved by eigh.
    """
    n = A.shape[0]
    if n < 4:  # no room for a basis [X, W, P] of 3b < n columns: the exact pair
        return _least_pair(A, torch.linalg.eigh(A)[1][:, :1], 0, True)
    b = min(BLOCK, (n - 1) // 3)  # 3b < n: the basis stays orthonormal
    if start is None or start.shape != (n, b):
        generator = torch.Generator().manual_seed(seed)
        start = torch.randn(n, b, dtype=torch.float64, generator=generator)
    X = torch.linalg.qr(start.to(device=A.device, dtype=torch.float64))[0]
    X, AX, theta = _rayleigh_ritz(X, A @ X, b)
    P = AP = None
    history: list[float] = []
    for step in range(1, MAX_STEPS + 1):
        R = AX - X * theta
        history.append(float(theta[0]))
        residual = float(R[:, 0].norm())
        if on_step is not None:
            on_step(step, history[-1], residual)
        tolerance = max(rtol * abs(history[-1]), atol)
        if residual <= tolerance or extrapolated_error(history, stall) <= tolerance:
            return _least_pair(A, X, step, True)
        kept = X if P is None else torch.cat([X, P], dim=1)
        W = _orthonormal_against(precondition(R), kept)
        S = torch.cat([X, W] if P is None else [X, W, P], dim=1)
        AS = torch.cat([AX, A @ W] if P is None else [AX, A @ W, AP], dim=1)
        X, AX, theta, C = _rayleigh_ritz(S, AS, b, coefficients=True)
        P, AP = _direction(C, b, S, AS)
    return _least_pair(A, X, MAX_STEPS, False)


def extrapolated_error(history: list[float], stall: int) -> float:
    """How far the last of the decreasing Ritz values θ_k still is from their limit, if they
    converge linearly: the change d over the last ``stall`` steps continued as a geometric
    series with ratio q = d / (the change over the ``stall`` steps before), q taken ≥ 1/2:
    d·q/(1 − q) ≥ d. inf before 2·``stall`` steps or while the changes do not shrink.

    An estimate, not a bound: it stops the iteration; :mod:`deqlab.theory.brackets` proves.
    """
    if len(history) <= 2 * stall:
        return math.inf
    recent = history[-1 - stall] - history[-1]
    before = history[-1 - 2 * stall] - history[-1 - stall]
    if abs(recent) <= 8 * ROUNDING * abs(history[-1]):
        return 0.0  # the Ritz value moves by round-off only
    if recent < 0:
        return math.inf
    if before <= recent:
        return math.inf
    q = max(recent / before, 0.5)
    return recent * q / (1.0 - q)


def _least_pair(A: torch.Tensor, X: torch.Tensor, steps: int, converged: bool) -> LeastRitzPair:
    x = X[:, 0]
    return LeastRitzPair(float(x @ (A @ x)) / float(x @ x), X, steps, converged)


def _orthonormal_against(W: torch.Tensor, Q: torch.Tensor) -> torch.Tensor:
    """W made orthonormal and orthogonal to the orthonormal Q (twice is enough: Kahan–Parlett)."""
    for _ in range(2):
        W = W - Q @ (Q.T @ W)
        W = torch.linalg.qr(W)[0]
    return W


def _rayleigh_ritz(S: torch.Tensor, AS: torch.Tensor, b: int, *, coefficients: bool = False):
    """The b least Ritz pairs of A on the orthonormal basis S (AS = A·S): (X, AX, θ[, C])."""
    H = S.T @ AS
    theta, C = torch.linalg.eigh((H + H.T) / 2)
    Cx = C[:, :b]
    found = (S @ Cx, AS @ Cx, theta[:b])
    return (*found, C) if coefficients else found


def _direction(C: torch.Tensor, b: int, S: torch.Tensor, AS: torch.Tensor):
    """(P, AP): the part of the new Ritz vectors outside the old X, orthonormalized in the
    coefficient space (C is orthogonal there, so this is exact) against the new X."""
    Cx = C[:, :b]
    Cp = Cx.clone()
    Cp[:b] = 0.0
    Cp = Cp - Cx @ (Cx.T @ Cp)
    Cp = torch.linalg.qr(Cp)[0]
    return S @ Cp, AS @ Cp

"""Extreme singular values and the spectral radius of batched linear maps, from products
only, each with a bracket that holds and a convergence status.

Rows ``r = 1 … R`` are independent operators ``A_r`` on ``ℝⁿ`` (per-sample Jacobians),
given by ``v ↦ A v`` and ``u ↦ Aᵀ u`` on ``(R, n)`` arrays, started from Gaussian vectors.

**Singular values: Golub–Kahan bidiagonalisation** (full reorthogonalisation on both sides).
After ``k`` steps ``A V_k = U_k B_k`` with ``B_k`` upper bidiagonal and ``V_k, U_k``
orthonormal, so ``V_kᵀ AᵀA V_k = B_kᵀ B_k``: the squared singular values of ``B_k`` are the
Ritz values of ``AᵀA`` on the Krylov space ``K_k(AᵀA, v_1)`` (the space of Lanczos on
``AᵀA``, without squaring the operator in floating point). With ``B_k = P Σ Qᵀ``, a triplet
``(σ, x = U_k p, y = V_k q)`` has ``A y = σ x`` and ``Aᵀ x − σ y = β_k p_k v_{k+1}``: ``[x; y]/√2``
is an eigenvector of ``[[0, A], [Aᵀ, 0]]`` (eigenvalues ±σ_i(A)) up to a residual of norm
``β_k |p_k| / √2``, so *some* singular value of A lies within that of σ (the ``residual``;
it does not say that it is the extreme one). Brackets, for σ₁ = σ_max(B_k) and
σ_k = σ_min(B_k):

* ``σ_max(A) ≥ σ₁`` and ``σ_min(A) ≤ σ_k`` always (Courant–Fischer: a Ritz value of a
  symmetric operator lies between its extreme eigenvalues).
* **Exhausted** (``k = n``, or the space closed, ``α_j`` or ``β_j`` ≈ 0): the Krylov space is
  invariant and holds the start vector, which has a component along every eigenvector of
  ``AᵀA`` with probability 1; every distinct singular value is then one of ``B_k``'s, so both
  sides are exact up to round-off.
* Otherwise, **Kuczyński & Woźniakowski (1992), Theorem 4.2**: for a symmetric positive
  semidefinite ``M`` (n × n) and a start uniform on the sphere (a normalised Gaussian), the
  largest Ritz value ``θ`` of ``K_{k'+1}(M, b)`` satisfies ``θ ≥ (1 − ε) λ_max(M)`` except
  with probability at most ``1.648 √n e^{−√ε (2k' − 1)}``. Solving for ``ε`` at the failure
  probability ``δ`` the caller gives with ``k' = k − 1`` (the smaller of the two readings of
  the theorem's step count, so the bound is the weaker one):
  ``ε_k = (ln(1.648 √n / δ) / (2k − 3))²``.

  - ``M = AᵀA``: ``σ_max(A) ≤ σ₁ / √(1 − ε_k)``.
  - ``M = λ_max(AᵀA) I − AᵀA`` (same Krylov space; its top Ritz value is
    ``λ_max − σ_k²``): ``λ_max − σ_k² ≥ (1 − ε_k)(λ_max − σ_min²)``, i.e.
    ``σ_min² ≥ (σ_k² − ε_k λ_max) / (1 − ε_k)``, with ``λ_max`` replaced by the square of
    the upper bound above (which only lowers the bound).

  So both brackets of a row hold, together, with probability ≥ 1 − 2δ over its start vector,
  at whichever step the run returns them: it reads the bounds at up to ~20 checkpoints and
  stops at the first that converges, so each reading uses the bound at δ / (the number of
  checkpoints), and by the union bound they all hold at once (the stop is then free).
  Round-off: every bound is widened by ``k · eps · σ₁`` (eps of the products' dtype), the
  size of the backward error of the products and of the reorthogonalised recurrences.

A side is **converged** when ``upper ≤ (1 + rtol) · lower`` with ``lower > 0``. Near a
singular ``A`` the lower side of σ_min tightens only at exhaustion: the worst case over
spectra needs ``k ≈ σ_max / σ_min`` steps (Chebyshev), more than ``n`` when σ_min is small.

**Spectral radius: Arnoldi** (full reorthogonalisation). ``A V_k = V_k H_k + h_{k+1,k}
v_{k+1} e_kᵀ``; the estimate is the largest modulus of the eigenvalues of ``H_k``. A Ritz pair
``(θ, y = V_k s)`` with ``‖s‖ = 1`` has residual ``‖A y − θ y‖ = |h_{k+1,k}| |s_k|``: θ is an
exact eigenvalue of ``A − r yᵀ``, a perturbation of that norm. The estimate is converged when
this backward error is at most ``rtol · |θ|``; for a non-normal ``A`` it does not bound
``|θ − ρ(A)|``, so no lower bound is claimed (the upper bound is ``ρ ≤ ‖A‖₂``, given by the
caller).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

Map = Callable[[torch.Tensor], torch.Tensor]

_KW = 1.648  # Kuczyński & Woźniakowski 1992, Theorem 4.2
_BREAKDOWN = 1e3  # α_j, β_j below 1e3 eps × the operator's scale: the Krylov space closed


@dataclass(frozen=True, eq=False)
class Estimate:
    """A per-row quantity ``(R,)``: ``value`` (the estimate), ``lower ≤ truth ≤ upper`` (module
    docstring), ``residual`` (the Ritz pair's: a singular value, or for ρ an eigenvalue of a
    perturbation that size, lies within it of ``value``), ``converged`` (bracket within
    ``rtol``, or Arnoldi's backward error), ``exact`` (Krylov space exhausted) and ``steps``
    (Krylov steps taken)."""

    value: torch.Tensor
    lower: torch.Tensor
    upper: torch.Tensor
    residual: torch.Tensor
    converged: torch.Tensor
    exact: torch.Tensor
    steps: int

    def rows(self, index: torch.Tensor | slice) -> Estimate:
        """The estimate of some rows."""
        return Estimate(
            self.value[index], self.lower[index], self.upper[index], self.residual[index],
            self.converged[index], self.exact[index], self.steps,
        )  # fmt: skip


def _unit(v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    norm = torch.linalg.vector_norm(v, dim=1, keepdim=True)  # (R, 1)
    return v / norm.clamp_min(torch.finfo(v.dtype).tiny), norm[:, 0]


def _orthogonalise(w: torch.Tensor, Q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``w`` (R, n) ⟂ the orthonormal rows of ``Q`` (R, j, n), twice (Kahan's "twice is
    enough"), and the coefficients ``Qw`` it lost (R, j)."""
    coeffs = w.new_zeros(w.shape[0], Q.shape[1])
    for _ in range(2):  # products and sums, not bmm: 3× faster for these matrix-vector shapes
        c = (Q * w[:, None, :]).sum(2)  # (R, j)
        w, coeffs = w - (c[:, :, None] * Q).sum(1), coeffs + c
    return w, coeffs


def _basis(start: torch.Tensor, steps: int) -> torch.Tensor:
    """An (R, steps + 1, n) buffer for an orthonormal basis (filled row by row: no copy of
    the basis per step)."""
    return start.new_empty(start.shape[0], steps + 1, start.shape[1])


def _checkpoints(max_steps: int) -> set[int]:
    """Steps at which the bounds are computed (about 25% apart, and the last)."""
    steps, k = {max_steps}, 2
    while k < max_steps:
        steps.add(k)
        k = max(k + 1, int(k * 1.25))
    return steps


def kw_epsilon(n: int, k: int, delta: float) -> float:
    """``ε_k = (ln(1.648 √n / δ) / (2k − 3))²`` (module docstring); inf for ``k < 2``."""
    if k < 2:
        return math.inf
    return (math.log(_KW * math.sqrt(n) / delta) / (2 * k - 3)) ** 2


@dataclass(frozen=True, eq=False)
class SingularBounds:
    """σ_min and σ_max of each row, with brackets (module docstring)."""

    smallest: Estimate
    largest: Estimate


def singular_extremes(
    mv: Map,
    rmv: Map,
    start: torch.Tensor,
    *,
    target: str,
    rtol: float,
    max_steps: int,
    delta: float,
) -> SingularBounds:
    """Golub–Kahan bidiagonalisation from ``start`` (R, n) until the ``target`` side
    (``"min"`` or ``"max"``) is converged on every row, or ``min(max_steps, n)`` steps;
    ``delta`` is the failure probability of each use of Kuczyński & Woźniakowski's bound
    over the whole run (split over its checkpoints: module docstring)."""
    R, n = start.shape
    steps = min(max_steps, n)
    eps = torch.finfo(start.dtype).eps
    due = _checkpoints(steps)
    delta /= len(due)  # one reading per checkpoint: the union bound
    V, U = _basis(start, steps), _basis(start, steps)
    V[:, 0] = _unit(start)[0]
    alphas, betas = [], []  # betas[j] = β_{j+1}, the last one the residual's
    active = torch.ones(R, dtype=torch.bool, device=start.device)
    scale = torch.zeros(R, dtype=start.dtype, device=start.device)
    for j in range(steps):
        p = mv(V[:, j])
        if j:
            p = p - betas[-1][:, None] * U[:, j - 1]
        U[:, j], alpha = _unit(_orthogonalise(p, U[:, :j])[0])
        scale = torch.maximum(scale, alpha)
        alphas.append(torch.where(active, alpha, alphas[0]) if alphas else alpha)
        active = active & (alpha > _BREAKDOWN * eps * scale)
        r = rmv(U[:, j]) - alpha[:, None] * V[:, j]
        V[:, j + 1], beta = _unit(_orthogonalise(r, V[:, : j + 1])[0])
        scale = torch.maximum(scale, beta)
        betas.append(torch.where(active, beta, 0.0))
        active = active & (beta > _BREAKDOWN * eps * scale)
        k = j + 1
        if k in due:
            exact = ~active | (k == n)
            found = _bidiagonal_bounds(alphas, betas, exact, n, eps, rtol, delta)
            side = found.smallest if target == "min" else found.largest
            if bool(side.converged.all()) or k == steps:
                return found
    raise AssertionError("unreachable: the last step is a checkpoint")


def _bidiagonal_bounds(alphas, betas, exact, n, eps, rtol, delta) -> SingularBounds:
    """Brackets from ``B_k`` (diag ``alphas``, super-diagonal ``betas[:-1]``; ``betas[-1]``
    is ``β_k`` of the residual), module docstring; a side is converged when exact or its
    bracket is within ``rtol``."""
    k = len(alphas)
    B = torch.diag_embed(torch.stack(alphas, dim=1).to(torch.float64))  # (R, k, k)
    if k > 1:
        B = B + torch.diag_embed(torch.stack(betas[:-1], dim=1).to(torch.float64), offset=1)
    P, sv, _ = torch.linalg.svd(B)  # (R, k, k), (R, k) descending
    top, bottom = sv[:, 0], sv[:, -1]
    # the triplet's residual β_k |p_k| / √2 (module docstring); 0 where exact
    beta_k = torch.where(exact, 0.0, betas[-1].to(torch.float64))
    residuals = beta_k[:, None] * P[:, k - 1, :].abs() / math.sqrt(2)  # (R, k)
    margin = k * eps * top
    epsilon = kw_epsilon(n, k, delta)
    if epsilon < 1:
        top_upper = top / math.sqrt(1 - epsilon)
        low_sq = (bottom.square() - epsilon * top_upper.square()) / (1 - epsilon)
        bottom_lower = low_sq.clamp_min(0).sqrt()
    else:
        top_upper = torch.full_like(top, math.inf)
        bottom_lower = torch.zeros_like(bottom)
    top_upper = torch.where(exact, top, top_upper) + margin
    bottom_lower = (torch.where(exact, bottom, bottom_lower) - margin).clamp_min(0)
    return SingularBounds(
        _bracketed(
            bottom, bottom_lower, bottom + margin, residuals[:, -1] + margin, exact, k, rtol
        ),
        _bracketed(
            top, (top - margin).clamp_min(0), top_upper, residuals[:, 0] + margin, exact, k, rtol
        ),
    )


def _bracketed(value, lower, upper, residual, exact, k: int, rtol: float) -> Estimate:
    converged = exact | (upper <= (1 + rtol) * lower) & (lower > 0)
    return Estimate(value, lower, upper, residual, converged, exact, k)


def spectral_radius(mv: Map, start: torch.Tensor, *, rtol: float, max_steps: int) -> Estimate:
    """Arnoldi from ``start`` (R, n) until the dominant Ritz pair's backward error is at most
    ``rtol · |θ|`` on every row, or ``min(max_steps, n)`` steps (module docstring).
    ``lower`` is 0 and ``upper`` inf: the caller bounds ρ by ``‖A‖₂``."""
    R, n = start.shape
    steps = min(max_steps, n)
    eps = torch.finfo(start.dtype).eps
    due = _checkpoints(steps)
    V = _basis(start, steps)
    V[:, 0] = _unit(start)[0]
    H = torch.zeros(R, steps + 1, steps, dtype=torch.float64, device=start.device)
    active = torch.ones(R, dtype=torch.bool, device=start.device)
    scale = torch.zeros(R, dtype=start.dtype, device=start.device)
    for j in range(steps):
        w, coeffs = _orthogonalise(mv(V[:, j]), V[:, : j + 1])
        V[:, j + 1], h = _unit(w)
        scale = torch.maximum(scale, torch.linalg.vector_norm(coeffs, dim=1) + h)
        H[:, : j + 1, j] = torch.where(active[:, None], coeffs, 0.0).to(H)
        active = active & (h > _BREAKDOWN * eps * scale)
        H[:, j + 1, j] = torch.where(active, h, 0.0).to(H)
        k = j + 1
        if k in due:
            value, residual = _dominant_ritz(H[:, : k + 1, :k])
            exact = ~active | (k == n)
            done = exact | (residual <= rtol * value)
            if bool(done.all()) or k == steps:
                zero, inf = torch.zeros_like(value), torch.full_like(value, math.inf)
                return Estimate(value, zero, inf, residual, done, exact, k)
    raise AssertionError("unreachable: the last step is a checkpoint")


def _dominant_ritz(H: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The largest modulus of the eigenvalues of ``H[:, :k, :k]`` and its pair's residual
    ``|h_{k+1,k}| |s_k|`` (R,) each."""
    k = H.shape[2]
    vals, vecs = torch.linalg.eig(H[:, :k, :k])  # (R, k), (R, k, k) unit columns
    top = vals.abs().argmax(dim=1)  # (R,)
    rows = torch.arange(H.shape[0], device=H.device)
    residual = H[:, k, k - 1].abs() * vecs[rows, k - 1, top].abs()
    return vals.abs()[rows, top], residual

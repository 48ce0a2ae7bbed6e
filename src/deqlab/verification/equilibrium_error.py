"""From the bracket of the stored matrix to the theorem's quantity: λ_0 of the exact equilibrium.

verify certifies λ_min of the float64 matrix fl(ẐᵀẐ) it forms from the computed equilibrium
Ẑ (:mod:`deqlab.theory.brackets`); the theorems speak of σ_min(Z*) of the exact one (Ling
et al. 2023: λ_0 = σ_min(Z*)²; Hieu 2022: λ_0 = σ_min(Z*)). Between them, each step proved:

- **the product**: |fl(ẐᵀẐ) − ẐᵀẐ| ≤ γ_k|Ẑ|ᵀ|Ẑ| entrywise (k the rows of Ẑ; Higham 2002,
  §3.5), so λ_min moves by at most ρ = γ_k‖Ẑ‖_F² (Weyl; ‖|Ẑ|ᵀ|Ẑ|‖₂ ≤ ‖Ẑ‖_F²), and
  σ_min(Ẑ) ∈ [√(lower − ρ), √(upper + ρ)];
- **the solve**: r ≥ ‖Ẑ − relu(WẐ + C)‖_F with W, C = UX in exact arithmetic, the float64
  residual's norm plus γ_k‖S‖_F, S ≥ the absolute terms of the sums that form WẐ + C (and
  W itself): their rounding (:func:`residual_bound`). Then
  ReLU DEQ, ‖W‖₂ ≤ w̄ < 1: Z ↦ relu(WZ + C) is a w̄-contraction in ‖·‖_F, so
  ‖Ẑ − Z*‖_F ≤ r/(1 − w̄);
  monotone DEQ, I − W ⪰ mI: with P = relu(WẐ + C) (so Ẑ − P = R), WR ∈ T(P) for the
  operator T(z) = ∂ι_{≥0}(z) + (I − W)z − C, m-strongly monotone, and 0 ∈ T(Z*), so
  m‖P − Z*‖_F² ≤ ⟨WR, P − Z*⟩ and ‖Ẑ − Z*‖_F ≤ r(1 + w̄/m) (Winston & Kolter 2020's
  splitting view of the equilibrium);
- **σ_min**: |σ_min(Ẑ) − σ_min(Z*)| ≤ ‖Ẑ − Z*‖₂ ≤ ‖Ẑ − Z*‖_F (Weyl for singular values).

w̄ ≥ ‖W‖₂ (:func:`norm_upper`): the SVD's σ_max widened by its backward error up to
:data:`EXACT_NORM_LIMIT` rows; above, Golub–Kahan with Kuczyński & Woźniakowski's bound
(:mod:`deqlab.krylov_bounds`), which holds with probability ≥ 1 − :data:`KRYLOV_FAILURE` over
its random start (said in the proof).
"""

from __future__ import annotations

import math

import torch

from deqlab.krylov_bounds import singular_extremes
from deqlab.theory.brackets import Bracket, gamma, next_down, next_up, unit_roundoff

#: Up to this size ‖W‖₂ comes from an exact SVD; above, from Golub–Kahan (module docstring).
EXACT_NORM_LIMIT = 2000
#: Failure probability of the Golub–Kahan upper bound of ‖W‖₂ above the limit.
KRYLOV_FAILURE = 1e-12
#: Golub–Kahan steps for that bound (its width: a fraction of a per cent at 300).
KRYLOV_STEPS = 300
#: The SVD's backward error is taken as this many times n·u·σ_max (LAPACK: a modest p(n)).
SVD_ERROR = 10.0


def residual_bound(
    Z: torch.Tensor, W: torch.Tensor, C: torch.Tensor, spread: torch.Tensor, k: int
) -> float:
    """An upper bound of ‖Z − relu(WZ + C)‖_F in exact arithmetic: the float64 residual's
    norm plus γ_k‖``spread``‖_F (``spread`` ≥ the absolute terms of the sums that form WZ + C
    and W, C themselves, entrywise; ``k`` their longest chain of roundings)."""
    R = Z - torch.relu(W @ Z + C)
    found = float(R.norm()) + gamma(k) * float(spread.norm())
    return next_up(found * (1.0 + gamma(Z.numel() + spread.numel() + 2)))


def norm_upper(W: torch.Tensor, abs_error: float = 0.0) -> tuple[float, str]:
    """(w̄ ≥ ‖W‖₂ + ``abs_error``, how): module docstring. ``abs_error`` bounds ‖W_exact − W‖₂
    where W was formed in floating point."""
    n = max(W.shape)
    if n <= EXACT_NORM_LIMIT:
        top = float(torch.linalg.matrix_norm(W.to(torch.float64), ord=2))
        how = f"exact SVD widened by {SVD_ERROR:g}·n·u·σ_max"
        return next_up(top * (1.0 + SVD_ERROR * n * unit_roundoff()) + abs_error), how
    generator = torch.Generator(device="cpu").manual_seed(0)
    start = torch.randn(1, W.shape[1], generator=generator, dtype=W.dtype).to(W.device)
    found = singular_extremes(
        lambda v: v @ W.T, lambda u: u @ W, start, target="max", rtol=1e-3,
        max_steps=KRYLOV_STEPS, delta=KRYLOV_FAILURE,
    ).largest  # fmt: skip
    how = f"Golub–Kahan upper bound, probability ≥ 1 − {KRYLOV_FAILURE:g}"
    return next_up(float(found.upper[0]) + abs_error), how


def relu_deq_error(model, X: torch.Tensor, Z: torch.Tensor) -> tuple[float, str]:
    """(e ≥ ‖Ẑ − Z*‖_F, how) for the ReLU DEQ ``model`` (W, U) at inputs X (d, n) and its
    computed equilibrium Z (m, n): r/(1 − w̄), inf when w̄ ≥ 1."""
    W, U = model.W.detach(), model.U.detach()
    spread = W.abs() @ Z.abs() + U.abs() @ X.abs()
    r = residual_bound(Z, W, U @ X, spread, W.shape[1] + U.shape[1] + 2)
    w, how = norm_upper(W)
    error = next_up(r / next_down(1.0 - w)) if w < 1.0 else math.inf
    return error, f"‖Ẑ − Z*‖_F ≤ r/(1 − w̄) = {error:.2g}, r = {r:.2g}, w̄ = {w:.6g} ({how})"


def mondeq_error(model, X: torch.Tensor, Z: torch.Tensor) -> tuple[float, str]:
    """(e ≥ ‖Ẑ − Z*‖_F, how) for the monotone DEQ ``model`` (no bias) at inputs X (d, N) and
    its computed equilibrium Z (n, N): r(1 + w̄/m)."""
    A, B, U, m = model.A.detach(), model.B.detach(), model.U.detach(), model.m
    n = A.shape[0]
    W = model.weight().detach()
    eye = torch.eye(n, dtype=A.dtype, device=A.device)
    W_terms = abs(1.0 - m) * eye + A.abs().T @ A.abs() + B.abs() + B.abs().T  # ≥ |terms of W|
    spread = W_terms @ Z.abs() + U.abs() @ X.abs()
    r = residual_bound(Z, W, U @ X, spread, 2 * n + U.shape[1] + 4)
    w, how = norm_upper(W, gamma(n + 3) * float(W_terms.norm()))
    error = next_up(r * (1.0 + w / m))
    return error, f"‖Ẑ − Z*‖_F ≤ r(1 + w̄/m) = {error:.2g}, r = {r:.2g}, w̄ = {w:.6g} ({how})"


def sigma_min_of_equilibrium(gram: Bracket, Z: torch.Tensor, error: float, how: str) -> Bracket:
    """A bracket of σ_min(Z*) from ``gram`` ∋ λ_min(fl(ẐᵀẐ)), Ẑ = ``Z`` (k, n), and
    ``error`` ≥ ‖Ẑ − Z*‖_F (``how``: its proof): module docstring. ``at_floor`` where
    ``gram``'s is, or where the product and the solve dominate it (a narrower ``gram`` cannot
    narrow the result)."""
    rho = next_up(gamma(Z.shape[0]) * float(Z.norm()) ** 2 * (1.0 + gamma(Z.numel())))
    low = next_down(next_down(math.sqrt(max(next_down(gram.lower - rho), 0.0))) - error)
    high = next_up(next_up(math.sqrt(next_up(gram.upper + rho))) + error)
    extra = "the product's rounding ρ = γ_k‖Ẑ‖_F² = {:.2g} and the equilibrium's error: {}"
    said = extra.format(rho, how)
    widened = high - low - (math.sqrt(max(gram.upper, 0.0)) - math.sqrt(max(gram.lower, 0.0)))
    return Bracket(
        max(low, 0.0),
        high,
        f"σ_min(Z*) ≥ √(λ_min(fl(ẐᵀẐ)) − ρ) − e, λ_min ≥ {gram.lower:.10g}: {gram.lower_proof}; "
        + said,
        f"σ_min(Z*) ≤ √(λ_min(fl(ẐᵀẐ)) + ρ) + e, λ_min ≤ {gram.upper:.10g}: {gram.upper_proof}; "
        + said,
        gram.at_floor or widened >= 0.5 * (high - low),
    )


def squared(sigma: Bracket) -> Bracket:
    """λ_0 = σ_min(Z*)² from a bracket of σ_min(Z*) ≥ 0."""
    return Bracket(
        max(next_down(sigma.lower * sigma.lower), 0.0),
        next_up(sigma.upper * sigma.upper),
        f"λ_0 = σ_min(Z*)², {sigma.lower_proof}",
        f"λ_0 = σ_min(Z*)², {sigma.upper_proof}",
        sigma.at_floor,
    )

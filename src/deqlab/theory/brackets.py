"""Certified brackets [lower, upper] ∋ λ_min(A) of a symmetric float64 matrix A, each side
with its proof, computed in floating point with every rounding error bounded.

What is certified is λ_min of the matrix as stored (for K of Ling et al. 2023, Eq. (14),
the float64 K that :func:`deqlab.theory.kernels.population_gram` computed), which must be
exactly symmetric: the Cholesky factorization reads one triangle, eigvalsh the other, the
Rayleigh quotient both (:func:`mirror_lower` makes a nearly symmetric one so). u = 2⁻⁵³ is
the unit roundoff of float64 and γ_k = ku/(1 − ku) (Higham 2002, §3.1).

**Upper side: a Rayleigh quotient** (:func:`rayleigh_upper`). For any x ≠ 0,
ρ(x) = xᵀAx/xᵀx ≥ λ_min (Courant–Fischer). Computed as q = fl(fl(xᵀ fl(Ax)) / fl(xᵀx)):
|fl(Ax) − Ax| ≤ γ_n|A||x| and |fl(xᵀy) − xᵀy| ≤ γ_n|x|ᵀ|y| for any order of summation
(Higham 2002, §3.1, 3.5; blocked BLAS included), so the numerator errs by at most
γ_n(2 + γ_n)|x|ᵀ|A||x| ≤ γ_n(2 + γ_n)N xᵀx with N = ‖|A|‖_∞ ≥ ‖|A|‖₂ (A symmetric), the
denominator by a factor 1 + δ, |δ| ≤ γ_n, the division by 1 + δ′, |δ′| ≤ u; with |ρ| ≤ N,
|q − ρ(x)| ≤ ((3 + γ_n)(1 + u)/(1 − γ_n) γ_n + u) N ≤ 5γ_n N for nu ≤ 10⁻³. Hence
λ_min ≤ q + 5γ_n N. N itself is bounded from above as fl(max row sum)·(1 + 2γ_n).

**Lower side: inertia** (:func:`inertia_lower`). If the floating-point Cholesky
factorization of B = fl(A − ℓI) runs to completion (every pivot positive: LAPACK's info = 0),
then R̂ᵀR̂ = B + ΔB with |ΔB| ≤ γ_{n+1}|R̂ᵀ||R̂| (Demmel 1989; Higham 2002, Theorem 10.3,
which holds for every order of evaluation of the inner products: a blocked LAPACK ``potrf``
on conventional, not Strassen-type, matrix products does the same operations in another
order). So ‖ΔB‖₂ ≤ γ_{n+1}‖R̂‖_F², and
‖R̂‖_F² = tr(B) + tr(ΔB) ≤ tr(B) + γ_{n+1}‖R̂‖_F² gives ‖ΔB‖₂ ≤ γ_{n+1} tr(B)/(1 − γ_{n+1}).
The diagonal shift rounds each b_ii = (a_ii − ℓ)(1 + ε_i), |ε_i| ≤ u. As R̂ᵀR̂ ⪰ 0,
A − ℓI ⪰ −(‖ΔB‖₂ + u max_i|a_ii − ℓ|)I: by Weyl's inequality

    λ_min(A) ≥ ℓ − γ_{n+1} tr(B)/(1 − γ_{n+1}) − u max_i |a_ii − ℓ|,

with |a_ii − ℓ| ≤ |b_ii|/(1 − u),

tr(B) taken as an exactly rounded sum (math.fsum) made one ulp larger. The bound is about
n²u·mean(a_ii): 1.1·10⁻⁷ for K at n = 3·10⁴ (λ* ≈ 0.026), the floor below which no bracket
of this kind can go. Why inertia and not Kato–Temple or Lehmann alone: those turn a
residual into a lower bound only given a lower bound on λ₂ (or λ_{b+1}); a gap read off
the Ritz values is an upper bound of it, not a lower one, and a Ritz block can miss an
eigenvalue — only an inertia count proves that none lies below ℓ (Sylvester's law).

:func:`certify_least` places ℓ a chosen relative distance below an estimate θ ≥ λ_min
(a Ritz value or eigvalsh's), retries further down when the factorization fails (then
θ was off by more than that distance), and improves θ with the certifying factor itself
as a shift-and-invert preconditioner when the bracket comes out wider than asked.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from deqlab._progress import Progress, silent

#: Rows per block of the passes over A that bound ‖|A|‖_∞ (8 MiB of float64 per block).
BLOCK_ENTRIES = 1 << 20
#: The shift is first placed this fraction of the target width below the estimate, so that
#: the bracket [ℓ − ε, θ + ε′] is at most the target wide when θ is within it of λ_min.
SHIFT_FRACTION = 0.9
#: Each failed factorization moves the shift this many times further below the estimate.
SHIFT_GROWTH = 8.0
#: Factorizations tried before A is declared not to be what the caller says.
MAX_SHIFTS = 12
#: Rounds of (factorize, improve the estimate with that factor) when the bracket is too wide.
MAX_ROUNDS = 3

Precondition = Callable[[torch.Tensor], torch.Tensor]
#: ``improve(precondition, block, atol)`` → (Ritz value, Ritz block) to an absolute ``atol``.
Improve = Callable[[Precondition, torch.Tensor | None, float], tuple[float, torch.Tensor]]


@dataclass(frozen=True)
class Bracket:
    """lower ≤ λ_min ≤ upper, with the proof of each side in words; ``at_floor``: as narrow
    as float64 rounding lets :func:`certify_least` prove, within a factor 2 of
    :func:`narrowest` (asking again cannot narrow it)."""

    lower: float
    upper: float
    lower_proof: str
    upper_proof: str
    at_floor: bool = False

    @property
    def width(self) -> float:
        return self.upper - self.lower

    @property
    def relative_width(self) -> float:
        """(upper − lower)/upper; 0 for a value known exactly; inf when upper ≤ 0 < width
        (no relative accuracy to speak of)."""
        if self.width == 0:
            return 0.0
        return self.width / self.upper if self.upper > 0 else math.inf

    def contains(self, value: float) -> bool:
        return self.lower <= value <= self.upper

    def as_dict(self) -> dict[str, object]:
        return {
            "lower": self.lower,
            "upper": self.upper,
            "relative_width": self.relative_width,
            "at_floor": self.at_floor,
            "lower_proof": self.lower_proof,
            "upper_proof": self.upper_proof,
        }


def unit_roundoff(dtype: torch.dtype = torch.float64) -> float:
    return torch.finfo(dtype).eps / 2


def gamma(k: int, dtype: torch.dtype = torch.float64) -> float:
    """γ_k = ku/(1 − ku) (Higham 2002, Lemma 3.1)."""
    ku = k * unit_roundoff(dtype)
    if ku >= 1e-3:
        raise ValueError(f"n = {k} is too large for float64 error bounds (nu = {ku:.2g})")
    return ku / (1.0 - ku)


def abs_row_norm(A: torch.Tensor) -> float:
    """An upper bound of ‖|A|‖_∞ = max_i Σ_j |a_ij| (≥ ‖|A|‖₂ for symmetric A), by row
    blocks (no n×n temporary)."""
    n = A.shape[0]
    rows = max(1, BLOCK_ENTRIES // max(n, 1))
    top = max(float(A[r0 : r0 + rows].abs().sum(dim=1).max()) for r0 in range(0, n, rows))
    return next_up(top * (1.0 + 2.0 * gamma(n)))


def rayleigh_upper(A: torch.Tensor, x: torch.Tensor, abs_norm: float) -> tuple[float, str]:
    """(an upper bound of λ_min(A), its proof): x's Rayleigh quotient plus the bound of its
    rounding, 5γ_n‖|A|‖_∞ (module docstring). ``abs_norm`` is :func:`abs_row_norm` (A)."""
    q, error = _rayleigh(A, x, abs_norm)
    return next_up(q + error), (
        f"Rayleigh quotient xᵀAx/xᵀx = {q:.12g} of a Ritz vector x (Courant–Fischer: ≥ λ_min), "
        f"plus its rounding ≤ 5γ_n‖|A|‖_∞ = {error:.2g}"
    )


def rayleigh_lower(A: torch.Tensor, x: torch.Tensor, abs_norm: float) -> tuple[float, str]:
    """(a lower bound of λ_max(A), its proof): x's Rayleigh quotient (Courant–Fischer:
    ≤ λ_max) less the bound of its rounding, 5γ_n‖|A|‖_∞, as in :func:`rayleigh_upper`."""
    q, error = _rayleigh(A, x, abs_norm)
    return next_down(q - error), (
        f"Rayleigh quotient xᵀAx/xᵀx = {q:.12g} (Courant–Fischer: ≤ λ_max), less its rounding "
        f"≤ 5γ_n‖|A|‖_∞ = {error:.2g}"
    )


def _rayleigh(A: torch.Tensor, x: torch.Tensor, abs_norm: float) -> tuple[float, float]:
    """(fl(xᵀAx)/fl(xᵀx), the bound 5γ_n‖|A|‖_∞ on its distance from xᵀAx/xᵀx)."""
    x = x.reshape(-1, 1).to(A)
    q = float((x.mT @ (A @ x)).item()) / float((x.mT @ x).item())
    return q, 5.0 * gamma(A.shape[0]) * abs_norm


def inertia_lower(A: torch.Tensor, shift: float, work: torch.Tensor) -> tuple[float, str] | None:
    """(a lower bound of λ_min(A), its proof) when the float64 Cholesky factorization of
    A − shift·I completes (module docstring), else None. The factor is left in ``work``
    (an n×n float64 array on A's device, overwritten) as the column-major view
    ``work.mT``; :func:`factor_inverse` applies it."""
    n = A.shape[0]
    work.copy_(A)
    diagonal = work.diagonal()
    diagonal.sub_(shift)
    trace = next_up(math.fsum(diagonal.tolist()))
    spread = float(diagonal.abs().max())
    factor = work.mT  # column-major: LAPACK's layout, no copy
    info = torch.empty((), dtype=torch.int32, device=A.device)
    torch.linalg.cholesky_ex(factor, out=(factor, info))
    if int(info) != 0:
        return None
    g, u = gamma(n + 1), unit_roundoff()
    # |a_ii − ℓ| ≤ |b_ii|/(1 − u); the factor 1 + 8u covers the rounding of this line itself
    error = next_up((g * trace / (1.0 - g) + u / (1.0 - u) * spread) * (1.0 + 8.0 * u))
    bound = next_down(shift - error)
    return bound, (
        f"inertia: the float64 Cholesky factorization of A − ℓI, ℓ = {shift:.12g}, completed "
        f"(all pivots positive), so λ_min ≥ ℓ − γ_(n+1)tr(A − ℓI)/(1 − γ_(n+1)) − "
        f"u·max|a_ii − ℓ| = ℓ − {error:.2g} (Demmel 1989; Higham 2002, Theorem 10.3)"
    )


def mirror_lower(A: torch.Tensor) -> torch.Tensor:
    """A, made exactly symmetric in place from its lower triangle (eigvalsh's), by row blocks
    (no n×n temporary): ``a_ij = a_ji`` for j > i."""
    n = A.shape[0]
    rows = max(1, BLOCK_ENTRIES // max(n, 1))
    for r0 in range(0, n, rows):
        r1 = min(r0 + rows, n)
        square = A[r0:r1, r0:r1]
        square.copy_(torch.tril(square) + torch.tril(square, -1).mT)
        A[r0:r1, r1:] = A[r1:, r0:r1].mT
    return A


def factor_inverse(work: torch.Tensor) -> Precondition:
    """R ↦ (A − ℓI)⁻¹R from the factor :func:`inertia_lower` left in ``work``."""
    factor = work.mT

    def apply(R: torch.Tensor) -> torch.Tensor:
        Y = torch.linalg.solve_triangular(factor, R, upper=False)
        return torch.linalg.solve_triangular(factor.mT, Y, upper=True)

    return apply


def narrowest(A: torch.Tensor) -> float:
    """About the narrowest bracket :func:`certify_least` can prove: a shift 2·floor below the
    estimate (:func:`rounding_floor`), the inertia bound's floor and the Rayleigh quotient's
    rounding 5γ_n‖|A|‖_∞."""
    return 3.0 * rounding_floor(A) + 5.0 * gamma(A.shape[0]) * abs_row_norm(A)


def rounding_floor(A: torch.Tensor) -> float:
    """About the least distance below λ_min at which a shift can be certified: the
    inertia bound's γ_{n+1} tr(A) (module docstring), at least one ulp of the diagonal."""
    n = A.shape[0]
    trace = abs(math.fsum(A.diagonal().tolist()))
    scale = float(A.diagonal().abs().max())
    return max(gamma(n + 1) * trace, unit_roundoff() * scale, 1e-300)


def certify_least(
    A: torch.Tensor,
    estimate: float,
    block: torch.Tensor | None,
    *,
    target: float,
    work: torch.Tensor,
    improve: Improve,
    progress: Progress = silent,
) -> tuple[Bracket, float]:
    """(a bracket of λ_min(A), the best estimate): the bracket at most ``target`` wide
    relative to its upper side where rounding allows (``target`` = 0, or a target below
    what rounding allows: about :func:`narrowest` wide).

    ``estimate`` ≥ λ_min up to its own error (a Ritz value, eigvalsh's value) and ``block``
    its Ritz vectors, first column the least (None: none yet). ``improve(precondition,
    block, atol)`` returns a better (estimate, block) — LOBPCG preconditioned by the
    certifying factor's inverse, a shift-and-invert step that separates the bottom of the
    spectrum — and is called when there is no vector for the upper side, or when the
    bracket is wider than asked (then the shift moves up to the better estimate).
    ``work``: an n×n float64 array on A's device (overwritten).
    """
    abs_norm = abs_row_norm(A)
    floor = rounding_floor(A)
    rounding = floor + 5.0 * gamma(A.shape[0]) * abs_norm  # both sides' rounding terms

    def distance(estimate: float) -> float:
        """How far below the estimate the shift goes: the width asked less the rounding."""
        return max(SHIFT_FRACTION * target * abs(estimate) - rounding, 2.0 * floor)

    def better(estimate: float, block: torch.Tensor | None):
        """(estimate, block) improved with the factor in ``work`` as the preconditioner, to
        a tenth of the bracket they are for; never a larger estimate (a worse answer of
        ``improve`` leaves both as they were, but a first block)."""
        progress("the Ritz vector by LOBPCG, preconditioned by the certifying factor", 0, 1)
        atol = max(0.1 * target * abs(estimate), 0.1 * floor)
        value, found = improve(factor_inverse(work), block, atol)
        if block is not None and value > estimate:
            return estimate, block
        return min(value, estimate), found

    gap = distance(estimate)
    lower, lower_proof, gap = _factorize_below(A, estimate, gap, work, progress)
    if block is None:
        estimate, block = better(estimate, block)
    for rounds in range(1, MAX_ROUNDS + 1):
        upper, upper_proof = rayleigh_upper(A, block[:, 0], abs_norm)
        found = Bracket(lower, upper, lower_proof, upper_proof)
        at_floor = found.width <= 2.0 * (rounding + 2.0 * floor)  # about narrowest(A)
        found = replace(found, at_floor=at_floor)
        if found.relative_width <= target or at_floor or rounds == MAX_ROUNDS:
            return found, estimate
        # work holds the factor of A − ℓI, ℓ close below λ_min: shift-and-invert
        estimate, block = better(estimate, block)
        gap = distance(estimate)
        lower, lower_proof, gap = _factorize_below(A, estimate, gap, work, progress)
    raise AssertionError("unreachable: the last round returns")


def _factorize_below(
    A: torch.Tensor, estimate: float, gap: float, work: torch.Tensor, progress: Progress
) -> tuple[float, str, float]:
    """(lower bound, proof, gap used): the first shift estimate − gap·8^k whose
    factorization completes."""
    for _ in range(MAX_SHIFTS):
        shift = estimate - gap
        progress(f"certifying λ_min ≥ {shift:.6g}: float64 Cholesky of A − ℓI", 0, 1)
        found = inertia_lower(A, shift, work)
        if found is not None:
            return (*found, gap)
        gap *= SHIFT_GROWTH
    raise ValueError(
        f"`A` has no float64 Cholesky factorization even shifted {gap:.3g} below its estimated "
        f"least eigenvalue {estimate:.6g}: it is not symmetric with that least eigenvalue"
    )


def next_up(x: float) -> float:
    return math.nextafter(x, math.inf)


def next_down(x: float) -> float:
    return math.nextafter(x, -math.inf)

"""The arc-cosine function Q and the population Gram matrices K^(l), K of Ling et al. (2023).

Scaling (Assumption 1): ``W_ij ~ N(0, 2σ_w²/m)``, ``U_ij ~ N(0, 2/d)``. The pre-activations
of inputs i, j in one unit are then jointly Gaussian with covariance ``2 Λ_ij`` where
``Λ_ij = σ_w² K_ij + x_iᵀx_j / d`` and ``K_ij = lim (1/m) z_iᵀ z_j``, hence Definition 1,
``K_ij = 2 E_{(u,v)~N(0, Λ)}[φ(u) φ(v)]``. For a general 2×2 covariance, homogeneity of ReLU
and Eq. (11) give ``2 E[φ(u)φ(v)] = √(Λ_ii Λ_jj) · Q(Λ_ij / √(Λ_ii Λ_jj))``.

Completing the paper for inputs off the sphere: with ``ν_i = ‖x_i‖²/d`` the diagonal obeys
``K_ii^(l) = σ_w² K_ii^(l-1) + ν_i`` (as Q(1) = 1), so ``K_ii^(l) = ρ_l ν_i`` with
``ρ_l = (1 - σ_w^{2l}) / (1 - σ_w²)`` (Lemma 3). Writing ``K_ij^(l) = ρ_l √(ν_i ν_j) k_ij^(l)``
and ``c_ij = x_iᵀx_j / (‖x_i‖ ‖x_j‖)`` every entry follows a scalar recursion

    k^(l) = Q((σ_w² ρ_{l-1} k^(l-1) + c) / ρ_l),   k^(0) = 0,                 (Eq. 12-13)

and at infinite depth ``k = Q(σ_w² k + (1 - σ_w²) c)``, ``K_ij = √(ν_i ν_j) k_ij / (1 - σ_w²)``
(Eq. 14); on the sphere ``K_ii = 1/(1 - σ_w²)``. For ν = 1 these are the paper's equations
with two typographical corrections: Eq. (13) divides by ``ρ^(l-1)`` where the derivation
(Appendix C.1, last display) gives ``ρ^(l)``, and the denominator of ``cos θ^(l)`` in Lemma 3
is ``σ_w² K_ii^(l-1) + 1``, not ``σ_w² K_ij^(l-1) + 1``. Because the entries decouple, the
matrix is computed in row blocks (upper triangle, mirrored): one n×n output buffer plus a
few block-sized buffers.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch

from deqlab._checks import check_int, check_real, check_tensor
from deqlab._memory import check_square
from deqlab._progress import Progress, silent
from deqlab.models.relu_deq import SIGMA_W2_LIMIT
from deqlab.theory.brackets import Bracket

__all__ = [
    "BLOCK_ENTRIES",
    "AssumptionWarning",
    "LeastEigenvalue",
    "arccos_q",
    "arccos_q_derivative",
    "check_sigma_w2",
    "converged_depth",
    "least_eigenvalue",
    "population_gram",
]

#: Entries per row block of :func:`assemble_gram_blocks` (8 MiB in float64): a memory knob
#: (any value gives the same matrix, to rounding).
BLOCK_ENTRIES = 1 << 20
_NEWTON_MAX_STEPS = 60


class AssumptionWarning(UserWarning):
    """A theorem's assumption does not hold for the given arguments (results still computed)."""


def check_sigma_w2(sigma_w2: object) -> float:
    """Validate σ_w²: ValueError outside (0, 1), AssumptionWarning on [1/8, 1) (Assumption 1)."""
    value = check_real(
        "sigma_w2", sigma_w2, low=0.0, high=1.0, low_inclusive=False, high_inclusive=False
    )
    if value >= SIGMA_W2_LIMIT:
        warnings.warn(
            f"`sigma_w2` = {value:g} violates Assumption 1 of Ling et al. (2023), which takes "
            "σ_w² < 1/8: the kernels are still well defined (σ_w² < 1), but Lemma 1 and "
            "Theorems 2-5 give no guarantee",
            AssumptionWarning,
            stacklevel=3,
        )
    return value


def check_inputs(X: object, name: str = "X") -> torch.Tensor:
    """Validate X of shape (d, n), one point per column: finite, n, d >= 1, no zero column."""
    X = check_tensor(name, X, ndim=2)
    d, n = X.shape
    if n == 0 or d == 0:
        raise ValueError(
            f"`{name}` must have shape (d, n) with d >= 1 features and n >= 1 columns (points); "
            f"got {tuple(X.shape)}"
        )
    zero = (X == 0).all(dim=0).nonzero().flatten()
    if zero.numel():
        shown = ", ".join(str(int(i)) for i in zero[:5]) + (", ..." if zero.numel() > 5 else "")
        raise ValueError(
            f"`{name}` has {zero.numel()} all-zero column(s) (points {shown}); the kernels need "
            "nonzero inputs (Assumption 2 takes ‖x_i‖ = √d)"
        )
    return X


def _clamp_unit(x: torch.Tensor, name: str) -> torch.Tensor:
    """Clamp ``x`` to [-1, 1], allowing a rounding excess of 64 eps; larger excesses raise."""
    tol = 64 * torch.finfo(x.dtype).eps
    excess = float((x.abs() - 1).max()) if x.numel() else 0.0
    if excess > tol:
        raise ValueError(
            f"`{name}` must lie in [-1, 1] (up to rounding, {tol:.1e}); got an entry with "
            f"|x| = 1 + {excess:.3g}"
        )
    return x.clamp(-1.0, 1.0)


def q_and_slope(u: torch.Tensor, *, slope: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Q(u) and optionally Q'(u) for u already in [-1, 1]; one ``acos`` serves both.

    ``√(1-u²)`` is formed as ``√((1-u)(1+u))``: near u = ±1 the two terms of Q cancel to
    leading order, and ``1 - u·u`` would lose half the digits there.
    """
    q_slope = torch.acos(u).div_(-math.pi).add_(1.0)  # Q'(u) = 1 - arccos(u)/π
    q = (1.0 - u).mul_(1.0 + u).sqrt_().div_(math.pi).addcmul_(u, q_slope)
    return q, (q_slope if slope else None)


def arccos_q(x: torch.Tensor) -> torch.Tensor:
    """Q(x) = (√(1-x²) + (π - arccos x) x) / π of Ling et al. (2023), Eq. (11).

    ``2 E[φ(u)φ(v)] = Q(x)`` for standard Gaussians with correlation x (Daniely et al. 2016).
    Q(1) = 1 and Q(-1) = 0 exactly, Q(0) = 1/π; Q is increasing and convex with
    Q'(x) = 1 - arccos(x)/π ∈ [0, 1]. Inputs outside [-1, 1] by rounding (64 eps) are
    clamped; larger excursions raise ``ValueError``. Shape-preserving.
    """
    x = check_tensor("x", x)
    return q_and_slope(_clamp_unit(x, "x"), slope=False)[0]


def arccos_q_derivative(x: torch.Tensor) -> torch.Tensor:
    """Q'(x) = 1 - arccos(x)/π = 2 P(u > 0, v > 0) for standard Gaussians with correlation x."""
    x = check_tensor("x", x)
    return q_and_slope(_clamp_unit(x, "x"), slope=True)[1]


def _check_depth(depth: object) -> int | None:
    if depth is None:
        return None
    return check_int("depth", depth, min_value=0)


def depth_scale(sigma_w2: float, depth: int | None) -> float:
    """ρ_l = (1 - σ_w^{2l}) / (1 - σ_w²) = K_ii^(l) on the sphere (Lemma 3); None → 1/(1-σ_w²).

    Computed by the recursion ρ_l = σ_w² ρ_{l-1} + 1, which stops changing (in floating
    point) after a few hundred layers at most: any depth costs that much, not ``depth`` steps.
    """
    if depth is None:
        return 1.0 / (1.0 - sigma_w2)
    rho = 0.0
    for _ in range(depth):
        rho, previous = sigma_w2 * rho + 1.0, rho
        if rho == previous:  # a fixed point of the recursion: every later ρ_l is this one
            break
    return rho


def converged_depth(sigma_w2: float, tol: float = 1e-14) -> int:
    """The least depth l with 2(l+1)σ_w^{2l} <= ``tol``: from there on K^(l) equals K = K^(∞)
    within ``tol`` relative to the diagonal scale, |K_ij^(l) − K_ij| <= tol · ρ_∞ √(ν_i ν_j).

    The bound: with e_l = max |k^(l) − k| on the normalised entries (module docstring),
    Q' <= 1 gives e_l <= σ_w² e_{l-1} + 2|1/ρ_l − 1/ρ_∞|, hence e_l <= (1 + 2l) σ_w^{2l}, and
    |ρ_l k^(l) − ρ_∞ k| <= ρ_∞ (e_l + σ_w^{2l}) <= 2(l+1) σ_w^{2l} ρ_∞. K itself is solved to
    an absolute ``tol`` on k, so beyond this depth K^(l) and the computed K agree as closely
    as K is known. 15 layers at σ_w² = 0.08, about 3 900 at σ_w² = 0.99.
    """
    sigma_w2 = check_real(
        "sigma_w2", sigma_w2, low=0.0, high=1.0, low_inclusive=False, high_inclusive=False
    )
    tol = check_real("tol", tol, low=0.0, low_inclusive=False)
    log_s = math.log(sigma_w2)
    depth = max(0, math.floor(math.log(tol / 2) / log_s) - 1)  # 2σ^{2l} <= tol is necessary
    while math.log(2 * (depth + 1)) + depth * log_s > math.log(tol):
        depth += 1
    return depth


def layer_entries(cos: torch.Tensor, sigma_w2: float, depth: int) -> torch.Tensor:
    """k^(depth) of Eq. (13) (corrected index), entrywise over the block ``cos``.

    Exact for any depth in bounded time: once ρ_l has stopped changing the layer map is one
    fixed function of k, and when its iterates repeat (bitwise) after one or two layers —
    a fixed point or a rounding 2-cycle, typically within a few dozen layers for σ_w² < 1/8 —
    every later iterate is known without computing it.
    """
    k = torch.zeros_like(cos)
    before: torch.Tensor | None = None  # k two layers back, while the map is unchanged
    rho_prev, same_map = 0.0, 0
    for layer in range(depth):
        rho = sigma_w2 * rho_prev + 1.0
        same_map = same_map + 1 if rho == rho_prev else 0
        u = k.mul(sigma_w2 * rho_prev / rho).add_(cos, alpha=1.0 / rho).clamp_(-1.0, 1.0)
        new = q_and_slope(u, slope=False)[0]  # (b, c)
        left = depth - layer - 1  # layers still to apply after this one
        if same_map >= 1 and torch.equal(new, k):
            return new  # a fixed point of the map
        if same_map >= 2 and before is not None and torch.equal(new, before):
            return new if left % 2 == 0 else k  # a 2-cycle: new, k, new, k, ...
        before, k, rho_prev = k, new, rho
    return k


def infinite_depth_entries(cos: torch.Tensor, sigma_w2: float, tol: float) -> torch.Tensor:
    """Solve k = Q(σ_w² k + (1-σ_w²) c) entrywise (Eq. 14) by safeguarded Newton steps.

    g(k) = k - Q(σ_w² k + b) is increasing (g' ≥ 1 - σ_w² > 0) and concave (Q is convex), so
    after the first step Newton's iterates increase monotonically to the root from below and
    converge quadratically; clamping to [0, 1] (which holds the root, as 0 ≤ Q ≤ 1) keeps
    that. The plain Picard map contracts only at rate σ_w² (Theorem 3); Newton needs ~5 steps.
    """
    b = cos.mul(1.0 - sigma_w2)  # (b, c)
    k = q_and_slope(cos, slope=False)[0]  # start at k^(1) = Q(c)
    for _ in range(_NEWTON_MAX_STEPS):
        u = torch.add(b, k, alpha=sigma_w2).clamp_(-1.0, 1.0)
        q, q_slope = q_and_slope(u, slope=True)
        step = q.sub_(k).div_(q_slope.mul_(-sigma_w2).add_(1.0))  # (Q(u) - k) / (1 - σ² Q'(u))
        k.add_(step).clamp_(0.0, 1.0)
        if float(step.abs().max()) <= tol:
            return k
    raise RuntimeError(  # unreachable for σ_w² < 1: Newton converges in < 10 steps
        f"population_gram: Newton did not reach tol={tol:g} in {_NEWTON_MAX_STEPS} steps"
    )


def population_gram(
    X: torch.Tensor,
    sigma_w2: float = 0.08,
    depth: int | None = None,
    *,
    tol: float = 1e-14,
    out: torch.Tensor | None = None,
    progress: Progress = silent,
) -> torch.Tensor:
    """Population Gram matrix K^(depth) (Definition 1, Lemma 3), or K = K^(∞) (Eq. 14) for None.

    Args:
        X: inputs, shape (d, n), one point per column; any norms (see the module docstring).
        sigma_w2: σ_w² ∈ (0, 1); values ≥ 1/8 warn (Assumption 1).
        depth: number of weight-untied layers l ≥ 0, or None for the infinite-depth limit,
            solved to ``tol`` (absolute, on the normalised entries k_ij ∈ [0, 1]).
        out: an (n, n) float64 tensor on ``X.device`` to write K into instead of a new one
            (:func:`assemble_gram_blocks`).
        progress: called as ``progress(what, entries done, entries in all)`` per row block.

    Returns:
        (n, n) float64 tensor on ``X.device``; ``K_ii = ρ_l ‖x_i‖²/d`` (= 1/(1-σ_w²) at infinite
        depth on the sphere ‖x_i‖ = √d). An n that does not fit in the memory available is
        refused first (:class:`deqlab._memory.MemoryRefusal`, a ValueError).
    """
    X = check_inputs(X)
    sigma_w2 = check_sigma_w2(sigma_w2)
    depth = _check_depth(depth)
    tol = check_real("tol", tol, low=0.0, low_inclusive=False)
    what = "population Gram matrix K (Eq. 14)" if depth is None else f"K^({depth})"

    def entries(cos: torch.Tensor, rows: slice) -> torch.Tensor:
        if depth is None:
            return infinite_depth_entries(cos, sigma_w2, tol)
        return layer_entries(cos, sigma_w2, depth)

    scale = depth_scale(sigma_w2, depth)
    return assemble_gram_blocks(X, entries, scale, out=out, progress=progress, what=what)


def assemble_gram(
    X: torch.Tensor, entries: Callable[[torch.Tensor], torch.Tensor], factor: float
) -> torch.Tensor:
    """``M_ij = factor · √(ν_i ν_j) · entries(c)_ij`` with c the cosine matrix of the columns of X.

    ``entries`` maps a block of cosines (clamped to [-1, 1], exactly 1 at i = j) to a block
    of the same shape, entrywise; it may overwrite its argument. See
    :func:`assemble_gram_blocks`, for entries that also depend on where the block lies.
    """
    return assemble_gram_blocks(X, lambda cos, rows: entries(cos), factor)


def assemble_gram_blocks(
    X: torch.Tensor,
    entries: Callable[[torch.Tensor, slice], torch.Tensor],
    factor: float,
    *,
    out: torch.Tensor | None = None,
    progress: Progress = silent,
    what: str = "Gram matrix",
) -> torch.Tensor:
    """``M_ij = factor · √(ν_i ν_j) · E_ij`` with E built block by block by ``entries``.

    ``entries(cos, rows)`` gets the cosines c_ij of rows ``rows`` (a slice r0:r1) and
    columns r0:n (clamped to [-1, 1], exactly 1 at i = j; it may overwrite them) and returns
    E on the same block; E must be symmetric, as only the upper triangle is asked for. Row
    blocks of the upper triangle are computed and mirrored: one (n, n) float64 output plus
    block-sized buffers (why: n = 10⁴ needs 0.8 GB for M, not several times that).

    ``out``: an (n, n) float64 tensor to write M into instead of a new one. It may be the
    very matrix ``entries`` reads (the DEQ NTK written over K): block r0:r1 reads only rows
    r0:r1 from column r0 on, which no earlier block has written (earlier blocks wrote their
    own rows and, mirrored, columns < r0). Without ``out`` the (n, n) output is checked
    against the memory available first. ``progress(what, entries done, entries in all)``
    is called before each block.
    """
    X = X.to(torch.float64)
    d, n = X.shape
    if out is None:
        check_square("`X`", n, f"the {what}", buffers=1, per_point=8 * (2 * d + 4), device=X.device)
        out = torch.empty(n, n, dtype=torch.float64, device=X.device)
    elif out.shape != (n, n) or out.dtype != torch.float64 or out.device != X.device:
        raise ValueError(
            f"`out` must be a ({n}, {n}) float64 tensor on {X.device}; got "
            f"{tuple(out.shape)} {out.dtype} on {out.device}"
        )
    norms = X.norm(dim=0)  # (n,)
    unit = X / norms  # (d, n) unit columns
    scale = norms / math.sqrt(d)  # √ν_i
    rows = max(1, BLOCK_ENTRIES // n)
    total, done = n * (n + 1) // 2, 0
    for r0 in range(0, n, rows):
        r1 = min(n, r0 + rows)
        progress(what, done, total)
        cos = (unit[:, r0:r1].T @ unit[:, r0:]).clamp_(-1.0, 1.0)  # (b, n - r0)
        cos.diagonal().fill_(1.0)  # global entries (i, i)
        block = entries(cos, slice(r0, r1))  # (b, n - r0)
        del cos
        block.mul_(scale[r0:r1, None] * factor).mul_(scale[None, r0:])
        square = block[:, : r1 - r0]  # (b, b) diagonal square: make it exactly symmetric
        square.copy_(torch.triu(square) + torch.triu(square, 1).T)
        out[r0:r1, r0:] = block
        out[r1:, r0:r1] = block[:, r1 - r0 :].T  # mirror into the lower triangle
        done += (r1 - r0) * (2 * n - r0 - r1 + 1) // 2
    progress(what, total, total)
    return out


@dataclass(frozen=True)
class LeastEigenvalue:
    """λ_min of a PSD matrix with its round-off context.

    ``value`` is the computed λ_min, replaced by 0.0 when it lies within ``tolerance`` of
    zero (then ``singular`` is True and ``reason`` says why); ``computed`` is the raw value;
    ``bracket`` a certified [lower, upper] ∋ λ_min where one was computed
    (:mod:`deqlab.theory.brackets`), else None.
    """

    value: float
    computed: float
    max_eigenvalue: float
    tolerance: float
    singular: bool
    reason: str
    bracket: Bracket | None = None

    @classmethod
    def rounded(
        cls,
        computed: float,
        max_eigenvalue: float,
        tolerance: float,
        bracket: Bracket | None = None,
    ) -> LeastEigenvalue:
        """The computed λ_min, or 0.0 (singular, with the reason) when ``computed <= tolerance``."""
        if computed > tolerance:
            return cls(computed, computed, max_eigenvalue, tolerance, False, "", bracket)
        reason = (
            f"λ_min = {computed:.3g} lies within the round-off tolerance {tolerance:.1e} = "
            "n·eps·‖K‖₂ of 0: K is singular to working precision (duplicate or parallel "
            "inputs give this)"
        )
        return cls(0.0, computed, max_eigenvalue, tolerance, True, reason, bracket)

    @property
    def condition_number(self) -> float:
        """λ_max / λ_min (inf when singular to working precision)."""
        return math.inf if self.singular else self.max_eigenvalue / self.value


def least_eigenvalue(K: torch.Tensor) -> LeastEigenvalue:
    """λ* = λ_min(K) of a symmetric PSD matrix (Definition 1), with a PSD-aware tolerance.

    ``eigvalsh`` is backward stable: each eigenvalue is exact for a matrix within
    ``c·n·eps·‖K‖₂`` of K, so a computed λ_min with ``|λ_min| <= tol = n·eps·λ_max`` cannot be
    told from 0 (duplicate or parallel inputs give exactly this): reported as 0.0,
    ``singular=True``. ``λ_min < -tol`` means K is not PSD: ValueError. eps is that of K's
    dtype (a float32 K carries float32 round-off); the eigenvalues are computed in float64.
    """
    K = check_tensor("K", K, ndim=2)
    if K.shape[0] != K.shape[1] or K.shape[0] == 0:
        raise ValueError(f"`K` must be a non-empty square matrix; got shape {tuple(K.shape)}")
    return _least(K, vector=False)[0]


def least_eigenpair(K: torch.Tensor) -> tuple[LeastEigenvalue, torch.Tensor]:
    """:func:`least_eigenvalue` and a unit eigenvector of it, (n,) float64 (``eigh``: a
    Rayleigh quotient then bounds λ_min from above without an iterative solver)."""
    found, vector = _least(K, vector=True)
    return found, vector  # type: ignore[return-value]


def _least(K: torch.Tensor, *, vector: bool) -> tuple[LeastEigenvalue, torch.Tensor | None]:
    eps = torch.finfo(K.dtype).eps  # the precision K was computed in
    n = K.shape[0]
    copies = 1 if K.dtype == torch.float64 else 2  # eigvalsh's copy, and a float64 one
    check_square("`K`", n, "eigvalsh's copy of K", buffers=copies, device=K.device)
    K = K.to(torch.float64)
    check_symmetric(K, eps)
    eigs, vectors = torch.linalg.eigh(K) if vector else (torch.linalg.eigvalsh(K), None)
    lo, hi = float(eigs[0]), float(eigs[-1])
    tol = n * eps * max(abs(hi), abs(lo))
    if lo < -tol:
        raise ValueError(
            f"`K` must be positive semi-definite; got least eigenvalue {lo:.3g} < -{tol:.1e} "
            "(the round-off tolerance n·eps·‖K‖₂)"
        )
    return LeastEigenvalue.rounded(lo, hi, tol), None if vectors is None else vectors[:, 0]


def check_symmetric(K: torch.Tensor, eps: float) -> float:
    """``max |K − Kᵀ|``; ValueError unless it is ``<= 1e3·eps·max |K|`` (K square, float64),
    both maxima taken by row blocks (no n×n temporary)."""
    rows = max(1, BLOCK_ENTRIES // K.shape[0])
    scale = asym = 0.0
    for r0 in range(0, K.shape[0], rows):
        block = K[r0 : r0 + rows]  # (b, n)
        scale = max(scale, float(block.abs().max()))
        asym = max(asym, float((block - K[:, r0 : r0 + rows].T).abs().max()))
    if asym > 1e3 * eps * max(scale, 1e-300):
        raise ValueError(f"`K` must be symmetric; got max |K - Kᵀ| = {asym:.3g}")
    return asym

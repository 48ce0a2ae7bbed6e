"""Ling et al. (2023): Condition 1 (Eqs. (7)–(9)), the learning-rate bound (Eq. (10)), the
width Condition 1 needs, a bound on Eq. (9)'s margin at every width (ours) and Lemma 2's
closed-form gradient; the quantities of Theorem 1 and of the PL inequalities of Section 2.3
(Eqs. (4)–(5)) along a GD run are in :mod:`.margins`.

Notation (Section 3.1): for 0 < δ < 1 − ‖W(0)‖₂,
ρ̄_w = ‖W(0)‖₂ + δ, ρ̄_u = ‖U(0)‖₂ + δ, ρ̄_a = ‖a(0)‖₂ + δ,
c_w = ρ̄_u ρ̄_a / (1 − ρ̄_w)², c_u = ρ̄_a / (1 − ρ̄_w), c_a = ρ̄_u / (1 − ρ̄_w).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import torch
from scipy.optimize import minimize_scalar

from deqlab._checks import check_choice, check_int, check_positive, check_real, check_tensor
from deqlab.models.relu_deq import ReLUDEQ
from deqlab.solvers import SolverError
from deqlab.theory.ntk import pl_gram
from deqlab.theory.spectra import gram_lambda_min, spectral_norm

_GRID = 2048  # δ grid points before the bounded refinement
_WIDTH_GRID = 4096  # log-spaced δ points per width in required_width
MAX_WIDTH = 1e30  # required_width searches m up to this width
EQUATIONS = ("eq7", "eq8", "eq9")


@dataclass(frozen=True)
class Inequality:
    """One side-by-side inequality ``lhs >= rhs`` of Condition 1."""

    name: str
    lhs: float
    rhs: float

    @property
    def holds(self) -> bool:
        return self.lhs >= self.rhs

    @property
    def margin(self) -> float:
        """lhs / rhs (>= 1 iff it holds)."""
        return self.lhs / self.rhs if self.rhs > 0 else math.inf


@dataclass(frozen=True)
class Constants:
    """What Condition 1 reads at initialization: λ_0, ‖W(0)‖₂, ‖U(0)‖₂, ‖a(0)‖₂, ‖X‖_F and
    ‖ŷ(0) − y‖₂."""

    lambda0: float
    W_norm: float
    U_norm: float
    a_norm: float
    X_fro: float
    residual_norm: float

    def at_width(self, m0: float, m: float) -> Constants:
        """These constants, measured at width ``m0``, carried to width ``m``.

        Scaling (Section 3.2): λ_0 ∝ m (Theorem 2: λ_0 ≥ mλ*/2, and G/m → K), ‖U(0)‖₂ ∝ √m
        (‖U(0)‖₂ = O(√(m/d))); ‖W(0)‖₂ = O(1) (Lemma 1), ‖a(0)‖₂ = O(1), ‖X‖_F and
        ‖ŷ(0) − y‖₂ (Φ(0) = O(n)) do not change with m.
        """
        scale = m / m0
        return Constants(self.lambda0 * scale, self.W_norm, self.U_norm * math.sqrt(scale),
                         self.a_norm, self.X_fro, self.residual_norm)  # fmt: skip


def condition1_sides(delta, k: Constants) -> dict:
    """Both sides of Eqs. (7)–(9) and the bound of Eq. (10) at ``delta`` (a float or array)."""
    rho_w, rho_u, rho_a = k.W_norm + delta, k.U_norm + delta, k.a_norm + delta
    c_w = rho_u * rho_a / (1.0 - rho_w) ** 2
    c_u = rho_a / (1.0 - rho_w)
    c_a = rho_u / (1.0 - rho_w)
    s_wu = c_w**2 + c_u**2
    X2, res = k.X_fro**2, k.residual_norm
    return {
        "c": (c_w, c_u, c_a),
        "eq7": (k.lambda0, 4.0 / delta * np.maximum(np.maximum(c_w, c_u), c_a) * k.X_fro * res),
        "eq8": (k.lambda0**1.5, 4.0 * (2.0 + math.sqrt(2.0)) / rho_a * s_wu * X2 * res),
        "eq9": (k.lambda0, 4.0 * s_wu * X2),
        "lr": np.minimum(2.0 / k.lambda0, 2.0 * s_wu / ((s_wu + c_a**2) ** 2 * X2)),
    }


@dataclass(frozen=True)
class Condition1:
    """Condition 1 and Eq. (10) evaluated at initialization for one δ."""

    delta: float
    constants: Constants
    c_w: float
    c_u: float
    c_a: float
    eq7: Inequality
    eq8: Inequality
    eq9: Inequality
    lr_bound: float  # Eq. (10): η must be < lr_bound

    @classmethod
    def evaluate(cls, delta: float, constants: Constants) -> Condition1:
        """The three inequalities and Eq. (10) at ``delta`` for ``constants``."""
        sides = condition1_sides(delta, constants)
        eqs = [Inequality(f"Eq. ({key[2:]})", float(sides[key][0]), float(sides[key][1]))
               for key in EQUATIONS]  # fmt: skip
        c_w, c_u, c_a = (float(c) for c in sides["c"])
        return cls(delta, constants, c_w, c_u, c_a, *eqs, float(sides["lr"]))

    @property
    def lambda0(self) -> float:
        return self.constants.lambda0

    @property
    def W_norm(self) -> float:
        return self.constants.W_norm

    @property
    def holds(self) -> bool:
        return self.eq7.holds and self.eq8.holds and self.eq9.holds

    @property
    def failing(self) -> tuple[str, ...]:
        """Names of the inequalities that fail, e.g. ("Eq. (7)", "Eq. (8)")."""
        return tuple(q.name for q in (self.eq7, self.eq8, self.eq9) if not q.holds)

    @property
    def drift_bound(self) -> float:
        """(4/λ_0) √(c_w² + c_u² + c_a²) ‖X‖_F ‖ŷ(0) − y‖₂: the proof's bound on ‖θ(τ) − θ(0)‖.

        Appendix B.1, step (1) bounds ‖W(τ) − W(0)‖_F, ‖U(τ) − U(0)‖_F and ‖a(τ) − a(0)‖₂
        by (4/λ_0) c_k ‖X‖_F ‖ŷ(0) − y‖₂ (k = w, u, a); their root sum of squares bounds
        the distance of all parameters.
        """
        k = self.constants
        c = math.sqrt(self.c_w**2 + self.c_u**2 + self.c_a**2)
        return 4.0 / k.lambda0 * c * k.X_fro * k.residual_norm

    def as_dict(self) -> dict:
        """Tidy row: δ, the constants, c_w/c_u/c_a, each side of each inequality, Eq. (10)."""
        row = {"delta": self.delta, **vars(self.constants), "c_w": self.c_w, "c_u": self.c_u,
               "c_a": self.c_a, "lr_bound": self.lr_bound}  # fmt: skip
        for q, key in zip((self.eq7, self.eq8, self.eq9), EQUATIONS, strict=True):
            row.update({f"{key}_lhs": q.lhs, f"{key}_rhs": q.rhs, f"{key}_holds": q.holds})
        row["holds"] = self.holds
        return row

    @classmethod
    def from_dict(cls, row: Mapping[str, object]) -> Condition1:
        """Inverse of :meth:`as_dict` (recomputed from δ and the constants)."""
        fields = Constants.__dataclass_fields__
        return cls.evaluate(float(row["delta"]), Constants(**{k: float(row[k]) for k in fields}))


def best_delta(constants: Constants) -> float:
    """The δ in (0, 1 − ‖W(0)‖₂) that maximizes the smallest margin lhs/rhs of Eqs. (7)–(9).

    Eq. (7) prefers a large δ, Eqs. (8)–(9) a small one: a grid search refined with bounded
    Brent. Raises ValueError if ‖W(0)‖₂ >= 1 (no admissible δ).
    """
    upper = 1.0 - constants.W_norm
    if upper <= 0:
        raise ValueError(f"Condition 1 needs ‖W(0)‖₂ < 1; got ‖W(0)‖₂ = {constants.W_norm:.6g}")

    def neg_min_log_margin(d: float) -> float:
        c = Condition1.evaluate(d, constants)
        return -min(math.log(q.margin) for q in (c.eq7, c.eq8, c.eq9))

    grid = upper * np.linspace(0.0, 1.0, _GRID + 2)[1:-1]
    values = [neg_min_log_margin(float(d)) for d in grid]
    i = int(np.argmin(values))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, _GRID - 1)]
    best = float(grid[i])
    if hi > lo:
        opt = minimize_scalar(neg_min_log_margin, bounds=(lo, hi), method="bounded",
                              options={"xatol": 1e-12 * upper})  # fmt: skip
        if opt.fun <= values[i]:
            best = float(opt.x)
    return best


def condition1(
    model: ReLUDEQ,
    X: torch.Tensor,
    y: torch.Tensor,
    *,
    delta: float | None = None,
    tol: float = 1e-10,
) -> Condition1:
    """Condition 1 (Eqs. (7)–(9)) and the bound of Eq. (10) for ``model`` at θ(0).

    λ_0 = λ_min(Z(0)ᵀZ(0)) with Z(0) solved to ``tol``; norms are exact (SVD), float64.
    ``delta=None`` picks :func:`best_delta`. Raises ValueError if ‖W(0)‖₂ >= 1.
    """
    if not isinstance(model, ReLUDEQ):
        raise TypeError(f"`model` must be a ReLUDEQ; got {type(model).__name__}")
    X, y = model.check_data(X, y)
    with torch.no_grad():
        Z = model.equilibrium(X, tol=tol).raise_if_failed("forward").Z
        res = float((model.predict(Z) - y).to(torch.float64).norm())
    W_norm = spectral_norm(model.W.detach())
    if W_norm >= 1.0:
        raise ValueError(f"Condition 1 needs ‖W(0)‖₂ < 1; got ‖W(0)‖₂ = {W_norm:.6g}")
    constants = Constants(
        gram_lambda_min(Z),
        W_norm,
        spectral_norm(model.U.detach()),
        float(model.a.detach().to(torch.float64).norm()),
        float(X.to(torch.float64).norm()),
        res,
    )
    if delta is None:
        return Condition1.evaluate(best_delta(constants), constants)
    delta = check_real("delta", delta, low=0.0, high=1.0 - W_norm, low_inclusive=False,
                       high_inclusive=False)  # fmt: skip
    return Condition1.evaluate(delta, constants)


def width_margin(constants: Constants, m0: float, m: float, equation: str) -> float:
    """max over δ of lhs/rhs of ``equation`` (``"eq7"``, ``"eq8"``, ``"eq9"``) at width ``m``.

    ``constants`` are measured at width ``m0`` and carried to ``m`` by
    :meth:`Constants.at_width`; δ runs over a log-spaced grid of (0, 1 − ‖W(0)‖₂).
    """
    k = constants.at_width(m0, m)
    upper = 1.0 - k.W_norm
    delta = upper * np.logspace(-9.0, math.log10(1.0 - 1e-9), _WIDTH_GRID)
    lhs, rhs = condition1_sides(delta, k)[equation]
    return float(np.max(lhs / rhs))


def required_width(constants: Constants, m0: float, equation: str) -> float:
    """The smallest width m >= ``m0`` at which ``equation`` holds for some δ; ``inf`` if none
    up to :data:`MAX_WIDTH`.

    Each margin grows with m under the scaling of :meth:`Constants.at_width` (λ_0 ∝ m
    against right sides that grow like √m or m), so the width is found by bisection on
    log m (:func:`width_where`). Eq. (9) compares λ_0 ∝ m with 4(c_w² + c_u²)‖X‖_F² ∝ m: its
    margin tends to a constant, and no width satisfies it when that constant is below 1.
    """
    check_choice("equation", equation, EQUATIONS)
    m0 = check_positive("m0", m0)
    return width_where(lambda m: width_margin(constants, m0, m, equation), m0)


def eq9_margin_ceiling(constants: Constants, n: int) -> float:
    """(1 − ‖W(0)‖₂)²/(4n‖a(0)‖₂²): a bound on Eq. (9)'s margin at every δ and width (ours).

    λ_0 = λ_min(Z(0)ᵀZ(0)) ≤ ‖Z(0)‖_F²/n (the smallest of n eigenvalues is at most their
    mean), and Z = relu(WZ + UX) with relu 1-Lipschitz and relu(0) = 0 gives ‖Z‖_F ≤
    ‖W‖₂‖Z‖_F + ‖U‖₂‖X‖_F, so λ_0 ≤ ‖U‖₂²‖X‖_F²/(n(1 − ‖W‖₂)²).  The right side of Eq. (9)
    is 4(c_w² + c_u²)‖X‖_F² ≥ 4c_w²‖X‖_F² ≥ 4‖U‖₂²‖a‖₂²‖X‖_F²/(1 − ‖W‖₂)⁴ (δ > 0 only
    enlarges c_w).  Their ratio is the bound.  It holds for constants measured on a draw,
    and Section 3.2's scaling (:meth:`Constants.at_width`: λ_0 ∝ m, ‖U(0)‖₂² ∝ m) keeps it
    at every width: Eq. (9) needs ‖a(0)‖₂ < (1 − ‖W(0)‖₂)/(2√n) < 1/(2√n), which an
    N(0, 1/m) draw of a (‖a(0)‖₂ ≈ 1) does not give for any n ≥ 1.
    """
    n = check_int("n", n, min_value=1)
    return (1.0 - constants.W_norm) ** 2 / (4.0 * n * constants.a_norm**2)


def learning_rate(cond: Condition1, fraction: float = 0.5) -> float:
    """η = ``fraction`` × the bound of Eq. (10) (0 < fraction < 1 keeps η strictly below)."""
    if not isinstance(cond, Condition1):
        raise TypeError(f"`cond` must be a Condition1; got {type(cond).__name__}")
    fraction = check_real("fraction", fraction, low=0.0, high=1.0, low_inclusive=False,
                          high_inclusive=False)  # fmt: skip
    return fraction * cond.lr_bound


def lemma2_gradients(
    model: ReLUDEQ, X: torch.Tensor, y: torch.Tensor, Z: torch.Tensor, *, max_size: int = 4096
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """∇_W Φ, ∇_U Φ, ∇_a Φ by Lemma 2 / Eq. (3) with the explicit Kronecker Jacobian.

    J = I_{mn} − D (I_n ⊗ W), D = diag(vec 1[W Z + U X > 0]) (vec stacks columns), and
    R = (I_n ⊗ aᵀ) J⁻¹ D (the paper writes (a ⊗ I_n); this is the index order that makes
    ŷ = R-compatible with vec). vec ∇_W = (Z ⊗ I_m) Rᵀ r, vec ∇_U = (X ⊗ I_m) Rᵀ r,
    ∇_a = Z r, with r = ŷ − y = aᵀZ − y. Dense O((mn)³): for tiny problems only
    (m·n <= ``max_size``).
    """
    X, y = model.check_data(X, y)
    m, n = model.m, X.shape[1]
    Z = check_tensor("Z", Z, shape=(m, n))
    max_size = check_int("max_size", max_size, min_value=1)
    if m * n > max_size:
        raise ValueError(f"`m*n` must be <= max_size={max_size} for the dense closed form; "
                         f"got {m}*{n}={m * n}")  # fmt: skip
    W, U, a = (p.detach() for p in (model.W, model.U, model.a))
    Dvec = ((W @ Z + U @ X) > 0).T.reshape(-1).to(W.dtype)  # vec: columns stacked
    eye_n = torch.eye(n, dtype=W.dtype, device=W.device)
    J = torch.eye(m * n, dtype=W.dtype, device=W.device) - Dvec[:, None] * torch.kron(eye_n, W)
    R = torch.kron(eye_n, a[None, :]) @ torch.linalg.solve(J, torch.diag(Dvec))  # (n, mn)
    r = a @ Z - y
    Rt_r = R.T @ r  # (mn,)
    Im = torch.eye(m, dtype=W.dtype, device=W.device)
    grad_W = (torch.kron(Z, Im) @ Rt_r).reshape(m, m).T  # unvec (column-major)
    grad_U = (torch.kron(X, Im) @ Rt_r).reshape(-1, m).T
    return grad_W, grad_U, Z @ r


def pl_gram_lambda_min(model: ReLUDEQ, X: torch.Tensor, tol: float) -> float:
    """λ_min(H) of Eq. (4), H = H1 + H2 + H3 from the exact implicit Jacobian at the
    model's θ (:func:`deqlab.theory.ntk.pl_gram`, solves to ``tol``), by ``eigvalsh`` in
    the Gram's dtype; NaN where a solve fails (e.g. ‖W‖₂ >= 1)."""
    try:
        H = pl_gram(model, X, tol=tol)
    except SolverError:
        return math.nan
    return float(torch.linalg.eigvalsh(H)[0])


def condition1_margin(constants: Constants, m0: float, m: float) -> float:
    """max over δ of the smallest margin lhs/rhs of Eqs. (7)–(9) at one δ, the constants
    measured at width ``m0`` carried to width ``m`` (:meth:`Constants.at_width`); ≥ 1 iff
    Condition 1 holds at m for some δ (log-spaced grid of (0, 1 − ‖W(0)‖₂))."""
    k = constants.at_width(m0, m)
    delta = (1.0 - k.W_norm) * np.logspace(-9.0, math.log10(1.0 - 1e-9), _WIDTH_GRID)
    sides = condition1_sides(delta, k)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.stack([sides[key][0] / sides[key][1] for key in EQUATIONS])
    return float(np.max(np.min(np.nan_to_num(ratios, nan=0.0), axis=0)))


def width_where(margin: Callable[[float], float], low: float) -> float:
    """The smallest m ≥ ``low`` with ``margin(m) ≥ 1`` for a margin that grows with m, by
    bisection on log m to 1e-9; ``inf`` when none up to :data:`MAX_WIDTH`."""
    if margin(low) >= 1.0:
        return low
    if margin(MAX_WIDTH) < 1.0:
        return math.inf
    lo, hi = math.log(low), math.log(MAX_WIDTH)
    while hi - lo > 1e-9:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if margin(math.exp(mid)) >= 1.0 else (mid, hi)
    return math.exp(hi)


def condition1_width(constants: Constants, m0: float, low: float = 1.0) -> float:
    """The smallest width m ≥ ``low`` at which Condition 1 holds (all three at one δ), from
    ``constants`` measured at ``m0``: each margin at fixed δ grows with m under
    :meth:`Constants.at_width`, so bisection (:func:`width_where`) is exact."""
    return width_where(lambda m: condition1_margin(constants, m0, m), low)


def eq9_margin_bound(constants: Constants) -> float:
    """λ_0/(4‖U(0)‖₂²‖a(0)‖₂²‖X‖_F²): Eq. (9)'s margin stays below it at every width and δ
    under :meth:`Constants.at_width`.

    c_w = ρ̄_uρ̄_a/(1 − ρ̄_w)² > ‖U‖₂‖a‖₂ (ρ̄ = norm + δ, 1 − ρ̄_w < 1), so
    4(c_w² + c_u²)‖X‖_F² > 4‖U‖₂²‖a‖₂²‖X‖_F²; carried to width m both λ_0 and ‖U‖₂² gain
    the factor m/m₀, which cancels. With λ_0 = m₀λ*/2 (Theorem 2) it is
    m₀λ*/(8‖U(0)‖₂²‖a(0)‖₂²‖X‖_F²): below 1, no width satisfies Eq. (9).
    """
    k = constants
    return float(k.lambda0 / (4.0 * k.U_norm**2 * k.a_norm**2 * k.X_fro**2))


def theorem2_scale(n: int, lambda_star: float, t: float) -> float:
    """n²λ*⁻² log(n/(λ* t)), Theorem 2's width m = Ω(·) without the constant the paper does
    not give; inf if λ* = 0."""
    if lambda_star <= 0:
        return math.inf
    return n**2 / lambda_star**2 * math.log(n / (lambda_star * t))


def theorem2_depth(n: int, lambda_star: float, sigma_w2: float) -> float:
    """The depth l of the proof of Theorem 2 at which n(2√2σ_w)^l ≤ λ*/2 (Section 4.4, its
    O(·) constant taken as 1): l = log(2n/λ*)/log(1/(2√2σ_w)); inf if λ* = 0 or 2√2σ_w ≥ 1."""
    rate = 2 * math.sqrt(2 * sigma_w2)
    if lambda_star <= 0 or rate >= 1:
        return math.inf
    return math.log(2 * n / lambda_star) / math.log(1 / rate)

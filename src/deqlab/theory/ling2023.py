"""Ling et al. (2023): Condition 1 (Eqs. (7)–(9)), the learning-rate bound (Eq. (10)),
Lemma 2's closed-form gradient, and the three claims of Theorem 1 along a GD run.

Notation (Section 3.1): for 0 < δ < 1 − ‖W(0)‖₂,
ρ̄_w = ‖W(0)‖₂ + δ, ρ̄_u = ‖U(0)‖₂ + δ, ρ̄_a = ‖a(0)‖₂ + δ,
c_w = ρ̄_u ρ̄_a / (1 − ρ̄_w)², c_u = ρ̄_a / (1 − ρ̄_w), c_a = ρ̄_u / (1 − ρ̄_w).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from scipy.optimize import minimize_scalar

from deqlab._checks import check_int, check_positive, check_real, check_tensor
from deqlab.models.relu_deq import ReLUDEQ
from deqlab.theory.spectra import gram_lambda_min, spectral_norm

_GRID = 2048  # δ grid points before the bounded refinement


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
class Condition1:
    """Condition 1 and Eq. (10) evaluated at initialization for one δ."""

    delta: float
    lambda0: float
    W_norm: float
    U_norm: float
    a_norm: float
    X_fro: float
    residual_norm: float  # ‖ŷ(0) − y‖₂
    c_w: float
    c_u: float
    c_a: float
    eq7: Inequality
    eq8: Inequality
    eq9: Inequality
    lr_bound: float  # Eq. (10): η must be < lr_bound

    @property
    def holds(self) -> bool:
        return self.eq7.holds and self.eq8.holds and self.eq9.holds

    @property
    def failing(self) -> tuple[str, ...]:
        """Names of the inequalities that fail, e.g. ("Eq. (7)", "Eq. (8)")."""
        return tuple(q.name for q in (self.eq7, self.eq8, self.eq9) if not q.holds)

    def as_dict(self) -> dict:
        """Tidy row: every number, each side of each inequality and whether it holds."""
        row = {k: getattr(self, k) for k in (
            "delta", "lambda0", "W_norm", "U_norm", "a_norm", "X_fro", "residual_norm",
            "c_w", "c_u", "c_a", "lr_bound")}  # fmt: skip
        for q, key in ((self.eq7, "eq7"), (self.eq8, "eq8"), (self.eq9, "eq9")):
            row.update({f"{key}_lhs": q.lhs, f"{key}_rhs": q.rhs, f"{key}_holds": q.holds})
        row["holds"] = self.holds
        return row


def _evaluate(delta, lambda0, W_norm, U_norm, a_norm, X_fro, res) -> Condition1:
    rho_w, rho_u, rho_a = W_norm + delta, U_norm + delta, a_norm + delta
    c_w = rho_u * rho_a / (1.0 - rho_w) ** 2
    c_u = rho_a / (1.0 - rho_w)
    c_a = rho_u / (1.0 - rho_w)
    s_wu = c_w**2 + c_u**2
    eq7 = Inequality("Eq. (7)", lambda0, 4.0 / delta * max(c_w, c_u, c_a) * X_fro * res)
    eq8 = Inequality(
        "Eq. (8)", lambda0**1.5, 4.0 * (2.0 + math.sqrt(2.0)) / rho_a * s_wu * X_fro**2 * res
    )
    eq9 = Inequality("Eq. (9)", lambda0, 4.0 * s_wu * X_fro**2)
    lr_bound = min(2.0 / lambda0, 2.0 * s_wu / ((s_wu + c_a**2) ** 2 * X_fro**2))
    return Condition1(delta, lambda0, W_norm, U_norm, a_norm, X_fro, res, c_w, c_u, c_a,
                      eq7, eq8, eq9, lr_bound)  # fmt: skip


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
    ``delta=None`` picks the δ in (0, 1 − ‖W(0)‖₂) that makes Condition 1 easiest: it
    maximizes the smallest margin lhs/rhs of the three inequalities (Eq. (7) prefers a
    large δ, Eqs. (8)–(9) a small one), by a grid search refined with bounded Brent.
    Raises ValueError if ‖W(0)‖₂ >= 1 (no admissible δ).
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
    args = (
        gram_lambda_min(Z),
        W_norm,
        spectral_norm(model.U.detach()),
        float(model.a.detach().to(torch.float64).norm()),
        float(X.to(torch.float64).norm()),
        res,
    )
    upper = 1.0 - W_norm
    if delta is not None:
        delta = check_real("delta", delta, low=0.0, high=upper, low_inclusive=False,
                           high_inclusive=False)  # fmt: skip
        return _evaluate(delta, *args)

    def neg_min_log_margin(d: float) -> float:
        c = _evaluate(d, *args)
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
    return _evaluate(best, *args)


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


@dataclass(frozen=True)
class Theorem1Claims:
    """The three claims of Theorem 1 checked on the measured steps of a run.

    (i) ‖W(τ)‖₂ < 1; (ii) λ_τ > λ_0/2 (τ >= 1); (iii) Φ(τ) <= (1 − ηλ_0/2)^τ Φ(0).
    Each claim reports whether it held at every step where it was measured, the worst
    value (max ‖W‖₂, min λ_τ/λ_0, max Φ(τ)/bound(τ)), the first violating step (or -1),
    and how many steps were checked.
    """

    W_norm_below_1: bool
    max_W_norm: float
    W_first_violation: int
    W_checked: int
    lambda_above_half: bool
    min_lambda_ratio: float
    lambda_first_violation: int
    lambda_checked: int
    loss_below_bound: bool
    max_loss_ratio: float
    loss_first_violation: int
    loss_checked: int

    @property
    def holds(self) -> bool:
        return self.W_norm_below_1 and self.lambda_above_half and self.loss_below_bound

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__} | {"holds": self.holds}


def theorem1_claims(records: Sequence[Mapping], lr: float) -> Theorem1Claims:
    """Evaluate Theorem 1's claims on GD records (``deqlab.train.GDTrainer`` rows).

    Uses the fields ``step``, ``loss``, ``lambda_min`` and ``W_norm`` (NaN = not measured);
    λ_0 and Φ(0) come from the record with step 0, which must have both measured.
    """
    lr = check_positive("lr", lr)
    if not isinstance(records, Sequence) or not records:
        raise ValueError("`records` must be a non-empty sequence of GD records")
    first = records[0]
    if first.get("step") != 0 or not math.isfinite(first.get("lambda_min", math.nan)):
        raise ValueError("`records` must start with step 0 with `loss` and `lambda_min` measured")
    lambda0, loss0 = float(first["lambda_min"]), float(first["loss"])
    factor = 1.0 - lr * lambda0 / 2.0

    def check(values: list[tuple[int, float]], ok) -> tuple[bool, int, int]:
        bad = [s for s, v in values if not ok(v)]
        return not bad, (bad[0] if bad else -1), len(values)

    def measured(key: str, min_step: int = 0) -> list[tuple[int, float]]:
        rows = [(int(r["step"]), float(r.get(key, math.nan))) for r in records]
        return [(s, v) for s, v in rows if s >= min_step and not math.isnan(v)]

    W_vals = measured("W_norm")
    lam = [(s, v / lambda0) for s, v in measured("lambda_min", 1)]
    loss_ratio = [(s, _ratio_to_bound(v, s, factor, loss0)) for s, v in measured("loss")]
    w_ok, w_first, w_n = check(W_vals, lambda v: v < 1.0)
    l_ok, l_first, l_n = check(lam, lambda v: v > 0.5)
    p_ok, p_first, p_n = check(loss_ratio, lambda v: v <= 1.0)
    return Theorem1Claims(
        w_ok, max((v for _, v in W_vals), default=math.nan), w_first, w_n,
        l_ok, min((v for _, v in lam), default=math.nan), l_first, l_n,
        p_ok, max((v for _, v in loss_ratio), default=math.nan), p_first, p_n,
    )  # fmt: skip


def _ratio_to_bound(loss: float, step: int, factor: float, loss0: float) -> float:
    """Φ(τ) / ((1 − ηλ_0/2)^τ Φ(0)), in logs so that long runs do not underflow."""
    if loss <= 0:
        return 0.0
    if factor <= 0 or loss0 <= 0:
        return math.inf
    return math.exp(min(700.0, math.log(loss) - step * math.log(factor) - math.log(loss0)))

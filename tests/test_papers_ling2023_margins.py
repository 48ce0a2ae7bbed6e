"""Theorem 1's and the PL inequalities' (Eqs. (4)–(5)) quantities along GD runs
(deqlab/papers/ling2023/margins.py) on hand-made records: every bound measured after the
start, each decided by worst (a violation beside a missing step is kept)."""

import math

import pytest

from deqlab.papers.ling2023.margins import _ratio_to_bound, pl_margins, theorem1_margins
from deqlab.statements import Run


def _records(losses, lambdas, W_norms, dists=None):
    dists = dists or [math.nan] * len(losses)
    return Run.from_rows("run", [
        {"step": s, "loss": p, "lambda_min": lam, "W_norm": w, "W_norm_bound": w + 0.01,
         "dist_from_init": dist}
        for s, (p, lam, w, dist) in enumerate(zip(losses, lambdas, W_norms, dists, strict=True))
    ])  # fmt: skip


def test_theorem1_margins_leave_out_step_zero_and_measure_every_bound():
    lr, lam0 = 0.1, 2.0  # contraction factor 1 − ηλ_0/2 = 0.9
    losses = [1.0, 0.85, 0.75, 0.65]
    good = _records(losses, [lam0, 1.5, math.nan, 1.1], [0.5, 0.6, math.nan, 0.7],
                    [0.0, 0.1, math.nan, 0.3])  # fmt: skip
    g = theorem1_margins(good, lr)
    assert (g.lambda0, g.loss0, g.last_step) == (2.0, 1.0, 3)
    assert g.max_W_norm == 0.7 and g.max_W_norm_bound == pytest.approx(0.71)
    assert g.min_lambda_ratio == pytest.approx(0.55)
    # max over τ ≥ 1 of Φ(τ)/0.9^τ: 0.85/0.9, 0.75/0.81, 0.65/0.729 — not 1 at τ = 0
    assert g.max_loss_ratio == pytest.approx(0.85 / 0.9)
    assert g.max_step_ratio == pytest.approx(0.75 / (0.9 * 0.85))
    assert g.max_drift == 0.3 and g.bound_factor == pytest.approx(0.9**3)
    # below the bound of (iii) at every step, yet one step contracts by less than 0.9
    mixed = theorem1_margins(_records([1.0, 0.85, 0.8], [lam0] * 3, [0.5] * 3), lr)
    assert mixed.max_loss_ratio < 1 < mixed.max_step_ratio == pytest.approx(0.8 / 0.765)

    bad = _records([1.0, 0.95, 0.8, 0.79], [lam0, 0.9, 1.5, 0.5], [0.5, 1.01, 0.9, 1.2])
    b = theorem1_margins(bad, lr)
    assert b.max_W_norm == 1.2 and b.min_lambda_ratio == 0.25
    assert b.max_loss_ratio > 1 and b.max_step_ratio == pytest.approx(0.79 / 0.72)
    assert math.isnan(b.max_drift)


def test_theorem1_margins_are_nan_without_a_step_after_the_start():
    only = theorem1_margins(_records([1.0], [2.0], [0.5], [0.0]), 0.1)
    assert only.last_step == 0 and only.bound_factor == 1.0
    for field in ("max_W_norm", "min_lambda_ratio", "max_loss_ratio", "max_step_ratio",
                  "max_drift"):  # fmt: skip
        assert math.isnan(getattr(only, field)), field
    # η λ_0 / 2 > 1: at an odd τ the bound (1 − ηλ_0/2)^τ Φ(0) is negative, so any positive
    # loss breaks it, a measured violation (Eq. (10) is unmet there: Theorem 1 is NOT
    # APPLICABLE); at an even τ the bound is positive again: (−0.5)² = 0.25
    over = theorem1_margins(_records([1.0, 0.5], [30.0, 30.0], [0.5, 0.5]), 0.1)
    assert over.max_loss_ratio == math.inf
    assert _ratio_to_bound(0.2, 2, -0.5, 1.0) == pytest.approx(0.8)
    assert _ratio_to_bound(0.2, 3, -0.5, 1.0) == math.inf
    # an overflowed loss is above every bound; an overflowed Φ(0) bounds nothing
    assert _ratio_to_bound(math.inf, 2, 0.9, 1.0) == math.inf
    assert math.isnan(_ratio_to_bound(0.5, 1, 0.9, math.inf))


def test_theorem1_margins_reject_bad_records():
    with pytest.raises(ValueError, match="must start with step 0"):
        theorem1_margins(_records([1.0], [math.nan], [0.5]), 0.1)
    with pytest.raises(ValueError, match="at least one step"):
        theorem1_margins(Run("empty"), 0.1)


def _pl_records(grad_sq, lambdas, h_lambdas, losses=None, bounds=None):
    """GD records with ‖∇Φ‖² = ``grad_sq``, λ_τ, λ_min(H(τ)) (NaN: not formed), Φ(τ) = 1,
    the bound of ‖W(τ)‖₂ and Lanczos ‖W(τ)‖₂ = bound − 0.1 at even steps."""
    n = len(grad_sq)
    losses = losses or [1.0] * n
    bounds = bounds or [0.5] * n
    return Run.from_rows("run", [
        {"step": s, "loss": p, "grad_norm": math.sqrt(g), "lambda_min": lam, "H_lambda_min": h,
         "W_norm_bound": b, "W_norm": b - 0.1 if s % 2 == 0 else math.nan}
        for s, (g, lam, h, p, b) in enumerate(zip(grad_sq, lambdas, h_lambdas, losses, bounds,
                                                  strict=True))
    ])  # fmt: skip


def test_pl_margins_read_eqs_4_and_5_over_the_steps_after_the_start():
    # τ = 0 violates everything and is left out; H formed at τ = 2 only
    records = _pl_records([0.1, 9.0, 8.0, 6.0], [1.0, 2.0, 2.0, 2.0],
                          [5.0, math.nan, 3.0, math.nan], bounds=[1.5, 0.6, 0.7, 0.65])  # fmt: skip
    g = pl_margins(records)
    assert g.min_eq4 == pytest.approx(8.0 / (2 * 3.0))  # τ = 2: 8 / (2·3·1)
    assert g.min_h_ratio == pytest.approx(3.0 / 2.0)
    assert g.min_eq5 == pytest.approx(6.0 / (2 * 2.0))  # τ = 3
    assert (g.h_steps, g.eq5_steps) == ((2,), (1, 2, 3))
    assert g.max_W_norm_bound == 0.7 and g.max_W_norm == pytest.approx(0.6)  # τ = 2


def test_pl_margins_fall_below_one_on_each_violation():
    eq4 = pl_margins(_pl_records([1.0, 5.0], [1.0, 1.0], [1.0, 3.0]))
    assert eq4.min_eq4 == pytest.approx(5 / 6) and eq4.min_eq5 == pytest.approx(2.5)
    assert eq4.min_h_ratio == 3
    below = pl_margins(_pl_records([1.0, 5.0], [1.0, 2.0], [1.0, 1.5]))
    assert below.min_h_ratio == 0.75 and below.min_eq4 > 1 and below.min_eq5 > 1
    eq5 = pl_margins(_pl_records([1.0, 3.0], [1.0, 2.0], [1.0, math.nan]))
    assert eq5.min_eq5 == pytest.approx(0.75) and math.isnan(eq5.min_eq4) and eq5.h_steps == ()
    # a right side <= 0 (Φ = 0) holds; λ_min(H) < λ_τ <= 0 is a (negative) failure
    zero = pl_margins(_pl_records([1.0, 0.0], [1.0, 2.0], [1.0, 3.0], losses=[1.0, 0.0]))
    assert math.isnan(zero.min_eq4) and math.isnan(zero.min_eq5)  # holds trivially: no margin
    neg = pl_margins(_pl_records([1.0, 1.0], [1.0, -1e-12], [1.0, -1e-9]))
    assert neg.min_h_ratio < 0


def test_pl_margins_are_nan_without_a_step_after_the_start():
    only = pl_margins(_pl_records([1.0], [1.0], [2.0]))
    for field in ("min_eq4", "min_h_ratio", "min_eq5", "max_W_norm_bound", "max_W_norm"):
        assert math.isnan(getattr(only, field)), field
    assert math.isnan(pl_margins(Run("empty")).min_eq5)

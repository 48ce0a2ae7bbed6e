"""Kawaguchi (2021) statement builders (papers/kawaguchi2021/corollaries.py) and the
hypotheses that guard them (hypotheses.py): Corollaries 1–2, Theorem 1 and the accuracy
times of Eqs. (9)–(12) on synthetic trajectories, each in both directions (a trajectory
where it holds, one where it must not, and no data)."""

import math

import pytest

from deqlab.papers.kawaguchi2021 import corollaries
from deqlab.papers.kawaguchi2021.corollaries import (
    bound_checks,
    faster_rate_observation,
    lambda_bound_check,
)
from deqlab.papers.kawaguchi2021.hypotheses import (
    COROLLARY_1,
    COROLLARY_2,
    gamma_hypothesis,
    hypotheses,
    kappa_hypothesis,
)
from deqlab.papers.kawaguchi2021.theory import lambda_lower_bound
from deqlab.statements import Kind, Run, Source, Verdict, runs_from_rows

PASS, FAIL, NM, NA = Verdict.PASS, Verdict.FAIL, Verdict.NOT_MEASURED, Verdict.NOT_APPLICABLE


def _trajectory(rate, bound_rate, *, key="t", steps=11, loss_star=1.0, gap0=10.0, **constants):
    """L_τ = L* + g₀e^{−rate·τ} under bounds L* + g₀e^{−bound_rate·τ} (dependent) and
    L* + g₀e^{−bound_rate·τ/2} (independent), with hypothesis constants that hold."""
    base = {"task": key, "loss_star": loss_star, "lambda_T": 1.0, "b_norm1": 1.0,
            "rank_ratio": 0.5, "rank_tol": 1e-13, "pl_ratio": 2.0, "sharpness_start": 10.0,
            "sharpness_end": 10.0, **constants}  # fmt: skip
    return [
        {**base, "step": s, "loss": loss_star + gap0 * math.exp(-rate * s),
         "bound_dependent": loss_star + gap0 * math.exp(-bound_rate * s),
         "bound_independent": loss_star + gap0 * math.exp(-bound_rate * s / 2)}
        for s in range(steps)
    ]  # fmt: skip


def _checks(rows, corollary=COROLLARY_1, lr=0.01, gamma=0.5, **kw):
    runs = runs_from_rows(rows)
    guards = hypotheses(corollary, runs, lr=lr, gamma=gamma, **kw)
    return guards, bound_checks(corollary, runs, guards, lr=lr)


def test_bound_check_passes_with_the_decay_ratio_after_the_start():
    """The ratio of decay exponents is rate/bound_rate at every τ ≥ 1 (τ = 0 is a tie)."""
    guards, (dependent, independent) = _checks(_trajectory(0.3, 0.2))
    assert all(g.verdict is Verdict.HOLDS for g in guards)
    assert dependent.verdict is PASS and dependent.value == pytest.approx(1.5)
    assert independent.verdict is PASS and independent.value == pytest.approx(3.0)
    assert dependent.margin == pytest.approx(0.5)


def test_bound_check_fails_on_a_violating_trajectory():
    _, (dependent, independent) = _checks(_trajectory(0.15, 0.2))
    assert dependent.verdict is FAIL and dependent.value == pytest.approx(0.75)
    assert independent.verdict is PASS  # 0.15 > 0.2 / 2
    _, (dependent, independent) = _checks(_trajectory(0.08, 0.2))  # 0.08 < 0.2 / 2
    assert independent.verdict is FAIL and independent.value == pytest.approx(0.8)
    assert "initialization-independent" in independent.name and dependent.verdict is FAIL
    _, (_, independent) = _checks(_trajectory(0.08, 0.2), corollary=COROLLARY_2, radius=10.0)
    assert independent.name.startswith("Corollary 2") and independent.verdict is FAIL
    one_step = _trajectory(0.3, 0.2)
    one_step[5]["loss"] = one_step[5]["bound_dependent"] + 1e-6  # above by more than rounding
    assert _checks(one_step)[1][0].verdict is FAIL


def test_a_loss_that_rises_above_the_bound_and_then_overflows_fails():
    """A diverging DELM run: the loss rises above both bounds, then becomes inf (the last
    recorded step), and beside it a run that was not measured at all: Corollary 1 FAILs
    with both λ_T (the finite violation is measured), it is not left NOT MEASURED."""
    rows = _trajectory(0.3, 0.2)
    for r in rows[6:]:
        r["loss"] = r["bound_independent"] * 2.0
    rows.append({**rows[-1], "step": 11, "loss": math.inf})
    blank = [{**r, "task": "u", "loss": math.nan} for r in _trajectory(0.3, 0.2)]
    guards, checks = _checks(rows + blank)
    assert all(g.verdict is Verdict.HOLDS for g in guards[:3])
    assert [c.verdict for c in checks] == [FAIL, FAIL]
    assert "not measured (a non-finite loss or bound) at" in checks[0].detail


def test_bound_check_rounding_ties_and_unresolvable_steps():
    """Above the bound by rounding only: a tie (ratio 1); at L*: holds, not counted."""
    rows = _trajectory(0.3, 0.2)
    rows[3]["loss"] = rows[3]["bound_dependent"] * (1 + 1e-12)
    (dependent, _) = _checks(rows)[1]
    assert dependent.verdict is PASS and dependent.value == pytest.approx(1.0)
    converged = _trajectory(0.3, 0.2)
    for r in converged[5:]:
        r["loss"] = r["loss_star"]  # at L*: holds, but its exponent is not resolvable
    (dependent, _) = _checks(converged)[1]
    assert dependent.value == pytest.approx(1.5) and "6 steps where" in dependent.detail
    at_optimum = _trajectory(80.0, 60.0)  # both reach L* within float64 after one step
    (dependent, _) = _checks(at_optimum)[1]
    assert dependent.verdict is NM and "resolvable" in dependent.detail


@pytest.mark.parametrize(
    "edit",
    [
        lambda rows: rows.__setitem__(4, {**rows[4], "loss": math.nan}),
        lambda rows: rows.pop(0),  # no step 0: L₀ unknown
        lambda rows: rows.clear(),
    ],
)
def test_bound_check_is_not_measured_without_data(edit):
    rows = _trajectory(0.3, 0.2)
    edit(rows)
    _, checks = _checks(rows)
    assert all(c.verdict is NM for c in checks)


@pytest.mark.parametrize(
    ("constants", "kw", "unmet", "needs"),
    [
        ({"rank_ratio": 0.0}, {}, "rank(Φ) = min(n, m)", "rank min(n, m)"),
        ({"pl_ratio": 0.5}, {}, "the loss is the square loss", "PL constant"),
        ({"sharpness_end": 500.0}, {}, "gradient descent follows", "η ≤ 0.002"),
        ({}, {"gamma": 1.5}, "γ ∈ (0, 1)", "γ < 1"),
    ],
)
def test_a_violated_hypothesis_makes_corollary_1_not_applicable(constants, kw, unmet, needs):
    guards, checks = _checks(_trajectory(0.15, 0.2, **constants), **kw)
    failing = [g for g in guards if g.verdict is Verdict.UNMET]
    assert [g.name[: len(unmet)] for g in failing] == [unmet]
    assert all(c.verdict is NA and needs in c.needs for c in checks)
    assert all(c.value is not None for c in checks)  # the measurement is kept


def test_corollary_2_has_the_radius_hypothesis():
    rows = _trajectory(0.3, 0.2, b_norm1=2.0)
    guards, checks = _checks(rows, COROLLARY_2)
    assert [g.name for g in guards][3] == "‖B_t‖₁ < (1 − γ)R for all t ∈ [0, T]"
    assert all(c.verdict is PASS for c in checks)
    guards, checks = _checks(rows, COROLLARY_2, radius=3.0)  # (1 − γ)R = 1.5 < 2
    assert guards[3].verdict is Verdict.UNMET and all(c.verdict is NA for c in checks)


def test_a_violation_beside_an_unmeasured_step_is_unmet_not_unmeasured():
    """One rule over runs (deqlab.statements.worst): ‖B_t‖₁ above (1 − γ)R at one step and
    NaN at another is UNMET (a measured violation is never hidden), and so is λ_T below
    Theorem 1's bound next to a NaN; with no violation the NaN leaves it NOT MEASURED."""
    rows = _trajectory(0.3, 0.2)
    rows[2]["b_norm1"], rows[5]["b_norm1"] = math.nan, 9.0
    guards, _ = _checks(rows, corollary=COROLLARY_2, radius=10.0)  # (1 − γ)R = 5
    radius = next(g for g in guards if g.name.startswith("‖B_t‖₁"))
    assert radius.verdict is Verdict.UNMET and radius.value == 9.0
    rows[5]["b_norm1"] = 1.0
    guards, _ = _checks(rows, corollary=COROLLARY_2, radius=10.0)
    assert next(g for g in guards if g.name.startswith("‖B_t‖₁")).verdict is NM
    low = _trajectory(0.3, 0.2, lambda_T=1.0)
    low[1]["lambda_T"], low[4]["lambda_T"] = math.nan, 0.01
    check = lambda_bound_check(runs_from_rows(low), [gamma_hypothesis(0.5)], m=4, gamma=0.5)
    assert check.verdict is FAIL


def test_an_unmeasured_hypothesis_leaves_the_corollary_not_measured():
    _, checks = _checks(_trajectory(0.3, 0.2, sharpness_end=math.nan))
    assert all(c.verdict is NM for c in checks)


def _accuracy(rows, *guards, eps_rel=math.exp(-2.5)):
    """Eq. (10) on ``rows`` with m = 1, γ = 0.5, η = 0.01: T_ε = 2.8125/κ (log(1/ε_rel) = 2.5)."""
    runs = runs_from_rows(rows)
    return corollaries.accuracy_time_check(
        runs, list(guards), equation="Eq. (10)", lr=0.01, m=1, gamma=0.5, eps_rel=eps_rel
    )


@pytest.mark.parametrize(
    ("rate", "kappa", "verdict", "value"),
    [
        (1.0, 56.25, PASS, math.exp(-2.5)),  # T_ε = 0.05 (step 5): gap/ε = e^{-5}/e^{-2.5}
        (0.1, 56.25, FAIL, math.exp(2)),  # slow decay: at step 5 gap/ε = e^{-0.5}/e^{-2.5}
        (1.0, 1.0, NM, None),  # T_ε = 2.8: no step of the 0.1-long run reaches it
    ],
)
def test_accuracy_time_check_in_both_directions(rate, kappa, verdict, value):
    """Eqs. (9)–(12): after T_ε the gap is at most ε; a run that never gets there is not
    measured; the predicted and measured times are reported."""
    found = _accuracy(_trajectory(rate, rate, kappa=kappa))
    assert found.verdict is verdict and found.kind is Kind.THEOREM
    assert (found.value is None) if value is None else found.value == pytest.approx(value)
    assert "T_ε = " in (found.measured if value else found.detail)
    if verdict is PASS:
        assert "measured time to ε 0.03 = 0.6 × T_ε" in found.measured
        assert "slack: every run reached ε at least 1.67× earlier than T_ε" in found.detail
    else:
        assert "slack" not in found.detail
    nan_rows = _trajectory(rate, rate, kappa=kappa)
    nan_rows[7]["loss"] = math.nan  # after T_ε: a NaN beside a violation does not hide it
    assert _accuracy(nan_rows).verdict is (NM if verdict is PASS else verdict)


def test_accuracy_time_needs_a_positive_kappa():
    """τ = 0 and R = ∞ give κ = 0: the hypothesis is unmet and Eqs. (11)–(12) not applicable."""
    rows = _trajectory(1.0, 1.0, kappa=0.0)
    runs = runs_from_rows(rows)
    positive = kappa_hypothesis(runs, tau=0.0, radius=math.inf)
    assert positive.verdict is Verdict.UNMET and "τ > 0" in positive.needs
    assert _accuracy(rows, positive).verdict is NA
    held = kappa_hypothesis(runs_from_rows(_trajectory(1, 1, kappa=56.25)),
                                        tau=0.1, radius=math.inf)  # fmt: skip
    assert held.verdict is Verdict.HOLDS
    assert corollaries.accuracy_equation("square", 0.0, math.inf) == "Eq. (10)"
    assert corollaries.accuracy_equation("logistic", 0.1, math.inf) == "Eq. (11)"
    assert corollaries.accuracy_equation("logistic", 0.0, 3.0) == "Eq. (12)"
    assert corollaries.accuracy_equation("logistic", 0.1, 3.0).startswith("Eq. (9)")


def test_lambda_bound_and_faster_rate_in_both_directions():
    m, gamma = 4, 0.5
    lam = lambda_lower_bound(m, gamma)
    guard = [gamma_hypothesis(gamma)]
    source = Source("kawaguchi2021", "Figure 3")
    for lam_T, verdict, faster in (
        (3 * lam, PASS, PASS),
        (lam, PASS, FAIL),
        (0.5 * lam, FAIL, FAIL),
    ):
        rows = _trajectory(0.3, 0.2, lambda_T=lam_T)
        check = lambda_bound_check(runs_from_rows(rows), guard, m=m, gamma=gamma)
        assert check.verdict is verdict and check.value == pytest.approx(lam_T / lam)
        run = Run.from_rows("t", rows)
        assert faster_rate_observation(run, source, m=m, gamma=gamma).verdict is faster
    nan_rows = _trajectory(0.3, 0.2, lambda_T=math.nan)
    assert lambda_bound_check(runs_from_rows(nan_rows), guard, m=m, gamma=gamma).verdict is NM
    assert lambda_bound_check({}, guard, m=m, gamma=gamma).verdict is NM
    assert faster_rate_observation(None, source, m=m, gamma=gamma).verdict is NM

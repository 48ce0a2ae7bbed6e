"""hieu2022 statement builders (papers/hieu2022/claims.py): the width fit, the
hypotheses, Theorem 3.3.5's checks, Proposition 3 and Lemmas 3.3.2–3.3.4,
each in both directions on made-up numbers."""

import math

import pytest

from deqlab.papers.hieu2022.claims import (
    ball_check,
    condition_hypothesis,
    lemma_check,
    lemma_statements,
    proposition_3_check,
    rate_check,
    sigma_check,
    step_size_hypothesis,
    untrained,
)
from deqlab.papers.hieu2022.mondeq import Inequality
from deqlab.papers.hieu2022.width_fit import WidthFit
from deqlab.statements import Kind, Run, Verdict

PASS, FAIL, NA, NM = Verdict.PASS, Verdict.FAIL, Verdict.NOT_APPLICABLE, Verdict.NOT_MEASURED
HOLDS, UNMET = Verdict.HOLDS, Verdict.UNMET


def _ineq(lhs, rhs, name="Eq. (3.16)"):
    return Inequality(name=name, lhs=lhs, relation=">=", rhs=rhs, holds=lhs >= rhs)


def _by_name(statements):
    return {s.name: s for s in statements}


def test_width_fit_extrapolates_a_power_law_to_the_width_where_the_margin_reaches_one():
    fit = WidthFit.of([10, 40], [1e-4 * 10**2, 1e-4 * 40**2])  # lhs/rhs = 1e-4 n²
    assert fit.slope == pytest.approx(2.0) and fit.intercept == pytest.approx(math.log(1e-4))
    assert fit.needs().startswith("n ≥ 100, if lhs/rhs ∝ n^2.00 as fitted over n = 10, 40")
    assert WidthFit.of([10, 40], [0.5, 0.1]).needs().startswith("no width: ")
    beyond_floats = WidthFit.of([10, 40], [1e-300, 1.1e-300]).needs()  # n = e^10049.7
    assert beyond_floats.startswith("n ≥ 3.35·10⁴³⁶⁴, if")
    assert WidthFit.of([10], [0.5]) is None
    assert WidthFit.of([10, 40], [0.5, math.nan]) is None


def test_width_fit_uses_only_widths_far_above_the_sample_count():
    """At `quick` (N = 30), n = 30 is near-singular: the slope comes from n ≥ 4N only."""
    ratios = [1e-9, 1e-5, 2e-5, 4.6e-5]  # a jump at n = N, then ∝ n^1.2
    fit = WidthFit.of([30, 60, 120, 240], ratios, n_samples=30)
    assert fit.widths == (120, 240) and fit.slope == pytest.approx(math.log2(2.3))
    assert "(widths n ≥ 4N only)" in fit.needs()
    assert WidthFit.of([30, 60, 120, 240], ratios).slope > 4  # every width: the jump dominates
    assert WidthFit.of([30, 60, 120], ratios[:3], n_samples=30) is None  # one width ≥ 4N


def test_condition_hypothesis_holds_or_says_what_width_would_satisfy_it():
    fit = WidthFit.of([10, 40], [0.01, 0.16])
    held = condition_hypothesis(_ineq(3.0, 2.0), width=40, condition="Condition 2", fit=fit, m=0.2)
    assert held.kind is Kind.HYPOTHESIS and held.verdict is HOLDS
    assert held.value == pytest.approx(1.5) and held.needs == ""
    unmet = condition_hypothesis(_ineq(1.0, 8.0), width=40, condition="Condition 2", fit=fit, m=0.2)
    assert unmet.verdict is UNMET and unmet.margin == pytest.approx(-0.875)
    assert unmet.needs.startswith("n ≥ 100, if lhs/rhs ∝ n^2.00")
    assert unmet.name == "Condition 2, Eq. (3.16) at n = 40"
    alone = condition_hypothesis(_ineq(1.0, 8.0), width=40, condition="Condition 1", fit=None, m=1)
    assert alone.needs == "a sweep over widths n ≥ 4N to extrapolate"
    big_m = condition_hypothesis(
        _ineq(1.0, 8.0, "Eq. (3.18)"), width=40, condition="Condition 2", fit=fit, m=0.3
    )
    assert big_m.needs.startswith("no width: m²N = 0.09 ≥ 1/20")
    # m = 0.2 < 1/√20 but N = 30: m²N = 1.2, as at `quick` — no width either (was "n ≥ …")
    many = condition_hypothesis(
        _ineq(1.0, 8.0, "Eq. (3.18)"),
        width=40,
        condition="Condition 2",
        fit=fit,
        m=0.2,
        n_samples=30,
    )
    assert many.needs.startswith("no width: m²N = 1.2 ≥ 1/20") and "n ≥" not in many.needs
    few = condition_hypothesis(
        _ineq(1.0, 8.0, "Eq. (3.18)"),
        width=40,
        condition="Condition 2",
        fit=fit,
        m=0.1,
        n_samples=4,
    )
    assert few.needs.startswith("n ≥ 100, if lhs/rhs ∝ n^2.00")  # m²N = 0.04 < 1/20
    nothing = condition_hypothesis(_ineq(1.0, 0.0), width=4, condition="Condition 2", fit=None, m=1)
    assert nothing.verdict is NM


def test_step_size_hypothesis_states_how_many_times_the_bound_eta_is():
    assert step_size_hypothesis(1e-3, 2e-3, width=8).verdict is HOLDS
    assert step_size_hypothesis(2e-3, 2e-3, width=8).verdict is HOLDS
    over = step_size_hypothesis(0.58, 1e-3, width=8)
    assert over.verdict is UNMET and "580× the bound" in over.measured
    assert over.needs == "η ≤ 0.001, 580× smaller than the run's"


def test_rate_check_takes_the_worst_step_ratio_against_the_per_step_factor():
    passed = rate_check([1.0, 0.5, 0.25, 0.2], 0.9, width=4)
    assert passed.kind is Kind.THEOREM and passed.verdict is PASS
    assert passed.value == pytest.approx(0.8) and "(step 3)" in passed.measured
    assert "halves after 7 steps" in passed.detail and "0.729·L(0)" in passed.detail
    failed = rate_check([1.0, 0.5, 0.6], 0.9, width=4)  # one increase
    assert failed.verdict is FAIL and failed.value == pytest.approx(1.2)
    at_zero = rate_check([1.0, 0.1], 0.0, width=4)  # η = 4/λ₀²: the theorem promises L(1) = 0
    assert at_zero.verdict is FAIL
    gap = rate_check([1.0, math.nan, 0.5, 0.4], 0.9, width=4)  # a NaN step: not measured
    assert gap.verdict is NM and "not finite" in gap.detail
    beside = rate_check([1.0, math.nan, 0.5, 0.6], 0.9, width=4)  # a violation beside it
    assert beside.verdict is FAIL and beside.value == pytest.approx(1.2)
    assert rate_check([1.0], 0.9, width=4).verdict is NM
    assert rate_check([1.0, math.nan], 0.9, width=4).verdict is NM


def test_ball_and_sigma_checks_use_the_steps_after_the_start():
    radii = dict.fromkeys("ABUu", 2.0)
    inside = {p: [0.0, 0.5, 1.0] for p in "ABUu"}
    assert ball_check(inside, radii, width=4).verdict is PASS
    outside = {**inside, "U": [0.0, 0.5, 3.0]}
    failed = ball_check(outside, radii, width=4)
    assert failed.verdict is FAIL and failed.value == pytest.approx(1.5)
    assert "‖U(k) − U(0)‖_F" in failed.measured and "(step 2)" in failed.measured
    start_only = {**inside, "A": [9.0, 0.5, 1.0]}  # k = 0 is not a step after the start
    assert ball_check(start_only, radii, width=4).verdict is PASS
    assert ball_check({p: [0.0] for p in "ABUu"}, radii, width=4).verdict is NM
    assert sigma_check([2.0, 1.5, 1.2], 2.0, width=4).verdict is PASS
    low = sigma_check([2.0, 1.5, 0.6], 2.0, width=4)
    assert low.verdict is FAIL and low.value == pytest.approx(0.3)
    assert sigma_check([0.1, 1.5], 2.0, width=4).verdict is PASS  # k = 0 excluded
    assert sigma_check([2.0, math.nan], 2.0, width=4).verdict is NM
    with pytest.raises(ValueError, match="`lambda0` must be > 0"):
        sigma_check([1.0, 1.0], 0.0, width=4)


def test_untrained_names_the_models_below_the_accuracy():
    assert untrained({"deq": 0.9, "repeat6": 0.5}) == ""
    why = untrained({"deq": 0.9, "repeat6": 0.3, "repeat11": None})
    assert "repeat6: 0.3, repeat11: —" in why and "deq" not in why


def test_proposition_3_compares_the_forward_backward_operator_with_its_bound():
    assert proposition_3_check(0.9, 0.95, alpha=0.1, width=8).verdict is PASS
    assert proposition_3_check(0.97, 0.95, alpha=0.1, width=8).verdict is FAIL
    assert proposition_3_check(math.nan, 0.95, alpha=0.1, width=8).verdict is NM


def test_lemma_check_takes_the_worst_ratio_and_skips_empty_pairs():
    passed = lemma_check("lemma3_3_3", [1.0, 2.0], [4.0, 4.0], width=8, run="flow")
    assert passed.kind is Kind.THEOREM and passed.verdict is PASS
    assert passed.value == pytest.approx(0.5) and "(the 2nd)" in passed.measured
    assert passed.name == "Lemma 3.3.3 along the flow at n = 8"
    failed = lemma_check("lemma3_3_2", [1.0, 5.0], [4.0, 4.0], width=8, run="GD run")
    assert failed.verdict is FAIL and failed.value == pytest.approx(1.25)
    at_start = lemma_check("lemma3_3_4", [0.0, 1.0], [0.0, 2.0], width=8, run="flow")
    assert at_start.value == pytest.approx(0.5) and "over 1 measured steps" in at_start.measured
    assert lemma_check("lemma3_3_4", [0.0], [0.0], width=8, run="flow").verdict is NM


NAN = math.nan


def test_lemma_statements_read_the_columns_of_the_measured_steps():
    runs = {
        8: Run(
            "n8", (0, 1), {"lemma3_3_3_lhs": (1.0, math.nan), "lemma3_3_3_rhs": (2.0, math.nan)}
        ),
        16: Run("n16", (0,), {"lemma3_3_3_lhs": (3.0,), "lemma3_3_3_rhs": (2.0,)}),
    }  # step 1 at n = 8 has no lemma columns: not a measured step
    found = _by_name(lemma_statements(runs, run="flow"))
    assert len(found) == 2 * 4
    assert found["Lemma 3.3.3 along the flow at n = 8"].verdict is PASS
    assert found["Lemma 3.3.3 along the flow at n = 16"].verdict is FAIL
    assert found["Lemma 3.3.2 along the flow at n = 8"].verdict is NM

"""The proof of Theorem 3.3.5 (thesis, Section 3.3.3) as statements
(``deqlab.papers.hieu2022.gd_proof``): the theorem inside its hypotheses, the
premises of the induction, its steps as implications, and Lemmas 3.3.6–3.3.10 on made-up
numbers, in both directions."""

import math

import pytest

from deqlab.papers.hieu2022.claims import condition_hypothesis
from deqlab.papers.hieu2022.gd_proof import GDTrace, premise, theorem_3_3_5
from deqlab.papers.hieu2022.mondeq import Inequality
from deqlab.statements import Kind, Source, Verdict, implication, measure

PASS, FAIL, NA, NM = Verdict.PASS, Verdict.FAIL, Verdict.NOT_APPLICABLE, Verdict.NOT_MEASURED
HOLDS, UNMET = Verdict.HOLDS, Verdict.UNMET
OURS_THEOREM = Source("hieu2022", "a made-up implication")


def _ineq(lhs, rhs, name="Eq. (3.16)"):
    return Inequality(name=name, lhs=lhs, relation=">=", rhs=rhs, holds=lhs >= rhs)


def _by_name(statements):
    return {s.name: s for s in statements}


def _trace(eta, losses):
    return GDTrace(
        width=8,
        eta=eta,
        eta_max=1e-2,
        lambda0=2.0,
        radii=dict.fromkeys("ABUu", 1.0),
        losses=losses,
        sigmas=[2.0] * len(losses),
        distances={p: [0.1 * k for k in range(len(losses))] for p in "ABUu"},
    )


def test_theorem_3_3_5_is_checked_only_inside_its_hypotheses():
    conditions = [_ineq(2.0, 1.0, f"Eq. (3.{k})") for k in (16, 17, 18)]
    fits = dict.fromkeys(c["name"] for c in conditions)
    inside = _by_name(theorem_3_3_5(_trace(1e-3, [1.0, 0.5, 0.6]), conditions, fits=fits, m=0.1))
    assert inside["Theorem 3.3.5: L(k+1) ≤ (1 − ηλ₀²/4)·L(k) at n = 8"].verdict is FAIL
    assert {s.verdict for s in inside.values() if s.kind is Kind.HYPOTHESIS} == {HOLDS}
    outside = theorem_3_3_5(_trace(0.5, [1.0, 0.5, 0.25]), conditions, fits=fits, m=0.1)
    checks = [s for s in outside if s.kind is Kind.THEOREM]
    assert len(checks) == 3 and {s.verdict for s in checks} == {NA}
    assert all("50× smaller than the run's" in s.needs and s.value is not None for s in checks)


def test_a_step_beyond_4_over_lambda0_squared_leaves_theorem_3_3_5_not_applicable():
    """η = 2 > 4/λ₀² = 1: the rate 1 − ηλ₀²/4 = −1 is no bound (it was a ValueError)."""
    conditions = [_ineq(2.0, 1.0, f"Eq. (3.{k})") for k in (16, 17, 18)]
    fits = dict.fromkeys(c["name"] for c in conditions)
    found = _by_name(theorem_3_3_5(_trace(2.0, [1.0, 3.0, 9.0]), conditions, fits=fits, m=0.1))
    rate = found["Theorem 3.3.5: L(k+1) ≤ (1 − ηλ₀²/4)·L(k) at n = 8"]
    assert rate.verdict is NA and rate.value is None and "η > 4/λ₀²" in rate.detail
    assert "200× smaller than the run's" in rate.needs


# --- the induction of Theorem 3.3.5: premises and implications ---------------------------


def _sided(losses, sides, *, radius=1.0, eta=1e-3):
    """A trace with λ₀ = 2, η = 1e-3 (factor 0.999), the distances 0.1·k and ``sides``."""
    return GDTrace(
        width=8,
        eta=eta,
        eta_max=1e-2,
        lambda0=2.0,
        radii=dict.fromkeys("ABUu", radius),
        losses=losses,
        sigmas=[2.0] * len(losses),
        distances={p: [0.1 * k for k in range(len(losses))] for p in "ABUu"},
        sides=sides,
    )


def test_premise_states_the_first_step_where_hypotheses_1_and_3_fail():
    held = premise(_sided([1.0, 0.9, 0.8], {}), "13")
    assert held.first is None and held.statement.verdict is HOLDS
    grown = premise(_sided([1.0, 0.9, 1.5, 0.1], {}), "13")  # L(2) = 1.5 > 0.999² L(0)
    assert grown.first == 2 and grown.statement.verdict is UNMET
    assert grown.statement.value == pytest.approx(1.5 - 0.999**2)
    assert "first fails at step 2: Hypothesis 3" in grown.statement.measured
    outside = premise(_sided([1.0, 0.9, 0.8], {}, radius=0.15), "1")  # 0.2 > R at step 2
    assert outside.first == 2 and outside.statement.value == pytest.approx(0.2 / 0.15 - 1)
    lost = premise(_sided([1.0, math.nan, 0.8], {}), "13")
    assert lost.first == 1 and lost.statement.verdict is NM


def test_implication_passes_fails_and_is_not_applicable_after_its_premise_fails():
    def check(values):
        def build(ks, suffix):
            found = [values[k] for k in ks]
            return measure(
                f"Q{suffix}",
                Kind.THEOREM,
                OURS_THEOREM,
                value=max(found, default=None),
                relation="<=",
                threshold=1.0,
                measured="",
                expected="",
            )

        return build

    holds = premise(_sided([1.0, 0.9, 0.8, 0.7], {}), "13")
    (passed,) = implication(check([0.5, 0.6, 0.7]), 3, holds.statement, holds.first)
    assert passed.verdict is PASS and passed.value == 0.7
    (failed,) = implication(check([0.5, 2.0, 0.7]), 3, holds.statement, holds.first)
    assert failed.verdict is FAIL
    grows = premise(_sided([1.0, 2.0, 0.8, 0.7], {}), "13")  # fails at step 1
    checked, rest = implication(check([0.5, 2.0, 3.0]), 3, grows.statement, grows.first)
    assert checked.verdict is PASS and checked.value == 0.5  # step 0 → 1 only
    assert rest.name == "Q, from step 1" and rest.verdict is NA and rest.value == 3.0
    assert "Hypotheses 1 and 3 at every step" in rest.detail and "step 1" in rest.needs
    outer = condition_hypothesis(_ineq(1.0, 8.0), width=8, condition="Condition 2", fit=None, m=0.1)
    (inside,) = implication(check([0.5, 0.6, 0.7]), 3, holds.statement, holds.first, [outer])
    assert inside.verdict is NA  # an unmet condition of the theorem


def test_step_lemmas_compare_each_step_with_its_printed_bound():
    nan = math.nan
    sides = {
        "lemma3_3_8": ([22.97, 5.0, 1.0, nan], [0.0062, 0.004, 0.003, nan]),
        "lemma3_3_10": ([-3.0, -0.5, -2.0, nan], [-1.0, -1.0, -1.0, nan]),
    }
    named = _by_name(theorem_3_3_5(_sided([1.0, 2.0, 0.8, 0.7], sides), [], fits={}, m=0.1))
    lemma = named["Lemma 3.3.8 at every GD step at n = 8"]
    assert lemma.verdict is FAIL and lemma.value == pytest.approx(22.97 / 0.0062)
    assert "lhs 22.97, bound 0.0062, step 0" in lemma.measured
    assert named["Lemma 3.3.8 at every GD step at n = 8, from step 1"].verdict is NA
    three = named["Lemma 3.3.10 at every GD step at n = 8"]  # I₃ = −3 ≤ −1: ratio 3 ≥ 1
    assert three.verdict is PASS and three.value == pytest.approx(3.0)
    assert named["Lemma 3.3.10 at every GD step at n = 8, from step 1"].value == pytest.approx(0.5)
    (later,) = [
        s
        for s in theorem_3_3_5(_sided([1.0, 0.9, 0.8, 0.7], sides), [], fits={}, m=0.1)
        if s.name == "Lemma 3.3.10 at every GD step at n = 8"
    ]
    assert later.verdict is FAIL and later.value == pytest.approx(0.5)  # step 1: −0.5 > −1


def test_lemmas_3_3_6_3_3_7_and_3_3_9_pass_and_fail_on_made_up_sides():
    nan = math.nan
    sides = {
        "lemma3_3_6": ([1.0 + 1e-13, 2.0, nan], [1.0, 2.0, nan]),  # equality to rounding
        **{f"lemma3_3_7_{p}": ([0.1, 0.1, nan], [1.0, 1.0, nan]) for p in "UuAB"},
        "lemma3_3_7_W": ([0.1, 3.0, nan], [1.0, 1.0, nan]),
        "lemma3_3_9": ([-0.5, 0.2, nan], [0.1, 0.1, nan]),  # I₂ may be negative
    }
    trace = _sided([1.0, 0.9, 0.8], sides)
    named = _by_name(theorem_3_3_5(trace, [], fits={}, m=0.1))
    assert named["Lemma 3.3.6 at every GD step at n = 8"].verdict is PASS
    seven = named["Lemma 3.3.7 at every GD step at n = 8"]
    assert seven.verdict is FAIL and seven.value == 3.0 and "worst (W)" in seven.measured
    nine = named["Lemma 3.3.9 at every GD step at n = 8"]
    assert nine.verdict is FAIL and nine.value == pytest.approx(2.0)
    sides["lemma3_3_6"] = ([1.01, 2.0, nan], [1.0, 2.0, nan])
    sides["lemma3_3_9"] = ([-0.5, 0.05, nan], [0.1, 0.1, nan])
    named = _by_name(theorem_3_3_5(_sided([1.0, 0.9, 0.8], sides), [], fits={}, m=0.1))
    assert named["Lemma 3.3.6 at every GD step at n = 8"].verdict is FAIL
    assert named["Lemma 3.3.9 at every GD step at n = 8"].verdict is PASS

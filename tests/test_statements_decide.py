"""Where verdicts are decided (deqlab/statements/decide.py): measure on a value in both
directions, theorems guarded by their hypotheses, the one combiner rule (worst),
implications over steps, and the increasing helpers."""

import math

import pytest

from deqlab.papers import HIEU, KAWAGUCHI
from deqlab.statements import (
    Kind,
    Source,
    Verdict,
    constant_not_given,
    implication,
    measure,
    measures,
    min_step_gap,
    ratio,
    strictly_increasing,
    theorem,
    worst,
)
from helpers import statement_at

NAN = math.nan
LING = Source("ling2023", "Theorem 1 (iii)")


@pytest.mark.parametrize(
    ("value", "relation", "verdict", "margin"),
    [
        (0.5, "<=", Verdict.PASS, 0.5),
        (1.0, "<=", Verdict.PASS, 0.0),
        (1.0, "<", Verdict.FAIL, 0.0),
        (1.5, "<=", Verdict.FAIL, -0.5),
        (2.0, ">=", Verdict.PASS, 1.0),
        (0.25, ">", Verdict.FAIL, -0.75),
    ],
)
def test_measure_decides_on_the_value_in_both_directions(value, relation, verdict, margin):
    s = statement_at(value, relation=relation)
    assert s.verdict is verdict
    assert s.margin == pytest.approx(margin)


@pytest.mark.parametrize(
    ("value", "relation"),
    [
        (None, "<="),
        (math.nan, "<="),
        (-math.inf, "<="),
        (math.inf, ">="),
        ("0.5", "<="),
        (True, "<"),
    ],
)
def test_nothing_measured_is_never_pass(value, relation):
    """An infinity on the satisfying side is an overflow, not a measurement."""
    s = statement_at(value, relation=relation)
    assert s.verdict is Verdict.NOT_MEASURED
    assert s.value is None and s.margin is None


@pytest.mark.parametrize(
    ("value", "relation", "kind", "verdict"),
    [
        (math.inf, "<=", Kind.THEOREM, Verdict.FAIL),
        (math.inf, "<", Kind.OURS, Verdict.FAIL),
        (-math.inf, ">=", Kind.OBSERVATION, Verdict.FAIL),
        (-math.inf, ">", Kind.HYPOTHESIS, Verdict.UNMET),
        (math.inf, "<", Kind.HYPOTHESIS, Verdict.UNMET),
    ],
)
def test_an_infinity_that_breaks_the_bound_is_a_measured_violation(value, relation, kind, verdict):
    s = statement_at(value, kind, relation)
    assert s.verdict is verdict
    assert s.value == value and s.margin is None
    assert measures(value, relation, 1.0) and not measures(-value, relation, 1.0)


def test_hypotheses_hold_or_are_unmet_and_keep_what_would_satisfy_them():
    holds = statement_at(2.0, Kind.HYPOTHESIS, ">=", needs="m ≥ 10")
    unmet = statement_at(1e-9, Kind.HYPOTHESIS, ">=", needs="m ≥ 3.2e9")
    assert holds.verdict is Verdict.HOLDS and holds.needs == ""
    assert unmet.verdict is Verdict.UNMET and unmet.needs == "m ≥ 3.2e9"


def test_theorem_is_not_applicable_when_a_hypothesis_is_unmet():
    check = statement_at(0.5)
    unmet = measure(
        "Condition 1",
        Kind.HYPOTHESIS,
        LING,
        value=1e-9,
        relation=">=",
        threshold=1.0,
        measured="lhs/rhs = 1e-9",
        expected="≥ 1",
        needs="m ≥ 3.2e9",
    )
    guarded = theorem(check, [unmet])
    assert guarded.verdict is Verdict.NOT_APPLICABLE
    assert guarded.detail == "hypotheses unmet (margins in their own rows): Condition 1"
    assert guarded.needs == "m ≥ 3.2e9"
    assert guarded.value == 0.5  # the measurement is kept beside the verdict
    holds = statement_at(3.0, Kind.HYPOTHESIS, ">=")
    assert theorem(check, [holds]).verdict is Verdict.PASS
    assert theorem(statement_at(2.0), [holds]).verdict is Verdict.FAIL
    unknown = statement_at(None, Kind.HYPOTHESIS, ">=")
    assert theorem(check, [holds, unknown]).verdict is Verdict.NOT_MEASURED


def test_theorem_rejects_non_theorems_and_non_hypotheses():
    with pytest.raises(ValueError, match="must be a theorem statement; got ours"):
        theorem(statement_at(0.5, Kind.OURS), [])
    with pytest.raises(ValueError, match="must all be hypothesis statements"):
        theorem(statement_at(0.5), [statement_at(0.5)])


@pytest.mark.parametrize(
    ("values", "relation", "threshold", "expected"),
    [
        ([0.2, 0.5, 0.3], "<", 1.0, 0.5),  # all measured and holding: the largest
        ([2.0, 1.5, 3.0], ">=", 1.0, 1.5),  # lower bounds: the smallest
        ([0.2, None, 0.3], "<", 1.0, None),  # a missing value can hide a pass...
        ([0.2, None, 1.7], "<", 1.0, 1.7),  # ...never a measured failure
        ([NAN, 0.4, 2.0], ">=", 1.0, 0.4),
        ([math.inf, 0.3], "<=", 1.0, math.inf),  # an overflow past the bound: measured
        ([0.3, NAN, -math.inf], ">=", 1.0, -math.inf),  # ...also beside a NaN
        ([math.inf, 0.3], ">=", 0.1, None),  # on the satisfying side it is not measured
        ([-math.inf, 0.3], "<=", 1.0, None),
        ([0.2, math.inf], "<", None, math.inf),  # no threshold: it breaks every bound
        ([0.2, math.inf], ">", None, None),
        ([0.2, NAN, -math.inf], ">", None, -math.inf),
        ([], "<", 1.0, None),
        ([0.2, 0.9], "<", None, 0.9),  # no threshold: the extreme, None if any missing
        ([0.2, NAN], "<", None, None),
    ],
)
def test_worst_never_lets_a_missing_value_hide_a_measured_failure(
    values, relation, threshold, expected
):
    assert worst(values, relation, threshold) == expected


@pytest.mark.parametrize(
    ("lhs", "rhs", "relation", "expected"),
    [
        (1.0, 4.0, "<=", 0.25),
        (1.0, 0.0, "<=", None),  # no ratio for rhs ≤ 0
        (NAN, 1.0, "<=", None),
        (None, 1.0, ">=", None),
        (math.inf, 2.0, "<=", math.inf),  # an overflow past the bound
        (1.0, -math.inf, "<=", math.inf),
        (1.0, math.inf, ">=", -math.inf),
        (-math.inf, 2.0, ">=", -math.inf),
        (1.0, math.inf, "<=", None),  # an overflow on the satisfying side: not measured
        (math.inf, 2.0, ">=", None),
        (math.inf, math.inf, "<=", None),  # both sides lost
    ],
)
def test_ratio_keeps_an_overflow_that_breaks_the_inequality(lhs, rhs, relation, expected):
    assert ratio(lhs, rhs, relation) == expected


def test_a_violated_bound_beside_a_nan_step_is_unmet_not_unmeasured():
    """The defect of Kawaguchi's old `_worst` (None as soon as one value is NaN): the
    radius hypothesis ‖B_t‖₁ < (1 − γ)R with a NaN step and a violating step is UNMET."""
    norms = [0.1, NAN, 0.9]
    bound = (1 - 0.5) * 1.0
    h = KAWAGUCHI.hypothesis(
        "Corollary 2",
        name="‖B_t‖₁ < (1 − γ)R",
        value=worst(norms, "<", bound),
        relation="<",
        threshold=bound,
        measured="largest ‖B_t‖₁",
        needs="a larger R",
    )
    assert h.verdict is Verdict.UNMET and h.value == 0.9 and h.needs == "a larger R"
    fine = [0.1, NAN, 0.2]
    assert worst(fine, "<", bound) is None  # nothing violated, a step unmeasured


#: ‖θ(k+1) − θ(0)‖/R at k = 0..4 (Proposition 5's conclusion), violated at k = 3 only.
RATIOS = [0.5, 0.8, 0.9, 7.0, 0.2]


def _ball(ks, suffix):
    value = worst([RATIOS[k] for k in ks], "<=", 1.0)
    return HIEU.theorem(
        "Proposition 5",
        name=f"Proposition 5{suffix}",
        value=value,
        relation="<=",
        threshold=1.0,
        measured=f"max ratio over {len(ks)} steps",
    )


def _premise(value):
    return HIEU.hypothesis(
        "Section 3.3.3",
        name="Hypotheses 1 and 3 at every k′",
        value=value,
        relation="<=",
        threshold=0.0,
        measured="largest excess",
        needs="Hypotheses 1 and 3 at step 3",
    )


def test_implication_is_checked_only_where_its_premise_held():
    # the premise fails from step 3: the violation at step 3 is outside it
    held, rest = implication(_ball, 5, _premise(0.4), 3)
    assert held.verdict is Verdict.PASS and held.value == 0.9 and held.name == "Proposition 5"
    assert rest.verdict is Verdict.NOT_APPLICABLE and rest.name == "Proposition 5, from step 3"
    assert rest.value == 7.0 and rest.needs == "Hypotheses 1 and 3 at step 3"
    (everywhere,) = implication(_ball, 3, _premise(-0.1), None)
    assert everywhere.verdict is Verdict.PASS and everywhere.value == 0.9
    failing, _ = implication(_ball, 5, _premise(0.4), 4)  # the premise held through step 3
    assert failing.verdict is Verdict.FAIL and failing.value == 7.0


def test_implication_whose_premise_never_held_or_is_unmeasured():
    none_held, rest = implication(_ball, 5, _premise(0.4), 0)
    assert none_held.verdict is Verdict.NOT_MEASURED  # no step where the premise held
    assert rest.verdict is Verdict.NOT_APPLICABLE and rest.kind is Kind.THEOREM
    _, unknown = implication(_ball, 5, _premise(None), 2)
    assert unknown.verdict is Verdict.NOT_MEASURED
    guarded, _ = implication(_ball, 5, _premise(0.4), 3, given=[_premise(1.0)])
    assert guarded.verdict is Verdict.NOT_APPLICABLE  # the theorem's own hypothesis is unmet


def test_implication_needs_a_hypothesis_as_its_premise():
    with pytest.raises(ValueError, match="`premise` must be a hypothesis statement; got theorem"):
        implication(_ball, 5, _ball(range(1), ""), 3)


def test_increasing_helpers_fail_on_ties_reversals_and_nan():
    assert strictly_increasing([1, 2, 3]) and not strictly_increasing([1, 1, 2])
    assert not strictly_increasing([1, math.nan, 3])
    assert min_step_gap([1.0, 3.0, 3.5]) == 0.5
    assert min_step_gap([1.0, 1.0]) == 0.0 and min_step_gap([2.0, 1.0]) == -1.0
    assert min_step_gap([1.0]) is None
    assert statement_at(min_step_gap([1.0, 1.0]), Kind.OURS, ">", 0.0).verdict is Verdict.FAIL
    # decided by worst: a reversal beside a value not measured is measured, a NaN beside
    # none leaves it unmeasured
    assert min_step_gap([3.0, 2.0, math.nan]) == -1.0 and min_step_gap([None, 2.0, 1.5]) == -0.5
    assert min_step_gap([1.0, 2.0, math.nan]) is None
    # across a missing value: no value in the gap can make 1, NaN, 0.5 increase
    assert min_step_gap([1.0, math.nan, 0.5]) == -0.5
    assert min_step_gap([1.0, None, 1.0, 3.0]) == 0.0
    assert min_step_gap([1.0, math.nan, 1.5]) is None  # a value in the gap may break it
    assert min_step_gap([math.nan, math.nan]) is None
    # an overflow that reverses the sequence is a measured reversal; one that continues it
    # is not a measurement
    assert min_step_gap([1.0, 2.0, -math.inf]) == -math.inf
    assert min_step_gap([1.0, math.inf, 3.0]) == -math.inf
    assert min_step_gap([1.0, 2.0, math.inf]) is None


def test_a_fail_that_rests_on_a_constant_the_paper_does_not_give_is_not_applicable():
    """verify's Theorem 2 (Ling et al.): its width hypothesis holds only with the constant of
    the paper's Ω taken as 1, so a FAIL there cannot be told from a too small constant."""
    source = Source("ling2023", "Theorem 2")
    failed = measure("T2", Kind.THEOREM, source, value=0.5, relation=">=", threshold=1.0,
                     measured="λ_0/(mλ*/2) = 0.5")  # fmt: skip
    ruled = constant_not_given(failed, "a width C·n² with the paper's constant C")
    assert ruled.verdict is Verdict.NOT_APPLICABLE and ruled.value == 0.5
    assert ruled.needs.startswith("a width C") and "constant" in ruled.detail
    passed = measure("T2", Kind.THEOREM, source, value=2.0, relation=">=", threshold=1.0,
                     measured="2")  # fmt: skip
    assert constant_not_given(passed, "x") == passed
    with pytest.raises(ValueError, match="`check` must be a theorem statement"):
        constant_not_given(measure("h", Kind.HYPOTHESIS, source, value=1.0, relation=">=",
                                   threshold=0.0, measured="1"), "x")  # fmt: skip

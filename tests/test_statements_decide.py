"""The one combiner rule (worst) and implications over steps, both directions."""

import math

import pytest

from deqlab.papers import HIEU, KAWAGUCHI
from deqlab.statements import Kind, Verdict, implication, worst

NAN = math.nan


@pytest.mark.parametrize(
    ("values", "relation", "threshold", "expected"),
    [
        ([0.2, 0.5, 0.3], "<", 1.0, 0.5),  # all measured and holding: the largest
        ([2.0, 1.5, 3.0], ">=", 1.0, 1.5),  # lower bounds: the smallest
        ([0.2, None, 0.3], "<", 1.0, None),  # a missing value can hide a pass...
        ([0.2, None, 1.7], "<", 1.0, 1.7),  # ...never a measured failure
        ([NAN, 0.4, 2.0], ">=", 1.0, 0.4),
        ([math.inf, 0.3], "<=", 1.0, None),  # ±inf is not a measurement
        ([], "<", 1.0, None),
        ([0.2, 0.9], "<", None, 0.9),  # no threshold: the extreme, None if any missing
        ([0.2, NAN], "<", None, None),
    ],
)
def test_worst_never_lets_a_missing_value_hide_a_measured_failure(
    values, relation, threshold, expected
):
    assert worst(values, relation, threshold) == expected


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


def _prop(holds, values, steps=None):
    steps = list(range(1, len(holds) + 1)) if steps is None else steps
    return implication(
        "Proposition 5",
        HIEU.source("Proposition 5"),
        premise="Hypotheses 1 and 3",
        holds=holds,
        values=values,
        steps=steps,
        relation="<=",
        threshold=1.0,
        measured="max ‖θ(k+1) − θ(0)‖/R",
    )


def test_implication_is_checked_only_where_its_premise_held():
    # the premise fails from step 3: the violation at step 4 is outside the premise
    s = _prop([True, True, False, True], [0.5, 0.8, 0.9, 7.0])
    assert s.verdict is Verdict.PASS and s.value == 0.8
    assert "checked at steps 1–2" in s.detail and "NOT APPLICABLE from step 3" in s.detail
    failing = _prop([True, True, False], [0.5, 1.2, 0.1])
    assert failing.verdict is Verdict.FAIL and failing.value == 1.2
    everywhere = _prop([True, True], [0.5, 0.6])
    assert everywhere.verdict is Verdict.PASS and "held at every step" in everywhere.detail


def test_implication_whose_premise_never_held_is_not_applicable():
    s = _prop([False, True], [0.5, 0.5])
    assert s.verdict is Verdict.NOT_APPLICABLE and s.kind is Kind.THEOREM
    assert "fails from the first step (step 1)" in s.detail
    assert _prop([None, True], [0.5, 0.5]).verdict is Verdict.NOT_MEASURED
    assert _prop([], []).verdict is Verdict.NOT_MEASURED
    unmeasured_after = _prop([True, None], [0.5, 9.0])
    assert unmeasured_after.verdict is Verdict.PASS
    assert "is not measured" in unmeasured_after.detail


def test_implication_checks_its_lengths():
    with pytest.raises(ValueError, match="one entry per step; got lengths 2, 1, 2"):
        _prop([True, True], [0.5])

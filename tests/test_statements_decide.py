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

"""The statement model: verdicts decided on measurements, both directions, and round trips."""

import math

import pytest

from deqlab.statements import (
    OURS,
    Counts,
    Kind,
    Source,
    Statement,
    Verdict,
    measure,
    min_step_gap,
    not_measured,
    strictly_increasing,
    theorem,
)

LING = Source("ling2023", "Theorem 1 (iii)")


def _check(value, kind=Kind.THEOREM, relation="<=", threshold=1.0, **kw):
    return measure(
        "s",
        kind,
        LING if kind is not Kind.OURS else OURS,
        value=value,
        relation=relation,
        threshold=threshold,
        measured=str(value),
        expected=f"{relation} {threshold}",
        **kw,
    )


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
    s = _check(value, relation=relation)
    assert s.verdict is verdict
    assert s.margin == pytest.approx(margin)


@pytest.mark.parametrize("value", [None, math.nan, math.inf, -math.inf, "0.5", True])
def test_nothing_measured_is_never_pass(value):
    s = _check(value)
    assert s.verdict is Verdict.NOT_MEASURED
    assert s.value is None and s.margin is None


def test_hypotheses_hold_or_are_unmet_and_keep_what_would_satisfy_them():
    holds = _check(2.0, Kind.HYPOTHESIS, ">=", needs="m ≥ 10")
    unmet = _check(1e-9, Kind.HYPOTHESIS, ">=", needs="m ≥ 3.2e9")
    assert holds.verdict is Verdict.HOLDS and holds.needs == ""
    assert unmet.verdict is Verdict.UNMET and unmet.needs == "m ≥ 3.2e9"


def test_theorem_is_not_applicable_when_a_hypothesis_is_unmet():
    check = _check(0.5)
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
    holds = _check(3.0, Kind.HYPOTHESIS, ">=")
    assert theorem(check, [holds]).verdict is Verdict.PASS
    assert theorem(_check(2.0), [holds]).verdict is Verdict.FAIL
    unknown = _check(None, Kind.HYPOTHESIS, ">=")
    assert theorem(check, [holds, unknown]).verdict is Verdict.NOT_MEASURED


def test_theorem_rejects_non_theorems_and_non_hypotheses():
    with pytest.raises(ValueError, match="must be a theorem statement; got ours"):
        theorem(_check(0.5, Kind.OURS), [])
    with pytest.raises(ValueError, match="must all be hypothesis statements"):
        theorem(_check(0.5), [_check(0.5)])


def test_kinds_only_take_their_verdicts_and_ours_cites_ours():
    with pytest.raises(ValueError, match="a hypothesis statement cannot be PASS"):
        Statement("h", Kind.HYPOTHESIS, LING, Verdict.PASS, "1", "≥ 1")
    with pytest.raises(ValueError, match="an observation statement cannot be NOT APPLICABLE"):
        Statement("o", Kind.OBSERVATION, LING, Verdict.NOT_APPLICABLE, "1", "≥ 1")
    with pytest.raises(ValueError, match="of kind 'ours' must cite Source"):
        Statement("o", Kind.OURS, LING, Verdict.PASS, "1", "≥ 1")
    with pytest.raises(ValueError, match="`paper` must be one of"):
        Source("smith2020")
    with pytest.raises(ValueError, match="`relation` must be one of"):
        _check(0.5, relation="=<")


def test_statement_round_trips_through_its_dict_form():
    for s in (
        _check(0.5),
        _check(None),
        _check(math.inf, Kind.OURS),
        not_measured(
            "n", Kind.OBSERVATION, Source("hieu2022", "Fig. 4.4", "q"), expected="x", why="no data"
        ),
    ):
        back = Statement.from_dict(s.as_dict())
        assert back.as_dict() == s.as_dict()
    with pytest.raises(ValueError, match="must have the field 'verdict'"):
        Statement.from_dict({k: v for k, v in _check(0.5).as_dict().items() if k != "verdict"})


def test_increasing_helpers_fail_on_ties_reversals_and_nan():
    assert strictly_increasing([1, 2, 3]) and not strictly_increasing([1, 1, 2])
    assert not strictly_increasing([1, math.nan, 3])
    assert min_step_gap([1.0, 3.0, 3.5]) == 0.5
    assert min_step_gap([1.0, 1.0]) == 0.0 and min_step_gap([2.0, 1.0]) == -1.0
    assert min_step_gap([1.0]) is None
    assert _check(min_step_gap([1.0, 1.0]), Kind.OURS, ">", 0.0).verdict is Verdict.FAIL


def test_counts_by_kind_and_the_strict_failure_count():
    statements = [
        _check(0.5, Kind.OBSERVATION),
        _check(2.0, Kind.OBSERVATION),
        _check(0.5),
        theorem(_check(0.5), [_check(0.0, Kind.HYPOTHESIS, ">=", threshold=1.0)]),
        _check(2.0, Kind.HYPOTHESIS, ">="),
        _check(None, Kind.OURS),
    ]
    counts = Counts.of(statements)
    assert counts.failed == 1
    assert counts.sentence() == (
        "paper observations: 1 of 2 reproduced; theorems: 1 checked (1 pass), 1 not "
        "applicable; hypotheses: 1 of 1 hold (margins shown); ours: 0 of 1 pass, 1 not measured"
    )
    assert Counts.of([]).sentence() == "no statements"

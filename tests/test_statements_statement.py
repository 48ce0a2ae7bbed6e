"""The statement types (deqlab/statements/statement.py): each kind takes only its verdicts,
ours cites ours, and a statement round-trips through its dict form."""

import math

import pytest

from deqlab.statements import (
    Kind,
    Source,
    Statement,
    Verdict,
    not_measured,
)
from helpers import statement_at

LING = Source("ling2023", "Theorem 1 (iii)")


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
        statement_at(0.5, relation="=<")


def test_statement_round_trips_through_its_dict_form():
    for s in (
        statement_at(0.5),
        statement_at(None),
        statement_at(math.inf, Kind.OURS),
        not_measured(
            "n", Kind.OBSERVATION, Source("hieu2022", "Fig. 4.4", "q"), expected="x", why="no data"
        ),
    ):
        back = Statement.from_dict(s.as_dict())
        assert back.as_dict() == s.as_dict()
    with pytest.raises(ValueError, match="must have the field 'verdict'"):
        Statement.from_dict(
            {k: v for k, v in statement_at(0.5).as_dict().items() if k != "verdict"}
        )

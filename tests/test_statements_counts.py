"""Counts (deqlab/statements/counts.py): statements counted by kind and verdict."""

from deqlab.statements import Counts, Kind, theorem
from helpers import statement_at


def test_counts_by_kind_and_the_strict_failure_count():
    statements = [
        statement_at(0.5, Kind.OBSERVATION),
        statement_at(2.0, Kind.OBSERVATION),
        statement_at(0.5),
        theorem(statement_at(0.5), [statement_at(0.0, Kind.HYPOTHESIS, ">=", threshold=1.0)]),
        statement_at(2.0, Kind.HYPOTHESIS, ">="),
        statement_at(None, Kind.OURS),
    ]
    counts = Counts.of(statements)
    assert counts.failed == 1
    assert counts.sentence() == (
        "paper observations: 1 of 2 reproduced; theorems: 1 checked (1 pass), 1 not "
        "applicable; hypotheses: 1 of 1 hold (margins shown); ours: 0 of 1 pass, 1 not measured"
    )
    assert Counts.of([]).sentence() == "no statements"

"""The typed measurements claims take (deqlab/statements/series.py): a run built from tidy
rows, read by quantity, step and constant; one more point and a run with nothing measured;
bad shapes named."""

import math

import pytest

from deqlab.statements import Run, Series, runs_from_rows

ROWS = [
    {"task": "b", "step": 2, "loss": 0.5, "W": math.nan, "m": 8, "model": "DELM"},
    {"task": "a", "step": 0, "loss": 2.0, "W": 0.3, "m": 4, "model": "DELM"},
    {"task": "b", "step": 0, "loss": 1.0, "W": 0.1, "m": 8, "model": "DELM"},
    {"task": "b", "step": 1, "loss": None, "W": 0.2, "m": 8, "model": "DELM"},
]


def test_runs_from_rows_group_sort_and_read_constants_and_labels():
    runs = runs_from_rows(ROWS, constants=("m",), labels=("model",))
    assert list(runs) == ["b", "a"]  # in order of appearance
    b = runs["b"]
    assert b.steps == (0, 1, 2) and b.constant("m") == 8.0 and b.label("model") == "DELM"
    assert b.label("task") == "b" and b.constant("absent") != b.constant("absent")  # NaN
    assert list(b["loss"][:1]) == [1.0] and math.isnan(b["loss"][1])  # None reads as NaN
    assert b.at("loss", 2) == 0.5 and math.isnan(b.at("loss", 9))
    assert all(math.isnan(v) for v in b["never recorded"])
    # a quantity measured every so many steps is due where it is not NaN (inf is due)
    assert b.points("W") == [(0, 0.1), (1, 0.2)] and b.points("W", start=1) == [(1, 0.2)]


def test_one_more_point_and_a_run_with_nothing_measured():
    b = runs_from_rows(ROWS, constants=("m",))["b"]
    longer = b.extended(math.inf)
    assert longer.steps == (0, 1, 2, 3) and longer.at("loss", 3) == math.inf
    assert longer.points("W")[-1] == (3, math.inf)
    blank = b.blank("missing")
    assert blank.key == "missing" and blank.steps == b.steps and blank.label("task") == "b"
    assert all(math.isnan(v) for v in blank["loss"]) and math.isnan(blank.constant("m"))
    grown = Series([1, "x", None]).extended(2.0)  # anything not a number reads as NaN
    assert grown[0] == 1.0 and math.isnan(grown[1]) and math.isnan(grown[2]) and grown[3] == 2.0


def test_a_series_of_another_length_than_the_steps_is_named():
    with pytest.raises(ValueError, match=r"series 'loss' of run 'r' must have one value per step"):
        Run("r", (0, 1), {"loss": (1.0,)})

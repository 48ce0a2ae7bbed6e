"""The CSV codec of the metrics tables (deqlab/runs/tables.py): floats round-trip exactly,
missing cells are None."""

from deqlab.runs.tables import read_rows_csv, write_rows_csv


def test_csv_round_trip_is_exact(tmp_path):
    rows = [{"a": 0.1 + 0.2, "b": 3, "c": "x"}, {"a": 1e-300, "d": None, "e": True}]
    write_rows_csv(tmp_path / "m.csv", rows)
    back = read_rows_csv(tmp_path / "m.csv")
    assert back == [
        {"a": 0.1 + 0.2, "b": 3, "c": "x", "d": None, "e": None},
        {"a": 1e-300, "b": None, "c": None, "d": None, "e": True},
    ]

"""The CSV codec of a run's tidy table (``metrics.csv``): one row per measurement.

A float is written with ``repr`` so that it reads back bit-exactly (``float(repr(x)) == x``);
``None`` is an empty cell. Reading parses each cell back as ``bool``, ``int``, ``float``
or, failing those, keeps the text.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from deqlab._atomic import write_text_atomic


def write_rows_csv(path: Path, rows: list[dict[str, object]]) -> None:
    """Write tidy rows as CSV; the columns are the union of keys in first-seen order.

    Floats are written with ``repr`` so they read back bit-exactly; ``None`` is empty.
    """
    columns: dict[str, None] = {}
    for row in rows:
        columns.update(dict.fromkeys(row))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow(
            {k: "" if v is None else repr(v) if isinstance(v, float) else v for k, v in row.items()}
        )
    write_text_atomic(path, buffer.getvalue())


def _parse_cell(text: str) -> object:
    if text == "":
        return None
    if text in ("True", "False"):
        return text == "True"
    for parse in (int, float):
        try:
            return parse(text)
        except ValueError:
            continue
    return text


def read_rows_csv(path: Path) -> list[dict[str, object]]:
    """Read a CSV written by :func:`write_rows_csv`, parsing ints, floats, bools and blanks."""
    with open(path, newline="", encoding="utf-8") as handle:
        return [{k: _parse_cell(v) for k, v in row.items()} for row in csv.DictReader(handle)]

"""``deqlab runs diff A B``: two runs side by side — config, statements, and their curves.

:func:`diff_runs` compares two index rows (and their ``summary.json``): the run facts
(experiment, preset, device, status, wall time, deqlab version and commit), every config
key whose value differs, and the statements matched by name (verdict and measurement of
A against B). :func:`overlay_figure` draws the two runs' ``metrics.csv`` curves on shared
axes: the x axis is the first step-like column both tables have (:data:`STEP_COLUMNS`),
one panel per numeric column both have that varies along a curve, curves split by the
text columns both have (e.g. ``task``); run A solid, run B dashed.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from deqlab.runs.store import RunStore
from deqlab.runs.tables import read_rows_csv
from deqlab.statements import Counts, Statement

#: Columns that can serve as the x axis of a curve, in order of preference.
STEP_COLUMNS = ("step", "steps", "iteration", "iter", "epoch", "t", "k")
#: At most this many panels in one overlay figure (the others are listed as left out).
MAX_PANELS = 6
#: Curves per panel above which the legend of curves is left out (line styles stay).
MAX_LEGEND = 10


def _summary(row: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    path = Path(row["path"]) / "summary.json"
    try:
        return json.loads(path.read_text(encoding="utf-8")), None
    except (OSError, ValueError) as err:
        return {}, f"{path} unreadable: {err}"


def run_facts(row: dict[str, Any], summary: dict[str, Any]) -> dict[str, Any]:
    """The facts of one run compared by a diff (JSON values)."""
    env = summary.get("environment") if isinstance(summary.get("environment"), dict) else {}
    statements = [Statement.from_dict(s) for s in summary.get("statements", [])]
    return {
        "experiment": row["experiment"],
        "config_hash": row["config_hash"],
        "preset": row["preset"],
        "device": row["device"],
        "status": row["status"],
        "wall_s": row["wall_s"],
        "started": row["started"],
        "path": row["path"],
        "deqlab": env.get("deqlab"),
        "git_commit": env.get("git_commit"),
        "verdicts": Counts.of(statements).as_dict(),
        "verdict_sentence": Counts.of(statements).sentence(),
    }


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def diff_runs(store: RunStore, ref_a: str, ref_b: str) -> dict[str, Any]:
    """The differences of runs ``ref_a`` and ``ref_b`` (hash prefixes or paths) of ``store``.

    Keys: ``a``, ``b`` (:func:`run_facts`), ``facts`` (the fact names that differ),
    ``config`` (``{"key", "a", "b", "only_in"}`` for each differing key; ``only_in`` is
    ``"a"``/``"b"`` for a key one config lacks), ``statements`` (``{"name", "kind",
    "citation", "verdict_a", "verdict_b", "measured_a", "measured_b", "value_a",
    "value_b", "changed"}``, ``None`` where a run lacks the statement), ``notes``.
    Raises :class:`~deqlab.runs.rundir.RunStoreError` for an unknown or ambiguous ref.
    """
    row_a, row_b = store.find(ref_a), store.find(ref_b)
    (sum_a, note_a), (sum_b, note_b) = _summary(row_a), _summary(row_b)
    facts_a, facts_b = run_facts(row_a, sum_a), run_facts(row_b, sum_b)
    compared = ("experiment", "preset", "device", "status", "deqlab", "git_commit")
    config_a, config_b = json.loads(row_a["config_json"]), json.loads(row_b["config_json"])
    config = []
    for key in dict.fromkeys([*config_a, *config_b]):
        in_a, in_b = key in config_a, key in config_b
        if in_a and in_b and _same(config_a[key], config_b[key]):
            continue
        only = None if in_a and in_b else ("a" if in_a else "b")
        config.append({"key": key, "a": config_a.get(key), "b": config_b.get(key), "only_in": only})
    by_name_a = {s["name"]: s for s in sum_a.get("statements", [])}
    by_name_b = {s["name"]: s for s in sum_b.get("statements", [])}
    statements = []
    for name in dict.fromkeys([*by_name_a, *by_name_b]):
        sa, sb = by_name_a.get(name), by_name_b.get(name)
        either = sa or sb
        statements.append(
            {
                "name": name,
                "kind": either.get("kind"),
                "citation": either.get("citation"),
                "verdict_a": sa and sa.get("verdict"),
                "verdict_b": sb and sb.get("verdict"),
                "measured_a": sa and sa.get("measured"),
                "measured_b": sb and sb.get("measured"),
                "value_a": sa and sa.get("value"),
                "value_b": sb and sb.get("value"),
                "changed": (sa and sa.get("verdict")) != (sb and sb.get("verdict")),
            }
        )
    return {
        "a": facts_a,
        "b": facts_b,
        "facts": [k for k in compared if facts_a[k] != facts_b[k]],
        "config": config,
        "statements": statements,
        "notes": [n for n in (note_a, note_b) if n],
    }


# ---- the overlay figure -------------------------------------------------------------------


def _is_number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _finite(v: object) -> bool:
    return _is_number(v) and math.isfinite(v)  # type: ignore[arg-type]


def _column_kinds(rows: Sequence[dict[str, object]]) -> tuple[set[str], set[str]]:
    """(numeric columns, text columns) of a tidy table; blanks are ignored."""
    numeric: set[str] = set()
    text: set[str] = set()
    seen: dict[str, set[str]] = {}
    for row in rows:
        for key, value in row.items():
            if value is None:
                continue
            kinds = seen.setdefault(key, set())
            kinds.add("number" if _is_number(value) else "other")
    for key, kinds in seen.items():
        if kinds == {"number"}:
            numeric.add(key)
        elif "number" not in kinds:
            text.add(key)
    return numeric, text


def _curves(
    rows: Sequence[dict[str, object]], x: str, y: str, keys: Sequence[str]
) -> dict[tuple, list[tuple[float, float]]]:
    curves: dict[tuple, list[tuple[float, float]]] = {}
    for row in rows:
        if _finite(row.get(x)) and _finite(row.get(y)):
            key = tuple(row.get(k) for k in keys)
            curves.setdefault(key, []).append((float(row[x]), float(row[y])))
    return {k: sorted(v) for k, v in curves.items()}


def _mixes_curves(tables: Sequence[Sequence[dict]], x: str, keys: Sequence[str]) -> bool:
    """True when some group of rows (same values of ``keys``) repeats an x value."""
    for rows in tables:
        seen: set[tuple] = set()
        for row in rows:
            if _is_number(row.get(x)):
                point = (*(row.get(k) for k in keys), row[x])
                if point in seen:
                    return True
                seen.add(point)
    return False


def series_columns(
    tables: Sequence[Sequence[dict]], x: str, numeric: Sequence[str], text: Sequence[str]
) -> list[str]:
    """The columns that tell the curves apart: every text column that is not constant
    (``task``, ``dataset``…), then, while a curve would still repeat an x value, the
    numeric column with the fewest distinct values (a width, a seed, a learning rate),
    among those with fewer distinct values than x has."""
    distinct = {c: len({row.get(c) for rows in tables for row in rows}) for c in [*numeric, *text]}
    keys = [c for c in text if distinct[c] > 1]  # a constant column separates nothing
    n_x = len({row.get(x) for rows in tables for row in rows})
    candidates = sorted((c for c in numeric if c != x and 1 < distinct[c] < n_x),
                        key=lambda c: distinct[c])  # fmt: skip
    while candidates and _mixes_curves(tables, x, keys):
        keys.append(candidates.pop(0))
    return keys


def overlay_plan(rows_a: Sequence[dict], rows_b: Sequence[dict]) -> dict[str, Any]:
    """What :func:`overlay_figure` would draw: ``x``, ``series`` (the columns that tell
    curves apart, :func:`series_columns`), ``columns`` (the panels: numeric columns both
    tables have that vary along some curve, in table order) and ``left_out`` (those beyond
    :data:`MAX_PANELS`). Raises ValueError when the tables share no step-like column."""
    numeric_a, text_a = _column_kinds(rows_a)
    numeric_b, text_b = _column_kinds(rows_b)
    ordered = list(dict.fromkeys(k for row in (*rows_a[:1], *rows_b[:1]) for k in row))
    numeric = [c for c in ordered if c in numeric_a & numeric_b]
    text = [c for c in ordered if c in text_a & text_b]
    x = next((c for c in STEP_COLUMNS if c in numeric), None)
    if x is None:
        common = ", ".join(numeric) or "none"
        raise ValueError(
            f"the two metrics.csv files share no step-like column ({', '.join(STEP_COLUMNS)}) "
            f"to draw curves along; numeric columns in both: {common}"
        )
    keys = series_columns((rows_a, rows_b), x, numeric, text)
    varying = []
    for column in [c for c in numeric if c != x and c not in keys]:
        for rows in (rows_a, rows_b):
            if any(len({v for _, v in pts}) > 1 for pts in _curves(rows, x, column, keys).values()):
                varying.append(column)
                break
    return {
        "x": x,
        "series": keys,
        "columns": varying[:MAX_PANELS],
        "left_out": varying[MAX_PANELS:],
    }


def overlay_figure(
    run_a: str | os.PathLike[str],
    run_b: str | os.PathLike[str],
    path: str | os.PathLike[str],
    labels: tuple[str, str] = ("A", "B"),
) -> dict[str, Any]:
    """Draw both runs' ``metrics.csv`` curves into ``path`` (.png, .pdf or .svg).

    Returns :func:`overlay_plan` plus ``path``. Raises ValueError when a table is missing
    or empty, the tables share no step-like column, or no shared column varies.
    """
    from matplotlib.figure import Figure

    from deqlab._atomic import atomic_path
    from deqlab.report.figures import CATEGORICAL_COLORS, figure_style

    path = Path(path)
    if path.suffix.lower() not in (".png", ".pdf", ".svg"):
        raise ValueError(f"`--figure` must end in .png, .pdf or .svg; got {str(path)!r}")
    tables = []
    for run in (Path(run_a), Path(run_b)):
        metrics = run / "metrics.csv"
        rows = read_rows_csv(metrics) if metrics.is_file() else []
        if not rows:
            raise ValueError(f"{str(metrics)!r} is missing or empty: no curves to draw")
        tables.append(rows)
    plan = overlay_plan(*tables)
    if not plan["columns"]:
        raise ValueError(f"no numeric column common to both runs varies along {plan['x']!r}")
    x, keys = plan["x"], plan["series"]
    with figure_style():
        n = len(plan["columns"])
        fig = Figure(figsize=(6.4, 2.4 * n + 0.6))  # no pyplot: the caller's backend stays
        axes = fig.subplots(n, 1, squeeze=False, sharex=True)
        for ax, column in zip(axes[:, 0], plan["columns"], strict=True):
            curves = [_curves(rows, x, column, keys) for rows in tables]
            names = list(dict.fromkeys([*curves[0], *curves[1]]))
            for i, name in enumerate(names):
                color = CATEGORICAL_COLORS[i % len(CATEGORICAL_COLORS)]
                for label, (style, width), run_curves in zip(
                    labels, (("-", 2.4), ("--", 1.4)), curves, strict=True
                ):
                    points = run_curves.get(name)
                    if points:
                        text = " ".join(f"{k}={v}" for k, v in zip(keys, name, strict=True))
                        ax.plot(
                            [p[0] for p in points],
                            [p[1] for p in points],
                            style,
                            linewidth=width,
                            color=color,
                            label=f"{text} ({label})".strip(),
                        )
            values = [p[1] for c in curves for pts in c.values() for p in pts]
            positive = [v for v in values if v > 0]
            if len(positive) == len(values) and positive and max(positive) > 100 * min(positive):
                ax.set_yscale("log")
            ax.set_ylabel(column)
            if ax is axes[0, 0] and 0 < len(names) * 2 <= MAX_LEGEND:
                ax.legend(fontsize=7)  # one legend: every panel draws the same curves
        axes[-1, 0].set_xlabel(x)
        axes[0, 0].set_title(f"{labels[0]} (solid) vs {labels[1]} (dashed)", fontsize=9)
        fmt = path.suffix.lower()[1:]
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=fmt)
    return {**plan, "path": str(path)}

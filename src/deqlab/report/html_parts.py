"""The pieces a self-contained HTML page is made of: the page itself (inline CSS, no
JavaScript, no external resource), sections, notes, tables, badges, the statements in three
tables, figures embedded as base64 PNG data URIs, and readable values; every piece of text
escaped. The run report (:mod:`deqlab.report.html`) and the ``deqlab verify`` page
(:mod:`deqlab.verification.page`) are built from them.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
from collections.abc import Sequence
from html import escape
from importlib import resources
from pathlib import Path
from typing import Any

import deqlab
from deqlab._format import format_seconds
from deqlab.report.rundir import FigureEntry
from deqlab.statements import Counts, Kind, Statement, Verdict

_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_STATUS_CLASS = {"finished": "ok", "failed": "bad", "running": "warn", "interrupted": "warn"}


_VERDICT_CLASS = {
    Verdict.PASS: "pass", Verdict.HOLDS: "pass", Verdict.FAIL: "fail", Verdict.UNMET: "warn",
    Verdict.NOT_APPLICABLE: "none", Verdict.NOT_MEASURED: "none",
}  # fmt: skip
#: Report groups, in order: what the paper states, what its theorems assume, what we add.
_GROUPS = (
    ("paper", "The paper's statements", (Kind.OBSERVATION, Kind.THEOREM)),
    ("hypotheses", "Hypotheses of the theorems (margins)", (Kind.HYPOTHESIS,)),
    ("ours", "Our own checks (not statements of the paper)", (Kind.OURS,)),
)


def statements_section(statements: list[Statement]) -> str:
    """The statements in three tables: the paper's, the hypotheses (margins), ours."""
    if not statements:
        return html_section("Statements", html_note("No statement was checked in this run."))
    headers = ["Statement", "Kind", "Source", "Verdict", "Measured", "Expected", "Margin",
               "Detail"]  # fmt: skip
    parts = []
    for group, heading, kinds in _GROUPS:
        mine = [s for s in statements if s.kind in kinds]
        if mine:
            rows = [_statement_cells(s) for s in mine]
            classes = [_VERDICT_CLASS[s.verdict] for s in mine]
            parts.append(f"<h3>{escape(heading)}</h3>")
            table_id = f"statements-{group}"
            parts.append(html_table(headers, rows, raw=True, table_id=table_id, classes=classes))
    return html_section("Statements", "".join(parts))


def _statement_cells(s: Statement) -> list[str]:
    source = escape(s.source.citation)
    if s.source.quote:
        source += f"<blockquote>“{escape(s.source.quote)}”</blockquote>"
    detail = escape(s.detail)
    if s.needs:
        detail += f"<p class='needs'>Would need: {escape(s.needs)}</p>"
    margin = "—" if s.margin is None else f"{s.margin:.3g}"
    verdict = f"<span class='result {_VERDICT_CLASS[s.verdict]}'>{s.verdict.value}</span>"
    return [escape(s.name), escape(s.kind.value), source, verdict, escape(s.measured),
            escape(s.expected), margin, detail]  # fmt: skip


def figures_section(run_dir: Path, figures: Sequence[FigureEntry]) -> str:
    """The figures embedded as PNG data, each linked to its file (and its PDF)."""
    if not figures:
        return html_section("Figures", html_note("No figures yet."))
    # A plot step may list both files save_figure wrote; the PDF is linked from its PNG.
    listed = {Path(entry.path) for entry in figures}
    parts = []
    for entry in figures:
        path = run_dir / entry.path
        if path.suffix == ".pdf" and Path(entry.path).with_suffix(".png") in listed:
            continue
        caption = escape(entry.caption)
        if not path.is_file():
            parts.append(html_note(f"Figure {entry.path!r} is listed but the file is missing."))
            continue
        data = path.read_bytes()
        if not data.startswith(_PNG_MAGIC):
            parts.append(html_note(f"Figure {entry.path!r} is not a PNG file and is not embedded."))
            continue
        pdf = path.with_suffix(".pdf")
        if pdf.is_file():
            href = escape(pdf.relative_to(run_dir).as_posix())
            caption += f" · <a href='{href}'>PDF</a>"
        uri = "data:image/png;base64," + base64.b64encode(data).decode("ascii")
        parts.append(  # the embedded image links to the file beside the report, full size
            f"<figure><a href='{escape(Path(entry.path).as_posix())}'>"
            f"<img src='{uri}' alt='{escape(entry.caption)}'></a>"
            f"<figcaption>{caption}</figcaption></figure>"
        )
    return html_section("Figures", "<div class='figures'>" + "".join(parts) + "</div>")


# ---- HTML primitives --------------------------------------------------------------------


def html_page(title: str, body: str) -> str:
    """A whole self-contained page: inline CSS, ``body``, the generator footer."""
    css = resources.files("deqlab.report").joinpath("report.css").read_text(encoding="utf-8")
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (
        "<!DOCTYPE html>\n<html lang='en'>\n<head>\n<meta charset='utf-8'>\n"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>\n"
        f"<title>{escape(title)}</title>\n<style>\n{css}</style>\n</head>\n<body>\n{body}\n"
        f"<footer>Generated by deqlab {escape(deqlab.__version__)} on {now}.</footer>\n"
        "</body>\n</html>\n"
    )


def html_section(heading: str, content: str) -> str:
    """``content`` under an h2 ``heading``."""
    return f"<section><h2>{escape(heading)}</h2>\n{content}\n</section>"


def html_note(text: str) -> str:
    """A highlighted note (a missing piece, an empty section)."""
    return f"<p class='note'>{escape(text)}</p>"


def html_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    raw: bool = False,
    table_id: str | None = None,
    classes: Sequence[str] | None = None,
) -> str:
    """A table; cells are escaped unless ``raw`` (already-escaped HTML)."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = []
    for i, row in enumerate(rows):
        cells = "".join(f"<td>{cell if raw else escape(cell)}</td>" for cell in row)
        css_class = f" class='{classes[i]}'" if classes and classes[i] else ""
        body.append(f"<tr{css_class}>{cells}</tr>")
    id_attr = f" id='{escape(table_id)}'" if table_id else ""
    return f"<table{id_attr}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def kv_table(mapping: dict[str, Any], what: str) -> str:
    """A two-column key/value table; a note naming ``what`` when ``mapping`` is empty."""
    if not mapping:
        return html_note(f"No {what} recorded.")
    rows = "".join(
        f"<tr><td class='key'>{escape(str(key))}</td>"
        f"<td class='mono'>{escape(format_value(value))}</td></tr>"
        for key, value in mapping.items()
    )
    return f"<table class='kv'><tbody>{rows}</tbody></table>"


def status_badge(status: object) -> str:
    """A run's status as a badge (finished green, failed red, running or interrupted amber)."""
    text = str(status) if status else "unknown"
    return f"<span class='badge {_STATUS_CLASS.get(text, '')}'>{escape(text)}</span>"


def verdict_badge(counts: Counts) -> str:
    """ "N FAIL" in red, "no FAIL" in green, or "none" when nothing was checked."""
    if counts.failed:
        return f"<span class='badge bad'>{counts.failed} FAIL</span>"
    if counts.by_kind:
        return "<span class='badge ok'>no FAIL</span>"
    return "<span class='badge'>none</span>"


# ---- value formatting -------------------------------------------------------------------


def flatten_keys(mapping: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested tables as dotted keys: {"a": {"b": 1}} -> {"a.b": 1}."""
    flat: dict[str, Any] = {}
    for key, value in mapping.items():
        if isinstance(value, dict):
            flat.update(flatten_keys(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def format_value(value: object) -> str:
    """Readable text for a JSON/TOML value: floats to 4 significant digits, None as '—'."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else str(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {format_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, str):
        return value
    return json.dumps(value, default=str)


def format_duration(seconds: object) -> str:
    """A wall time in seconds for a reader; '—' for anything not a non-negative number."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
        return "—"
    return format_seconds(seconds)


def format_time(value: object) -> str:
    """An ISO string as is; a POSIX timestamp as UTC ISO time; anything else as '—'."""
    if isinstance(value, str) and value:
        return value
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        stamp = dt.datetime.fromtimestamp(value, dt.timezone.utc)
        return stamp.isoformat(timespec="seconds")
    return "—"

"""The self-contained HTML report of a run, and an index of the runs under a results folder.

The page needs nothing but itself: inline CSS, figures embedded as base64 PNG data URIs,
no JavaScript and no external resource. Every piece of text from the run is escaped.
The page primitives (``html_page``, ``html_section``, ``statements_section``, …) are public:
the ``deqlab verify`` page is built from the same pieces.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
import os
from collections.abc import Iterable, Sequence
from html import escape
from importlib import resources
from pathlib import Path
from typing import Any

import deqlab
from deqlab._atomic import write_text_atomic
from deqlab._format import format_seconds
from deqlab.report.rundir import (
    SUMMARY_FILE,
    FigureEntry,
    read_config,
    read_metrics_info,
    read_summary,
    resolve_run_dir,
)
from deqlab.statements import Counts, Kind, Statement, Verdict

REPORT_FILE = "report.html"
INDEX_FILE = "index.html"
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_STATUS_CLASS = {"finished": "ok", "failed": "bad", "running": "warn", "interrupted": "warn"}


def write_report(run_dir: str | os.PathLike[str]) -> Path:
    """Write ``<run_dir>/report.html`` (atomically) from the run's files and return its path.

    Sections: header (title, paper, status, wall time, verdicts by kind), statements in
    three tables (``id="statements-paper"``: observations and theorems;
    ``"statements-hypotheses"``: margins and what would satisfy them; ``"statements-ours"``),
    deviations from the paper
    (``id="deviations"``), figures, tasks (failed ones with their error), metrics file,
    resolved config, environment. Missing optional pieces render as a note.
    Raises ``FileNotFoundError`` for a missing ``run_dir`` or ``summary.json``,
    ``ValueError`` for a malformed ``summary.json``.
    """
    run_dir = resolve_run_dir(run_dir)
    summary = read_summary(run_dir)
    title = str(summary.get("title") or summary.get("experiment") or run_dir.name)
    body = "\n".join(
        [
            _header(summary, title),
            statements_section(_statements(summary)),
            _deviations_section(summary["deviations"]),
            figures_section(run_dir, summary["figures"]),
            _tasks_section(summary["tasks"]),
            _metrics_section(run_dir),
            _config_section(run_dir),
            html_section("Environment", kv_table(summary["environment"], "environment")),
        ]
    )
    return write_text_atomic(run_dir / REPORT_FILE, html_page(title, body))


def write_index(results_dir: str | os.PathLike[str]) -> Path:
    """Write ``<results_dir>/index.html`` listing every run directory found below it.

    A run directory is any folder holding a ``summary.json`` (its subfolders are not
    searched). Each row links to the run's ``report.html`` when one exists and shows its
    status and verdict counts; a run whose summary cannot be read is listed with the reason.
    """
    if not isinstance(results_dir, str | os.PathLike):
        raise TypeError(f"`results_dir` must be a str or path; got {type(results_dir).__name__}")
    root = Path(results_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"results directory {str(root)!r} does not exist")
    rows = [_index_row(root, run_dir) for run_dir in _find_run_dirs(root)]
    rows.sort(key=lambda row: row[0], reverse=True)  # newest first
    headers = ["Run", "Experiment", "Preset", "Status", "Verdicts", "Wall time", "Started"]
    if rows:
        content = _table(headers, [cells for _, cells in rows], raw=True)
    else:
        content = html_note(f"No run directories (folders with a {SUMMARY_FILE}) found yet.")
    body = f"<header><h1>deqlab runs</h1><p class='paper'>{escape(str(root))}</p></header>"
    body += html_section(f"Runs ({len(rows)})", content)
    return write_text_atomic(root / INDEX_FILE, html_page("deqlab runs", body))


# ---- sections ---------------------------------------------------------------------------


def _statements(summary: dict[str, Any]) -> list[Statement]:
    try:
        return [Statement.from_dict(d) for d in summary["statements"]]
    except ValueError as err:
        raise ValueError(f"{SUMMARY_FILE}: a statement is malformed: {err}") from None


def _header(summary: dict[str, Any], title: str) -> str:
    counts = Counts.of(_statements(summary))
    n_failed_tasks = sum(1 for t in summary["tasks"] if t.get("status") == "failed")
    facts = [
        ("Status", _status_badge(summary.get("status"))),
        ("Verdicts", verdict_badge(counts) + " " + escape(counts.sentence())),
        ("Wall time", escape(_format_duration(summary.get("wall_s")))),
        ("Tasks", escape(f"{len(summary['tasks'])} ({n_failed_tasks} failed)")),
        ("Experiment", f"<code>{escape(str(summary.get('experiment', '—')))}</code>"),
        ("Preset", escape(str(summary.get("preset", "—")))),
        ("Config hash", f"<code>{escape(str(summary.get('config_hash', '—')))}</code>"),
        ("Started", escape(_format_time(summary.get("started")))),
        ("Finished", escape(_format_time(summary.get("finished")))),
    ]
    paper = summary.get("paper")
    return (
        f"<header><h1>{escape(title)}</h1>"
        + (f"<p class='paper'>{escape(str(paper))}</p>" if paper else "")
        + "<div class='facts'>"
        + "".join(f"<span>{escape(k)}: <b>{v}</b></span>" for k, v in facts)
        + "</div></header>"
    )


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
            parts.append(_table(headers, rows, raw=True, table_id=table_id, classes=classes))
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


def _deviations_section(deviations: list[dict[str, Any]]) -> str:
    heading = "Deviations from the paper"
    if not deviations:
        return html_section(heading, html_note("This run uses the paper's setting throughout."))
    headers = ["Setting", "Paper", "This run", "Kind", "Where in the paper"]
    keys = ("setting", "paper", "run", "kind", "where")
    rows = [[escape(str(d.get(k, "—"))) for k in keys] for d in deviations]
    table = _table(headers, rows, raw=True, table_id="deviations")
    return html_section(heading, table)


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


def _tasks_section(tasks: list[dict[str, Any]]) -> str:
    if not tasks:
        return html_section("Tasks", html_note("No tasks recorded."))
    rows, classes = [], []
    for task in tasks:
        status = task.get("status")
        error = (
            f"<pre class='error'>{escape(str(task['error']))}</pre>" if task.get("error") else ""
        )
        if task.get("traceback"):
            error += (
                "<details><summary>traceback</summary>"
                f"<pre class='error'>{escape(str(task['traceback']))}</pre></details>"
            )
        reused = " <small>(reused)</small>" if task.get("reused") else ""
        rows.append(
            [
                f"<code>{escape(_format_value(task.get('key')))}</code>",
                _status_badge(status) + reused,
                escape(_format_duration(task.get("wall_s"))),
                error,
            ]
        )
        classes.append("fail" if status == "failed" else "")
    return html_section(
        "Tasks", _table(["Task", "Status", "Wall time", "Error"], rows, raw=True, classes=classes)
    )


def _metrics_section(run_dir: Path) -> str:
    info, reason = read_metrics_info(run_dir)
    if info is None:
        return html_section("Metrics", html_note(reason or "metrics unavailable"))
    name = escape(info.path.name)  # linked relatively: the run directory can move
    rows = [
        ["file", f"<a href='{name}'>{name}</a>"],
        ["rows", escape(str(info.n_rows))],
        ["columns", escape(", ".join(info.columns) or "—")],
        ["size", escape(f"{info.n_bytes / 1024:.1f} KiB")],
    ]
    return html_section("Metrics", _table(["", ""], rows, raw=True))


def _config_section(run_dir: Path) -> str:
    config, reason = read_config(run_dir)
    if config is None:
        return html_section("Resolved config", html_note(reason or "config unavailable"))
    tables = {k: v for k, v in config.items() if isinstance(v, dict)}
    loose = {k: v for k, v in config.items() if not isinstance(v, dict)}
    parts = [kv_table(loose, "config")] if loose else []
    for name, table in tables.items():
        parts.append(f"<h3>[{escape(name)}]</h3>" + kv_table(flatten_keys(table), name))
    return html_section("Resolved config", "".join(parts))


def _index_row(root: Path, run_dir: Path) -> tuple[str, list[str]]:
    """(sort key, cells) of one run in the index; unreadable summaries become a note."""
    name = run_dir.relative_to(root).as_posix()
    report = run_dir / REPORT_FILE
    link = (
        f"<a href='{escape((report.relative_to(root)).as_posix())}'>{escape(name)}</a>"
        if report.is_file()
        else f"{escape(name)} <small>(no report.html yet)</small>"
    )
    try:
        summary = read_summary(run_dir)
    except (OSError, ValueError) as err:
        unreadable = f"<span class='result fail'>unreadable: {escape(str(err))}</span>"
        return "", [link, unreadable, "", "", "", "", ""]
    counts = Counts.of(_statements(summary))
    cells = [
        link,
        f"<code>{escape(str(summary.get('experiment', '—')))}</code>",
        escape(str(summary.get("preset", "—"))),
        _status_badge(summary.get("status")),
        verdict_badge(counts) + " " + escape(counts.sentence()),
        escape(_format_duration(summary.get("wall_s"))),
        escape(_format_time(summary.get("started"))),
    ]
    return _format_time(summary.get("started")), cells


def _find_run_dirs(root: Path) -> Iterable[Path]:
    """Folders under ``root`` (itself included) holding a summary.json; no descent below."""
    for current, subdirs, files in os.walk(root):
        if SUMMARY_FILE in files:
            subdirs.clear()
            yield Path(current)
        else:
            subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))


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


def _table(
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
        f"<td class='mono'>{escape(_format_value(value))}</td></tr>"
        for key, value in mapping.items()
    )
    return f"<table class='kv'><tbody>{rows}</tbody></table>"


def _status_badge(status: object) -> str:
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


def _format_value(value: object) -> str:
    """Readable text for a JSON/TOML value: floats to 4 significant digits, None as '—'."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else str(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_format_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_format_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, str):
        return value
    return json.dumps(value, default=str)


def _format_duration(seconds: object) -> str:
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
        return "—"
    return format_seconds(seconds)


def _format_time(value: object) -> str:
    """An ISO string as is; a POSIX timestamp as UTC ISO time; anything else as '—'."""
    if isinstance(value, str) and value:
        return value
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        stamp = dt.datetime.fromtimestamp(value, dt.timezone.utc)
        return stamp.isoformat(timespec="seconds")
    return "—"

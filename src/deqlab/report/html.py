"""The self-contained HTML report of a run, and an index of the runs under a results folder.

The page needs nothing but itself: inline CSS, figures embedded as base64 PNG data URIs,
no JavaScript and no external resource. Every piece of text from the run is escaped.
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
from deqlab.report.rundir import (
    SUMMARY_FILE,
    FigureEntry,
    claim_counts,
    read_config,
    read_metrics_info,
    read_summary,
    resolve_run_dir,
)

REPORT_FILE = "report.html"
INDEX_FILE = "index.html"
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_STATUS_CLASS = {"finished": "ok", "failed": "bad", "running": "warn", "interrupted": "warn"}


def write_report(run_dir: str | os.PathLike[str]) -> Path:
    """Write ``<run_dir>/report.html`` (atomically) from the run's files and return its path.

    Sections: header (title, paper, status, wall time, claim counts), claims table
    (``id="claims"``), figures, tasks (failed ones with their error), metrics file,
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
            _claims_section(summary["claims"]),
            _figures_section(run_dir, summary["figures"]),
            _tasks_section(summary["tasks"]),
            _metrics_section(run_dir),
            _config_section(run_dir),
            _section("Environment", _kv_table(summary["environment"], "environment")),
        ]
    )
    return write_text_atomic(run_dir / REPORT_FILE, _page(title, body))


def write_index(results_dir: str | os.PathLike[str]) -> Path:
    """Write ``<results_dir>/index.html`` listing every run directory found below it.

    A run directory is any folder holding a ``summary.json`` (its subfolders are not
    searched). Each row links to the run's ``report.html`` when one exists and shows its
    status and claim counts; a run whose summary cannot be read is listed with the reason.
    """
    if not isinstance(results_dir, str | os.PathLike):
        raise TypeError(f"`results_dir` must be a str or path; got {type(results_dir).__name__}")
    root = Path(results_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"results directory {str(root)!r} does not exist")
    rows = [_index_row(root, run_dir) for run_dir in _find_run_dirs(root)]
    rows.sort(key=lambda row: row[0], reverse=True)  # newest first
    headers = ["Run", "Experiment", "Preset", "Status", "Claims", "Wall time", "Started"]
    if rows:
        content = _table(headers, [cells for _, cells in rows], raw=True)
    else:
        content = _note(f"No run directories (folders with a {SUMMARY_FILE}) found yet.")
    body = f"<header><h1>deqlab runs</h1><p class='paper'>{escape(str(root))}</p></header>"
    body += _section(f"Runs ({len(rows)})", content)
    return write_text_atomic(root / INDEX_FILE, _page("deqlab runs", body))


# ---- sections ---------------------------------------------------------------------------


def _header(summary: dict[str, Any], title: str) -> str:
    passed, failed, unknown = claim_counts(summary["claims"])
    counts = f"{passed} passed · {failed} failed" + (
        f" · {unknown} not evaluated" if unknown else ""
    )
    n_failed_tasks = sum(1 for t in summary["tasks"] if t.get("status") == "failed")
    facts = [
        ("Status", _status_badge(summary.get("status"))),
        ("Claims", _claims_badge(passed, failed) + " " + escape(counts)),
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


def _claims_section(claims: list[dict[str, Any]]) -> str:
    if not claims:
        return _section("Claims", _note("No claims were checked in this run."))
    rows, classes = [], []
    for claim in claims:
        verdict = {True: ("PASS", "pass"), False: ("FAIL", "fail")}.get(
            claim.get("passed"), ("n/a", "none")
        )
        rows.append(
            [
                escape(str(claim.get("name", "—"))),
                f"<span class='result {verdict[1]}'>{verdict[0]}</span>",
                escape(_format_value(claim.get("measured"))),
                escape(_format_value(claim.get("expected"))),
                escape(_format_value(claim.get("detail"))),
            ]
        )
        classes.append(verdict[1])
    headers = ["Claim", "Result", "Measured", "Expected", "Detail"]
    return _section("Claims", _table(headers, rows, raw=True, table_id="claims", classes=classes))


def _figures_section(run_dir: Path, figures: Sequence[FigureEntry]) -> str:
    if not figures:
        return _section("Figures", _note("No figures yet."))
    # A plot step may list both files save_figure wrote; the PDF is linked from its PNG.
    listed = {Path(entry.path) for entry in figures}
    parts = []
    for entry in figures:
        path = run_dir / entry.path
        if path.suffix == ".pdf" and Path(entry.path).with_suffix(".png") in listed:
            continue
        caption = escape(entry.caption)
        if not path.is_file():
            parts.append(_note(f"Figure {entry.path!r} is listed but the file is missing."))
            continue
        data = path.read_bytes()
        if not data.startswith(_PNG_MAGIC):
            parts.append(_note(f"Figure {entry.path!r} is not a PNG file and is not embedded."))
            continue
        pdf = path.with_suffix(".pdf")
        if pdf.is_file():
            href = escape(pdf.relative_to(run_dir).as_posix())
            caption += f" · <a href='{href}'>PDF</a>"
        uri = "data:image/png;base64," + base64.b64encode(data).decode("ascii")
        parts.append(
            f"<figure><img src='{uri}' alt='{escape(entry.caption)}'>"
            f"<figcaption>{caption}</figcaption></figure>"
        )
    return _section("Figures", "<div class='figures'>" + "".join(parts) + "</div>")


def _tasks_section(tasks: list[dict[str, Any]]) -> str:
    if not tasks:
        return _section("Tasks", _note("No tasks recorded."))
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
    return _section(
        "Tasks", _table(["Task", "Status", "Wall time", "Error"], rows, raw=True, classes=classes)
    )


def _metrics_section(run_dir: Path) -> str:
    info, reason = read_metrics_info(run_dir)
    if info is None:
        return _section("Metrics", _note(reason or "metrics unavailable"))
    facts = {
        "file": str(info.path.resolve()),
        "rows": info.n_rows,
        "columns": ", ".join(info.columns) or "—",
        "size": f"{info.n_bytes / 1024:.1f} KiB",
    }
    return _section("Metrics", _kv_table(facts, "metrics"))


def _config_section(run_dir: Path) -> str:
    config, reason = read_config(run_dir)
    if config is None:
        return _section("Resolved config", _note(reason or "config unavailable"))
    tables = {k: v for k, v in config.items() if isinstance(v, dict)}
    loose = {k: v for k, v in config.items() if not isinstance(v, dict)}
    parts = [_kv_table(loose, "config")] if loose else []
    for name, table in tables.items():
        parts.append(f"<h3>[{escape(name)}]</h3>" + _kv_table(_flatten(table), name))
    return _section("Resolved config", "".join(parts))


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
    passed, failed, _ = claim_counts(summary["claims"])
    cells = [
        link,
        f"<code>{escape(str(summary.get('experiment', '—')))}</code>",
        escape(str(summary.get("preset", "—"))),
        _status_badge(summary.get("status")),
        _claims_badge(passed, failed) + escape(f" {passed} passed · {failed} failed"),
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


def _page(title: str, body: str) -> str:
    css = resources.files("deqlab.report").joinpath("report.css").read_text(encoding="utf-8")
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (
        "<!DOCTYPE html>\n<html lang='en'>\n<head>\n<meta charset='utf-8'>\n"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>\n"
        f"<title>{escape(title)}</title>\n<style>\n{css}</style>\n</head>\n<body>\n{body}\n"
        f"<footer>Generated by deqlab {escape(deqlab.__version__)} on {now}.</footer>\n"
        "</body>\n</html>\n"
    )


def _section(heading: str, content: str) -> str:
    return f"<section><h2>{escape(heading)}</h2>\n{content}\n</section>"


def _note(text: str) -> str:
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


def _kv_table(mapping: dict[str, Any], what: str) -> str:
    if not mapping:
        return _note(f"No {what} recorded.")
    rows = "".join(
        f"<tr><td class='key'>{escape(str(key))}</td>"
        f"<td class='mono'>{escape(_format_value(value))}</td></tr>"
        for key, value in mapping.items()
    )
    return f"<table class='kv'><tbody>{rows}</tbody></table>"


def _status_badge(status: object) -> str:
    text = str(status) if status else "unknown"
    return f"<span class='badge {_STATUS_CLASS.get(text, '')}'>{escape(text)}</span>"


def _claims_badge(passed: int, failed: int) -> str:
    if failed:
        return f"<span class='badge bad'>{failed} FAIL</span>"
    if passed:
        return "<span class='badge ok'>all PASS</span>"
    return "<span class='badge'>none</span>"


# ---- value formatting -------------------------------------------------------------------


def _flatten(mapping: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested tables as dotted keys: {"a": {"b": 1}} -> {"a.b": 1}."""
    flat: dict[str, Any] = {}
    for key, value in mapping.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
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
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def _format_time(value: object) -> str:
    """An ISO string as is; a POSIX timestamp as UTC ISO time; anything else as '—'."""
    if isinstance(value, str) and value:
        return value
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        stamp = dt.datetime.fromtimestamp(value, dt.timezone.utc)
        return stamp.isoformat(timespec="seconds")
    return "—"

"""The self-contained HTML report of a run, and an index of the runs under a results folder.

The page needs nothing but itself: inline CSS, figures embedded as base64 PNG data URIs,
no JavaScript and no external resource. Every piece of text from the run is escaped. The
pieces (``html_page``, ``html_section``, ``statements_section``, …) are
:mod:`deqlab.report.html_parts`, shared with the ``deqlab verify`` page.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from html import escape
from pathlib import Path
from typing import Any

from deqlab._atomic import write_text_atomic
from deqlab.report.html_parts import (
    figures_section,
    flatten_keys,
    format_duration,
    format_time,
    format_value,
    html_note,
    html_page,
    html_section,
    html_table,
    kv_table,
    statements_section,
    status_badge,
    verdict_badge,
)
from deqlab.report.rundir import (
    SUMMARY_FILE,
    read_config,
    read_metrics_info,
    read_summary,
    resolve_run_dir,
)
from deqlab.statements import Counts, Statement

REPORT_FILE = "report.html"
INDEX_FILE = "index.html"


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
        content = html_table(headers, [cells for _, cells in rows], raw=True)
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
        ("Status", status_badge(summary.get("status"))),
        ("Verdicts", verdict_badge(counts) + " " + escape(counts.sentence())),
        ("Wall time", escape(format_duration(summary.get("wall_s")))),
        ("Tasks", escape(f"{len(summary['tasks'])} ({n_failed_tasks} failed)")),
        ("Experiment", f"<code>{escape(str(summary.get('experiment', '—')))}</code>"),
        ("Preset", escape(str(summary.get("preset", "—")))),
        ("Config hash", f"<code>{escape(str(summary.get('config_hash', '—')))}</code>"),
        ("Started", escape(format_time(summary.get("started")))),
        ("Finished", escape(format_time(summary.get("finished")))),
    ]
    paper = summary.get("paper")
    return (
        f"<header><h1>{escape(title)}</h1>"
        + (f"<p class='paper'>{escape(str(paper))}</p>" if paper else "")
        + "<div class='facts'>"
        + "".join(f"<span>{escape(k)}: <b>{v}</b></span>" for k, v in facts)
        + "</div></header>"
    )


def _deviations_section(deviations: list[dict[str, Any]]) -> str:
    heading = "Deviations from the paper"
    if not deviations:
        return html_section(heading, html_note("This run uses the paper's setting throughout."))
    headers = ["Setting", "Paper", "This run", "Kind", "Where in the paper"]
    keys = ("setting", "paper", "run", "kind", "where")
    rows = [[escape(str(d.get(k, "—"))) for k in keys] for d in deviations]
    table = html_table(headers, rows, raw=True, table_id="deviations")
    return html_section(heading, table)


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
                f"<code>{escape(format_value(task.get('key')))}</code>",
                status_badge(status) + reused,
                escape(format_duration(task.get("wall_s"))),
                error,
            ]
        )
        classes.append("fail" if status == "failed" else "")
    return html_section(
        "Tasks",
        html_table(["Task", "Status", "Wall time", "Error"], rows, raw=True, classes=classes),
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
    return html_section("Metrics", html_table(["", ""], rows, raw=True))


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
        status_badge(summary.get("status")),
        verdict_badge(counts) + " " + escape(counts.sentence()),
        escape(format_duration(summary.get("wall_s"))),
        escape(format_time(summary.get("started"))),
    ]
    return format_time(summary.get("started")), cells


def _find_run_dirs(root: Path) -> Iterable[Path]:
    """Folders under ``root`` (itself included) holding a summary.json; no descent below."""
    for current, subdirs, files in os.walk(root):
        if SUMMARY_FILE in files:
            subdirs.clear()
            yield Path(current)
        else:
            subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))

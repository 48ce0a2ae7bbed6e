"""The rows of the run index (:mod:`deqlab.runs.store`) read back from the run directories:
what ``deqlab runs reindex`` and a store whose index was lost rebuild it from.

A run's row comes from its ``config.toml`` and ``summary.json``: a run whose summary says
``running`` is ``running`` only while a live process holds its lock, else ``interrupted``
(and its summary is rewritten to say so); a run without a readable summary is
``interrupted`` with the reason as its error.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

from deqlab.runs.lock import RunLock, lock_holder
from deqlab.runs.rundir import RunDir, SummaryError
from deqlab.runs.sqlite_read import open_for_reading

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


def readable_index(path: Path) -> bool:
    """Whether SQLite reads ``path`` as an index (a hot journal read past)."""
    try:
        with closing(open_for_reading(path)) as db:
            db.execute("SELECT count(*) FROM runs").fetchone()
    except sqlite3.Error:
        return False
    return True


def insert_entry(
    db: sqlite3.Connection, run: dict[str, Any], tasks: list[tuple], conflict: str
) -> None:
    """Insert a run's row and task rows (:func:`index_entry`); ``conflict`` says what an
    existing row does: ``"IGNORE"`` (stays) or ``"REPLACE"``."""
    columns = ", ".join(run)
    db.execute(
        f"INSERT OR {conflict} INTO runs ({columns}) VALUES ({', '.join('?' * len(run))})",
        tuple(run.values()),
    )
    db.executemany(f"INSERT OR {conflict} INTO tasks VALUES (?, ?, ?, ?, ?, ?, ?)", tasks)


def index_entry(run: RunDir) -> tuple[dict[str, Any], list[tuple]]:
    """The index row and task rows of a run directory (module docstring)."""
    try:
        document = tomllib.loads(run.config_file.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"config.toml cannot be parsed: {err}") from None
    head = document.get("experiment")
    config = document.get("config", {})
    if not isinstance(head, dict) or not isinstance(config, dict):
        raise ValueError("config.toml lacks its [experiment] or [config] table")
    experiment, digest = run.path.parent.name, run.path.name
    try:
        summary: dict[str, Any] | None = run.read_summary()
        error = None
    except SummaryError as err:
        summary, error = None, str(err)
    holder = lock_holder(run)
    status = "interrupted" if summary is None else summary["status"]
    if summary is not None and status == "running" and holder is None:
        status = "interrupted"
        lock = RunLock(run)
        if lock.acquire_nowait():  # its owner is gone: the summary says so too
            try:
                run.write_summary({**summary, "status": "interrupted"})
            except OSError:
                pass
            finally:
                lock.release()
    summary = summary or {}
    tasks = summary.get("tasks", [])
    task_errors = "; ".join(f"{t.get('key')}: {t['error']}" for t in tasks if t.get("error"))
    row = {
        "experiment": experiment,
        "config_hash": digest,
        "preset": str(head.get("preset", summary.get("preset", "?"))),
        "device": str(head.get("device", summary.get("device", "cpu"))),
        "status": status,
        "started": summary.get("started"),
        "finished": summary.get("finished"),
        "wall_s": summary.get("wall_s"),
        "n_tasks": len(tasks) if tasks else None,
        "n_failed": sum(t.get("status") == "failed" for t in tasks) if tasks else None,
        "error": error or task_errors or None,
        "config_json": json.dumps(config, sort_keys=True),
        "path": f"{experiment}/{digest}",
        "pid": (holder or {}).get("pid"),
        "host": (holder or {}).get("host"),
        "pid_start": (holder or {}).get("start"),
    }
    task_rows = [
        (experiment, digest, str(t.get("key")), str(t.get("status")), t.get("error"),
         t.get("wall_s"), summary.get("finished"))
        for t in tasks if t.get("key")
    ]  # fmt: skip
    return row, task_rows

"""Reading a run directory back for the report: summary, resolved config, metrics table.

Layout (written by :mod:`deqlab.runs`)::

    <run_dir>/summary.json     required: experiment, title, paper, status, statements, tasks, ...
    <run_dir>/config.toml      resolved config: [experiment] name, preset, hash; [config] fields
    <run_dir>/metrics.csv      tidy long table (only its size and columns are reported)
    <run_dir>/figures/*.png    figures listed by summary["figures"]

The summary is required and must be well formed (``ValueError`` naming the field
otherwise); every other piece is optional and comes back as ``None`` plus a reason.
"""

from __future__ import annotations

import csv
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

SUMMARY_FILE = "summary.json"
CONFIG_FILE = "config.toml"
METRICS_FILE = "metrics.csv"


@dataclass(frozen=True)
class MetricsInfo:
    """Size of ``metrics.csv``: data rows (header excluded), column names, bytes."""

    path: Path
    n_rows: int
    columns: list[str]
    n_bytes: int


@dataclass(frozen=True)
class FigureEntry:
    """One figure of the summary: its path relative to the run directory and a caption."""

    path: str
    caption: str


def resolve_run_dir(run_dir: object) -> Path:
    """``run_dir`` as an existing directory path; TypeError/FileNotFoundError/ValueError."""
    if not isinstance(run_dir, str | os.PathLike):
        raise TypeError(f"`run_dir` must be a str or path; got {type(run_dir).__name__}")
    path = Path(run_dir)
    if not path.exists():
        raise FileNotFoundError(f"run directory {str(path)!r} does not exist")
    if not path.is_dir():
        raise ValueError(f"`run_dir` must be a directory; got the file {str(path)!r}")
    return path


#: How a damaged summary.json is rebuilt (said by every error about one).
REBUILD_HINT = (
    "rerunning the run's `deqlab reproduce` command, or `deqlab runs show HASH --out STORE`, "
    "rebuilds it from the checkpoints"
)


def read_summary(run_dir: Path) -> dict[str, Any]:
    """Parse and check ``summary.json``; raises naming the file and the faulty field (and
    saying how it is rebuilt: :data:`REBUILD_HINT`)."""
    path = run_dir / SUMMARY_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"{str(path)!r} not found: a run directory needs a summary.json to be reported"
        )
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{str(path)!r} is not valid JSON: {err}; {REBUILD_HINT}") from err
    if not isinstance(summary, dict):
        raise ValueError(
            f"{str(path)!r} must hold a JSON object; got {type(summary).__name__}; {REBUILD_HINT}"
        )
    for key in ("statements", "deviations", "tasks"):
        items = summary.setdefault(key, [])
        if not isinstance(items, list) or not all(isinstance(x, dict) for x in items):
            raise ValueError(
                f"{str(path)!r}: `{key}` must be a list of objects; got {_short(items)}; "
                + REBUILD_HINT
            )
    environment = summary.setdefault("environment", {})
    if not isinstance(environment, dict):
        raise ValueError(
            f"{str(path)!r}: `environment` must be an object; got {_short(environment)}; "
            + REBUILD_HINT
        )
    summary["figures"] = _parse_figures(path, summary.get("figures", []))
    return summary


def _short(value: object, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _parse_figures(path: Path, figures: object) -> list[FigureEntry]:
    """``figures``: a list of relative paths, or of ``{"path", "caption"}`` objects."""
    if not isinstance(figures, list):
        raise ValueError(f"{str(path)!r}: `figures` must be a list; got {figures!r}")
    parsed = []
    for i, item in enumerate(figures):
        entry = {"path": item} if isinstance(item, str) else item
        if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
            raise ValueError(
                f"{str(path)!r}: `figures[{i}]` must be a path string or an object with a "
                f"string 'path'; got {item!r}"
            )
        relative = Path(entry["path"])
        if relative.is_absolute() or ".." in relative.parts:
            raise ValueError(
                f"{str(path)!r}: `figures[{i}]` must be a path inside the run directory; "
                f"got {entry['path']!r}"
            )
        default_caption = relative.stem.replace("_", " ")
        parsed.append(FigureEntry(entry["path"], str(entry.get("caption", default_caption))))
    return parsed


def read_config(run_dir: Path) -> tuple[dict[str, Any] | None, str | None]:
    """``(config, None)`` from ``config.toml``, or ``(None, reason)`` if missing/unreadable."""
    path = run_dir / CONFIG_FILE
    if not path.is_file():
        return None, f"{CONFIG_FILE} not found in the run directory"
    try:
        return tomllib.loads(path.read_text(encoding="utf-8")), None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        return None, f"{CONFIG_FILE} could not be parsed: {err}"


def read_metrics_info(run_dir: Path) -> tuple[MetricsInfo | None, str | None]:
    """``(info, None)`` for ``metrics.csv`` (streamed, never loaded whole), or ``(None, why)``."""
    path = run_dir / METRICS_FILE
    if not path.is_file():
        return None, f"{METRICS_FILE} not found in the run directory (no metrics written yet)"
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.reader(handle)
            columns = next(reader, [])
            n_rows = sum(1 for _ in reader)
    except (csv.Error, UnicodeDecodeError) as err:
        return None, f"{METRICS_FILE} could not be read as CSV: {err}"
    return MetricsInfo(path, n_rows, columns, path.stat().st_size), None

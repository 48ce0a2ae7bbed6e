"""The run store: one directory per resolved config, and an SQLite index of all runs.

Layout (the report reads exactly this)::

    <root>/index.sqlite
    <root>/<experiment>/<config-hash-12>/
        config.toml      [experiment] name, preset, hash, device; [config] every field
        metrics.csv      the tidy table (one row per measurement)
        summary.json     status, timings, tasks, statements, deviations, figures, environment
        figures/         <name>.png and <name>.pdf
        checkpoints/     <task-key>.pt: {"done", "rows", "state"} (state is None once done)

Every file is written atomically (temporary file in the same directory, then
``os.replace``), so a reader or a resumed run never sees half a file.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
import sqlite3
import tempfile
from contextlib import closing
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import tomli_w
import torch

from deqlab._atomic import atomic_path, write_text_atomic
from deqlab.experiments.config import config_to_dict

INDEX_NAME = "index.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    experiment TEXT NOT NULL,
    config_hash TEXT NOT NULL,
    preset TEXT NOT NULL,
    device TEXT NOT NULL,
    status TEXT NOT NULL,
    started TEXT,
    finished TEXT,
    wall_s REAL,
    n_tasks INTEGER,
    n_failed INTEGER,
    error TEXT,
    config_json TEXT NOT NULL,
    path TEXT NOT NULL,
    PRIMARY KEY (experiment, config_hash)
);
CREATE TABLE IF NOT EXISTS tasks (
    experiment TEXT NOT NULL,
    config_hash TEXT NOT NULL,
    task_key TEXT NOT NULL,
    status TEXT NOT NULL,
    error TEXT,
    wall_s REAL,
    finished TEXT,
    PRIMARY KEY (experiment, config_hash, task_key)
);
"""


class RunStoreError(ValueError):
    """The output directory or a run in it cannot be used; the message is one line."""


def now_iso() -> str:
    """The current UTC time, ISO 8601 to the second."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


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


@dataclass(frozen=True)
class RunDir:
    """The files of one run (see the module docstring for the layout)."""

    path: Path

    @property
    def config_file(self) -> Path:
        return self.path / "config.toml"

    @property
    def metrics_file(self) -> Path:
        return self.path / "metrics.csv"

    @property
    def summary_file(self) -> Path:
        return self.path / "summary.json"

    @property
    def figures_dir(self) -> Path:
        return self.path / "figures"

    def checkpoint_file(self, task_key: str) -> Path:
        return self.path / "checkpoints" / f"{task_key}.pt"

    def save_checkpoint(self, task_key: str, payload: dict[str, Any]) -> None:
        """Atomically save ``{"done", "rows", "state"}`` of a task."""
        with atomic_path(self.checkpoint_file(task_key)) as tmp:
            torch.save(payload, tmp)

    def load_checkpoint(self, task_key: str) -> dict[str, Any] | None:
        """The last checkpoint of a task, or ``None`` if it has none.

        Checkpoints hold only tensors and plain Python values, so the safe
        ``weights_only`` loader reads them.
        """
        path = self.checkpoint_file(task_key)
        if not path.exists():
            return None
        return torch.load(path, map_location="cpu", weights_only=True)

    def clear(self) -> None:
        """Delete the run's results and checkpoints (``--force``); ``config.toml`` stays."""
        for directory in (self.path / "checkpoints", self.figures_dir):
            shutil.rmtree(directory, ignore_errors=True)
        for file in (self.metrics_file, self.summary_file, self.path / "report.html"):
            file.unlink(missing_ok=True)

    def write_summary(self, summary: dict[str, Any]) -> None:
        write_text_atomic(self.summary_file, json.dumps(summary, indent=2, default=str) + "\n")

    def read_summary(self) -> dict[str, Any]:
        return json.loads(self.summary_file.read_text(encoding="utf-8"))


class RunStore:
    """Run directories under ``root`` and the SQLite index ``root/index.sqlite``."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self.index = self.root / INDEX_NAME
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=self.root):
                pass
        except OSError as err:
            raise RunStoreError(
                f"output directory {str(self.root)!r} is not writable: {err.strerror or err}"
            ) from None
        with closing(self._connect()) as db, db:
            db.executescript(_SCHEMA)

    @classmethod
    def open_existing(cls, root: Path | str) -> RunStore:
        """The store at ``root`` for reading only: nothing is created or written.

        Raises :class:`RunStoreError` when ``root`` holds no run index.
        """
        store = cls.__new__(cls)
        store.root = Path(root)
        store.index = store.root / INDEX_NAME
        if not store.index.is_file():
            raise RunStoreError(
                f"no run index at {str(store.index)!r}; run `deqlab reproduce` first"
            )
        return store

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.index, timeout=30)
        db.row_factory = sqlite3.Row
        return db

    def run_dir(self, experiment: str, config_hash: str) -> RunDir:
        return RunDir(self.root / experiment / config_hash)

    def lookup(self, experiment: str, config_hash: str) -> dict[str, Any] | None:
        """The index row of a run, or ``None``."""
        with closing(self._connect()) as db:
            row = db.execute(
                "SELECT * FROM runs WHERE experiment = ? AND config_hash = ?",
                (experiment, config_hash),
            ).fetchone()
        return None if row is None else dict(row)

    def begin(
        self, experiment: str, config_hash: str, *, preset: str, device: str, config: Any
    ) -> RunDir:
        """Create (or reopen) the run directory, write ``config.toml``, mark it running."""
        run = self.run_dir(experiment, config_hash)
        fields = {k: v for k, v in config_to_dict(config).items() if v is not None}
        document = {
            "experiment": {
                "name": experiment,
                "preset": preset,
                "hash": config_hash,
                "device": device,
            },
            "config": fields,
        }
        write_text_atomic(run.config_file, tomli_w.dumps(document))
        with closing(self._connect()) as db, db:
            db.execute(
                "INSERT INTO runs (experiment, config_hash, preset, device, status, started,"
                " config_json, path) VALUES (?, ?, ?, ?, 'running', ?, ?, ?)"
                " ON CONFLICT (experiment, config_hash) DO UPDATE SET status = 'running',"
                " started = excluded.started, finished = NULL, error = NULL",
                (
                    experiment,
                    config_hash,
                    preset,
                    device,
                    now_iso(),
                    json.dumps(config_to_dict(config), sort_keys=True),
                    str(run.path),
                ),
            )
        return run

    def record_task(
        self,
        experiment: str,
        config_hash: str,
        task_key: str,
        *,
        status: str,
        error: str | None,
        wall_s: float,
    ) -> None:
        """Record the outcome of one task (a failed task keeps its error text)."""
        with closing(self._connect()) as db, db:
            db.execute(
                "INSERT OR REPLACE INTO tasks VALUES (?, ?, ?, ?, ?, ?, ?)",
                (experiment, config_hash, task_key, status, error, wall_s, now_iso()),
            )

    def finish(
        self,
        experiment: str,
        config_hash: str,
        *,
        status: str,
        wall_s: float,
        n_tasks: int,
        n_failed: int,
        error: str | None,
    ) -> None:
        """Set the final status, timings and error text of a run."""
        with closing(self._connect()) as db, db:
            db.execute(
                "UPDATE runs SET status = ?, finished = ?, wall_s = ?, n_tasks = ?, n_failed = ?,"
                " error = ? WHERE experiment = ? AND config_hash = ?",
                (status, now_iso(), wall_s, n_tasks, n_failed, error, experiment, config_hash),
            )

    def runs(self) -> list[dict[str, Any]]:
        """All index rows, newest first."""
        with closing(self._connect()) as db:
            return [dict(r) for r in db.execute("SELECT * FROM runs ORDER BY started DESC")]

    def tasks(self, experiment: str, config_hash: str) -> list[dict[str, Any]]:
        """The task rows of one run."""
        with closing(self._connect()) as db:
            rows = db.execute(
                "SELECT * FROM tasks WHERE experiment = ? AND config_hash = ? ORDER BY task_key",
                (experiment, config_hash),
            )
            return [dict(r) for r in rows]

    def find(self, ref: str) -> dict[str, Any]:
        """The run whose hash starts with ``ref`` (or whose path is ``ref``), else an error."""
        matches = [r for r in self.runs() if r["config_hash"].startswith(ref) or r["path"] == ref]
        if len(matches) != 1:
            what = "no run" if not matches else f"{len(matches)} runs"
            raise RunStoreError(f"{what} in {str(self.index)!r} match {ref!r}")
        return matches[0]

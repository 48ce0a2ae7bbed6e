"""The run store's SQLite index (``<root>/index.sqlite``) of the run directories under a root.

The index stores each run's directory relative to the store root, so a moved or copied
store works; the rows it returns carry ``path``, the directory under this store's root. A
run's owner (pid, host, process start time) is recorded in the index and in ``.lock``: a
``running`` run whose process is gone is listed as ``dead``. The index can be rebuilt from
the run directories (:meth:`RunStore.reindex`, ``deqlab runs reindex``; each run's rows:
:mod:`deqlab.runs.index_rows`). The run directories themselves are :mod:`deqlab.runs.rundir`.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import closing, contextmanager, suppress
from pathlib import Path
from typing import Any

import tomli_w

from deqlab._atomic import atomic_path, write_text_atomic
from deqlab.experiments.config import config_to_dict
from deqlab.runs.index_rows import index_entry, insert_entry, readable_index
from deqlab.runs.lock import now_iso, owner_state, process_identity
from deqlab.runs.rundir import RunDir, RunStoreError
from deqlab.runs.sqlite_read import journal_of, open_for_reading

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
    pid INTEGER,
    host TEXT,
    pid_start TEXT,
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
#: Columns added after the first release (an older index gains them when opened to write).
_ADDED_COLUMNS = {"pid": "INTEGER", "host": "TEXT", "pid_start": "TEXT"}


def check_not_a_file(root: Path) -> None:
    """Raise :class:`RunStoreError` when ``root``, or a directory above it, is a file."""
    for path in (root, *root.parents):
        if path.exists() and not path.is_dir():
            where = "" if path == root else f" cannot be made: {str(path)!r}"
            raise RunStoreError(f"output directory {str(root)!r}{where} is a file, not a directory")


def _store_hint(root: Path) -> str:
    return f"`deqlab runs reindex --out {root}` rebuilds it from the run directories"


class RunStore:
    """Run directories under ``root`` and the SQLite index ``root/index.sqlite``."""

    def __init__(self, root: Path | str) -> None:
        """Open (or make) the store at ``root`` for writing; the index is created by the
        first write, so a run refused before it begins leaves no index behind."""
        self.root = Path(root)
        self.index = self.root / INDEX_NAME
        self.read_only = False
        self.made_root = not self.root.exists()
        check_not_a_file(self.root)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=self.root):
                pass
        except OSError as err:
            raise RunStoreError(
                f"output directory {str(self.root)!r} is not writable: {err.strerror or err}"
            ) from None
        if not (self.index.is_file() and self.index.stat().st_size) and self.run_directories():
            self._index_unindexed_runs()  # a lost (or emptied) index
        if self.index.is_file():
            with self._db(write=True) as db:
                have = {r[1] for r in db.execute("PRAGMA table_info(runs)")}
                for column, kind in _ADDED_COLUMNS.items():
                    if column not in have:
                        db.execute(f"ALTER TABLE runs ADD COLUMN {column} {kind}")

    def remove_if_unused(self) -> None:
        """Remove the root when this store made it and nothing was written into it."""
        if self.made_root:
            with suppress(OSError):
                self.root.rmdir()

    @classmethod
    def open_existing(cls, root: Path | str) -> RunStore:
        """The store at ``root`` for reading only: nothing is created or written (a
        read-only directory works).

        Raises :class:`RunStoreError` when ``root`` holds no run index, or an unreadable one.
        """
        store = cls.unopened(root)
        store.read_only = True
        check_not_a_file(store.root)
        if not store.index.is_file():
            found = store.run_directories()
            if found:
                raise RunStoreError(
                    f"no run index at {str(store.index)!r}, but {len(found)} run "
                    f"director{'y' if len(found) == 1 else 'ies'} below it; "
                    + _store_hint(store.root)
                )
            raise RunStoreError(
                f"no run index at {str(store.index)!r}; run `deqlab reproduce` first"
            )
        with store._db() as db:
            db.execute("SELECT count(*) FROM runs").fetchone()
            db.execute("SELECT count(*) FROM tasks").fetchone()
        return store

    @classmethod
    def unopened(cls, root: Path | str) -> RunStore:
        """The store at ``root`` without touching its index (to :meth:`reindex` it)."""
        store = cls.__new__(cls)
        store.root = Path(root)
        store.index = store.root / INDEX_NAME
        store.read_only = False
        return store

    def _connect(self, write: bool = False) -> sqlite3.Connection:
        if not self.index.is_file() and not write:
            db = sqlite3.connect(":memory:")  # no index yet: no runs
            db.executescript(_SCHEMA)
        elif write or not self.read_only:
            db = sqlite3.connect(self.index, timeout=30)
            if write:
                db.executescript(_SCHEMA)  # the first write creates the index
        else:
            db = open_for_reading(self.index)
        db.row_factory = sqlite3.Row
        return db

    @contextmanager
    def _db(self, write: bool = False) -> Iterator[sqlite3.Connection]:
        """A connection (a transaction when writing); SQLite errors become one line."""
        try:
            with closing(self._connect(write)) as db:
                if write:
                    with db:
                        yield db
                else:
                    yield db
        except sqlite3.Error as err:
            raise self._index_error(err) from None

    def _index_error(self, err: sqlite3.Error) -> RunStoreError:
        text = str(err)
        where = repr(str(self.index))
        if "readonly" in text or "read-only" in text:
            return RunStoreError(f"run index {where} is read-only ({text})")
        if "locked" in text or "busy" in text:
            return RunStoreError(f"run index {where} is locked by another process ({text})")
        if "disk is full" in text or "disk I/O" in text:
            return RunStoreError(f"cannot write the run index {where} ({text})")
        if "unable to open" in text:
            return RunStoreError(f"cannot open the run index {where} ({text})")
        return RunStoreError(f"run index {where} is unreadable ({text}); " + _store_hint(self.root))

    def run_dir(self, experiment: str, config_hash: str) -> RunDir:
        return RunDir(self.root / experiment / config_hash)

    def _present(self, row: sqlite3.Row) -> dict[str, Any]:
        """An index row as callers see it: ``path`` under this root; a run whose directory
        is gone is ``missing``; a ``running`` run whose process is gone is ``dead``."""
        out = dict(row)
        out["path"] = str(self.run_dir(out["experiment"], out["config_hash"]).path)
        if not Path(out["path"]).is_dir():
            out["status"] = "missing"
        elif out["status"] == "running":
            state = owner_state(out.get("pid"), out.get("host"), out.get("pid_start"))
            if state == "dead":
                out["status"] = "dead"
        return out

    def lookup(self, experiment: str, config_hash: str) -> dict[str, Any] | None:
        """The index row of a run (its recorded status, ``path`` under this root), or ``None``."""
        with self._db() as db:
            row = db.execute(
                "SELECT * FROM runs WHERE experiment = ? AND config_hash = ?",
                (experiment, config_hash),
            ).fetchone()
        if row is None:
            return None
        out = dict(row)
        out["path"] = str(self.run_dir(experiment, config_hash).path)
        return out

    def begin(
        self, experiment: str, config_hash: str, *, preset: str, device: str, config: Any
    ) -> RunDir:
        """Create (or reopen) the run directory, write ``config.toml``, mark it running
        (owned by this process)."""
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
        me = process_identity()
        with self._db(write=True) as db:
            db.execute(
                "INSERT INTO runs (experiment, config_hash, preset, device, status, started,"
                " config_json, path, pid, host, pid_start)"
                " VALUES (?, ?, ?, ?, 'running', ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (experiment, config_hash) DO UPDATE SET status = 'running',"
                " started = excluded.started, finished = NULL, error = NULL,"
                " path = excluded.path, pid = excluded.pid, host = excluded.host,"
                " pid_start = excluded.pid_start",
                (
                    experiment,
                    config_hash,
                    preset,
                    device,
                    now_iso(),
                    json.dumps(config_to_dict(config), sort_keys=True),
                    f"{experiment}/{config_hash}",
                    me["pid"],
                    me["host"],
                    me["start"],
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
        with self._db(write=True) as db:
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
        with self._db(write=True) as db:
            db.execute(
                "UPDATE runs SET status = ?, finished = ?, wall_s = ?, n_tasks = ?, n_failed = ?,"
                " error = ? WHERE experiment = ? AND config_hash = ?",
                (status, now_iso(), wall_s, n_tasks, n_failed, error, experiment, config_hash),
            )

    def runs(self) -> list[dict[str, Any]]:
        """All index rows, newest first (``path`` under this root; ``dead`` runs marked)."""
        with self._db() as db:
            rows = list(db.execute("SELECT * FROM runs ORDER BY started DESC"))
        return [self._present(r) for r in rows]

    def tasks(self, experiment: str, config_hash: str) -> list[dict[str, Any]]:
        """The task rows of one run."""
        with self._db() as db:
            rows = db.execute(
                "SELECT * FROM tasks WHERE experiment = ? AND config_hash = ? ORDER BY task_key",
                (experiment, config_hash),
            )
            return [dict(r) for r in rows]

    def find(self, ref: str) -> dict[str, Any]:
        """The run whose hash starts with ``ref`` (or whose directory is ``ref``), else an error."""
        target = _resolved(ref)
        matches = [
            r
            for r in self.runs()
            if r["config_hash"].startswith(ref) or _resolved(r["path"]) == target
        ]
        if len(matches) != 1:
            what = "no run" if not matches else f"{len(matches)} runs"
            raise RunStoreError(f"{what} in {str(self.index)!r} match {ref!r}")
        return matches[0]

    # -- rebuilding the index

    def run_directories(self) -> list[Path]:
        """The run directories below the root (``<experiment>/<hash>/config.toml``)."""
        if not self.root.is_dir():
            return []
        return sorted(p.parent for p in self.root.glob("*/*/config.toml") if p.is_file())

    def _index_unindexed_runs(self) -> None:
        """Add the run directories the index lacks, in place, in one write transaction.

        For a lost or emptied index, when a store is opened to write. Not :meth:`reindex`:
        replacing the file would race with another process that opened the same fresh
        store a moment earlier and is beginning its own run: its row, written between our
        reading the run directories and our replacing the file, would come back without its
        start time (the directory's summary is not written yet). In place and under
        ``BEGIN IMMEDIATE``, that row is either already there (and kept) or written after
        ours (and then overwrites it).
        """
        with self._db(write=True) as db:
            db.execute("BEGIN IMMEDIATE")
            indexed = {tuple(r) for r in db.execute("SELECT experiment, config_hash FROM runs")}
            for path in self.run_directories():
                if (path.parent.name, path.name) in indexed:
                    continue
                try:
                    run, tasks = index_entry(RunDir(path))
                except (OSError, ValueError):
                    continue  # `deqlab runs reindex` names what it skips
                insert_entry(db, run, tasks, "IGNORE")

    def reindex(self) -> dict[str, Any]:
        """Rebuild ``index.sqlite`` from the run directories (atomically replacing it).

        Each run's row comes from its ``config.toml`` and ``summary.json``: a run whose
        summary says ``running`` is ``running`` only while a live process holds its lock,
        else ``interrupted`` (and its summary is rewritten to say so); a run without a
        readable summary is ``interrupted`` with the reason as its error. An unreadable old
        index is kept as ``index.sqlite.corrupt`` (with its journal, if a writer left one).
        Returns ``{"runs", "skipped", "set_aside"}``; raises :class:`RunStoreError` (one
        line) when the new index cannot be written.
        """
        entries, skipped = [], []
        for path in self.run_directories():
            try:
                entries.append(index_entry(RunDir(path)))
            except (OSError, ValueError) as err:
                skipped.append(f"{path}: {err}")
        set_aside = None
        if self.index.is_file() and self.index.stat().st_size and not readable_index(self.index):
            aside = self.index.with_name(INDEX_NAME + ".corrupt")
            shutil.copyfile(self.index, aside)
            if journal_of(self.index).is_file():  # it belongs to the old index, not the new one
                os.replace(journal_of(self.index), journal_of(aside))
            set_aside = str(aside)
        try:
            with atomic_path(self.index) as tmp, closing(sqlite3.connect(tmp)) as db, db:
                db.executescript(_SCHEMA)
                for run, tasks in entries:
                    insert_entry(db, run, tasks, "REPLACE")
        except sqlite3.Error as err:  # e.g. a read-only directory: the new index cannot be made
            raise self._index_error(err) from None
        return {"runs": len(entries), "skipped": skipped, "set_aside": set_aside}


def _resolved(path: str) -> Path | None:
    try:
        return Path(path).resolve()
    except (OSError, RuntimeError):
        return None

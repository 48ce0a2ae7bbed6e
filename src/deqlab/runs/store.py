"""The run store: one directory per resolved config, and an SQLite index of all runs.

Layout (the report reads exactly this)::

    <root>/index.sqlite
    <root>/<experiment>/<config-hash-12>/
        config.toml      [experiment] name, preset, hash, device; [config] every field
        metrics.csv      the tidy table (one row per measurement)
        summary.json     status, timings, tasks, statements, deviations, figures, environment,
                         files (size and SHA-256 of each result file), notes
        figures/         <name>.png and <name>.pdf
        checkpoints/     <task-key>.pt: {"done", "rows", "state"} (state is None once done)
        .lock            held (``flock``) by the process computing the run; it names it

Every file is written atomically (temporary file in the same directory, then
``os.replace``), so a reader or a resumed run never sees half a file. The index stores
each run's directory relative to the store root, so a moved or copied store works; the
rows it returns carry ``path``, the directory under this store's root. A run's owner
(pid, host, process start time) is recorded in the index and in ``.lock``: a ``running``
run whose process is gone is listed as ``dead``. The index can be rebuilt from the run
directories (:meth:`RunStore.reindex`, ``deqlab runs reindex``).
"""

from __future__ import annotations

import csv
import errno
import hashlib
import io
import json
import os
import shutil
import socket
import sqlite3
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import tomli_w
import torch

from deqlab._atomic import atomic_path, stale_temporaries, write_text_atomic
from deqlab.experiments.config import config_to_dict

try:  # POSIX; elsewhere runs are not locked
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

INDEX_NAME = "index.sqlite"
LOCK_NAME = ".lock"
#: The statuses a run has in the index and summary.json (``dead`` is only ever shown).
STATUSES = ("running", "finished", "failed", "interrupted")
#: The keys of a checkpoint.
CHECKPOINT_KEYS = ("done", "rows", "state")
#: Set by the process that owns a run (its pid) for the processes computing its tasks.
OWNER_ENV = "DEQLAB_RUN_OWNER"

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


class RunStoreError(ValueError):
    """The output directory or a run in it cannot be used; the message is one line."""


class SummaryError(RunStoreError):
    """A ``summary.json`` that cannot be read or does not have the expected shape."""


class OwnerGoneError(RuntimeError):
    """The process that owns a run is gone (or another owns it now): nothing may write."""


def now_iso() -> str:
    """The current UTC time, ISO 8601 to the second."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# --- processes ----------------------------------------------------------------------------


def host_name() -> str:
    """This machine's name, as recorded with a run's owner."""
    return socket.gethostname()


def process_start(pid: int) -> str | None:
    """An identifier of the start of process ``pid`` (boot id and start tick, Linux), or
    ``None`` where it cannot be read; a reused pid has another one."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return f"{boot}:{fields[19]}" if len(fields) > 19 else None


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    fields = stat.rsplit(")", 1)[-1].split()
    return bool(fields) and fields[0] in ("Z", "X")


def process_identity() -> dict[str, Any]:
    """``{"pid", "host", "start"}`` of this process."""
    return {"pid": os.getpid(), "host": host_name(), "start": process_start(os.getpid())}


def owner_state(pid: object, host: object, start: object) -> str:
    """``alive``, ``dead`` (the process is gone, or its pid was reused) or ``unknown``
    (another host, or nothing recorded)."""
    if not isinstance(pid, int) or pid <= 0 or host != host_name():
        return "unknown"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return "dead"
    except PermissionError:
        pass
    if _zombie(pid):
        return "dead"
    if start is not None:
        current = process_start(pid)
        if current is not None and current != start:
            return "dead"
    return "alive"


# --- tidy tables ----------------------------------------------------------------------------


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


def file_record(path: Path) -> dict[str, Any]:
    """``{"bytes", "sha256"}`` of a file, as summary.json records each result file."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return {"bytes": path.stat().st_size, "sha256": digest.hexdigest()}


# --- summaries and checkpoints --------------------------------------------------------------


def check_summary(summary: object, path: Path) -> dict[str, Any]:
    """``summary`` if it has the shape :mod:`deqlab.runs` writes, else :class:`SummaryError`
    naming the file and the faulty field."""
    where = str(path)
    if not isinstance(summary, dict):
        raise SummaryError(f"{where!r} must hold a JSON object; got {type(summary).__name__}")
    status = summary.get("status")
    if status not in STATUSES:
        raise SummaryError(f"{where!r}: `status` must be one of {', '.join(STATUSES)}; "
                           f"got {status!r}")  # fmt: skip
    for key in ("statements", "deviations", "tasks", "notes"):
        items = summary.get(key, [])
        kind = str if key == "notes" else dict
        if not isinstance(items, list) or not all(isinstance(x, kind) for x in items):
            what = "strings" if kind is str else "objects"
            raise SummaryError(f"{where!r}: `{key}` must be a list of {what}; got "
                               f"{_short(items)}")  # fmt: skip
    figures = summary.get("figures", [])
    if not isinstance(figures, list) or not all(
        isinstance(f, str) or (isinstance(f, dict) and isinstance(f.get("path"), str))
        for f in figures
    ):
        raise SummaryError(f"{where!r}: `figures` must be a list of paths or objects with a "
                           f"'path'; got {_short(figures)}")  # fmt: skip
    files = summary.get("files", {})
    if not isinstance(files, dict) or not all(
        isinstance(v, dict) and isinstance(v.get("bytes"), int) and isinstance(v.get("sha256"), str)
        for v in files.values()
    ):
        raise SummaryError(f"{where!r}: `files` must map file names to {{bytes, sha256}}; got "
                           f"{_short(files)}")  # fmt: skip
    return summary


def _short(value: object, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _first_sentence(text: str, limit: int = 160) -> str:
    line = " ".join(text.split())
    cut = line.find(". ")
    line = line if cut < 0 else line[: cut + 1]
    return line if len(line) <= limit else line[: limit - 1] + "…"


def checkpoint_problem(path: Path, err: BaseException | None = None) -> str:
    """Why the checkpoint file ``path`` cannot be read, in a few words."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(4)
    except OSError as read_error:
        return f"it cannot be read ({read_error.strerror or read_error})"
    if not head:
        return "it is empty"
    if head != b"PK\x03\x04":
        return "it is not a torch checkpoint (no zip archive header)"
    if not zipfile.is_zipfile(path):
        return "it is truncated or damaged (its zip archive has no central directory)"
    if err is None:
        return "it cannot be read"
    detail = _first_sentence(str(err)) if str(err) else ""
    return f"{type(err).__name__}" + (f": {detail}" if detail else "")


def _check_payload(payload: object) -> str | None:
    """Why a loaded checkpoint does not have the shape ``{"done", "rows", "state"}``."""
    if not isinstance(payload, dict):
        return f"it holds a {type(payload).__name__}, not a dict of {', '.join(CHECKPOINT_KEYS)}"
    missing = [k for k in CHECKPOINT_KEYS if k not in payload]
    if missing:
        has = ", ".join(map(str, payload)) or "nothing"
        return f"it lacks the key(s) {', '.join(missing)} (it holds {has})"
    if not isinstance(payload["done"], bool):
        return f"its 'done' must be a bool; got {type(payload['done']).__name__}"
    rows = payload["rows"]
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        return "its 'rows' must be a list of dicts"
    return None


def _warn_stderr(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)


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

    @property
    def lock_file(self) -> Path:
        return self.path / LOCK_NAME

    def checkpoint_file(self, task_key: str) -> Path:
        return self.path / "checkpoints" / f"{task_key}.pt"

    # -- ownership

    def owner(self) -> dict[str, Any] | None:
        """The owner recorded in ``.lock`` (``pid``, ``host``, ``start``), or ``None``."""
        try:
            record = json.loads(self.lock_file.read_text(encoding="utf-8") or "null")
        except (OSError, ValueError):
            return None
        return record if isinstance(record, dict) else None

    def check_owner(self) -> None:
        """Raise :class:`OwnerGoneError` when the run's owner is gone, or when this process
        works for an owner (``$DEQLAB_RUN_OWNER``, set by the owner for its workers) that
        no longer holds the run: it ended, or another process owns the run now.

        Called before every checkpoint write: a task left running by a dead or finished
        owner (an orphaned worker) stops instead of writing into the run. A run owned on
        another host is not checked, nor one without a recorded owner written to by a
        process that is no run's worker (a direct call).
        """
        record = self.owner()
        expected = os.environ.get(OWNER_ENV, "")
        if record is not None and record.get("host") != host_name():
            return
        if expected.isdigit():
            if record is None:
                raise OwnerGoneError(
                    f"process {expected}, which started this task, no longer owns run "
                    f"{self.path}; not writing into it"
                )
            if int(expected) != record.get("pid"):
                raise OwnerGoneError(
                    f"run {self.path} is owned by process {record.get('pid')} now, not by "
                    f"{expected} that started this task; not writing into it"
                )
        if record is None:
            return
        if owner_state(record.get("pid"), record.get("host"), record.get("start")) == "dead":
            raise OwnerGoneError(
                f"the process {record.get('pid')} that owns run {self.path} is gone; "
                "not writing into it"
            )

    # -- checkpoints

    def save_checkpoint(self, task_key: str, payload: dict[str, Any]) -> None:
        """Atomically save ``{"done", "rows", "state"}`` of a task (its owner must be alive)."""
        self.check_owner()
        with atomic_path(self.checkpoint_file(task_key)) as tmp:
            torch.save(payload, tmp)

    def load_checkpoint(
        self,
        task_key: str,
        *,
        on_corrupt: Callable[[str], None] | None = None,
        mmap: bool = False,
    ) -> dict[str, Any] | None:
        """The last checkpoint of a task, or ``None`` if it has none.

        Checkpoints hold only tensors and plain Python values, so the safe ``weights_only``
        loader reads them. A file that cannot be read or lacks a key is set aside as
        ``<key>.pt.corrupt`` and ``None`` is returned (the task restarts from scratch);
        ``on_corrupt`` receives the one-line message naming the file (default: a warning
        on stderr). ``mmap=True`` maps tensors instead of reading them (a cheap check).
        """
        path = self.checkpoint_file(task_key)
        if not path.exists():
            return None
        try:
            payload = torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
        except Exception as err:  # torch raises many types for a damaged file
            problem = checkpoint_problem(path, err)
        else:
            problem = _check_payload(payload)
            if problem is None:
                return payload
        (on_corrupt or _warn_stderr)(self.set_aside(task_key, problem))
        return None

    def set_aside(self, task_key: str, problem: str) -> str:
        """Move a bad checkpoint to ``<key>.pt.corrupt``; return the message saying so."""
        path = self.checkpoint_file(task_key)
        aside = path.with_name(path.name + ".corrupt")
        try:
            os.replace(path, aside)
        except OSError as err:
            return (
                f"checkpoint {str(path)!r} is unreadable: {problem}; it could not be set aside "
                f"({err.strerror or err}); task {task_key} restarts from scratch"
            )
        return (
            f"checkpoint {str(path)!r} is unreadable: {problem}; set aside as "
            f"{aside.name!r}, task {task_key} restarts from scratch"
        )

    def clear(self) -> None:
        """Delete the run's results and checkpoints (``--force``); ``config.toml`` stays."""
        for directory in (self.path / "checkpoints", self.figures_dir):
            shutil.rmtree(directory, ignore_errors=True)
        for file in (self.metrics_file, self.summary_file, self.path / "report.html"):
            file.unlink(missing_ok=True)

    def remove_stale_temporaries(self) -> list[Path]:
        """Delete the temporary files of killed writers in the run directory; return them."""
        removed = []
        for path in stale_temporaries(self.path):
            try:
                path.unlink()
            except OSError:
                continue
            removed.append(path)
        return removed

    # -- summary and result files

    def write_summary(self, summary: dict[str, Any]) -> None:
        write_text_atomic(self.summary_file, json.dumps(summary, indent=2, default=str) + "\n")

    def read_summary(self) -> dict[str, Any]:
        """The summary, checked (:func:`check_summary`); :class:`SummaryError` names the file
        when it is missing, not JSON or of another shape."""
        path = self.summary_file
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise SummaryError(f"{str(path)!r} does not exist") from None
        except (OSError, UnicodeDecodeError) as err:
            raise SummaryError(f"{str(path)!r} cannot be read: {err}") from None
        try:
            summary = json.loads(text)
        except ValueError as err:
            raise SummaryError(f"{str(path)!r} is not valid JSON ({err})") from None
        return check_summary(summary, path)

    def result_files(self, figures: list[Any]) -> dict[str, dict[str, Any]]:
        """``{relative path: {"bytes", "sha256"}}`` of metrics.csv and the listed figures."""
        names = ["metrics.csv"] + [f["path"] if isinstance(f, dict) else f for f in figures]
        return {n: file_record(self.path / n) for n in names if (self.path / n).is_file()}

    def verify_files(self, recorded: dict[str, dict[str, Any]]) -> list[str]:
        """Problems of the result files against ``recorded`` (empty when all match)."""
        problems = []
        for name, record in recorded.items():
            path = self.path / name
            if not path.is_file():
                problems.append(f"{name} is missing")
                continue
            size = path.stat().st_size
            if size != record["bytes"]:
                problems.append(f"{name} has {size} bytes, summary.json records {record['bytes']}")
            elif file_record(path)["sha256"] != record["sha256"]:
                problems.append(f"{name}'s SHA-256 differs from the one summary.json records")
        return problems


# --- locks ------------------------------------------------------------------------------------


class RunLock:
    """The exclusive lock of one run directory (``flock`` on ``.lock``), held by its owner.

    The lock is released when the owner ends, however it ends (the kernel drops the lock
    of a killed process), so a lock left by a dead owner is taken over by the next one.
    While held, ``.lock`` names the owner (pid, host, process start); :meth:`release`
    empties it.
    """

    def __init__(self, run: RunDir) -> None:
        self.run = run
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, on_wait: Callable[[dict[str, Any] | None], None] | None = None) -> None:
        """Take the lock; if another process holds it, call ``on_wait(owner)`` and wait."""
        self._acquire(blocking=True, on_wait=on_wait)

    def acquire_nowait(self) -> bool:
        """Take the lock if no other process holds it; return whether it was taken."""
        return self._acquire(blocking=False, on_wait=None)

    def _acquire(
        self, *, blocking: bool, on_wait: Callable[[dict[str, Any] | None], None] | None
    ) -> bool:
        waited = False
        while True:
            self.run.path.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.run.lock_file, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                if fcntl is not None and not _unlockable(fd):
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        if not blocking:
                            os.close(fd)
                            return False
                        if on_wait is not None and not waited:
                            on_wait(self.run.owner())
                        waited = True
                        fcntl.flock(fd, fcntl.LOCK_EX)
                    if not _same_file(fd, self.run.lock_file):
                        os.close(fd)  # the previous owner removed the run directory: again
                        continue
                record = json.dumps({**process_identity(), "since": now_iso()}).encode()
                os.ftruncate(fd, 0)
                os.pwrite(fd, record, 0)
            except BaseException:
                os.close(fd)
                raise
            self._fd = fd
            return True

    def remove_if_empty(self) -> bool:
        """While holding the lock: delete the run directory when it holds nothing but the
        lock (a run that never began), and its experiment directory when that is empty."""
        if self._fd is None:
            return False
        path = self.run.path
        try:
            if [p.name for p in path.iterdir()] != [LOCK_NAME]:
                return False
            self.run.lock_file.unlink()
            path.rmdir()
            path.parent.rmdir()
        except OSError:
            pass
        return True

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)
        except OSError:
            pass
        finally:
            os.close(fd)  # closing drops the flock


def _unlockable(fd: int) -> bool:
    """True where the file system has no ``flock`` (some network file systems): the run is
    then not locked (its owner is still recorded)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError as err:
        return err.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)
    fcntl.flock(fd, fcntl.LOCK_UN)
    return False


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.fstat(fd).st_ino == os.stat(path).st_ino
    except OSError:
        return False


def lock_holder(run: RunDir) -> dict[str, Any] | None:
    """The owner of ``run`` if a live process holds its lock now, else ``None``."""
    if fcntl is None or not run.lock_file.is_file():
        return None
    try:
        fd = os.open(run.lock_file, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return run.owner() or {}
    except OSError:
        return None
    finally:
        os.close(fd)  # also drops the shared lock just taken
    return None


# --- the store ----------------------------------------------------------------------------------


def _store_hint(root: Path) -> str:
    return f"`deqlab runs reindex --out {root}` rebuilds it from the run directories"


class RunStore:
    """Run directories under ``root`` and the SQLite index ``root/index.sqlite``."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self.index = self.root / INDEX_NAME
        self.read_only = False
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=self.root):
                pass
        except OSError as err:
            raise RunStoreError(
                f"output directory {str(self.root)!r} is not writable: {err.strerror or err}"
            ) from None
        if not (self.index.is_file() and self.index.stat().st_size) and self.run_directories():
            self.reindex()  # a lost (or emptied) index is rebuilt from the run directories
        with self._db(write=True) as db:
            db.executescript(_SCHEMA)
            have = {r[1] for r in db.execute("PRAGMA table_info(runs)")}
            for column, kind in _ADDED_COLUMNS.items():
                if column not in have:
                    db.execute(f"ALTER TABLE runs ADD COLUMN {column} {kind}")

    @classmethod
    def open_existing(cls, root: Path | str) -> RunStore:
        """The store at ``root`` for reading only: nothing is created or written (a
        read-only directory works).

        Raises :class:`RunStoreError` when ``root`` holds no run index, or an unreadable one.
        """
        store = cls.unopened(root)
        store.read_only = True
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
        if write or not self.read_only:
            db = sqlite3.connect(self.index, timeout=30)
        else:
            uri = "file:" + str(self.index.absolute()).replace("?", "%3f").replace("#", "%23")
            db = sqlite3.connect(uri + "?mode=ro", uri=True, timeout=30)
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
        """An index row as callers see it: ``path`` under this root; a ``running`` run whose
        process is gone is ``dead``."""
        out = dict(row)
        out["path"] = str(self.run_dir(out["experiment"], out["config_hash"]).path)
        if out["status"] == "running":
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

    def reindex(self) -> dict[str, Any]:
        """Rebuild ``index.sqlite`` from the run directories (atomically replacing it).

        Each run's row comes from its ``config.toml`` and ``summary.json``: a run whose
        summary says ``running`` is ``running`` only while a live process holds its lock,
        else ``interrupted`` (and its summary is rewritten to say so); a run without a
        readable summary is ``interrupted`` with the reason as its error. An unreadable old
        index is kept as ``index.sqlite.corrupt``. Returns ``{"runs", "skipped", "set_aside"}``.
        """
        entries, skipped = [], []
        for path in self.run_directories():
            try:
                entries.append(_index_entry(RunDir(path)))
            except (OSError, ValueError) as err:
                skipped.append(f"{path}: {err}")
        set_aside = None
        if self.index.is_file() and self.index.stat().st_size and not _readable_index(self.index):
            aside = self.index.with_name(INDEX_NAME + ".corrupt")
            shutil.copyfile(self.index, aside)
            set_aside = str(aside)
        with atomic_path(self.index) as tmp, closing(sqlite3.connect(tmp)) as db, db:
            db.executescript(_SCHEMA)
            for run, tasks in entries:
                db.execute(
                    f"INSERT OR REPLACE INTO runs ({', '.join(run)}) VALUES "
                    f"({', '.join('?' * len(run))})",
                    tuple(run.values()),
                )
                db.executemany("INSERT OR REPLACE INTO tasks VALUES (?, ?, ?, ?, ?, ?, ?)", tasks)
        return {"runs": len(entries), "skipped": skipped, "set_aside": set_aside}


def _resolved(path: str) -> Path | None:
    try:
        return Path(path).resolve()
    except (OSError, RuntimeError):
        return None


def _readable_index(path: Path) -> bool:
    try:
        with closing(sqlite3.connect(f"file:{path.absolute()}?mode=ro", uri=True)) as db:
            db.execute("SELECT count(*) FROM runs").fetchone()
    except sqlite3.Error:
        return False
    return True


def _index_entry(run: RunDir) -> tuple[dict[str, Any], list[tuple]]:
    """The index row and task rows of a run directory (for :meth:`RunStore.reindex`)."""
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

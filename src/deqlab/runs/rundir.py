"""One run's directory: its files, its checkpoints and the schema of its summary.json.

Layout (the report reads exactly this)::

    <root>/<experiment>/<config-hash-12>/
        config.toml      [experiment] name, preset, hash, device; [config] every field
        metrics.csv      the tidy table (one row per measurement)
        summary.json     status, timings, tasks, statements, deviations, figures, environment,
                         files (size and SHA-256 of each result file), notes
        figures/         <name>.png and <name>.pdf
        checkpoints/     <task-key>.pt: {"done", "rows", "state"} (state is None once done)
        .lock            held (``flock``) by the process computing the run; it names it

Every file is written atomically (temporary file in the same directory, then
``os.replace``), so a reader or a resumed run never sees half a file. A checkpoint is
written only while the run's owner is alive (:meth:`RunDir.check_owner`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from deqlab._atomic import atomic_path, stale_temporaries, write_text_atomic
from deqlab.runs.lock import LOCK_NAME, OWNER_ENV, OwnerGoneError, host_name, owner_state

#: The statuses a run has in the index and summary.json (``dead`` and ``missing`` are only
#: ever shown: a running run whose process is gone, a run whose directory is gone).
STATUSES = ("running", "finished", "failed", "interrupted")
#: The keys of a checkpoint.
CHECKPOINT_KEYS = ("done", "rows", "state")
#: Version of summary.json's layout; a reused run of another format is re-derived.
SUMMARY_FORMAT = 3


class RunStoreError(ValueError):
    """The output directory or a run in it cannot be used; the message is one line."""


class SummaryError(RunStoreError):
    """A ``summary.json`` that cannot be read or does not have the expected shape."""


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

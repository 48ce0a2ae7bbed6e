"""Reading the run index past what a killed writer leaves: a hot SQLite journal.

A writer killed inside a transaction (kill -9, a power cut) leaves ``index.sqlite-journal``
behind, a *hot* journal holding the pages to restore. SQLite rolls it back on the next open
that can write; an open with ``mode=ro`` fails instead ("attempt to write a readonly
database"), which made the read-only commands refuse a store that is perfectly writable.
:func:`open_for_reading` rolls the journal back where the store can be written and reads
past it where it cannot; either way the reader sees the index as its last commit left it,
as if the killed transaction had never begun.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from contextlib import closing
from pathlib import Path


def journal_of(index: Path) -> Path:
    """SQLite's rollback journal of ``index`` (``<index>-journal``)."""
    return index.with_name(index.name + "-journal")


def open_for_reading(index: Path) -> sqlite3.Connection:
    """A read-only connection to ``index``, past a hot journal (module docstring): rolled
    back by a short read-write open, or where nothing can be written, read from an
    in-memory copy rolled back in a temporary directory (the files stay untouched)."""
    db = _read_only_connection(index)
    if not journal_of(index).is_file() or _readable(db):
        return db
    with closing(sqlite3.connect(index, timeout=30)) as writer:
        if _readable(writer):  # its first read rolled the journal back
            return _read_only_connection(index)
    return _rolled_back_copy(index)


def _read_only_connection(index: Path) -> sqlite3.Connection:
    uri = "file:" + str(index.absolute()).replace("?", "%3f").replace("#", "%23")
    return sqlite3.connect(uri + "?mode=ro", uri=True, timeout=30)


def _readable(db: sqlite3.Connection) -> bool:
    """Whether ``db`` can be read; False (and ``db`` closed) when a hot journal it cannot
    roll back stands in the way; any other error is raised."""
    try:
        db.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.OperationalError as err:
        if "readonly" not in str(err):
            raise
        db.close()
        return False
    return True


def _rolled_back_copy(index: Path) -> sqlite3.Connection:
    """An in-memory copy of ``index`` as its last commit left it."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / index.name
        shutil.copyfile(index, copy)
        shutil.copyfile(journal_of(index), journal_of(copy))
        memory = sqlite3.connect(":memory:")
        with closing(sqlite3.connect(copy)) as source:
            source.backup(memory)  # its first read rolls the copied journal back
    return memory

"""Atomic file writes shared by every module: write beside the target, then ``os.replace``."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(target: Path) -> Iterator[Path]:
    """Yield a temporary path in ``target``'s directory; move it onto ``target`` on success.

    A reader never sees a half-written ``target``: either the old file or the complete new
    one. On an exception the temporary file is removed and ``target`` is left untouched.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    # A unique name (not mkstemp, whose 0600 mode would survive the rename): the file is
    # created by the writer with the usual umask-derived permissions.
    tmp = target.with_name(
        f".{target.name}.{os.getpid()}.{secrets.token_hex(6)}.tmp{target.suffix}"
    )
    try:
        yield tmp
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text_atomic(target: Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``target`` atomically and return ``target``."""
    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return target


def write_bytes_atomic(target: Path, payload: bytes) -> Path:
    """Write ``payload`` to ``target`` atomically and return ``target``."""
    with atomic_path(target) as tmp:
        tmp.write_bytes(payload)
    return target

"""Atomic writes for the data package: write beside the target, then ``os.replace``."""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def write_bytes_atomic(path: Path, payload: bytes) -> Path:
    """Write ``payload`` to ``path`` so that a reader sees either the old file or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        tmp.write_bytes(payload)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path

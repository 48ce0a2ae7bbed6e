"""Atomic file writes shared by every module: write beside the target, then ``os.replace``.

A reader never sees a half-written file, and a writer that fails (a full disk, a
read-only directory, an interrupt) leaves the target as it was and no temporary file
behind. The error of a failed write names the target, not the temporary file:
``[Errno 28] No space left on device: 'results/…/metrics.csv'``.

A process killed by SIGKILL cannot clean up: its temporary file stays, named
``.<target>.<pid>.<random>.tmp<suffix>``; :func:`stale_temporaries` finds such files of
processes that are gone, so that the next owner of the directory can remove them.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

_TMP_PATTERN = re.compile(r"^\..+\.(\d+)\.[0-9a-f]{12}\.tmp(\.[^.]*)?$")


def temporary_name(target: Path) -> Path:
    """The temporary path :func:`atomic_path` writes before moving it onto ``target``."""
    return target.with_name(
        f".{target.name}.{os.getpid()}.{secrets.token_hex(6)}.tmp{target.suffix}"
    )


@contextmanager
def atomic_path(target: Path) -> Iterator[Path]:
    """Yield a temporary path in ``target``'s directory; move it onto ``target`` on success.

    A reader never sees a half-written ``target``: either the old file or the complete new
    one. On an exception the temporary file is removed and ``target`` is left untouched;
    an ``OSError`` is raised again naming ``target`` (same errno, same subclass).
    """
    target = Path(target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise _naming(err, target) from err
    # A unique name (not mkstemp, whose 0600 mode would survive the rename): the file is
    # created by the writer with the usual umask-derived permissions.
    tmp = temporary_name(target)
    try:
        yield tmp
        os.replace(tmp, target)
    except OSError as err:
        _remove(tmp)
        raise _naming(err, target) from err
    except BaseException:
        _remove(tmp)
        raise


def _remove(path: Path) -> None:
    with suppress(OSError):  # a read-only directory: nothing was written there either
        path.unlink(missing_ok=True)


def _naming(err: OSError, target: Path) -> OSError:
    """``err`` with ``target`` as its file name (its errno picks the same subclass)."""
    if err.errno is None:
        return err
    return OSError(err.errno, err.strerror or os.strerror(err.errno), str(target))


def _write(path: Path, payload: bytes) -> None:
    """Write ``payload`` to the (temporary) ``path``; the one place that writes bytes."""
    with open(path, "wb") as handle:
        handle.write(payload)


def write_text_atomic(target: Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``target`` atomically and return ``target``."""
    return write_bytes_atomic(target, text.encode("utf-8"))


def write_bytes_atomic(target: Path, payload: bytes) -> Path:
    """Write ``payload`` to ``target`` atomically and return ``target``."""
    with atomic_path(target) as tmp:
        _write(tmp, payload)
    return target


def stale_temporaries(directory: Path, *, recursive: bool = True) -> list[Path]:
    """Temporary files of :func:`atomic_path` under ``directory`` whose writer is gone.

    A file whose writing process (the pid in its name) still runs is left out.
    """
    directory = Path(directory)
    if not directory.is_dir():
        return []
    found = []
    for path in directory.rglob(".*.tmp*") if recursive else directory.glob(".*.tmp*"):
        match = _TMP_PATTERN.match(path.name)
        if match is None or not path.is_file():
            continue
        pid = int(match.group(1))
        if pid != os.getpid() and _alive(pid):
            continue
        found.append(path)
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

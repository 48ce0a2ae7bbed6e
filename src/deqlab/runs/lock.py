"""Process identity and the lock of a run directory.

A run's owner is the process computing it, named by ``{"pid", "host", "start"}``:
``start`` (boot id and start tick, Linux) tells a reused pid from the original. The owner
holds an exclusive ``flock`` on the run's ``.lock`` file and writes its identity there;
the kernel drops the lock of a process however it ends, so a lock left by a dead owner is
taken over by the next one. Workers of an owner know it by ``$DEQLAB_RUN_OWNER``.
"""

from __future__ import annotations

import errno
import json
import os
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

try:  # POSIX; elsewhere runs are not locked
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from deqlab.runs.rundir import RunDir

LOCK_NAME = ".lock"
#: Set by the process that owns a run (its pid) for the processes computing its tasks.
OWNER_ENV = "DEQLAB_RUN_OWNER"


class OwnerGoneError(RuntimeError):
    """The process that owns a run is gone (or another owns it now): nothing may write."""


def now_iso() -> str:
    """The current UTC time, ISO 8601 to the second."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


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


@contextmanager
def owner_environment() -> Iterator[None]:
    """``$DEQLAB_RUN_OWNER`` = this process while tasks run (workers inherit it, and
    :meth:`RunDir.check_owner` refuses their writes once the owner has changed)."""
    previous = os.environ.get(OWNER_ENV)
    os.environ[OWNER_ENV] = str(os.getpid())
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(OWNER_ENV, None)
        else:
            os.environ[OWNER_ENV] = previous


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

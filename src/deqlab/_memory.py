"""Will an n×n computation fit in memory? Checked before allocating, refused in one line.

A computation on n points that holds ``buffers`` n×n arrays of ``itemsize`` bytes (the
matrix and its workspace: a copy that ``eigvalsh`` or a Cholesky factor overwrites) plus
``per_point`` bytes per point (inputs, block buffers) needs

    need(n) = buffers · itemsize · n² + per_point · n  bytes,

and may have what this process can still get, less :data:`HEADROOM` (the interpreter,
small temporaries):

* on the CPU, the least of
  - the machine's ``MemAvailable`` (/proc/meminfo, or ``psutil`` where installed);
  - for this process's memory cgroup and each cgroup above it (/proc/self/cgroup), its
    limit less its usage (v2 ``memory.max − memory.current``, v1
    ``memory.limit_in_bytes − memory.usage_in_bytes``): the limit a container or a
    ``systemd-run -p MemoryMax=`` enforces;
  - this process's own limits less what it has mapped: ``RLIMIT_AS`` (``ulimit -v``) less
    its ``VmSize``, ``RLIMIT_DATA`` (``ulimit -d``) less its ``VmData`` (/proc/self/status).
    Past them an allocation fails however much memory the machine has;
* on a CUDA device, the free bytes ``torch.cuda.mem_get_info`` reports.

When need(n) exceeds it, :func:`check_square` raises :class:`MemoryRefusal` (a ValueError:
the CLI prints it as one ``error:`` line, exit 2) with the estimate, the figure it was
compared with and which limit gave that figure, and the largest n that fits, the positive
root of need(n) = available. Where nothing can be measured the check passes.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

__all__ = [
    "HEADROOM",
    "MemoryRefusal",
    "available_bytes",
    "available_memory",
    "check_square",
    "largest_square",
    "nbytes",
    "out_of_memory",
    "square_bytes",
]

#: Bytes kept free for the interpreter and small temporaries.
HEADROOM = 256 * 2**20
_CGROUP = Path("/sys/fs/cgroup")
_MEMINFO = Path("/proc/meminfo")
_PROC_CGROUP = Path("/proc/self/cgroup")
_STATUS = Path("/proc/self/status")


class MemoryRefusal(ValueError):
    """An n×n computation that would not fit; the message is one line with the largest n."""


def nbytes(count: float) -> str:
    """``count`` bytes for a reader: 7.2 GB, 8.00 TB (decimal units, 3 significant digits)."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return f"{count / scale:.3g} {unit}"
    return f"{int(count)} bytes"


def _read_int(path: Path) -> int | None:
    """The integer in a one-value kernel file; None when absent, unreadable or "max"."""
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _cgroup_files() -> list[tuple[Path, Path]]:
    """(limit, usage) files of this process's memory cgroup and of each cgroup above it,
    v2 and v1, as /proc/self/cgroup names them (the root cgroup's where it cannot be read)."""
    try:
        lines = _PROC_CGROUP.read_text().splitlines()
    except OSError:
        lines = ["0::/", "0:memory:/"]
    files = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if not controllers:
            base, limit, usage = _CGROUP, "memory.max", "memory.current"
        elif "memory" in controllers.split(","):
            base, limit, usage = (
                _CGROUP / "memory",
                "memory.limit_in_bytes",
                "memory.usage_in_bytes",
            )
        else:
            continue
        here = base / path.strip("/")
        for directory in (here, *here.parents):
            files.append((directory / limit, directory / usage))
            if directory == base:
                break
    return files


def _cgroup_free() -> tuple[int, str] | None:
    """The least, over this process's memory cgroups, of limit less usage; None when no
    cgroup sets a limit."""
    found = []
    for limit_file, usage_file in _cgroup_files():
        limit, usage = _read_int(limit_file), _read_int(usage_file)
        if limit is not None and usage is not None and limit < 2**60:  # v1 "no limit" is ~2⁶³
            what = (
                f"its cgroup's limit of {nbytes(limit)} ({limit_file}), less {nbytes(usage)} in use"
            )
            found.append((max(0, limit - usage), what))
    return min(found) if found else None


def _process_free() -> tuple[int, str] | None:
    """The least of this process's ``RLIMIT_AS`` less its ``VmSize`` and ``RLIMIT_DATA``
    less its ``VmData``; None without such a limit (or where they cannot be read)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not a Unix
        return None
    found = []
    for limit, field, what in (
        (resource.RLIMIT_AS, "VmSize", "address-space limit, `ulimit -v`"),
        (resource.RLIMIT_DATA, "VmData", "data-segment limit, `ulimit -d`"),
    ):
        soft, _ = resource.getrlimit(limit)
        if soft == resource.RLIM_INFINITY or soft < 0:
            continue
        used = _status_bytes(field)
        found.append((max(0, soft - used), f"this process's {what} {nbytes(soft)}, less the "
                      f"{nbytes(used)} it has mapped"))  # fmt: skip
    return min(found) if found else None


def _status_bytes(field: str) -> int:
    """A ``kB`` field of /proc/self/status in bytes (0 where it cannot be read)."""
    try:
        lines = _STATUS.read_text().splitlines()
    except OSError:
        return 0
    for line in lines:
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    return 0


def _host_available() -> tuple[int, str] | None:
    """MemAvailable of the host (psutil where installed, else /proc/meminfo)."""
    what = "the machine's available memory"
    try:
        import psutil
    except ImportError:
        pass
    else:
        return int(psutil.virtual_memory().available), what
    try:
        lines = _MEMINFO.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024, what  # the file counts kB
    return None


def available_memory(device: torch.device | str | None = None) -> tuple[int, str] | None:
    """The bytes this process can still allocate on ``device`` (CPU when None) and which
    limit gives that figure, or None when it cannot be measured (module docstring)."""
    device = torch.device("cpu" if device is None else device)
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free), f"free on {device}"
    if device.type != "cpu":
        return None
    known = [b for b in (_host_available(), _cgroup_free(), _process_free()) if b is not None]
    return min(known, key=lambda found: found[0]) if known else None


def available_bytes(device: torch.device | str | None = None) -> int | None:
    """The bytes of :func:`available_memory` (None when it cannot be measured)."""
    found = available_memory(device)
    return None if found is None else found[0]


def square_bytes(n: int, buffers: float, *, itemsize: int = 8, per_point: int = 0) -> int:
    """need(n) = buffers · itemsize · n² + per_point · n (module docstring)."""
    return math.ceil(buffers * itemsize * n * n + per_point * n)


def largest_square(buffers: float, available: int, *, itemsize: int = 8, per_point: int = 0) -> int:
    """The largest n with need(n) <= ``available``: the positive root of a quadratic."""
    a, b = buffers * itemsize, float(per_point)
    if available <= 0:
        return 0
    n = math.floor((-b + math.sqrt(b * b + 4 * a * available)) / (2 * a))
    while n > 0 and square_bytes(n, buffers, itemsize=itemsize, per_point=per_point) > available:
        n -= 1  # the root rounded up past the bound in floating point
    return n


def check_square(
    subject: str,
    n: int,
    what: str,
    *,
    buffers: float,
    itemsize: int = 8,
    per_point: int = 0,
    device: torch.device | str | None = None,
) -> None:
    """Raise :class:`MemoryRefusal` when ``what`` on ``n`` points would not fit.

    Args:
        subject: what the message names first, e.g. "`--n`" or "`X`".
        n: the number of points (the matrices are n×n).
        what: the computation, e.g. "the population Gram matrix K and one work copy".
        buffers: n×n arrays held at once (may be fractional: a triangle is 0.5).
        itemsize: bytes per entry (8 for float64).
        per_point: further bytes per point (inputs, block buffers).
        device: where the arrays live (CPU when None).

    The message reads: "`--n`: n = 1000000 needs 16.0 TB for the population Gram matrix K and
    one work copy (2 n×n float64 arrays), but 20.3 GB of memory is available (the machine's
    available memory); the largest n that fits is 50290".
    """
    found = available_memory(device)
    if found is None:
        return
    available, source = found
    usable = max(0, available - HEADROOM)
    need = square_bytes(n, buffers, itemsize=itemsize, per_point=per_point)
    if need <= usable:
        return
    largest = largest_square(buffers, usable, itemsize=itemsize, per_point=per_point)
    kind = {8: "float64", 4: "float32"}.get(itemsize, f"{itemsize}-byte")
    raise MemoryRefusal(
        f"{subject}: n = {n} needs {nbytes(need)} for {what} ({buffers:g} n×n {kind} "
        f"array(s)), but {nbytes(available)} of memory is available ({source}); the largest "
        f"n that fits is {largest}"
    )


def out_of_memory(err: BaseException) -> str | None:
    """One line for an allocation that failed (numpy's ``MemoryError``, torch's "can't
    allocate memory", a CUDA out-of-memory) with the memory available now; None for any
    other error. The last resort where an estimate fell short of what was allocated."""
    text = " ".join(str(err).split())
    failed = isinstance(err, MemoryError | torch.OutOfMemoryError) or (
        isinstance(err, RuntimeError) and "can't allocate memory" in text
    )
    if not failed:
        return None
    at = text.find("DefaultCPUAllocator:")
    text = text[at:] if at >= 0 else text
    found = available_memory()
    now = "" if found is None else f"; {nbytes(found[0])} is available now ({found[1]})"
    return f"out of memory: {text}{now}"

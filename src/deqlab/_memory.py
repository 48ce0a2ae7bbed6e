"""Will an n×n computation fit in memory? Checked before allocating, refused in one line.

A computation on n points that holds ``buffers`` n×n arrays of ``itemsize`` bytes (the
matrix and its workspace: a copy that ``eigvalsh`` or a Cholesky factor overwrites) plus
``per_point`` bytes per point (inputs, block buffers) needs

    need(n) = buffers · itemsize · n² + per_point · n  bytes,

and may have what this process can still get, less :data:`HEADROOM` (the interpreter,
small temporaries):

* on the CPU, the least of ``MemAvailable`` (/proc/meminfo, or ``psutil`` where installed)
  and the cgroup's limit less its usage (v2 ``memory.max − memory.current``, v1
  ``memory.limit_in_bytes − memory.usage_in_bytes``), the limit a container enforces;
* on a CUDA device, the free bytes ``torch.cuda.mem_get_info`` reports.

When need(n) exceeds it, :func:`check_square` raises :class:`MemoryRefusal` (a ValueError:
the CLI prints it as one ``error:`` line, exit 2) with the largest n that fits, the
positive root of need(n) = available. Where nothing can be measured the check passes.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

__all__ = [
    "HEADROOM",
    "MemoryRefusal",
    "available_bytes",
    "check_square",
    "largest_square",
    "nbytes",
    "square_bytes",
]

#: Bytes kept free for the interpreter and small temporaries.
HEADROOM = 256 * 2**20
_CGROUP = Path("/sys/fs/cgroup")
_MEMINFO = Path("/proc/meminfo")


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


def _cgroup_free() -> int | None:
    """The cgroup's limit less its usage (v2, else v1); None when there is no limit."""
    for limit_file, usage_file in (
        ("memory.max", "memory.current"),
        ("memory/memory.limit_in_bytes", "memory/memory.usage_in_bytes"),
    ):
        limit = _read_int(_CGROUP / limit_file)
        usage = _read_int(_CGROUP / usage_file)
        if limit is not None and usage is not None and limit < 2**60:  # v1 "no limit" is ~2⁶³
            return max(0, limit - usage)
    return None


def _host_available() -> int | None:
    """MemAvailable of the host (psutil where installed, else /proc/meminfo)."""
    try:
        import psutil
    except ImportError:
        pass
    else:
        return int(psutil.virtual_memory().available)
    try:
        lines = _MEMINFO.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024  # the file counts kB
    return None


def available_bytes(device: torch.device | str | None = None) -> int | None:
    """The bytes this process can still allocate on ``device`` (CPU when None), or None
    when that cannot be measured (module docstring)."""
    device = torch.device("cpu" if device is None else device)
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    if device.type != "cpu":
        return None
    known = [b for b in (_host_available(), _cgroup_free()) if b is not None]
    return min(known) if known else None


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
    one work copy (2 n×n float64 arrays), but 20.3 GB of memory is available; the largest n
    that fits is 50290".
    """
    available = available_bytes(device)
    if available is None:
        return
    usable = max(0, available - HEADROOM)
    need = square_bytes(n, buffers, itemsize=itemsize, per_point=per_point)
    if need <= usable:
        return
    largest = largest_square(buffers, usable, itemsize=itemsize, per_point=per_point)
    kind = {8: "float64", 4: "float32"}.get(itemsize, f"{itemsize}-byte")
    where = "" if str(device or "cpu") == "cpu" else f" on {device}"
    raise MemoryRefusal(
        f"{subject}: n = {n} needs {nbytes(need)} for {what} ({buffers:g} n×n {kind} "
        f"array(s)), but {nbytes(available)} of memory is available{where}; the largest n "
        f"that fits is {largest}"
    )

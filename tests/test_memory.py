"""deqlab._memory: the bytes an n×n computation needs against the memory available."""

from __future__ import annotations

import re
import sys

import pytest

from deqlab import _memory
from deqlab._memory import (
    MemoryRefusal,
    available_bytes,
    check_square,
    largest_square,
    nbytes,
    square_bytes,
)


def test_square_bytes_counts_the_buffers_and_the_per_point_bytes():
    assert square_bytes(30_000, 1) == 7_200_000_000  # K at n = 3·10⁴: 7.2 GB
    assert square_bytes(10, 2, itemsize=4, per_point=3) == 2 * 4 * 100 + 30


@pytest.mark.parametrize("buffers, per_point", [(1, 0), (2, 800), (0.5, 17), (3, 10**6)])
def test_largest_square_is_the_exact_boundary(buffers, per_point):
    for available in (10**3, 10**9 + 7, 16 * 10**9):
        n = largest_square(buffers, available, per_point=per_point)
        assert square_bytes(n, buffers, per_point=per_point) <= available
        assert square_bytes(n + 1, buffers, per_point=per_point) > available


def test_the_available_memory_is_measured_on_linux():
    available = available_bytes()
    assert available is not None and 0 < available < 2**50


def test_a_size_that_cannot_fit_is_refused_in_one_line_with_the_largest_n():
    with pytest.raises(MemoryRefusal) as caught:
        check_square("`--n`", 10**6, "K and one work copy", buffers=2, per_point=800)
    message = str(caught.value)
    assert "\n" not in message and isinstance(caught.value, ValueError)
    assert message.startswith("`--n`: n = 1000000 needs 16 TB for K and one work copy (2 n×n")
    largest = int(re.search(r"the largest n that fits is (\d+)$", message).group(1))
    assert 0 < largest < 10**6
    check_square("`--n`", largest, "K and one work copy", buffers=2, per_point=800)  # fits


def test_a_small_size_passes():
    check_square("`X`", 1000, "K", buffers=1)


def test_the_cgroup_limit_bounds_the_available_memory(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "psutil", None)  # read /proc/meminfo's stand-in below
    monkeypatch.setattr(_memory, "_CGROUP", tmp_path)
    monkeypatch.setattr(_memory, "_MEMINFO", tmp_path / "meminfo")
    (tmp_path / "meminfo").write_text("MemTotal: 100000000 kB\nMemAvailable: 20000000 kB\n")
    (tmp_path / "memory.max").write_text("16000000000\n")
    (tmp_path / "memory.current").write_text("1000000000\n")
    assert available_bytes() == 15_000_000_000  # the cgroup's limit less its usage
    (tmp_path / "memory.max").write_text("max\n")  # no limit: the host's MemAvailable
    assert available_bytes() == 20_000_000 * 1024


def test_bytes_are_written_for_a_reader():
    assert [nbytes(b) for b in (512, 7.2e9, 8e12)] == ["512 bytes", "7.2 GB", "8 TB"]


def test_a_cgroup_above_this_process_bounds_the_available_memory(tmp_path, monkeypatch):
    """The limit of a cgroup holds for every cgroup below it (systemd-run -p MemoryMax=,
    nested containers): v2 and v1, read where /proc/self/cgroup places this process."""
    monkeypatch.setattr(_memory, "_CGROUP", tmp_path)
    monkeypatch.setattr(_memory, "_PROC_CGROUP", tmp_path / "self-cgroup")
    (tmp_path / "self-cgroup").write_text("4:cpu,memory:/job/step\n0::/user.slice/run-1\n")
    own, above = tmp_path / "user.slice" / "run-1", tmp_path / "user.slice"
    for directory, limit, usage in ((own, "max", 10**9), (above, 8 * 10**9, 7 * 10**9)):
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "memory.max").write_text(f"{limit}\n")
        (directory / "memory.current").write_text(f"{usage}\n")
    assert _memory._cgroup_free() == (
        10**9,
        f"its cgroup's limit of 8 GB ({above / 'memory.max'}), less 7 GB in use",
    )
    v1 = tmp_path / "memory" / "job"
    v1.mkdir(parents=True)
    (v1 / "memory.limit_in_bytes").write_text("3000000000\n")
    (v1 / "memory.usage_in_bytes").write_text("2500000000\n")
    assert _memory._cgroup_free()[0] == 5 * 10**8  # v1 /job, above /job/step


def test_the_process_own_limits_bound_the_available_memory(tmp_path, monkeypatch):
    import resource

    limits = {resource.RLIMIT_AS: 6 * 10**9, resource.RLIMIT_DATA: resource.RLIM_INFINITY}
    monkeypatch.setattr(resource, "getrlimit", lambda which: (limits[which], limits[which]))
    monkeypatch.setattr(_memory, "_STATUS", tmp_path / "status")
    (tmp_path / "status").write_text("VmPeak:\t 900000 kB\nVmSize:\t 781250 kB\nVmData: 1 kB\n")
    assert _memory._process_free() == (
        6 * 10**9 - 800 * 10**6,
        "this process's address-space limit, `ulimit -v` 6 GB, less the 800 MB it has mapped",
    )
    available, source = _memory.available_memory()
    assert available <= 5.2 * 10**9 and "`ulimit -v`" in source  # far below the machine's
    limits[resource.RLIMIT_DATA] = 10**9
    assert _memory._process_free() == (
        10**9 - 1024,
        "this process's data-segment limit, `ulimit -d` 1 GB, less the 1.02 kB it has mapped",
    )


def test_an_allocation_failure_is_one_line_and_other_errors_are_not_one():
    import numpy as np
    import torch

    try:
        torch.empty(2**50, dtype=torch.uint8)
    except RuntimeError as err:
        line = _memory.out_of_memory(err)
    assert line.startswith("out of memory: DefaultCPUAllocator: can't allocate memory: you ")
    assert "\n" not in line and " is available now (" in line
    try:
        np.empty(2**50, dtype=np.uint8)
    except MemoryError as err:
        assert _memory.out_of_memory(err).startswith("out of memory: Unable to allocate 1.00 PiB")
    assert _memory.out_of_memory(RuntimeError("mat1 and mat2 shapes cannot be multiplied")) is None

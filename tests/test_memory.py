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

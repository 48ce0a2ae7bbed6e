"""The ReLU DEQ benchmark runs end to end (2 steps) and its table has every method,
with ours and the plain Picard on the same loss trajectory and ours using fewer
products. The speed-up itself is measured by ``make bench``, not asserted here."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "bench_relu_deq.py"


@pytest.mark.slow
def test_benchmark_runs_and_reports_every_method():
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--steps", "3", "--block", "1"],
        capture_output=True, text=True, check=True, timeout=600,
    ).stdout  # fmt: skip
    rows = {}
    for line in out.splitlines():
        match = re.match(r"(ours.*?|plain warm Picard|torchdeq 0\.1\.0)\s{2,}([\d.]+)\s", line)
        if match:
            numbers = line[len(match.group(1)) :].split()
            rows[match.group(1)] = [float(v) for v in numbers[:3]] + [float(numbers[-1])]
    assert {"ours", "ours, no extrapolation", "ours, V adjoint", "plain warm Picard"} <= set(rows)
    assert rows["ours"][2] < rows["plain warm Picard"][2]  # products per step
    assert rows["plain warm Picard"][3] < 1e-5  # the same loss trajectory
    assert "peak RSS growth" in out and "unrolled" in out
    assert "product equivalents alone" in out  # the ceiling of ours' design
    with pytest.raises(subprocess.CalledProcessError):
        subprocess.run(
            [sys.executable, str(SCRIPT), "--block", "0"], capture_output=True, check=True
        )

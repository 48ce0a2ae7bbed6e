"""The ReLU DEQ benchmark runs end to end on a small problem (3 steps) and its table has
every method, with ours and the plain reference step on the same loss trajectory and ours
using fewer products; the same-process A/B loads another source tree beside ours; bad
options are usage errors. The speed-up itself is measured by ``make bench``, not here."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
SCRIPT = ROOT / "benchmarks" / "bench_relu_deq.py"
SMALL = ["--problem", "40", "30", "256", "--lr", "1e-3"]


def _table(out: str) -> dict[str, list[float]]:
    rows = {}
    for line in out.splitlines():
        match = re.match(
            r"(ours.*?|before|plain reference step|torchdeq 0\.1\.0)\s{2,}[\d.]+\s", line
        )
        if match:
            numbers = line[len(match.group(1)) :].split()
            rows[match.group(1)] = [float(v) for v in numbers[:3]] + [float(numbers[-1])]
    return rows


@pytest.mark.slow
def test_benchmark_runs_and_reports_every_method():
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--steps", "3", *SMALL],
        capture_output=True, text=True, check=True, timeout=600,
    ).stdout  # fmt: skip
    rows = _table(out)
    expected = {"ours", "ours, no extrapolation", "ours, no rank-n update", "ours, V adjoint"}
    assert expected | {"plain reference step"} <= set(rows)
    assert rows["ours"][2] < rows["plain reference step"][2]  # products per step
    assert rows["plain reference step"][3] < 1e-5  # the same loss trajectory
    assert "peak RSS growth" in out and "unrolled" in out
    assert "product equivalents alone" in out  # the ceiling of ours' design


@pytest.mark.slow
def test_same_process_ab_against_another_source_tree():
    """The working tree's own src as the baseline: identical losses and products."""
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--steps", "3", "--methods", "ours", *SMALL,
         "--baseline-src", str(ROOT / "src"), "--no-memory"],
        capture_output=True, text=True, check=True, timeout=600,
    ).stdout  # fmt: skip
    rows = _table(out)
    assert set(rows) == {"ours", "before"} and rows["before"][3] == 0.0
    assert rows["before"][2] == rows["ours"][2]
    assert "A/B ours / before" in out and "peak RSS" not in out


def test_bad_options_are_usage_errors():
    for bad in (["--steps", "1"], ["--methods", "ours,nothing"], ["--problem", "0", "2", "3"]):
        done = subprocess.run([sys.executable, str(SCRIPT), *bad], capture_output=True, text=True)
        assert done.returncode == 2 and "--methods among" in done.stderr, bad
    missing = subprocess.run(
        [sys.executable, str(SCRIPT), "--steps", "2", "--baseline-src", "/nonexistent"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert missing.returncode != 0 and "--baseline-src /nonexistent" in missing.stderr

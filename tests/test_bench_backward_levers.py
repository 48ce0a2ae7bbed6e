"""The backward-levers benchmark runs end to end at a tiny size and counts each lever's work:
the approximate backwards their fixed VJPs, the exact ones an adjoint solve each step."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sklearn", reason="the digits come from scikit-learn")

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "bench_backward_levers.py"


@pytest.mark.slow
def test_tiny_run_counts_every_lever(tmp_path):
    out = tmp_path / "levers.json"
    args = [sys.executable, str(SCRIPT), "--steps", "2", "--channels", "4", "--json", str(out)]
    done = subprocess.run(args, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    rows = {row["config"]: row for row in json.loads(out.read_text())}
    assert len(rows) == 13 and "fwd evals" in done.stdout
    assert rows["broyden + Shine() [approximate]"]["vjps_per_step"] == 0
    assert rows["anderson + JacobianFree() [approximate]"]["vjps_per_step"] == 0
    assert rows["anderson + Phantom(5, 0.5) [approximate]"]["vjps_per_step"] == 4
    all_rows = rows["anderson + Implicit(init=zero), all rows"]
    assert all_rows["backward_evaluations_per_step"] == 1  # the graph at z*, never rebuilt
    assert rows["anderson + Phantom(5, 0.5) [approximate]"]["exact_gradients"] == 0
    for name, row in rows.items():
        assert row["forward_evaluations_per_step"] >= 1
        if "Implicit" in name:
            assert row["vjps_per_step"] >= 1


def test_bad_arguments():
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--channels", "6"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2 and "--channels a multiple of 4" in done.stderr

"""docs/own_deq.md runs as written and prints what it says, and its claim holds in the run.

The page's code block runs in a fresh interpreter with one thread (float32, seeded); every
annotated ``print(...)  # expected`` must print its comment, numbers to the digits the
comment shows (the comparison of tests/test_docs.py). Independently of the comments, the
printed numbers must show what the page concludes: with Jacobian regularisation ‖J_f‖₂ and
the solver steps per forward fall over the run, without it they rise, and both end lower
with it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from test_docs import instrument, matches, printed_by

pytest.importorskip("sklearn", reason="the page trains on scikit-learn's digits")

PAGE = Path(__file__).resolve().parents[1] / "docs" / "own_deq.md"
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
_SUMMARY = re.compile(r"‖J_f‖₂ ([\d.]+) → ([\d.]+), solver steps per forward ([\d.]+) → ([\d.]+)")


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[dict[int, str], dict[int, list[str]]]:
    (code,) = _BLOCK.findall(PAGE.read_text(encoding="utf-8"))
    program, expected = instrument(code)
    env = os.environ | {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", program], cwd=tmp_path_factory.mktemp("own_deq"), env=env,
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return expected, printed_by(done.stdout)


@pytest.mark.slow
def test_the_page_prints_what_it_says(run):
    expected, printed = run
    assert len(expected) == 8
    for line, comment in expected.items():
        (output,) = printed[line]
        assert matches(comment, output), f"line {line}: says '{comment}', printed '{output}'"


@pytest.mark.slow
def test_regularisation_lowers_the_jacobian_norm_and_the_solver_steps(run):
    _, printed = run
    summaries = [_SUMMARY.search(out[0]) for out in printed.values() if "per forward" in out[0]]
    plain, regular = ([float(v) for v in m.groups()] for m in summaries)
    assert plain[1] > plain[0] and plain[3] > plain[2]  # without: both rise
    assert regular[1] < regular[0] and regular[3] < plain[3]  # with: the norm falls
    assert regular[1] < plain[1]

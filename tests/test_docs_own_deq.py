"""docs/own_deq.md runs as written and prints what it says, and its claim holds in the run.

The page's code block runs in a fresh interpreter with one thread (float32, seeded); every
annotated ``print(...)  # expected`` must print its comment, numbers to the digits the
comment shows (the comparison of tests/test_docs.py), and the run-level table the page shows
in its ```text block must be what the code prints, line by line. The figure the page embeds
is the one the code draws (same size, not blank), and the HTML page of the run is written.
Independently of the comments, the printed numbers must show what the page concludes: with
Jacobian regularisation ‖J_f‖₂ and the solver steps per forward fall over the run, without it
they rise, and both end lower with it.
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
_TABLE = re.compile(r"^```text\n(.*?)^```", re.DOTALL | re.MULTILINE)
_SUMMARY = re.compile(r"‖J_f‖₂ ([\d.]+) → ([\d.]+), solver steps per forward ([\d.]+) → ([\d.]+)")


@pytest.fixture(scope="module")
def executed(tmp_path_factory) -> tuple[dict[int, str], str, Path]:
    (code,) = _BLOCK.findall(PAGE.read_text(encoding="utf-8"))
    program, expected = instrument(code)
    env = os.environ | {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    where = tmp_path_factory.mktemp("own_deq")
    done = subprocess.run(
        [sys.executable, "-c", program], cwd=where, env=env,
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return expected, done.stdout, where


@pytest.fixture(scope="module")
def run(executed) -> tuple[dict[int, str], dict[int, list[str]]]:
    expected, stdout, _ = executed
    return expected, printed_by(stdout)


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


@pytest.mark.slow
def test_the_page_shows_the_run_level_table_the_code_prints(executed):
    _, stdout, _ = executed
    (table,) = _TABLE.findall(PAGE.read_text(encoding="utf-8"))
    shown = table.strip().splitlines()
    lines = stdout.splitlines()
    start = [i for i, line in enumerate(lines) if line.split() == shown[0].split()]
    assert len(start) == 1, "the table's header is not printed once"
    printed = lines[start[0] : start[0] + len(shown)]
    assert len(printed) == len(shown) == 7
    for says, output in zip(shown, printed, strict=True):
        assert matches(says, output), f"the page shows '{says}', the code printed '{output}'"


@pytest.mark.slow
def test_the_page_embeds_the_figure_the_code_draws(executed):
    mpimg = pytest.importorskip("matplotlib.image")
    _, _, where = executed
    assert "![" in PAGE.read_text(encoding="utf-8") and "](own_deq_run.png)" in PAGE.read_text(
        encoding="utf-8"
    )
    drawn, shown = (
        mpimg.imread(where / "own_deq_run.png"),
        mpimg.imread(PAGE.parent / "own_deq_run.png"),
    )
    assert drawn.shape == shown.shape
    assert (drawn[..., :3] < 0.9).any(axis=-1).mean() > 0.03  # not blank
    page = (where / "own_deq_run.html").read_text(encoding="utf-8")
    assert page.count("data:image/png;base64,") == 1 and "<table" in page

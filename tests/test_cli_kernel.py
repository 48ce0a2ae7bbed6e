"""``deqlab kernel`` past memory: answered from a named subsample S as certified one-sided
bounds — λ_min from above, λ_max and the condition number from below — against the whole
matrix computed at sizes where both fit, the diagonal exact over every point; ``--save``
refused (tests/test_faults_data.py holds the refusals at sizes that do not fit)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from deqlab.cli import app
from deqlab.verification import subsample

N, D = 500, 8


def _forced(monkeypatch, available: float) -> None:
    """The memory figure the subsample is sized from (the real one stays for the rest)."""
    figure = (int(subsample.HEADROOM + available), "a forced figure")
    monkeypatch.setattr(subsample, "available_memory", lambda device=None: figure)


@pytest.fixture(scope="module")
def points(tmp_path_factory):
    """Inputs off the sphere (norms from 0.5 to 2 times √d): the diagonal is not constant."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((N, D)) * rng.uniform(0.5, 2.0, size=(N, 1))
    path = tmp_path_factory.mktemp("kernel") / "X.npy"
    np.save(path, X)
    return path


def _json(*args) -> dict:
    result = CliRunner().invoke(app, ["kernel", *map(str, args), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize(
    "matrix", [(), ("--depth", "2"), ("--ntk",), ("--ntk", "--parameterization", "ntk")]
)
def test_past_memory_the_bounds_hold_against_the_whole_matrix(monkeypatch, points, matrix):
    whole = _json("--input", points, *matrix)
    _forced(monkeypatch, 2e6)  # 16·500² = 4 MB would not fit: S of about 300 points
    part = _json("--input", points, *matrix)
    sample = part["subsample"]
    assert whole["subsample"] is None and 100 <= sample["size"] < N and sample["seed"] == 0
    assert sample["why"].startswith("n = 500 needs 4 MB for the kernel matrix and the work")
    lower, upper = part["lambda_min_bounds"]
    assert lower == 0.0 and whole["lambda_min"] <= upper == part["lambda_min"]
    assert upper < 10 * whole["lambda_min"]  # an upper bound, not a vacuous one
    assert part["lambda_max"] <= whole["lambda_max"]  # at least: Cauchy interlacing
    assert part["lambda_max_proof"].startswith("Cauchy interlacing: λ_max ≥ λ_max on S ≥ ")
    assert whole["lambda_max_proof"] is None
    assert part["lambda_max"] >= 0.5 * whole["lambda_max"]
    assert part["condition_number"] <= whole["condition_number"]
    for key in ("min", "mean", "max"):  # exact over every point, not only S
        assert part["diagonal"][key] == pytest.approx(whole["diagonal"][key], rel=1e-12)
    assert part["singular"] is None and set(part["one_sided"]) == {
        "lambda_min", "lambda_max", "condition_number", "diagonal"
    }  # fmt: skip


def test_past_memory_the_text_says_at_most_at_least_and_names_s(monkeypatch, points):
    _forced(monkeypatch, 2e6)
    result = CliRunner().invoke(app, ["kernel", "--input", str(points), "--seed", "3"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[1].startswith("beyond memory: n = 500 needs 4 MB for the kernel matrix")
    assert " of the 500 points (seed 3) as certified one-sided bounds" in lines[1]
    assert lines[3].startswith("lambda_min (λ*): at most ")
    assert lines[4].startswith("  certified: 0 ≤ λ_min ≤ ") and "Cauchy interlacing" in lines[4]
    assert lines[5].startswith("lambda_max: at least ")
    assert lines[6].startswith("condition number: at least ")


def test_a_subsample_is_not_drawn_where_the_matrix_fits(monkeypatch, points):
    _forced(monkeypatch, 1e9)
    assert _json("--input", points)["subsample"] is None

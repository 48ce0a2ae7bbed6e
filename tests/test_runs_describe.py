"""What `deqlab show` describes (deqlab/runs/describe.py): the run-time estimate without a
store is generic, and reading never creates a store (the rest: tests/test_cli_experiments.py)."""

from deqlab.runs.describe import estimate_run_time
from test_runs_store import LeastSquaresGD  # noqa: F401  (registers the test experiment)


def test_estimate_without_a_store_is_generic(tmp_path):
    estimate = estimate_run_time("test-lsq-gd", "custom", None, tmp_path / "none")
    assert estimate["source"] == "generic" and estimate["text"].startswith("unknown")
    assert not (tmp_path / "none").exists()  # reading never creates a store

"""The five-cell training benchmark (issue 31) runs end to end at a tiny size, against torchdeq
0.1.0 in the same process, and reports the work per step, the gradient's label and its cosine
with the exact gradient. The times themselves are measured on an idle machine
(benchmarks/README.md), not here."""

import json
from pathlib import Path

import pytest

from helpers import run_benchmark

pytest.importorskip(
    "torchdeq", reason="torchdeq 0.1.0 is the `bench` extra: pip install torchdeq==0.1.0"
)
pytest.importorskip("sklearn", reason="the digits come from scikit-learn")

TINY = ["--seeds", "0", "--max-steps", "3", "--eval-every", "1", "--eval-images", "64",
        "--grad-images", "16", "--target", "0.99"]  # fmt: skip


def run(tmp_path: Path, *extra: str):
    return run_benchmark("bench_train_cells.py", TINY, tmp_path / "out.json", *extra)


@pytest.mark.slow
def test_tiny_run_reports_work_labels_and_cosines(tmp_path):
    variant = "jacobian-free@picard:tol=1e-3,max_iter=20,per_sample=True"
    done = run(tmp_path, "--kinds", "mlp", "tuple", "--variant", variant)
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads((tmp_path / "out.json").read_text())
    rows = {(r["kind"], r["library"]): r for r in results["rows"]}
    libraries = ["deqlab", "torchdeq", f"deqlab[{variant}]"]
    assert set(rows) == {(kind, lib) for kind in ("mlp", "tuple") for lib in libraries}
    for row in rows.values():
        assert row["steps"] == 3 and row["reached_at_step"] is None  # 0.99 is out of reach
        assert row["cpu_seconds"] > 0 and row["cell_evaluations_per_step"] >= 2
        assert -1 <= row["cosine_init"] <= 1 and 0 < row["cosine_images"][0] <= 16
    for kind in ("mlp", "tuple"):
        torchdeq = rows[kind, "torchdeq"]
        assert torchdeq["vjps_per_step"] == 0 and torchdeq["exact_gradients"] == 0
        # deqlab's Jacobian-free variant computes torchdeq's default gradient, u = g: at the
        # same initial weights the two cosines agree to the forward solves' accuracy
        jfb = rows[kind, f"deqlab[{variant}]"]
        assert jfb["vjps_per_step"] == 0
        assert jfb["cosine_init"] == pytest.approx(torchdeq["cosine_init"], abs=0.05)
        # and at the end, averaged over the same trained weights (every run's)
        assert jfb["cosine_end_paired"] == pytest.approx(torchdeq["cosine_end_paired"], abs=0.05)
        for row in (jfb, torchdeq, rows[kind, "deqlab"]):
            assert -1 <= row["cosine_end"] <= 1 and -1 <= row["cosine_end_paired"] <= 1
    assert "td/this" in done.stdout


def test_a_bad_variant_is_a_usage_error(tmp_path):
    done = run(tmp_path, "--variant", "phantom:two")
    assert done.returncode == 2 and "bad phantom settings" in done.stderr

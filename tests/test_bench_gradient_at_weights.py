"""The gradient-at-trained-weights benchmark (issue 31) runs end to end at a tiny size: every
configuration's cosine is taken at one set of weights against one exact gradient."""

import json
from pathlib import Path

import pytest

from helpers import run_benchmark

pytest.importorskip("sklearn", reason="the digits come from scikit-learn")


def run(tmp_path: Path, *args: str):
    return run_benchmark("bench_gradient_at_weights.py", list(args), tmp_path / "out.json")


def test_configurations_are_compared_at_the_same_weights(tmp_path):
    solver = "anderson:tol=1e-3,max_iter=20,per_sample=True"
    variants = ["", f"jacobian-free@{solver}", f"implicit@{solver.replace('1e-3', '1e-6')}"]
    done = run(tmp_path, "--kind", "mlp", "--steps", "2", "--grad-images", "16", "--variant",
               *variants)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    cosines = json.loads((tmp_path / "out.json").read_text())["cosines"]
    assert set(cosines) >= {"defaults", *variants[1:]}
    assert all(-1 <= c <= 1 for c in cosines.values())
    # the exact implicit gradient of a tight solve is the reference itself, to its tolerance
    assert cosines[variants[2]] == pytest.approx(1.0, abs=1e-4)
    if "torchdeq" in cosines:  # its default gradient is u = g, as the Jacobian-free variant's
        assert cosines[variants[1]] == pytest.approx(cosines["torchdeq"], abs=0.05)


def test_a_bad_variant_is_a_usage_error(tmp_path):
    done = run(tmp_path, "--variant", "phantom:two")
    assert done.returncode == 2 and "bad phantom settings" in done.stderr

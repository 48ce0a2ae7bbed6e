"""The conv-DEQ training benchmark runs end to end at a tiny size, against torchdeq 0.1.0 in the
same process, and reports for each library and setting the work it did and the gradient's
label. The times themselves are measured on an idle machine (benchmarks/README.md), not here."""

import json
from pathlib import Path

import pytest

from helpers import run_benchmark

pytest.importorskip(
    "torchdeq", reason="torchdeq 0.1.0 is the `bench` extra: pip install torchdeq==0.1.0"
)
pytest.importorskip("sklearn", reason="the digits come from scikit-learn")

TINY = ["--threads", "1", "--channels", "8", "--n-train", "128", "--max-steps", "4",
        "--eval-every", "2", "--matched-steps", "2"]  # fmt: skip


def run(tmp_path: Path, *extra: str):
    return run_benchmark("bench_train_conv_deq.py", TINY, tmp_path / "out.json", *extra)


@pytest.mark.slow
def test_tiny_run_reports_work_and_labels(tmp_path):
    done = run(tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads((tmp_path / "out.json").read_text())
    assert set(results) == {"defaults", "matched"}
    for rows in results.values():
        assert [r["library"] for r in rows] == ["deqlab", "torchdeq"]
        for r in rows:
            assert r["cell_evaluations_per_step"] >= 2 and r["ms_per_step_median"] > 0
            assert sum(r["gradient"].values()) == r["steps"]
            assert r["peak_memory_mib"] >= 0  # CPU: a fresh process per library
    defaults = {r["library"]: r for r in results["defaults"]}
    # torchdeq's default is the 1-step gradient: no adjoint VJPs, never exact
    assert defaults["torchdeq"]["vjps_per_step"] == 0
    assert set(defaults["torchdeq"]["gradient"]) == {"approximate"}
    # deqlab's default is Phantom(3, 0.8): 3 damped steps, 2 full-batch VJPs, never exact
    assert defaults["deqlab"]["vjps_per_step"] == 2
    assert defaults["deqlab"]["gradient"] == {"approximate": defaults["deqlab"]["steps"]}
    matched = {r["library"]: r for r in results["matched"]}
    for r in matched.values():  # an adjoint solve of at most 30 VJPs (+ the graph's own)
        assert 1 <= r["vjps_per_step"] <= 32
        assert r["cell_evaluations_per_step"] <= 32
    assert "torchdeq/deqlab" in done.stdout


def test_cuda_without_a_gpu_is_a_usage_error(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    done = run(tmp_path, "--device", "cuda", "--no-memory")
    assert done.returncode == 2
    assert "--device cuda" in done.stderr


@pytest.mark.slow
@pytest.mark.parametrize(("backward", "vjps"), [("phantom:3,0.5", 2), ("jacobian-free", 0)])
def test_named_backward_replaces_deqlabs_default(tmp_path, backward, vjps):
    # Phantom(k, λ) spends k − 1 full-batch VJPs, JacobianFree none; both are approximate
    done = run(tmp_path, "--libraries", "deqlab", "--settings", "defaults", "--no-memory",
               "--deqlab-backward", backward)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    (row,) = json.loads((tmp_path / "out.json").read_text())["defaults"]
    assert row["vjps_per_step"] == vjps
    assert row["gradient"] == {"approximate": row["steps"]}
    assert f"deqlab backward in the defaults setting: {backward}" in done.stdout


@pytest.mark.parametrize(
    ("backward", "message"),
    [("phantom:0,0.5", "`steps` must be >= 1"), ("newton", "unknown backward 'newton'")],
)
def test_bad_backward_is_a_usage_error(tmp_path, backward, message):
    done = run(tmp_path, "--deqlab-backward", backward)
    assert done.returncode == 2
    assert message in done.stderr

"""The LOBPCG convergence benchmark at a tiny size: its reference value is λ_min(K) (dense
eigvalsh), its errors are those of Ritz values (never below λ_min) and reach each accuracy
in order."""

import importlib.util
from pathlib import Path

import pytest
import torch

from deqlab.data import get_dataset
from deqlab.theory.kernels import population_gram

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "bench_lobpcg_convergence.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_lobpcg_convergence", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tiny_run_reports_errors_against_the_dense_least_eigenvalue(capsys):
    result = _bench().main(["--n", "400", "--d", "10", "--threads", "1", "--every", "5"])
    K = population_gram(get_dataset("sphere", n=400, d=10, seed=0).X, 0.08)
    assert result["value"] == pytest.approx(torch.linalg.eigvalsh(K)[0].item(), rel=1e-10)
    assert min(result["errors"]) >= -1e-12  # Ritz values lie above λ_min
    steps = list(result["reached"].values())
    assert all(isinstance(k, int) for k in steps) and steps == sorted(steps)
    assert "steps to a relative error of 1e-06:" in capsys.readouterr().out


@pytest.mark.parametrize("option", ["--block", "--n", "--every"])
def test_a_size_below_one_is_a_usage_error(option, capsys):
    with pytest.raises(SystemExit) as stop:
        _bench().main([option, "0"])
    assert stop.value.code == 2
    assert f"{option} must be >= 1; got 0" in capsys.readouterr().err

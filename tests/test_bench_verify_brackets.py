"""The stage timing of verify with certified brackets at a tiny size: every stage is listed,
the brackets hold the dense λ*, and a size below one is a usage error."""

import importlib.util
from pathlib import Path

import pytest

from deqlab.theory import spectra
from deqlab.theory.kernels import least_eigenvalue, population_gram
from deqlab.verification import load_dataset

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "bench_verify_brackets.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_verify_brackets", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tiny_run_lists_the_stages_and_holds_the_dense_value(capsys, monkeypatch):
    monkeypatch.setattr(spectra, "DENSE_LIMIT", 100)  # LOBPCG and the proofs, as at large n
    x, _, _ = load_dataset("sphere", n=300, d=10)
    exact = least_eigenvalue(population_gram(x.T, 0.08)).value
    args = ["--n", "300", "--d", "10", "--width", "50", "--threads", "1"]
    result = _bench().main([*args, "--reference", str(exact)])
    printed = capsys.readouterr().out
    assert "float32 Cholesky factorization of K (n = 300)" in printed
    assert "certifying λ_min ≥ " in printed and "inside the bracket: True" in printed
    lower, upper = result["numbers"]["lambda_star_bounds"]
    assert lower <= exact <= upper and (upper - lower) / upper <= spectra.PRECISION


@pytest.mark.parametrize("option", ["--n", "--width", "--threads"])
def test_a_size_below_one_is_a_usage_error(option, capsys):
    with pytest.raises(SystemExit) as stop:
        _bench().main([option, "0"])
    assert stop.value.code == 2
    assert f"{option} must be >= 1; got 0" in capsys.readouterr().err

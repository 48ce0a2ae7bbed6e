"""The issue-32 benchmarks at tiny sizes: the JVP routes compute one linear map and the route
an op lacks is reported missing; the recorder's overhead is measured and bounded; the default
σ_min is exact on a near-singular cell where the Krylov cap is not."""

import importlib.util
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).parents[1] / "benchmarks"


def _bench(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_jvp_routes_agree_and_fused_attention_has_no_forward_mode(monkeypatch, capsys):
    bench = _bench("bench_jvp_routes")
    small = {k: v for k, v in bench.cells().items() if k.startswith(("tanh", "transformer"))}
    monkeypatch.setattr(bench, "cells", lambda: small)
    results = bench.main(["--repeats", "1", "--inner", "1"])
    assert set(results["tanh 64×256"]["evaluations"]) == {
        "double backward", "forward-mode", "forward-mode, math attention"
    }  # fmt: skip
    assert "forward-mode" not in results["transformer 32×16×64"]["evaluations"]
    assert all(r["agreement"] < 1e-5 for r in results.values())
    assert "—" in capsys.readouterr().out


def test_the_recorders_overhead_is_reported(capsys):
    rows = _bench("bench_diagnostics_along_run").main(["--steps", "6", "--every", "2"])
    unbounded = next(r for r in rows if r["max_fraction"] is None)
    assert unbounded["recordings"] == 3 and unbounded["overhead"] > 0
    assert "bare run: 6 steps" in capsys.readouterr().out


def test_the_default_sigma_min_is_exact_where_the_krylov_cap_is_not(monkeypatch, capsys):
    bench = _bench("bench_sigma_min")
    small = {"tanh 128": bench.near_singular(128, 2)}
    monkeypatch.setattr(bench, "cells", lambda batch: small)
    ways = bench.main(["--batch", "2"])["tanh 128"]["ways"]
    assert ways["default"]["status"] == "exact" and ways["default"]["dense"]
    assert ways["default"]["error"] < 1e-8 and ways["Krylov to N"]["error"] < 1e-8
    assert ways["Krylov, cap 100"]["status"] == "not converged"
    assert "exact, dense SVD" in capsys.readouterr().out


@pytest.mark.parametrize("option", ["--steps", "--every"])
def test_a_size_below_one_is_a_usage_error(option, capsys):
    with pytest.raises(SystemExit) as stop:
        _bench("bench_diagnostics_along_run").main([option, "0"])
    assert stop.value.code == 2
    assert "--steps and --every must be >= 1" in capsys.readouterr().err

"""What a user reading ``deqlab verify`` found inconsistent (issue 35, item 5), each on the
printed output: Theorem 3 (ii)'s answer and its statement from one source; ``--train``
without ``--eta`` at the stand-in step, saying so; the rate predicted from the PL ratio at
θ(0) beside the PL ratio along the run, with how long the prediction held."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from typer.testing import CliRunner

from deqlab.cli import app
from deqlab.verification import relu_deq
from deqlab.verification.stand_ins import descent_rate, pl_along


@pytest.fixture(scope="module")
def raw_csv(tmp_path_factory):
    """40 samples of 6 raw features on scales 1 to 10⁵ (not on the sphere), labels 0/1."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((40, 6)) * np.logspace(0, 5, 6) + np.logspace(0, 5, 6)
    y = (X[:, 0] > 1).astype(float)
    path = tmp_path_factory.mktemp("data") / "raw.csv"
    header = ",".join([*(f"f{i}" for i in range(6)), "target"])
    np.savetxt(path, np.column_stack([X, y]), delimiter=",", header=header, comments="")
    return path


def _run(*args: object) -> list[str]:
    result = CliRunner().invoke(app, ["verify", *(str(a) for a in args)])
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()


def test_raw_data_answer_and_statement_agree_that_theorem3_does_not_apply(raw_csv):
    lines = _run("--input", raw_csv, "--width", 60)
    answer = next(line for line in lines if "Theorem 3 (ii): λ* > 0:" in line)
    assert answer.startswith(
        "  Ling et al. 2023, Theorem 3 (ii): λ* > 0: does not apply to these data — its "
        "hypothesis on the data is unmet: Assumption 2 (i): ‖x_i‖ = √d (needs --normalize"
    )
    row = next(line for line in lines if line.startswith("│ Theorem 3 (ii): λ* > 0"))
    assert "NOT APPLICABLE" in row  # the statements table, from the same statement
    normalized = _run("--input", raw_csv, "--width", 60, "--normalize")
    answer = next(line for line in normalized if "Theorem 3 (ii): λ* > 0:" in line)
    assert ": holds for these data — λ* ∈ [" in answer


def test_train_without_eta_takes_the_stand_in_step_and_says_so(raw_csv):
    lines = _run("--input", raw_csv, "--width", 60, "--normalize", "--train", 5)
    stand_in = next(line for line in lines if "η = 1/λ_max(H(0)) = " in line)
    eta = re.search(r"η = 1/λ_max\(H\(0\)\) = ([0-9.e+-]+)", stand_in).group(1)
    trained = next(line for line in lines if line.startswith("training: 5 GD steps"))
    assert trained.startswith(f"training: 5 GD steps at η = {eta}, the stand-in 1/λ_max(H(0))")
    assert "as Condition 1 fails at m = 60: the theorem's η = " in trained
    assert f"at the η trained with ({eta})" in "\n".join(lines)


def test_train_without_eta_and_without_a_stand_in_asks_for_eta(raw_csv, monkeypatch):
    monkeypatch.setattr(relu_deq, "STANDIN_LIMIT", 10)  # H(0) not formed at n = 40
    result = CliRunner().invoke(
        app, ["verify", "--input", str(raw_csv), "--normalize", "--width", "60", "--train", "3"]
    )
    assert result.exit_code == 2
    assert result.stderr.strip().startswith("error: `eta`: Condition 1 fails at m = 60, so the")
    assert result.stderr.strip().endswith("give a step size with --eta")


def test_the_predicted_rate_comes_with_the_pl_ratio_along_the_run(raw_csv):
    lines = _run("--input", raw_csv, "--width", 60, "--normalize", "--train", 15, "--eta", 4e-4)
    text = "\n".join(lines)
    measured = float(re.search(r"at the η trained with \(0.0004\): ([0-9.]+) per step", text)[1])
    predicted = re.search(
        r"1 − η\(2 − ηλ_max\)μ: ([0-9.]+) per step from μ\(0\), valid (.+?) — (.+?); along the "
        r"run μ\(τ\) = ‖∇Φ\(τ\)‖²/\(2Φ\(τ\)\) went from ([0-9.e+-]+) to ([0-9.e+-]+) .*?, and "
        r"μ\(τ\) step by step predicts ([0-9.]+) per step",
        text,
    )
    assert predicted is not None, text
    from_start, start, end, along = (float(predicted[i]) for i in (1, 4, 5, 6))
    assert end != start  # μ moves along the run: the prediction from μ(0) is not enough
    assert abs(math.log(along / measured)) < abs(math.log(from_start / measured))
    steps = next(line for line in lines if "ours: steps to Φ = " in line)
    assert "at the rate predicted from μ(0), valid " in steps


def test_pl_along_reads_the_records_and_says_how_long_mu0_held():
    records = [
        {"step": 0, "loss": 1.0, "grad_norm": 2.0},  # μ = 2
        {"step": 1, "loss": 0.5, "grad_norm": 1.2},  # μ = 1.44
        {"step": 2, "loss": 0.4, "grad_norm": 0.4},  # μ = 0.2 < μ(0)/2
        {"step": 3, "loss": 0.39, "grad_norm": 0.3},  # the last: no step after it
    ]
    along = pl_along(records, 0.1, 4.0)
    assert (along.start, along.least_step, along.fell_at) == (2.0, 2, 2)
    assert along.least == pytest.approx(0.2)
    factors = [descent_rate(0.1, 4.0, mu) for mu in (2.0, 1.44, 0.2)]
    assert along.rate == pytest.approx(math.prod(factors) ** (1 / 3))
    assert along.validity == "up to step 1: μ fell below μ(0)/2 at step 2"
    steady = [{**r, "grad_norm": 2.0 * math.sqrt(r["loss"])} for r in records]  # μ = 2
    assert pl_along(steady, 0.1, 4.0).validity.startswith("throughout the run")
    assert pl_along(records[:2], 0.1, 4.0) is None  # one step: nothing along a run

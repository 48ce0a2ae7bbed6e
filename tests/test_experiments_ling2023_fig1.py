"""ling2023-fig1: the tiny preset end to end, η against an independent Picard solve,
bit-exact resume after SIGKILL, and the claims on tables with known answers."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from typer.testing import CliRunner

from deqlab.cli import app
from deqlab.data import synthetic_sphere
from deqlab.experiments.config import ConfigError
from deqlab.experiments.ling2023.fig1 import Fig1Config, Ling2023Fig1
from deqlab.experiments.ling2023.fig1_report import by_dataset, dataset_claims
from deqlab.models.relu_deq import ReLUDEQ
from deqlab.runs.store import RunStore, read_rows_csv

ARGS = ("reproduce", "ling2023-fig1", "--preset", "tiny", "--quiet", "--workers", "1",
        "--checkpoint-every", "4")  # fmt: skip
TIMING = ("wall_time_s", "elapsed_s")


def _untimed(rows: list[dict]) -> list[str]:
    """Rows without wall-clock columns, as reprs (exact for floats, and NaN equals NaN)."""
    return [repr({k: v for k, v in r.items() if k not in TIMING}) for r in rows]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("fig1")
    result = CliRunner().invoke(app, [*ARGS, "--out", str(out)])
    assert result.exit_code == 0, result.output
    return next((out / "ling2023-fig1").iterdir())


def test_tiny_run_has_the_figures_claims_and_columns(tiny_run):
    summary = json.loads((tiny_run / "summary.json").read_text())
    rows = read_rows_csv(tiny_run / "metrics.csv")
    claims = {c["name"].split(": ", 1)[1]: c for c in summary["statements"]}
    for c in claims.values():
        c["passed"] = c["verdict"] == "PASS"
    for name in (
        "loss decreases linearly on a log scale",
        "wider converges faster",
        "wider reaches a lower loss at step 29",
        "‖W(τ)‖₂ < 1 at every step",
        "λ_τ ≥ λ_0/2 throughout",
        "Φ(τ) ≤ (1 − ηλ_0/2)^τ Φ(0)",
    ):
        assert claims[name]["passed"], claims[name]
    holds = {r["m"]: r["cond1_holds"] for r in rows}
    assert claims["Condition 1 (Eqs. 7–9) at initialization"]["passed"] == all(holds.values())
    for name in ("loss", "w_norm", "lambda_ratio"):
        assert f"figures/{name}.png" in [f["path"] for f in summary["figures"]]
        assert (tiny_run / "figures" / f"{name}.pdf").stat().st_size > 0
    assert set(Ling2023Fig1.metric_columns) <= set(rows[0])
    assert [t["key"] for t in summary["tasks"]] == ["sphere-m32", "sphere-m128"]
    assert len(rows) == 2 * 30 and {r["status"] for r in rows} == {"ok"}


def test_eta_is_shared_and_follows_the_curvature_rule(tiny_run):
    config = Ling2023Fig1().resolve("tiny")
    rows = read_rows_csv(tiny_run / "metrics.csv")
    assert len({r["eta"] for r in rows}) == 1  # one η for every width
    # Independent reference: plain Picard iteration on the widest model at initialization.
    data = synthetic_sphere(config.n, config.d, seed=config.data_seed)
    model = ReLUDEQ.init(config.d, config.widths[-1], sigma_w2=config.sigma_w2, seed=config.seed)
    W, U = model.W.detach(), model.U.detach()
    Z = torch.zeros(config.widths[-1], config.n, dtype=torch.float64)
    for _ in range(400):  # contraction ‖W‖₂ < 0.9: error < 0.9^400
        Z = torch.relu(W @ Z + U @ data.X)
    lambda_max = float(torch.linalg.eigvalsh(Z.T @ Z)[-1])
    assert rows[0]["eta"] == pytest.approx(config.eta_fraction * 2 / lambda_max, rel=1e-5)


def _start_and_signal(out, checkpoint: str, sig: signal.Signals) -> tuple[int, str]:
    """Run the tiny preset in a subprocess; send ``sig`` once ``checkpoint`` exists.

    Returns the exit code and stderr."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "deqlab", *ARGS, "--out", str(out)],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A shell without job control starts background jobs with SIGINT ignored.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 120
    try:
        while not list(out.glob(f"ling2023-fig1/*/checkpoints/{checkpoint}.pt")):
            assert proc.poll() is None, "the run ended before it could be stopped"
            assert time.monotonic() < deadline, "no checkpoint within 120 s"
            time.sleep(0.01)
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait()
    return proc.returncode, stderr


def test_interrupted_then_killed_run_resumes_to_the_same_numbers(tiny_run, tmp_path):
    """Ctrl-C during the first task, SIGKILL during the second after a checkpoint, rerun:
    the table equals the uninterrupted one."""
    out = tmp_path / "out"
    code, stderr = _start_and_signal(out, "sphere-m32", signal.SIGINT)
    assert code == 130
    assert stderr == "error: interrupted; rerun the same command to resume from the checkpoints\n"
    run_dir = next((out / "ling2023-fig1").iterdir())
    store = RunStore(out)
    assert store.lookup("ling2023-fig1", run_dir.name)["status"] == "interrupted"

    code, _ = _start_and_signal(out, "sphere-m128", signal.SIGKILL)
    assert code == -signal.SIGKILL
    checkpoint = torch.load(run_dir / "checkpoints" / "sphere-m128.pt", weights_only=True)
    assert not checkpoint["done"] and 0 < checkpoint["state"]["step_count"] < 30
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "running"
    assert store.lookup("ling2023-fig1", run_dir.name)["status"] == "running"

    result = CliRunner().invoke(app, [*ARGS, "--out", str(out)])
    assert result.exit_code == 0, result.output
    summary = json.loads((run_dir / "summary.json").read_text())
    assert [t["reused"] for t in summary["tasks"]] == [True, False]
    resumed = read_rows_csv(run_dir / "metrics.csv")
    assert _untimed(resumed) == _untimed(read_rows_csv(tiny_run / "metrics.csv"))


def _rows(m: int, rate: float, *, steps: int = 20, W_bound: float = 0.8, lam_drop: float = 1.0):
    """Rows of a run whose loss decays exactly geometrically: Φ(τ) = 10 (1 − rate)^τ."""
    return [
        {
            "dataset": "toy", "m": m, "eta": 0.01, "step": t, "loss": 10 * (1 - rate) ** t,
            "lambda_min": 100.0 * (lam_drop if t == steps - 1 else 1.0), "W_norm": 0.7,
            "W_norm_bound": W_bound, "status": "ok", "cond1_holds": False,
            "cond1_eq9_lhs": 100.0, "cond1_eq9_rhs": 1e6, "cond1_eq9_holds": False,
            "cond1_lr_bound": 1e-6,
        }
        for t in range(steps)
    ]  # fmt: skip


def _claims(rows: list[dict]) -> dict[str, object]:
    (runs,) = by_dataset(rows).values()
    return {c.name.split(": ", 1)[1]: c for c in dataset_claims(runs)}


def test_claims_on_exact_geometric_losses():
    claims = _claims(_rows(64, 0.1) + _rows(32, 0.05))  # order of rows does not matter
    assert claims["loss decreases linearly on a log scale"].measured == "R² = 1.000, 1.000"
    faster = claims["wider converges faster"]
    assert faster.passed and faster.measured == (
        f"rate {-math.log(0.95):.3g} < {-math.log(0.9):.3g}"
    )
    assert claims["wider reaches a lower loss at step 19"].passed
    assert claims["‖W(τ)‖₂ < 1 at every step"].passed
    assert claims["λ_τ ≥ λ_0/2 throughout"].passed
    # ηλ_0/2 = 0.5 per step: the losses (decay 0.9, 0.95) lie above the bound 10·0.5^τ.
    bound = claims["Φ(τ) ≤ (1 − ηλ_0/2)^τ Φ(0)"]
    assert not bound.passed and "checked empirically" in bound.detail
    assert "η / Eq. (10) bound = 1e+04 to 1e+04" in bound.detail
    cond = claims["Condition 1 (Eqs. 7–9) at initialization"]
    assert not cond.passed and "m=32 Eq. (9): 100 < 1e+06" in cond.detail


def test_claims_fail_when_the_theorem_fails():
    claims = _claims(_rows(32, 0.1, W_bound=1.02) + _rows(64, 0.05, lam_drop=0.4))
    assert not claims["‖W(τ)‖₂ < 1 at every step"].passed
    assert not claims["λ_τ ≥ λ_0/2 throughout"].passed
    assert not claims["wider converges faster"].passed
    assert not claims["wider reaches a lower loss at step 19"].passed


def test_config_validation():
    with pytest.raises(ConfigError, match=r"`widths` must be strictly increasing; got \[64, 32\]"):
        Ling2023Fig1().resolve("tiny", overrides=["widths=[64,32]"])
    with pytest.raises(ConfigError, match="`datasets` must be one of 'sphere', 'mnist'"):
        Ling2023Fig1().resolve("tiny", overrides=["datasets=svhn"])
    with pytest.raises(ValueError, match=r"`eta_fraction` must be in \(0, 1\)"):
        Fig1Config(eta_fraction=1.0)
    assert Fig1Config().widths == (1000, 2000, 4000, 8000) and Fig1Config().sigma_w2 == 0.08

"""ling2023-fig1: the tiny preset end to end (and with one step, no metrics after step 0, a
step size that stops GD), η against an independent Picard solve, λ_min(H(0)) against an
autograd Jacobian, bit-exact resume after SIGKILL, and every statement passing and failing
on tables with known answers."""

from __future__ import annotations

import dataclasses
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
from deqlab.experiments.ling2023 import fig1
from deqlab.experiments.ling2023.fig1 import Fig1Config, Ling2023Fig1
from deqlab.experiments.ling2023.fig1_report import by_dataset
from deqlab.models.relu_deq import ReLUDEQ
from deqlab.papers.ling2023.figure1 import figure1_statements
from deqlab.papers.ling2023.theory import Condition1, Constants, best_delta
from deqlab.runs.store import RunStore
from deqlab.runs.tables import read_rows_csv

ARGS = ("reproduce", "ling2023-fig1", "--preset", "tiny", "--quiet", "--workers", "1",
        "--checkpoint-every", "4")  # fmt: skip
TIMING = ("wall_time_s", "elapsed_s")


def dataset_statements(name, runs, steps, widths):
    """Every statement of data set ``name``'s widths ``runs`` (as the experiment makes them)."""
    n = int(runs[0].run.constant("n")) if runs else 0
    return figure1_statements(f"{name}: ", runs, steps, widths, n=n)


def _untimed(rows: list[dict]) -> list[str]:
    """Rows without wall-clock columns, as reprs (exact for floats, and NaN equals NaN)."""
    return [repr({k: v for k, v in r.items() if k not in TIMING}) for r in rows]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("fig1")
    result = CliRunner().invoke(app, [*ARGS, "--out", str(out)])
    assert result.exit_code == 0, result.output
    return next((out / "ling2023-fig1").iterdir())


OBSERVATIONS = (
    "convergence is faster for larger m",
    "the final training loss is smaller for larger m",
    "‖W(τ)‖₂ < 1 throughout training",
)
HYPOTHESES = (
    "Condition 1, Eq. (7) at initialization",
    "Condition 1, Eq. (8) at initialization",
    "Condition 1, Eq. (9) at initialization",
    "learning rate below Eq. (10)",
)
THEOREMS = (
    "Theorem 1 (i): ‖W(τ)‖₂ < 1 for τ ≥ 1",
    "Theorem 1 (ii): λ_τ > λ_0/2 for τ ≥ 1",
    "Theorem 1 (iii): Φ(τ) ≤ (1 − ηλ_0/2)^τ Φ(0) for τ ≥ 1",
    "proof of Theorem 1 (iii): Φ(τ+1) ≤ (1 − ηλ_0/2) Φ(τ)",
    "proof of Theorem 1: ‖θ(τ) − θ(0)‖ within its drift bound",
)
EQ9 = "Condition 1, Eq. (9) holds at no width (its margin ≤ (1 − ‖W(0)‖₂)²/(4n‖a(0)‖₂²) < 1)"
LEMMA2 = "Lemma 2: J(τ) invertible (‖W(τ)‖₂ < 1) where Eqs. (4)–(5) are checked"
PL = (
    "Eq. (4): ‖∇_θΦ(τ)‖² ≥ 2λ_min(H(τ))Φ(τ) for τ ≥ 1",
    "Section 2.3: λ_min(H(τ)) ≥ λ_τ for τ ≥ 1",
    "Eq. (5): ‖∇_θΦ(τ)‖² ≥ 2λ_τΦ(τ) for τ ≥ 1",
)


def _by_name(statements) -> dict[str, dict]:
    """Statements (dicts or Statement) by name without the data set prefix, as dicts."""
    out = {}
    for s in statements:
        d = s if isinstance(s, dict) else s.as_dict()
        out[d["name"].split(": ", 1)[1]] = d
    return out


def test_tiny_run_has_the_figures_statements_and_columns(tiny_run):
    summary = json.loads((tiny_run / "summary.json").read_text())
    rows = read_rows_csv(tiny_run / "metrics.csv")
    statements = _by_name(summary["statements"])
    completed = "GD ran all 30 steps at every width"
    assert list(statements) == [
        *OBSERVATIONS, completed, *HYPOTHESES, EQ9, *THEOREMS, LEMMA2, *PL
    ]  # fmt: skip
    for name in (*OBSERVATIONS, completed, EQ9, *PL):  # Eqs. (4)–(5) hold at any width
        assert statements[name]["verdict"] == "PASS", statements[name]
    assert all("consistency check of two computations" in statements[n]["detail"] for n in PL)
    assert statements[EQ9]["kind"] == "ours" and "findings.md#ling-eq9" in statements[EQ9]["detail"]
    assert statements[LEMMA2]["verdict"] == "HOLDS"
    assert "at τ = 5, 10, …, 25 (5 steps per width)" in statements[PL[0]]["detail"]
    for name in HYPOTHESES:  # far from the theorem's regime at m = 32, 128
        assert statements[name]["verdict"] == "UNMET" and statements[name]["needs"], name
    for name in THEOREMS:
        s = statements[name]
        assert s["verdict"] == "NOT APPLICABLE" and s["kind"] == "theorem", s
        assert "Eq. (9): no width" in s["needs"] and "η <" in s["needs"]
    assert (
        statements[OBSERVATIONS[0]]["quote"]
        == "the convergence speed becomes faster as m increases"
    )
    for name in ("loss", "w_norm", "lambda_ratio"):
        assert f"figures/{name}.png" in [f["path"] for f in summary["figures"]]
        assert (tiny_run / "figures" / f"{name}.pdf").stat().st_size > 0
        assert summary["figures"][0]["caption"].endswith(".")
    assert set(Ling2023Fig1.metric_columns) <= set(rows[0])
    assert {(r["n"], r["d"]) for r in rows} == {(8, 8)}
    assert [t["key"] for t in summary["tasks"]] == ["sphere-m32", "sphere-m128"]
    assert len(rows) == 2 * 30 and {r["status"] for r in rows} == {"ok"}
    formed = [r["step"] for r in rows if r["m"] == 32 and math.isfinite(r["H_lambda_min"])]
    assert formed == [0, 5, 10, 15, 20, 25]  # lcm(metrics_every = 1, spectral_every = 5)


def test_lambda_min_of_h_matches_the_autograd_jacobian_at_initialization(tiny_run):
    """λ_min(H(0)) of the m = 32 run against Θ = JJᵀ of the unrolled model by autograd."""
    config = Ling2023Fig1().resolve("tiny")
    data = synthetic_sphere(config.n, config.d, seed=config.data_seed)
    m = config.widths[0]
    model = ReLUDEQ.init(config.d, m, sigma_w2=config.sigma_w2, seed=config.seed)
    params = [p.detach().clone() for p in (model.W, model.U, model.a)]

    def predict(W, U, a):
        Z = torch.zeros(m, config.n, dtype=torch.float64)
        for _ in range(300):  # ‖W‖₂ < 0.9: the equilibrium to rounding
            Z = torch.relu(W @ Z + U @ data.X)
        return a @ Z

    jac = torch.func.jacrev(predict, argnums=(0, 1, 2))(*params)
    H = sum(J.reshape(config.n, -1) @ J.reshape(config.n, -1).T for J in jac)
    rows = read_rows_csv(tiny_run / "metrics.csv")
    (row,) = [r for r in rows if r["m"] == m and r["step"] == 0]
    assert row["H_lambda_min"] == pytest.approx(float(torch.linalg.eigvalsh(H)[0]), rel=1e-5)


def _reproduce(tmp_path, *overrides: str) -> dict[str, dict]:
    args = [*ARGS, "--out", str(tmp_path)]
    for o in overrides:
        args += ["--set", o]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp_path / "ling2023-fig1").iterdir()
    return _by_name(json.loads((run_dir / "summary.json").read_text())["statements"])


def test_one_step_measures_nothing_after_the_start(tmp_path):
    statements = _reproduce(tmp_path, "steps=1")
    passed = [name for name, s in statements.items() if s["verdict"] == "PASS"]
    assert passed == ["GD ran all 1 steps at every width", EQ9]  # no stop; EQ9 is at τ = 0
    for name in OBSERVATIONS:
        assert statements[name]["verdict"] == "NOT MEASURED", name


def test_no_metrics_after_the_start_leaves_lambda_and_the_drift_unmeasured(tmp_path):
    statements = _reproduce(tmp_path, "metrics_every=0")
    assert statements[OBSERVATIONS[0]]["verdict"] == "PASS"  # the loss is measured every step
    assert "min λ_τ/λ_0 = —, —" in statements[THEOREMS[1]]["measured"]
    assert "= —, —" in statements[THEOREMS[4]]["measured"]


def test_a_step_size_that_stops_gd_shows_the_stop_and_passes_no_theorem(tmp_path):
    statements = _reproduce(tmp_path, "eta=5")
    done = statements["GD ran all 30 steps at every width"]
    assert done["verdict"] == "FAIL"
    assert "m = 32 stopped at step 1 (W_norm_ge_1: ‖W‖₂ =" in done["measured"]
    assert statements[OBSERVATIONS[2]]["verdict"] == "FAIL"
    assert "stopped at step 1" in statements[OBSERVATIONS[2]]["measured"]
    assert statements["learning rate below Eq. (10)"]["verdict"] == "UNMET"
    assert {statements[name]["verdict"] for name in THEOREMS} == {"NOT APPLICABLE"}


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


#: Condition 1 holds (tiny ‖X‖_F against λ_0 = 1) and Eq. (10) allows η = 0.01; Φ(0) = 10
#: matches ‖ŷ(0) − y‖₂ = √20.
GOOD = Constants(lambda0=1.0, W_norm=0.1, U_norm=1.0, a_norm=1.0, X_fro=1e-4,
                 residual_norm=math.sqrt(20))  # fmt: skip
#: The widest sphere model of the quick preset (Condition 1 fails by ~10⁷).
BAD = Constants(lambda0=230.0, W_norm=0.795, U_norm=7.04, a_norm=1.01, X_fro=100.0,
                residual_norm=13.5)  # fmt: skip


def _rows(m, rate, *, steps=20, constants=GOOD, eta=0.01, lam=1.0, W=0.5, drift=0.0,
          stop=None, bump=None, h=2.0, g=1.5):  # fmt: skip
    """Rows of one width: Φ(τ) = 10 (1 − rate)^τ (× 1.2 from step ``bump`` on), λ_τ = λ_0
    × ``lam`` after step 0, ‖W(τ)‖₂ = ``W`` after step 0, ‖θ(τ) − θ(0)‖ = ``drift`` τ,
    λ_min(H(τ)) = ``h`` λ_τ every 5 steps and ‖∇Φ‖² = ``g`` · 2 (h λ_τ) Φ (so Eq. (4) has
    margin g, Eq. (5) g·h); a ``stop`` status on the last row (loss, λ and ‖∇Φ‖ not
    measured there, as the trainer)."""
    cond = {f"cond1_{k}": v for k, v in
            Condition1.evaluate(best_delta(constants), constants).as_dict().items()}  # fmt: skip
    rows = []
    for t in range(steps):
        loss = 10 * (1 - rate) ** t * (1.2 if bump is not None and t >= bump else 1.0)
        lam_t = constants.lambda0 * (lam if t else 1.0)
        rows.append({
            "dataset": "toy", "n": 10, "d": 5, "m": m, "eta": eta, **cond, "step": t,
            "loss": loss, "lambda_min": lam_t,
            "W_norm": W if t else 0.4, "W_norm_bound": (W if t else 0.4) + 0.01,
            "dist_from_init": drift * t, "status": "ok",
            "grad_norm": math.sqrt(g * 2 * h * lam_t * loss),
            "H_lambda_min": h * lam_t if t % 5 == 0 else math.nan,
        })  # fmt: skip
    if stop is not None:
        rows[-1].update(status=stop, loss=math.nan, lambda_min=math.nan, dist_from_init=math.nan,
                        grad_norm=math.nan)  # fmt: skip
    return rows


def _verdicts(*tables, steps=20, widths=(32, 64)) -> dict[str, str]:
    rows = [r for table in tables for r in table]
    runs = by_dataset(rows).get("toy", [])
    statements = dataset_statements("toy", runs, steps, widths)
    return {name: s["verdict"] for name, s in _by_name(statements).items()}


def _statement(name, *tables, steps=20, widths=(32, 64)) -> dict:
    rows = [r for table in tables for r in table]
    statements = dataset_statements("toy", by_dataset(rows)["toy"], steps, widths)
    return _by_name(statements)[name]


def test_everything_passes_on_a_run_inside_the_theorem():
    verdicts = _verdicts(_rows(64, 0.1), _rows(32, 0.05))  # order of rows does not matter
    assert {verdicts[n] for n in (*OBSERVATIONS, *THEOREMS, *PL)} == {"PASS"}, verdicts
    assert {verdicts[n] for n in (*HYPOTHESES, LEMMA2)} == {"HOLDS"}
    assert verdicts["GD ran all 20 steps at every width"] == "PASS"
    faster = _statement(OBSERVATIONS[0], _rows(32, 0.05), _rows(64, 0.1))
    assert faster["value"] == pytest.approx(-math.log(0.9) + math.log(0.95))


def test_the_observations_fail_when_wider_is_slower_or_w_reaches_one():
    verdicts = _verdicts(_rows(32, 0.1), _rows(64, 0.05, W=1.02))
    assert verdicts[OBSERVATIONS[0]] == verdicts[OBSERVATIONS[1]] == "FAIL"
    assert verdicts[OBSERVATIONS[2]] == verdicts[THEOREMS[0]] == "FAIL"


def test_the_observations_need_a_step_after_the_start_and_two_widths():
    one_step = _verdicts(_rows(32, 0.05, steps=1), _rows(64, 0.1, steps=1), steps=1)
    for name in (*OBSERVATIONS, *THEOREMS):
        assert one_step[name] == "NOT MEASURED", name
    one_width = _verdicts(_rows(32, 0.05), widths=(32,))
    assert one_width[OBSERVATIONS[0]] == one_width[OBSERVATIONS[1]] == "NOT MEASURED"
    assert one_width[OBSERVATIONS[2]] == "PASS"


def test_a_stop_or_a_missing_width_fails_the_run_statement():
    table = _rows(32, 0.05), _rows(64, 0.1, stop="forward_failed")
    done = _statement("GD ran all 20 steps at every width", *table)
    assert done["verdict"] == "FAIL" and done["measured"] == (
        "m = 64 stopped at step 19 (forward_failed)"
    )
    assert _statement(OBSERVATIONS[1], *table)["measured"].startswith("Φ(18) = ")
    missing = _statement("GD ran all 20 steps at every width", _rows(32, 0.05), widths=(32, 64))
    assert missing["verdict"] == "FAIL" and missing["measured"] == "no rows for m = 64"


def test_each_theorem_statement_fails_on_its_own_violation():
    """A loss above the bound of (iii) must also break the per-step contraction at some step;
    the other violations fail only their own statement."""
    cases = [
        ({"lam": 0.4}, [THEOREMS[1]]),  # λ_τ = 0.4 λ_0
        ({"rate": 0.001}, [THEOREMS[2], THEOREMS[3]]),  # slower than 1 − ηλ_0/2 = 0.995
        ({"bump": 10}, [THEOREMS[3]]),  # one step up by 8 %, far below the bound of (iii)
        ({"drift": 1.0}, [THEOREMS[4]]),  # far beyond (4/λ_0)√(Σc²)‖X‖_F‖ŷ(0) − y‖₂ ≈ 4e-3
    ]
    for change, want in cases:
        rate = change.pop("rate", 0.1)
        verdicts = _verdicts(_rows(32, 0.05), _rows(64, rate, **change))
        assert [n for n in THEOREMS if verdicts[n] == "FAIL"] == want, (want, verdicts)
        assert {verdicts[n] for n in HYPOTHESES} == {"HOLDS"}


def test_theorem_statements_are_unmeasured_without_their_quantity():
    no_metrics = _rows(32, 0.05, lam=math.nan, drift=math.nan), _rows(64, 0.1)
    verdicts = _verdicts(*no_metrics)
    assert verdicts[THEOREMS[1]] == verdicts[THEOREMS[4]] == "NOT MEASURED"
    assert verdicts[THEOREMS[2]] == "PASS"


def test_each_pl_statement_fails_on_its_own_violation():
    """Eq. (4) with margin g, λ_min(H)/λ_τ = h, Eq. (5) with margin g·h (see _rows)."""
    cases = [
        ({"g": 0.9}, [PL[0]]),  # ‖∇Φ‖² below 2λ_min(H)Φ; Eq. (5) still holds (1.8)
        ({"h": 0.9}, [PL[1]]),  # λ_min(H) below λ_τ; Eq. (4) 1.5, Eq. (5) 1.35
        ({"g": 0.4}, [PL[0], PL[2]]),  # both PL inequalities
    ]
    for change, want in cases:
        verdicts = _verdicts(_rows(32, 0.05), _rows(64, 0.1, **change))
        assert [n for n in PL if verdicts[n] == "FAIL"] == want, (want, verdicts)
        assert verdicts[LEMMA2] == "HOLDS"
    s = _statement(PL[0], _rows(32, 0.05), _rows(64, 0.1, g=0.9))
    assert s["value"] == pytest.approx(0.9) and "= 1.5, 0.9 (m = 32, 64)" in s["measured"]


def test_pl_statements_apply_at_any_width_and_need_their_measurements():
    """Condition 1 unmet leaves Eqs. (4)–(5) applicable; ‖W(τ)‖₂ ≥ 1 (Lemma 2's hypothesis)
    does not; no H(τ) after the start leaves Eq. (4) and λ_min(H) ≥ λ_τ unmeasured."""
    bad = _verdicts(_rows(32, 0.05, constants=BAD), _rows(64, 0.1, constants=BAD, g=0.9))
    assert bad["Condition 1, Eq. (9) at initialization"] == "UNMET"
    assert [bad[n] for n in PL] == ["FAIL", "PASS", "PASS"]
    table = _rows(32, 0.05), _rows(64, 0.1, W=1.02)
    lemma2 = _statement(LEMMA2, *table)
    assert lemma2["verdict"] == "UNMET" and lemma2["value"] == pytest.approx(1.03)
    assert {_statement(n, *table)["verdict"] for n in PL} == {"NOT APPLICABLE"}
    assert "Lemma 2: J(τ) invertible" in _statement(PL[0], *table)["detail"]
    no_h = [{**r, "H_lambda_min": math.nan if r["step"] else 1.0} for r in _rows(32, 0.05)]
    verdicts = _verdicts(no_h, _rows(64, 0.1))
    assert [verdicts[n] for n in PL] == ["NOT MEASURED", "NOT MEASURED", "PASS"]


def test_unmet_hypotheses_make_every_theorem_not_applicable_with_what_it_needs():
    table = _rows(32, 0.05, constants=BAD), _rows(64, 0.1, constants=BAD, lam=0.4)
    by_name = _by_name(
        dataset_statements("toy", by_dataset([r for t in table for r in t])["toy"], 20, (32, 64))
    )
    for key in (7, 8):
        s = by_name[f"Condition 1, Eq. ({key}) at initialization"]
        assert s["verdict"] == "UNMET" and s["needs"].startswith(f"Eq. ({key}): m ≥ ")
        assert "(run: m ≤ 64; λ_0 ∝ m, ‖U(0)‖₂ ∝ √m)" in s["needs"]
    eq9 = by_name["Condition 1, Eq. (9) at initialization"]
    assert eq9["verdict"] == "UNMET" and eq9["needs"].startswith("Eq. (9): no width (margin → ")
    assert by_name["learning rate below Eq. (10)"]["verdict"] == "UNMET"  # bound ≈ 6e-9
    for name in THEOREMS:
        s = by_name[name]
        assert s["verdict"] == "NOT APPLICABLE", s
        assert "Eq. (7): m ≥" in s["needs"] and "Eq. (9): no width" in s["needs"]
        assert s["detail"].startswith("hypotheses unmet (margins in their own rows): ")
        assert "Condition 1, Eq. (9) at initialization" in s["detail"]


def test_eq9_unreachable_in_both_directions():
    """Ours: the ceiling (1 − ‖W(0)‖₂)²/(4n‖a(0)‖₂²) is 0.0019 at the quick preset's constants
    (n = 10 here): Eq. (9) is out of reach; ‖a(0)‖₂ = 0.01 lifts it to 10.5 (not ruled out);
    without Condition 1's columns nothing is measured."""
    s = _statement(EQ9, _rows(32, 0.05, constants=BAD), _rows(64, 0.1, constants=BAD))
    assert s["verdict"] == "PASS" and s["value"] == pytest.approx(0.205**2 / (40 * 1.01**2))
    small = dataclasses.replace(BAD, a_norm=0.01)
    s = _statement(EQ9, _rows(32, 0.05, constants=BAD), _rows(64, 0.1, constants=small))
    assert s["verdict"] == "FAIL" and s["value"] == pytest.approx(0.205**2 / (40 * 1e-4))
    rows = [{k: v for k, v in r.items() if not k.startswith("cond1_")} for r in _rows(32, 0.05)]
    assert _statement(EQ9, rows, widths=(32,))["verdict"] == "NOT MEASURED"


def test_a_step_size_above_eq10_is_unmet_and_says_what_step_size_it_needs():
    s = _statement("learning rate below Eq. (10)", _rows(32, 0.05, eta=5.0), _rows(64, 0.1))
    assert s["verdict"] == "UNMET" and s["value"] == pytest.approx(2.5)  # bound 2/λ_0 = 2
    assert s["needs"] == "η < 2 (Eq. (10) at m = 32; run: η = 5)"
    assert _statement(THEOREMS[0], _rows(32, 0.05, eta=5.0), _rows(64, 0.1))["verdict"] == (
        "NOT APPLICABLE"
    )


def test_rows_without_condition1_columns_leave_the_hypotheses_unmeasured():
    rows = [{k: v for k, v in r.items() if not k.startswith("cond1_")}
            for r in _rows(32, 0.05) + _rows(64, 0.1)]  # fmt: skip
    statements = _by_name(dataset_statements("toy", by_dataset(rows)["toy"], 20, (32, 64)))
    assert {statements[n]["verdict"] for n in HYPOTHESES} == {"NOT MEASURED"}
    assert {statements[n]["verdict"] for n in THEOREMS[:4]} == {"NOT MEASURED"}


def test_the_paper_setting_declares_every_field_and_the_digits_substitution():
    experiment = Ling2023Fig1()
    found = {d.setting: d for d in experiment.deviations(experiment.resolve("quick"))}
    assert found["datasets"].kind == "substitution" and found["datasets"].run == "sphere, digits"
    assert found["n"].kind == "changed" and found["n"].paper == "1000"
    assert "sigma_w2" not in found and "tol" not in found  # the paper's σ_w²; a measurement
    assert found["widths"].kind == "our choice"
    labels = found["image_labels"]  # the official code's U[0, 1) against our ±1 by class
    assert (labels.kind, labels.paper, labels.run) == ("changed", "uniform", "class")
    assert "official code" in labels.where
    uniform = experiment.resolve("quick", overrides=["image_labels=uniform"])
    assert "image_labels" not in {d.setting for d in experiment.deviations(uniform)}


@pytest.mark.parametrize(("labels", "values"), [("class", {-1.0, 1.0}), ("uniform", None)])
def test_image_labels_are_by_class_or_uniform_and_the_sphere_keeps_gaussian(labels, values):
    config = Ling2023Fig1().resolve("quick", overrides=[f"image_labels={labels}", "n=20"])
    y = fig1._load(config, "digits", torch.float64, torch.device("cpu")).y
    if values is None:
        assert float(y.min()) >= 0.0 and float(y.max()) < 1.0 and len(set(y.tolist())) == 20
    else:
        assert set(y.tolist()) == values
    sphere = fig1._load(config, "sphere", torch.float64, torch.device("cpu"))
    assert float(sphere.y.min()) < 0.0 < float(sphere.y.max())  # N(0, 1), whatever image_labels


def test_config_validation():
    with pytest.raises(ConfigError, match=r"`widths` must be strictly increasing; got \[64, 32\]"):
        Ling2023Fig1().resolve("tiny", overrides=["widths=[64,32]"])
    with pytest.raises(ConfigError, match="`datasets` must be one of 'sphere', 'mnist'"):
        Ling2023Fig1().resolve("tiny", overrides=["datasets=imagenet"])
    with pytest.raises(ValueError, match=r"`eta_fraction` must be in \(0, 1\)"):
        Fig1Config(eta_fraction=1.0)
    with pytest.raises(ConfigError, match=r"`datasets` must not repeat a value"):
        Ling2023Fig1().resolve("tiny", overrides=["datasets=['sphere', 'sphere']"])
    with pytest.raises(ConfigError, match=r"`image_labels` must be one of 'class', 'uniform'"):
        Fig1Config(image_labels="sign")
    assert Fig1Config().widths == (1000, 2000, 4000, 8000) and Fig1Config().sigma_w2 == 0.08

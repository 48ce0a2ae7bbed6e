"""ling2023-init: the tiny preset end to end through the CLI, its rows against independent
references (dense spectral norm, Picard equilibrium), the claims on a corrupted table, and
config validation."""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

from deqlab.cli import app
from deqlab.data import synthetic_sphere
from deqlab.experiments.config import ConfigError
from deqlab.experiments.ling2023.init import Ling2023Init
from deqlab.models.relu_deq import ReLUDEQ
from deqlab.runs.store import read_rows_csv
from deqlab.theory.init_theorems import initialization_claims


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("init")
    args = ("reproduce", "ling2023-init", "--preset", "tiny", "--quiet", "--workers", "1")
    result = CliRunner().invoke(app, [*args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    run_dir = next((out / "ling2023-init").iterdir())
    summary = json.loads((run_dir / "summary.json").read_text())
    return run_dir, summary, read_rows_csv(run_dir / "metrics.csv")


def test_tiny_run_has_the_tasks_rows_claims_and_figure(tiny_run):
    run_dir, summary, rows = tiny_run
    config = Ling2023Init().resolve("tiny")
    assert summary["status"] == "finished"
    keys = [f"m{m}-s{s}" for m in config.widths for s in config.seeds]
    assert [t["key"] for t in summary["tasks"]] == ["theorem3", *keys]
    assert set(Ling2023Init.metric_columns) == set(rows[0])
    # Theorem 3: one row per depth; per network: Lemma 1, Theorems 4 and 5 per depth, and
    # the two Theorem 2 rows.
    per_network = 1 + 2 * len(config.depths) + 2
    assert len(rows) == len(config.depths) + len(keys) * per_network
    claims = {c["name"]: c for c in summary["statements"]}
    for c in claims.values():
        c["passed"] = c["verdict"] == "PASS"
    reference = initialization_claims(rows, config.sigma_w2)  # the theory module's claims
    assert [(c["name"], c["passed"]) for c in reference] == [
        (c["name"], c["passed"]) for c in claims.values()
    ]
    assert len(claims) == 7 and all(c["passed"] for c in claims.values()), claims
    assert "m=256: 1" in claims["theorem2_lambda0"]["detail"]
    assert float(claims["lemma1_well_posed"]["measured"]) == pytest.approx(
        max(r["measured"] for r in rows if r["quantity"] == "W_spectral_norm"), rel=1e-3
    )
    for suffix in ("png", "pdf"):
        assert f"figures/init_theorems.{suffix}" in summary["figures"]
        assert (run_dir / "figures" / f"init_theorems.{suffix}").stat().st_size > 0


def test_rows_match_independent_references(tiny_run):
    """‖W(0)‖₂ by a dense SVD and λ_0 from a plain Picard equilibrium, for one task."""
    _, _, rows = tiny_run
    config = Ling2023Init().resolve("tiny")
    m, seed = config.widths[0], config.seeds[-1]
    X = synthetic_sphere(config.n, config.d, seed=config.data_seed).X
    model = ReLUDEQ.init(config.d, m, sigma_w2=config.sigma_w2, seed=seed)
    W, U = model.W.detach(), model.U.detach()
    Z = torch.zeros(m, config.n, dtype=torch.float64)
    for _ in range(300):  # ‖W‖₂ < 0.85: error < 0.85^300
        Z = torch.relu(W @ Z + U @ X)
    (norm,) = [r for r in rows if r["quantity"] == "W_spectral_norm" and r["m"] == m
               and r["seed"] == seed]  # fmt: skip
    assert norm["measured"] == pytest.approx(float(torch.linalg.matrix_norm(W, 2)), rel=1e-8)
    (lam,) = [r for r in rows if r["quantity"] == "lambda0" and r["m"] == m and r["seed"] == seed]
    assert lam["measured"] == pytest.approx(float(torch.linalg.eigvalsh(Z.T @ Z)[0]), rel=1e-6)


def test_claims_fail_on_a_table_that_breaks_lemma1(tiny_run):
    _, _, rows = tiny_run
    experiment = Ling2023Init()
    config = experiment.resolve("tiny")
    broken = [
        {**r, "measured": 1.5} if r["quantity"] == "W_spectral_norm" and r["seed"] == 0 else r
        for r in rows
    ]
    claims = {c.name: c for c in experiment.claims(config, broken)}
    assert not claims["lemma1_well_posed"].passed and claims["lemma1_well_posed"].measured == "1.5"
    assert not claims["lemma1_bound"].passed
    assert claims["theorem2_lambda0"].passed


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("widths=[512,256]", r"`widths` must be strictly increasing; got \[512, 256\]"),
        ("seeds=[-1]", r"`seeds\[0\]` must be >= 0"),
        ("depths=[]", "`depths` must hold at least one value; got none"),
        ("dataset=imagenet", "`dataset` must be one of"),
        ("sigma_w2=1.0", "`sigma_w2` must be"),
        ("tol=0", "`tol` must be"),
    ],
)
def test_bad_config_is_rejected(override, message):
    with pytest.raises(ConfigError, match=message):
        Ling2023Init().resolve("tiny", overrides=[override])

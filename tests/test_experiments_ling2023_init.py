"""ling2023-init: the tiny preset end to end through the CLI, its rows against independent
references (dense spectral norms, Picard equilibrium, the loss by hand), every statement
passing on the tiny table and failing (or unmeasured, or not applicable for a parallel
pair of inputs) on a table that breaks it, and config validation."""

from __future__ import annotations

import json
import math

import pytest
import torch
from typer.testing import CliRunner

from deqlab.cli import app
from deqlab.data import synthetic_sphere
from deqlab.experiments.config import ConfigError
from deqlab.experiments.ling2023.init import Ling2023Init
from deqlab.experiments.ling2023.init_figure import plot_initialization
from deqlab.experiments.ling2023.init_report import draws
from deqlab.models.relu_deq import ReLUDEQ
from deqlab.papers.ling2023.init_theorems import lemma1_bound, measure_assumption2, measure_theorem3
from deqlab.papers.ling2023.initialization import initialization
from deqlab.runs.tables import read_rows_csv

SIGMA_W2 = 0.08


def init_statements(rows, sigma_w2):
    return initialization(draws(rows), sigma_w2)


NAMES = {
    "assumption1": "Assumption 1: σ_w² < 1/8",
    "assumption2_norm": "Assumption 2 (i): ‖x_i‖ = √d",
    "assumption2_parallel": "Assumption 2 (i): no two inputs parallel",
    "lemma1_bound": "Lemma 1: ‖W(0)‖₂ ≤ 2√2σ_w, finite-m form",
    "lemma1": "Lemma 1: ‖W(0)‖₂ < 1 at initialization",
    "theorem3": "Theorem 3 (i): ‖K − K^(l)‖_F = O(n l σ_w^(2l))",
    "theorem3_ii": "Theorem 3 (ii): λ* > 0 (K strictly positive definite)",
    "theorem4": "Theorem 4: ‖G − G^(l)‖_F/m = O(n (2√2σ_w)^l)",
    "theorem5": "Theorem 5: ‖G^(l)/m − K^(l)‖_F ≤ n (2√2σ_w)^l",
    "theorem2": "Theorem 2: λ_0 ≥ mλ*/2",
    "u_norm": "Section 3.2: ‖U(0)‖₂ = O(√(m/d))",
    "initial_loss": "Section 3.2: Φ(0) = O(n)",
    "concentration": "‖G/m − K‖_F falls like m^(−1/2)",
}
#: The theorems stated under Assumptions 1 and 2.
UNDER_BOTH = ("theorem3", "theorem3_ii", "theorem4", "theorem5", "theorem2")


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("init")
    args = ("reproduce", "ling2023-init", "--preset", "tiny", "--quiet", "--workers", "1")
    result = CliRunner().invoke(app, [*args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    run_dir = next((out / "ling2023-init").iterdir())
    summary = json.loads((run_dir / "summary.json").read_text())
    return run_dir, summary, read_rows_csv(run_dir / "metrics.csv")


def _verdicts(rows, sigma_w2=SIGMA_W2) -> dict[str, str]:
    by_name = {s.name: s.verdict.value for s in init_statements(rows, sigma_w2)}
    return {key: by_name[name] for key, name in NAMES.items()}


def test_tiny_run_has_the_tasks_rows_statements_and_figure(tiny_run):
    run_dir, summary, rows = tiny_run
    config = Ling2023Init().resolve("tiny")
    assert summary["status"] == "finished"
    keys = [f"m{m}-s{s}" for m in config.widths for s in config.seeds]
    assert [t["key"] for t in summary["tasks"]] == ["theorem3", *keys]
    assert set(Ling2023Init.metric_columns) == set(rows[0])
    # Assumption 2 (two rows) and Theorem 3 (one row per depth and λ*); per network: Lemma 1,
    # ‖U(0)‖₂, Theorems 4 and 5 per depth, the two Theorem 2 rows and the two Φ(0) rows.
    per_network = 2 + 2 * len(config.depths) + 2 + 2
    assert len(rows) == 2 + len(config.depths) + 1 + len(keys) * per_network
    statements = {s["name"]: s for s in summary["statements"]}
    assert list(statements) == list(NAMES.values())
    assert {s["verdict"] for s in statements.values()} == {"PASS", "HOLDS"}, statements
    assert {s["kind"] for s in statements.values()} == {"hypothesis", "theorem", "ours"}
    assert "m=256: 1" in statements[NAMES["theorem2"]]["detail"]
    worst = max(r["measured"] for r in rows if r["quantity"] == "W_spectral_norm")
    assert statements[NAMES["lemma1"]]["value"] == pytest.approx(worst)
    assert [d["setting"] for d in summary["deviations"]][:2] == ["n", "d"]
    for suffix in ("png", "pdf"):
        assert f"figures/init_theorems.{suffix}" in [f["path"] for f in summary["figures"]]
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
    (u,) = [r for r in rows if r["quantity"] == "U_spectral_norm" and r["m"] == m
            and r["seed"] == seed]  # fmt: skip
    assert u["measured"] == pytest.approx(float(torch.linalg.matrix_norm(U, 2)), rel=1e-10)
    assert u["theory"] == pytest.approx(math.sqrt(m / config.d))
    y = synthetic_sphere(config.n, config.d, seed=config.data_seed).y
    (loss,) = [r for r in rows if r["quantity"] == "initial_loss" and r["m"] == m
               and r["seed"] == seed]  # fmt: skip
    r = model.a.detach() @ Z - y
    assert loss["measured"] == pytest.approx(0.5 * float(r @ r) / config.n, rel=1e-8)
    s = float(Z.square().sum()) / (m * config.n)
    assert loss["theory"] == pytest.approx(0.5 * (s + float(y @ y) / config.n), rel=1e-8)


def _edit(rows, quantity, change, **where):
    """A copy of ``rows`` with ``change(row)`` applied to the rows of ``quantity``/``where``."""
    out = []
    for r in rows:
        hit = r["quantity"] == quantity and all(r[k] == v for k, v in where.items())
        out.append({**r, **change(r)} if hit else dict(r))
    return out


def test_lemma1_statements_fail_on_norms_above_their_bounds(tiny_run):
    _, _, rows = tiny_run
    # one norm of 1.5: both fail
    verdicts = _verdicts(_edit(rows, "W_spectral_norm", lambda r: {"measured": 1.5}, seed=0))
    assert verdicts["lemma1"] == verdicts["lemma1_bound"] == "FAIL"
    # above the finite-m bound at m = 256, still < 1: only the bound fails
    over = 1.01 * lemma1_bound(SIGMA_W2, 256, 1e-6)
    verdicts = _verdicts(_edit(rows, "W_spectral_norm", lambda r: {"measured": over}, m=256))
    assert over < 1 and (verdicts["lemma1"], verdicts["lemma1_bound"]) == ("PASS", "FAIL")


def test_theorem3_fails_on_a_decay_above_what_its_bound_allows(tiny_run):
    """e_l = C q^l with q = 0.1 > σ_w² · 6/5 = 0.096 (the decay of n l σ_w^(2l) between
    l = 5 and 6) fails; e_l = C l σ_w^(2l) itself passes; one depth is not a decay."""
    _, _, rows = tiny_run

    def with_errors(error):
        return _edit(rows, "K_minus_Kl_fro", lambda r: {"measured": error(r["depth"])})

    fast = with_errors(lambda l: 3 * 0.1**l)
    assert _verdicts(fast)["theorem3"] == "FAIL"
    (s,) = [s for s in init_statements(fast, SIGMA_W2) if s.name == NAMES["theorem3"]]
    assert "decay" in s.measured and "= 0.1 per layer" in s.measured  # the raw decay
    assert "against σ_w² = 0.08 (ratio 1.25)" in s.measured  # beside σ_w²
    assert _verdicts(with_errors(lambda l: 3 * l * SIGMA_W2**l))["theorem3"] == "PASS"
    only_one = with_errors(lambda l: 1.0 if l == 1 else 1e-20)
    assert _verdicts(only_one)["theorem3"] == "NOT MEASURED"
    (s,) = [s for s in init_statements(rows, SIGMA_W2) if s.name == NAMES["theorem3"]]
    assert "between l₁ = 5 and l₂ = 6" in s.measured and s.threshold == pytest.approx(0.096)
    assert "σ_w² (6/5)^(1/1)" in s.expected and "n l σ_w^(2l)" in s.expected


def _with_a_duplicate_input(config):
    """Rows of the theorem3 task for the tiny inputs with the first input repeated."""
    X = synthetic_sphere(config.n, config.d, seed=config.data_seed).X
    X = torch.cat([X, X[:, :1]], dim=1)
    return measure_assumption2(X) + measure_theorem3(X, config.sigma_w2, config.depths)


def test_theorem3_ii_fails_on_a_singular_k_and_is_not_applicable_for_a_parallel_pair(tiny_run):
    _, _, rows = tiny_run
    assert _verdicts(rows)["theorem3_ii"] == "PASS"
    singular = _edit(rows, "lambda_star", lambda r: {"measured": 0.0})
    assert _verdicts(singular)["theorem3_ii"] == "FAIL"  # Assumption 2 holds: λ* = 0 fails
    config = Ling2023Init().resolve("tiny")
    kernel = {"x_norm_deviation", "max_abs_cos", "K_minus_Kl_fro", "lambda_star"}
    duplicated = [r for r in rows if r["quantity"] not in kernel] + _with_a_duplicate_input(config)
    by_name = {s.name: s for s in init_statements(duplicated, SIGMA_W2)}
    parallel = by_name[NAMES["assumption2_parallel"]]
    assert parallel.verdict.value == "UNMET" and parallel.value == 1.0
    assert parallel.needs.startswith("no two inputs parallel")
    assert by_name[NAMES["assumption2_norm"]].verdict.value == "HOLDS"
    s = by_name[NAMES["theorem3_ii"]]
    assert s.verdict.value == "NOT APPLICABLE" and s.value == 0.0  # λ* = 0 is measured
    assert "hypotheses unmet" in s.detail and NAMES["assumption2_parallel"] in s.detail
    for key in UNDER_BOTH:
        assert by_name[NAMES[key]].verdict.value == "NOT APPLICABLE", key
    assert by_name[NAMES["lemma1"]].verdict.value == "PASS"  # Lemma 1 needs Assumption 1 only


def test_inputs_off_the_sphere_make_the_theorems_under_assumption2_not_applicable(tiny_run):
    _, _, rows = tiny_run
    verdicts = _verdicts(_edit(rows, "x_norm_deviation", lambda r: {"measured": 1e-3}))
    assert verdicts["assumption2_norm"] == "UNMET"
    assert {verdicts[k] for k in UNDER_BOTH} == {"NOT APPLICABLE"}
    assert verdicts["u_norm"] == verdicts["initial_loss"] == "PASS"


def test_section32_bounds_fail_when_they_grow_with_the_width(tiny_run):
    """‖U(0)‖₂ ∝ m (ratio to √(m/d) ∝ √m) and Φ(0) ∝ m (a ~ N(0, I), not N(0, I/m)) fail;
    the tiny draws pass against their constants."""
    _, _, rows = tiny_run
    (u,) = [s for s in init_statements(rows, SIGMA_W2) if s.name == NAMES["u_norm"]]
    assert u.verdict.value == "PASS" and u.threshold == pytest.approx(
        math.sqrt(2) * (1 + math.sqrt(12 / 64) + math.sqrt(2 * math.log(1e6)) / 8)
    )
    assert "m₀ = 64" in u.expected and "d = 12" in u.measured
    wide = _edit(rows, "U_spectral_norm", lambda r: {"measured": r["theory"] * math.sqrt(r["m"])})
    assert _verdicts(wide)["u_norm"] == "FAIL"
    (loss,) = [s for s in init_statements(rows, SIGMA_W2) if s.name == NAMES["initial_loss"]]
    assert loss.verdict.value == "PASS" and 0 < loss.value < 1
    grows = _edit(rows, "initial_loss", lambda r: {"measured": 0.5 * r["m"]})
    assert _verdicts(grows)["initial_loss"] == "FAIL"


def test_theorems_4_5_and_2_fail_on_tables_that_break_them(tiny_run):
    _, _, rows = tiny_run
    slow = _edit(rows, "G_minus_Gl_fro_over_m", lambda r: {"measured": 0.9 ** r["depth"]})
    assert _verdicts(slow)["theorem4"] == "FAIL"  # decay 0.9 > 2√2σ_w = 0.8
    above = _edit(rows, "Gl_over_m_minus_Kl_fro", lambda r: {"measured": 1.1 * r["theory"]},
                  m=256, seed=1, depth=3)  # fmt: skip
    assert _verdicts(above)["theorem5"] == "FAIL"
    low = _edit(rows, "lambda0", lambda r: {"measured": 0.5 * r["theory"]}, m=256, seed=0)
    assert _verdicts(low)["theorem2"] == "FAIL"
    assert _verdicts(low)["lemma1"] == "PASS"


def test_concentration_fails_on_a_slope_of_minus_one(tiny_run):
    _, _, rows = tiny_run
    fast = _edit(rows, "G_over_m_minus_K_fro", lambda r: {"measured": 100.0 / r["m"]})
    assert _verdicts(fast)["concentration"] == "FAIL"


def test_assumption1_unmet_makes_the_theorems_not_applicable(tiny_run):
    _, _, rows = tiny_run
    with pytest.warns(UserWarning, match="violates Assumption 1"):
        verdicts = _verdicts(rows, sigma_w2=0.2)
    assert verdicts["assumption1"] == "UNMET"
    for key in ("lemma1", *UNDER_BOTH, "u_norm", "initial_loss"):
        assert verdicts[key] == "NOT APPLICABLE", key
    (a1,) = [s for s in init_statements(rows, SIGMA_W2) if s.name == NAMES["assumption1"]]
    assert a1.threshold == 0.125 and a1.margin == pytest.approx(0.045)


def test_an_empty_table_measures_nothing():
    verdicts = _verdicts([])
    assert verdicts.pop("assumption1") == "HOLDS"
    assert set(verdicts.values()) == {"NOT MEASURED"}


def test_plot_writes_png_and_pdf(tiny_run, tmp_path):
    _, _, rows = tiny_run
    paths = plot_initialization(rows, 12, "sphere, n = 12, d = 12", tmp_path / "figs")
    assert [p.name for p in paths] == ["init_theorems.png", "init_theorems.pdf"]
    assert all(p.stat().st_size > 1000 for p in paths)


def test_the_paper_setting_declares_every_field():
    experiment = Ling2023Init()
    found = {d.setting: d for d in experiment.deviations(experiment.resolve("paper"))}
    assert set(found) == {"widths", "seeds", "depths", "data_seed"}  # not given by the paper
    assert all(d.kind == "our choice" for d in found.values())
    assert math.isclose(experiment.resolve("paper").sigma_w2, 0.08)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("widths=[512,256]", r"`widths` must be strictly increasing; got \[512, 256\]"),
        ("seeds=[-1]", r"`seeds` must be >= 0; got -1"),
        ("seeds=[1,1]", r"`seeds` must be strictly increasing; got \[1, 1\]"),
        ("depths=[]", r"`depths` must hold at least 1 value; got \[\]"),
        ("dataset=imagenet", "`dataset` must be one of"),
        ("sigma_w2=1.0", "`sigma_w2` must be"),
        ("tol=0", r"`tol` must be in \(0, inf\); got 0"),
    ],
)
def test_bad_config_is_rejected(override, message):
    with pytest.raises(ConfigError, match=message):
        Ling2023Init().resolve("tiny", overrides=[override])

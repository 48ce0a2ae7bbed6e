"""The thesis experiments (Hieu 2022): statement builders, every statement in both
directions on made-up rows, and the tiny presets (rows, statements and resume)."""

import math

import pytest
import torch

from deqlab.experiments.config import ConfigError
from deqlab.experiments.hieu2022 import dynamics_report, landscape_report
from deqlab.experiments.hieu2022.dynamics import Hieu2022Dynamics, pca_2d
from deqlab.experiments.hieu2022.landscape import Hieu2022Landscape
from deqlab.experiments.hieu2022.landscape_report import flat_areas, surfaces
from deqlab.experiments.hieu2022.mondeq_gd import Hieu2022MonDEQGD
from deqlab.experiments.hieu2022.mondeq_gd_report import mondeq_gd_statements
from deqlab.experiments.hieu2022.setting import CONDITION_KEYS
from deqlab.experiments.hieu2022.statements import (
    WidthFit,
    ball_check,
    condition_hypothesis,
    conjecture_1_check,
    proposition_3_check,
    rate_check,
    sigma_check,
    step_size_hypothesis,
    untrained,
)
from deqlab.statements import Kind, Verdict
from deqlab.theory.mondeq import Inequality
from test_experiments_kawaguchi2021 import MemoryCheckpoints

PASS, FAIL, NA, NM = Verdict.PASS, Verdict.FAIL, Verdict.NOT_APPLICABLE, Verdict.NOT_MEASURED
HOLDS, UNMET = Verdict.HOLDS, Verdict.UNMET


def _ineq(lhs, rhs, name="Eq. (3.16)"):
    return Inequality(name=name, lhs=lhs, relation=">=", rhs=rhs, holds=lhs >= rhs)


def _by_name(statements):
    return {s.name: s for s in statements}


# --- statement builders ---------------------------------------------------------------------


def test_width_fit_extrapolates_a_power_law_to_the_width_where_the_margin_reaches_one():
    fit = WidthFit.of([10, 40], [1e-4 * 10**2, 1e-4 * 40**2])  # lhs/rhs = 1e-4 n²
    assert fit.slope == pytest.approx(2.0) and fit.intercept == pytest.approx(math.log(1e-4))
    assert fit.needs().startswith("n ≥ 100, if lhs/rhs ∝ n^2.00 as fitted over n = 10, 40")
    assert WidthFit.of([10, 40], [0.5, 0.1]).needs().startswith("no width: ")
    assert WidthFit.of([10, 40], [1e-300, 1.1e-300]).needs().startswith("n ≥ 10^")  # > floats
    assert WidthFit.of([10], [0.5]) is None
    assert WidthFit.of([10, 40], [0.5, math.nan]) is None


def test_width_fit_uses_only_widths_far_above_the_sample_count():
    """At `quick` (N = 30), n = 30 is near-singular: the slope comes from n ≥ 4N only."""
    ratios = [1e-9, 1e-5, 2e-5, 4.6e-5]  # a jump at n = N, then ∝ n^1.2
    fit = WidthFit.of([30, 60, 120, 240], ratios, n_samples=30)
    assert fit.widths == (120, 240) and fit.slope == pytest.approx(math.log2(2.3))
    assert "(widths n ≥ 4N only)" in fit.needs()
    assert WidthFit.of([30, 60, 120, 240], ratios).slope > 4  # every width: the jump dominates
    assert WidthFit.of([30, 60, 120], ratios[:3], n_samples=30) is None  # one width ≥ 4N


def test_condition_hypothesis_holds_or_says_what_width_would_satisfy_it():
    fit = WidthFit.of([10, 40], [0.01, 0.16])
    held = condition_hypothesis(_ineq(3.0, 2.0), width=40, condition="Condition 2", fit=fit, m=0.2)
    assert held.kind is Kind.HYPOTHESIS and held.verdict is HOLDS
    assert held.value == pytest.approx(1.5) and held.needs == ""
    unmet = condition_hypothesis(_ineq(1.0, 8.0), width=40, condition="Condition 2", fit=fit, m=0.2)
    assert unmet.verdict is UNMET and unmet.margin == pytest.approx(-0.875)
    assert unmet.needs.startswith("n ≥ 100, if lhs/rhs ∝ n^2.00")
    assert unmet.name == "Condition 2, Eq. (3.16) at n = 40"
    alone = condition_hypothesis(_ineq(1.0, 8.0), width=40, condition="Condition 1", fit=None, m=1)
    assert alone.needs == "a sweep over widths n ≥ 4N to extrapolate"
    big_m = condition_hypothesis(
        _ineq(1.0, 8.0, "Eq. (3.18)"), width=40, condition="Condition 2", fit=fit, m=0.3
    )
    assert big_m.needs.startswith("no width: m²N = 0.09 ≥ 1/20")
    # m = 0.2 < 1/√20 but N = 30: m²N = 1.2, as at `quick` — no width either (was "n ≥ …")
    many = condition_hypothesis(
        _ineq(1.0, 8.0, "Eq. (3.18)"),
        width=40,
        condition="Condition 2",
        fit=fit,
        m=0.2,
        n_samples=30,
    )
    assert many.needs.startswith("no width: m²N = 1.2 ≥ 1/20") and "n ≥" not in many.needs
    few = condition_hypothesis(
        _ineq(1.0, 8.0, "Eq. (3.18)"),
        width=40,
        condition="Condition 2",
        fit=fit,
        m=0.1,
        n_samples=4,
    )
    assert few.needs.startswith("n ≥ 100, if lhs/rhs ∝ n^2.00")  # m²N = 0.04 < 1/20
    nothing = condition_hypothesis(_ineq(1.0, 0.0), width=4, condition="Condition 2", fit=None, m=1)
    assert nothing.verdict is NM


def test_step_size_hypothesis_states_how_many_times_the_bound_eta_is():
    assert step_size_hypothesis(1e-3, 2e-3, width=8).verdict is HOLDS
    assert step_size_hypothesis(2e-3, 2e-3, width=8).verdict is HOLDS
    over = step_size_hypothesis(0.58, 1e-3, width=8)
    assert over.verdict is UNMET and "580× the bound" in over.measured
    assert over.needs == "η ≤ 0.001, 580× smaller than the run's"


def test_rate_check_takes_the_worst_step_ratio_against_the_per_step_factor():
    passed = rate_check([1.0, 0.5, 0.25, 0.2], 0.9, width=4)
    assert passed.kind is Kind.THEOREM and passed.verdict is PASS
    assert passed.value == pytest.approx(0.8) and "(step 3)" in passed.measured
    assert "halves after 7 steps" in passed.detail and "0.729·L(0)" in passed.detail
    failed = rate_check([1.0, 0.5, 0.6], 0.9, width=4)  # one increase
    assert failed.verdict is FAIL and failed.value == pytest.approx(1.2)
    at_zero = rate_check([1.0, 0.1], 0.0, width=4)  # η = 4/λ₀²: the theorem promises L(1) = 0
    assert at_zero.verdict is FAIL
    gap = rate_check([1.0, math.nan, 0.5, 0.4], 0.9, width=4)  # NaN pairs skipped, not PASSed
    assert gap.value == pytest.approx(0.8) and "not finite" in gap.detail
    assert rate_check([1.0], 0.9, width=4).verdict is NM
    assert rate_check([1.0, math.nan], 0.9, width=4).verdict is NM


def test_ball_and_sigma_checks_use_the_steps_after_the_start():
    radii = dict.fromkeys("ABUu", 2.0)
    inside = {p: [0.0, 0.5, 1.0] for p in "ABUu"}
    assert ball_check(inside, radii, width=4).verdict is PASS
    outside = {**inside, "U": [0.0, 0.5, 3.0]}
    failed = ball_check(outside, radii, width=4)
    assert failed.verdict is FAIL and failed.value == pytest.approx(1.5)
    assert "‖U(k) − U(0)‖_F" in failed.measured and "(step 2)" in failed.measured
    start_only = {**inside, "A": [9.0, 0.5, 1.0]}  # k = 0 is not a step after the start
    assert ball_check(start_only, radii, width=4).verdict is PASS
    assert ball_check({p: [0.0] for p in "ABUu"}, radii, width=4).verdict is NM
    assert sigma_check([2.0, 1.5, 1.2], 2.0, width=4).verdict is PASS
    low = sigma_check([2.0, 1.5, 0.6], 2.0, width=4)
    assert low.verdict is FAIL and low.value == pytest.approx(0.3)
    assert sigma_check([0.1, 1.5], 2.0, width=4).verdict is PASS  # k = 0 excluded
    assert sigma_check([2.0, math.nan], 2.0, width=4).verdict is NM
    with pytest.raises(ValueError, match="`lambda0` must be > 0"):
        sigma_check([1.0, 1.0], 0.0, width=4)


def test_untrained_names_the_models_below_the_accuracy():
    assert untrained({"deq": 0.9, "repeat6": 0.5}) == ""
    why = untrained({"deq": 0.9, "repeat6": 0.3, "repeat11": None})
    assert "repeat6: 0.3, repeat11: —" in why and "deq" not in why


# --- hieu2022-mondeq-gd statements on made-up rows ---------------------------------------


def _gd_rows(width, losses, *, eta=1e-3, lhs=2.0, lam0=2.0, sigma=None):
    rows = []
    for k, loss in enumerate(losses):
        row = {
            "width": width,
            "step": k,
            "loss": loss,
            "eta": eta,
            "eta_max": 1e-2,
            "lambda0": lam0,
            "sigma_min": lam0 if sigma is None else sigma[k],
            **{f"dist_{p}": 0.1 * k for p in "ABUu"},
        }
        row.update({f"{key}_lhs": lhs * width for key in CONDITION_KEYS})
        row.update({f"{key}_rhs": 1.0 for key in CONDITION_KEYS})
        rows.append(row)
    return rows


def _gd_config(**overrides):
    defaults = {"n_samples": 2, "d": 2, "widths": [4, 8], "steps": 2, "loss_rtol": 0.5}
    return Hieu2022MonDEQGD().resolve(
        "tiny", overrides=[f"{k}={v}" for k, v in {**defaults, **overrides}.items()]
    )


def test_mondeq_gd_statements_pass_inside_the_hypotheses_and_fail_on_a_violating_run():
    config = _gd_config()
    good = _gd_rows(4, [1.0, 0.5, 0.3], lam0=1.0) + _gd_rows(8, [1.0, 0.4, 0.2])
    found = _by_name(mondeq_gd_statements(config, good))
    assert len(found) == 2 * 10 + 6  # 4 hypotheses, 3 premises, 3 theorems per width; 6 ours
    for name, verdict in [
        ("Theorem 3.3.5: L(k+1) ≤ (1 − ηλ₀²/4)·L(k) at n = 4", PASS),
        ("Proposition 5 (Hypothesis 1): the parameters stay in their balls at n = 8", PASS),
        ("Proposition 6 (Hypothesis 2): σ_min(Z(k)) ≥ λ₀/2 at n = 4", PASS),
        ("GD reaches L(K) ≤ 0.5·L(0) at the widest width", PASS),
        ("wider is faster: L(K)/L(0) decreases with the width", PASS),
        ("λ₀ = σ_min(Z(0)) increases with the width", PASS),
        ("the margin lhs/rhs of Eq. (3.17) grows with the width", PASS),
    ]:
        assert found[name].verdict is verdict, found[name]
    assert found["Theorem 3.3.5: L(k+1) ≤ (1 − ηλ₀²/4)·L(k) at n = 4"].kind is Kind.THEOREM
    assert found["wider is faster: L(K)/L(0) decreases with the width"].kind is Kind.OURS
    bad = _gd_rows(4, [1.0, 0.5, 0.1], lhs=4.0, sigma=[2.0, 0.9, 2.0])
    bad += _gd_rows(8, [1.0, 0.9, 0.95], lhs=2.0, lam0=2.0)
    found = _by_name(mondeq_gd_statements(config, bad))
    for name in (
        "Theorem 3.3.5: L(k+1) ≤ (1 − ηλ₀²/4)·L(k) at n = 8",
        "Proposition 6 (Hypothesis 2): σ_min(Z(k)) ≥ λ₀/2 at n = 4",
        "GD reaches L(K) ≤ 0.5·L(0) at the widest width",
        "wider is faster: L(K)/L(0) decreases with the width",
        "λ₀ = σ_min(Z(0)) increases with the width",
        "the margin lhs/rhs of Eq. (3.16) grows with the width",
    ):
        assert found[name].verdict is FAIL, found[name]


def test_mondeq_gd_statements_outside_the_hypotheses_are_not_applicable():
    config = _gd_config(radius=0.05, widths=[8, 16])
    rows = _gd_rows(8, [1.0, 0.5, 0.3], eta=0.3, lhs=0.01) + _gd_rows(16, [1.0, 0.4, 0.2], eta=0.3)
    found = _by_name(mondeq_gd_statements(config, rows))
    eq = found["Condition 2, Eq. (3.16) at n = 8"]
    width = 8 * 12.5 ** (1 / math.log2(400))  # the line through (8, 0.08) and (16, 32) meets 1
    assert eq.verdict is UNMET and eq.needs.startswith(f"n ≥ {width:.3g}, if lhs/rhs ∝ n^8.64")
    assert found["Condition 2, Eq. (3.18) at n = 8"].needs.startswith("no width: m²N = 0.08")
    theorem = found["Theorem 3.3.5: L(k+1) ≤ (1 − ηλ₀²/4)·L(k) at n = 16"]
    assert theorem.verdict is NA and "30× smaller" in theorem.needs
    # Hypothesis 1 fails at step 1 (0.1 > R = 0.05): Proposition 5 is checked at step 1 only
    ball = found["Proposition 5 (Hypothesis 1): the parameters stay in their balls at n = 16"]
    assert ball.verdict is NA and ball.value == pytest.approx(2.0)  # 0.1/0.05, kept
    rest = "Proposition 5 (Hypothesis 1): the parameters stay in their balls at n = 16, from step 2"
    assert found[rest].verdict is NA and found[rest].value == pytest.approx(4.0)


def test_mondeq_gd_statements_without_data_are_not_measured():
    config = _gd_config()
    statements = mondeq_gd_statements(config, [])
    assert len(statements) == 6 and {s.verdict for s in statements} == {NM}
    nan = _gd_rows(4, [1.0, math.nan, math.nan]) + _gd_rows(8, [1.0, 0.5, 0.2])
    found = _by_name(mondeq_gd_statements(config, nan))
    assert found["Theorem 3.3.5: L(k+1) ≤ (1 − ηλ₀²/4)·L(k) at n = 4"].verdict is NM
    assert found["wider is faster: L(K)/L(0) decreases with the width"].verdict is NM


# --- hieu2022-dynamics statements on made-up rows -----------------------------------------


def _init_rows(std, residuals, samples=3):
    return [
        {
            "panel": "init",
            "init_std": std,
            "epoch": 0,
            "sample": b,
            "label": b,
            "step": s,
            "residual": r,
            "pc1": 0.0,
            "pc2": 0.0,
        }
        for b in range(samples)
        for s, r in enumerate(residuals)
    ]


def _snapshot(epoch, steps, spread):
    """Two classes of two inputs; final PCA points ``±spread`` apart, ±1 within a class."""
    rows = []
    for b, (label, offset) in enumerate([(0, -1), (0, 1), (1, -1), (1, 1)]):
        centre = spread * (1 if label else -1)
        for s in range(steps):
            rows.append(
                {
                    "panel": "training",
                    "init_std": 0.01,
                    "epoch": epoch,
                    "sample": b,
                    "label": label,
                    "step": s,
                    "residual": 0.1,
                    "pc1": centre if s == steps - 1 else 0.0,
                    "pc2": float(offset),
                }
            )
    return rows


def _train_rows(accuracy, epochs=(1,)):
    return [
        {"panel": "train", "init_std": 0.01, "epoch": e, "train_loss": 1.0, "train_acc": accuracy}
        for e in epochs
    ]


def _dyn_config():
    return Hieu2022Dynamics().resolve("tiny", overrides=["max_iter=10"])


def test_dynamics_statements_pass_and_fail():
    config = _dyn_config()
    steady = _init_rows(0.01, [1.0, 0.1, 0.005]) + _init_rows(1.0, [1.0, 0.5, 0.4, 0.3])
    trained = _snapshot(0, 3, 1.0) + _snapshot(1, 5, 4.0) + _train_rows(0.9)
    found = _by_name(dynamics_report.statements(config, steady + trained))
    names = list(found)
    assert [found[n].kind for n in names] == [
        Kind.OBSERVATION,
        Kind.OURS,
        Kind.OURS,
        Kind.OBSERVATION,
        Kind.OBSERVATION,
    ]
    assert all(s.verdict is PASS for s in found.values()), found
    assert found[names[0]].source.quote.startswith("the sequence of z^[i] is more chaos")
    assert found[names[3]].source.location == "Section 4.1.2, Fig. 4.3"
    chaotic = _init_rows(0.01, [1.0, 0.5, 0.4, 0.3]) + _init_rows(1.0, [1.0, 0.5, 0.4, 0.3])
    reversed_ = _snapshot(0, 5, 4.0) + _snapshot(1, 5, 1.0) + _train_rows(0.9)
    found = _by_name(dynamics_report.statements(config, chaotic + reversed_))
    assert all(s.verdict is FAIL for s in found.values()), found  # ties and reversals fail


def test_dynamics_statements_not_measured_untrained_saturated_or_missing():
    config = _dyn_config()
    init = _init_rows(0.01, [1.0, 0.1, 0.005]) + _init_rows(1.0, [1.0, 0.5, 0.4, 0.3])
    untrained_run = _snapshot(0, 3, 1.0) + _snapshot(1, 5, 4.0) + _train_rows(0.2)
    found = list(dynamics_report.statements(config, init + untrained_run))
    assert [s.verdict for s in found[3:]] == [NM, NM]
    assert "not trained" in found[3].detail
    capped = _snapshot(0, 10, 1.0) + _snapshot(1, 10, 4.0) + _train_rows(0.9)
    longer = dynamics_report.statements(config, init + capped)[3]
    assert longer.verdict is NM and "all max_iter = 10" in longer.detail
    one_step = _init_rows(0.01, [1.0]) + _init_rows(1.0, [1.0])
    assert dynamics_report.statements(config, one_step)[0].verdict is NM  # no step after the first
    assert {s.verdict for s in dynamics_report.statements(config, [])} == {NM}


# --- hieu2022-landscape statements on made-up rows ----------------------------------------


def _bowl(model, curvature, grid=5, accuracy=0.9):
    """``L = curvature · (α² + β²)`` on a ``grid²`` lattice over [−1, 1]², and a trained row."""
    points = torch.linspace(-1, 1, grid).tolist()
    rows = [
        {"model": model, "alpha": a, "beta": b, "loss": curvature * (a * a + b * b)}
        for a in points
        for b in points
    ]
    return [*rows, {"model": model, "epoch": 1, "train_loss": 0.1, "train_acc": accuracy}]


def _land_config():
    return Hieu2022Landscape().resolve("tiny", overrides=["flat_delta=1.0", "grid=5"])


def test_landscape_statements_pass_only_on_strict_growth_and_a_largest_deq():
    config = _land_config()  # repeats 1, 2
    good = _bowl("deq", 0.9) + _bowl("repeat1", 4.0) + _bowl("repeat2", 2.0)  # 13, 5, 9 points
    grows, largest = landscape_report.statements(config, good)
    assert grows.kind is Kind.OBSERVATION and grows.verdict is PASS
    assert largest.verdict is PASS and largest.value > 0
    assert "small-loss neighborhood around the minimizer is expanded" in grows.source.quote
    assert largest.source.quote.endswith("This suggests the superior of training DEQ models.")
    assert grows.source.location == "Section 4.2.1, Figure 4.4"
    tie = _bowl("deq", 2.0) + _bowl("repeat1", 2.0) + _bowl("repeat2", 2.0)
    assert [s.verdict for s in landscape_report.statements(config, tie)] == [FAIL, FAIL]
    reversed_ = _bowl("deq", 4.0) + _bowl("repeat1", 0.9) + _bowl("repeat2", 2.0)
    assert [s.verdict for s in landscape_report.statements(config, reversed_)] == [FAIL, FAIL]


def test_landscape_statements_not_measured_when_saturated_untrained_or_missing():
    config = _land_config()
    flat = _bowl("deq", 0.1) + _bowl("repeat1", 4.0) + _bowl("repeat2", 2.0)
    found = landscape_report.statements(config, flat)
    assert {s.verdict for s in found} == {NM}
    assert "deq: the whole grid (grid too small or flat_delta too loose)" in found[0].detail
    sharp = _bowl("deq", 1.2) + _bowl("repeat1", 100.0) + _bowl("repeat2", 2.0)
    assert "repeat1: only the centre" in landscape_report.statements(config, sharp)[0].detail
    weak = _bowl("deq", 1.2) + _bowl("repeat1", 4.0, accuracy=0.2) + _bowl("repeat2", 2.0)
    assert "not trained" in landscape_report.statements(config, weak)[1].detail
    missing = landscape_report.statements(config, _bowl("deq", 1.2))
    assert {s.verdict for s in missing} == {NM} and "no surface for repeat1" in missing[0].detail


def test_landscape_deq_statement_not_measured_when_its_solves_stop_at_max_iter():
    config = _land_config()  # max_iter 10
    good = _bowl("deq", 0.9) + _bowl("repeat1", 4.0) + _bowl("repeat2", 2.0)
    steps = [dict(r, solver_steps=9 if r["model"] == "deq" else 0) for r in good]
    assert [s.verdict for s in landscape_report.statements(config, steps)] == [PASS, PASS]
    capped = [
        dict(r, solver_steps=10 if r.get("beta") == 1.0 else r["solver_steps"]) for r in steps
    ]
    grows, largest = landscape_report.statements(config, capped)
    assert grows.verdict is PASS and largest.verdict is NM
    assert "all max_iter = 10 evaluations at 5 of 25 grid points" in largest.detail


# --- the experiments at their presets --------------------------------------------------------


@pytest.mark.parametrize("experiment", [Hieu2022MonDEQGD, Hieu2022Dynamics, Hieu2022Landscape])
def test_paper_setting_declares_every_field_and_the_substitutions(experiment):
    exp = experiment()
    found = {d.setting: d for d in exp.deviations(exp.resolve("quick"))}
    if experiment is Hieu2022MonDEQGD:
        assert found["eta_rule"].kind == "changed"  # the thesis' η is Theorem 3.3.5's bound
        assert "eta_rule" not in {d.setting for d in exp.deviations(exp.resolve("theorem"))}
    else:
        assert found["dataset"].kind == "substitution" and found["dataset"].run == "fashion-mnist"
    assert exp.figure_captions and all(c.endswith(".") for c in exp.figure_captions.values())


def test_mondeq_gd_tiny_rows_statements_and_bit_exact_resume():
    experiment = Hieu2022MonDEQGD()
    config = experiment.resolve("tiny")
    tasks = experiment.tasks(config)
    rows = [
        r for t in tasks for r in experiment.run_task(config, t, MemoryCheckpoints().context(10))
    ]
    assert {r["width"] for r in rows} == set(config.widths)
    assert len(rows) == len(config.widths) * (config.steps + 1)
    found = _by_name(experiment.statements(config, rows))
    for width in config.widths:  # η is hundreds of times the bound: nothing applies
        eta = found[f"η within the step-size bound of Theorem 3.3.5 at n = {width}"]
        assert eta.verdict is UNMET and eta.value / eta.threshold > 100
        sigma = found[f"Proposition 6 (Hypothesis 2): σ_min(Z(k)) ≥ λ₀/2 at n = {width}"]
        assert sigma.verdict is NA and sigma.value is not None
    assert found["GD reaches L(K) ≤ 0.5·L(0) at the widest width"].verdict is PASS
    interrupted = MemoryCheckpoints(stop_after=2)
    with pytest.raises(KeyboardInterrupt):
        experiment.run_task(config, tasks[0], interrupted.context(10))
    interrupted.stop_after = None
    resumed = experiment.run_task(config, tasks[0], interrupted.context(10))
    assert resumed == [r for r in rows if r["width"] == config.widths[0]]


def test_mondeq_gd_theorem_preset_meets_the_hypotheses_and_the_theorem_fails():
    experiment = Hieu2022MonDEQGD()
    config = experiment.resolve("theorem", overrides=["widths=[200]", "steps=2"])
    (task,) = experiment.tasks(config)
    rows = experiment.run_task(config, task, MemoryCheckpoints().context(10))
    assert rows[0]["eta"] == pytest.approx(rows[0]["eta_max"], rel=1e-12)
    found = experiment.statements(config, rows)
    outer = [s for s in found if s.name.startswith(("Condition 2", "η within"))]
    assert len(outer) == 4 and {s.verdict for s in outer} == {HOLDS}
    named = _by_name(found)
    rate = named["Theorem 3.3.5: L(k+1) ≤ (1 − ηλ₀²/4)·L(k) at n = 200"]
    assert rate.verdict is FAIL and rate.value > 9  # the residual grows ≥ 3× (|1 − ηλ²| ≥ 3)
    assert rate.threshold == pytest.approx(0.0, abs=1e-12)  # η = 4/λ₀²: L(1) ≤ 0 promised
    # Hypothesis 3 fails at step 1: Propositions 5–6 hold at step 1, NOT APPLICABLE from step 2
    premise = named[
        "Hypotheses 1 and 3 at every step k′ ≥ 1 at n = 200 (the premise of the induction's steps)"
    ]
    assert premise.verdict is UNMET and "first fails at step 1: Hypothesis 3" in premise.measured
    for prop in (
        "Proposition 5 (Hypothesis 1): the parameters stay in their balls at n = 200",
        "Proposition 6 (Hypothesis 2): σ_min(Z(k)) ≥ λ₀/2 at n = 200",
    ):
        assert named[prop].verdict is PASS and "over steps 1–1" in named[prop].measured
        assert named[f"{prop}, from step 2"].verdict is NA
    # Lemma 3.3.8 at step 0 (its premise is empty): I₁ is thousands of times the printed bound
    lemma = named["Lemma 3.3.8 at every GD step at n = 200"]
    assert lemma.verdict is FAIL and lemma.value > 1e3 and "step 0" in lemma.measured
    assert rows[0]["lemma3_3_8_lhs"] > 20 and rows[0]["lemma3_3_8_rhs"] < 0.01
    assert named["Lemma 3.3.8 at every GD step at n = 200, from step 1"].verdict is NA
    prop3 = named["Proposition 3: L[T_α] ≤ √(1 − 2αm + α²L[I − W]²) at n = 200"]
    assert prop3.verdict is PASS and 0.9 < prop3.value <= 1  # ‖T_α‖₂ = 0.0554, bound 0.0557


def test_mondeq_gd_theorem_at_a_quarter_of_the_bound_holds_with_its_propositions():
    """At ¼·η_max every hypothesis holds at all 30 steps: Propositions 5–6 are checked at every
    step and pass, and so do Theorem 3.3.5 and Lemma 3.3.10 — Lemma 3.3.8 still fails."""
    experiment = Hieu2022MonDEQGD()
    config = experiment.resolve(
        "theorem", overrides=["widths=[200]", "steps=30", "eta_fraction=0.25"]
    )
    (task,) = experiment.tasks(config)
    rows = experiment.run_task(config, task, MemoryCheckpoints().context(100))
    named = _by_name(experiment.statements(config, rows))
    for name in (
        "Theorem 3.3.5: L(k+1) ≤ (1 − ηλ₀²/4)·L(k) at n = 200",
        "Proposition 5 (Hypothesis 1): the parameters stay in their balls at n = 200",
        "Proposition 6 (Hypothesis 2): σ_min(Z(k)) ≥ λ₀/2 at n = 200",
        "Lemma 3.3.10 at every GD step at n = 200",
    ):
        assert named[name].verdict is PASS, named[name]
    assert (
        "over steps 1–30"
        in named[
            "Proposition 5 (Hypothesis 1): the parameters stay in their balls at n = 200"
        ].measured
    )
    assert not any(n.endswith(", from step 2") for n in named)
    assert named["Lemma 3.3.8 at every GD step at n = 200"].verdict is FAIL


def test_mondeq_gd_theorem_half_preset_fails_theorem_3_3_5_at_a_positive_rate():
    """η = ½·η_max: the promised factor is 1 − ηλ₀²/4 = 0.5, the measured worst ≈ 5.8."""
    experiment = Hieu2022MonDEQGD()
    config = experiment.resolve("theorem-half", overrides=["widths=[200]", "steps=4"])
    (task,) = experiment.tasks(config)
    rows = experiment.run_task(config, task, MemoryCheckpoints().context(100))
    rate = _by_name(experiment.statements(config, rows))[
        "Theorem 3.3.5: L(k+1) ≤ (1 − ηλ₀²/4)·L(k) at n = 200"
    ]
    assert rate.threshold == pytest.approx(0.5) and rate.verdict is FAIL and rate.value > 5


def test_mondeq_gd_config_rejects_bad_widths_and_eta_rules():
    with pytest.raises(ConfigError, match="`widths` must be >= n_samples = "):
        Hieu2022MonDEQGD().resolve("tiny", overrides=["widths=[4, 12]"])
    with pytest.raises(ConfigError, match="`eta_rule` must be one of"):
        Hieu2022MonDEQGD().resolve("tiny", overrides=["eta_rule=fast"])


def test_dynamics_tiny_rows_statements_and_resume():
    experiment = Hieu2022Dynamics()
    config = experiment.resolve("tiny")
    small, large, training = experiment.tasks(config)
    rows = experiment.run_task(config, small, MemoryCheckpoints().context(1))
    rows += experiment.run_task(config, large, MemoryCheckpoints().context(1))
    first = [r for r in rows if r["sample"] == 0 and r["init_std"] == 1.0]
    assert first[0]["residual"] == pytest.approx(1.0)  # z = 0: ‖f(0)‖/‖f(0)‖
    trained = experiment.run_task(config, training, MemoryCheckpoints().context(1))
    assert {r["panel"] for r in trained} == {"training", "train"}
    assert {r["epoch"] for r in trained if r["panel"] == "training"} == {0, 1}
    found = experiment.statements(config, rows + trained)
    assert [s.verdict for s in found] == [PASS, PASS, PASS, NM, NM]  # 2 steps train nothing
    saved = MemoryCheckpoints()
    experiment.run_task(config, training, saved.context(1))
    assert experiment.run_task(config, training, saved.context(1)) == trained  # resumed at end


def test_pca_2d_matches_svd():
    points = torch.randn(30, 7) @ torch.diag(torch.tensor([5.0, 3.0, 1, 1, 1, 1, 1]))
    projected = pca_2d(points)
    centered = points - points.mean(0)
    _, _, vh = torch.linalg.svd(centered, full_matrices=False)
    expected = centered @ vh[:2].T
    assert torch.allclose(projected.abs(), expected.abs(), atol=1e-10)


def test_landscape_tiny_rows_surfaces_and_statements():
    experiment = Hieu2022Landscape()
    config = experiment.resolve("tiny")
    assert [t.key for t in experiment.tasks(config)] == ["deq", "repeat1", "repeat2"]
    rows = []
    for task in experiment.tasks(config):
        rows += experiment.run_task(config, task, MemoryCheckpoints().context(1))
    found = surfaces(rows)
    assert set(found) == {"deq", "repeat1", "repeat2"}
    assert all(
        s.losses.shape == (3, 3) and bool(torch.isfinite(s.losses).all()) for s in found.values()
    )
    assert flat_areas(rows, 1e9) == dict.fromkeys(found, 9.0)  # whole 3 × 3 grid, unit cells
    statements = experiment.statements(config, rows)
    assert [s.verdict for s in statements] == [NM, NM]  # untrained and saturated at tiny
    assert "saturated" in statements[0].detail


@pytest.mark.parametrize(
    ("experiment", "override", "message"),
    [
        (Hieu2022Dynamics, "channels=0", "`channels` must be >= 1"),
        (Hieu2022Dynamics, "groups=-1", "`groups` must be >= 1"),
        (Hieu2022Landscape, "inner_channels=0", "`inner_channels` must be >= 1"),
        (Hieu2022Landscape, "max_iter=0", "`max_iter` must be >= 1"),
        (Hieu2022Landscape, "batch_size=0", "`batch_size` must be >= 1"),
        (Hieu2022Landscape, "repeats=[0, 2]", "`repeats` must be >= 1"),
    ],
)
def test_thesis_configs_reject_non_positive_sizes(experiment, override, message):
    with pytest.raises(ConfigError, match=message):
        experiment().resolve("tiny", overrides=[override])


def test_conjecture_1_reads_a_linear_rate_and_rejects_a_sublinear_one():
    linear = conjecture_1_check([0.9**k for k in range(41)], width=8)
    assert linear.verdict is PASS and linear.value == pytest.approx(1.0)
    assert linear.kind is Kind.OBSERVATION and "linear convergence rate" in linear.source.quote
    sublinear = conjecture_1_check([1 / (k + 1) for k in range(401)], width=8)
    assert sublinear.verdict is FAIL and sublinear.value < 0.2  # ln 2 / ln 201
    assert conjecture_1_check([1.0, 2.0, 3.0, 0.1, 0.01], width=8).value == 0.0  # no fall first
    assert conjecture_1_check([1.0, math.nan, 0.5], width=8).verdict is NM
    assert conjecture_1_check([1.0], width=8).verdict is NM


def test_proposition_3_compares_the_forward_backward_operator_with_its_bound():
    assert proposition_3_check(0.9, 0.95, alpha=0.1, width=8).verdict is PASS
    assert proposition_3_check(0.97, 0.95, alpha=0.1, width=8).verdict is FAIL
    assert proposition_3_check(math.nan, 0.95, alpha=0.1, width=8).verdict is NM

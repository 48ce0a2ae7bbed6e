"""kawaguchi2021-fig3 (experiments/kawaguchi2021/fig3.py and its report): the tiny preset
(statements, bit-exact resume), reaching the logistic minimum in both directions, and
Eqs. (11)–(12) where their hypotheses hold and where they do not."""

import math

import numpy as np
import pytest

from deqlab.experiments.kawaguchi2021 import fig3, fig3_report
from deqlab.experiments.kawaguchi2021.fig3 import Fig3Config, Kawaguchi2021Fig3
from deqlab.statements import Kind, Verdict
from helpers import MemoryCheckpoints, assert_settings_declared_and_captions_sentences

PASS, FAIL, NM, NA = Verdict.PASS, Verdict.FAIL, Verdict.NOT_MEASURED, Verdict.NOT_APPLICABLE


def _by_name(statements):
    return {s.name: s for s in statements}


def test_fig3_tiny_statements_and_bit_exact_resume():
    experiment = Kawaguchi2021Fig3()
    config = experiment.resolve("tiny")
    (task,) = experiment.tasks(config)
    rows = experiment.run_task(config, task, MemoryCheckpoints().context(100))
    found = experiment.statements(config, rows)
    *decided, eq11, reaches = found
    assert {s.verdict for s in [*decided, reaches]} == {PASS, Verdict.HOLDS}
    assert eq11.name.startswith("Eq. (11)") and eq11.verdict is NM  # T_ε = 42 > T = 1 here
    assert "measured time to ε" in eq11.detail
    assert [s.kind for s in found].count(Kind.THEOREM) == 4
    interrupted = MemoryCheckpoints(stop_after=5)
    with pytest.raises(KeyboardInterrupt):
        experiment.run_task(config, task, interrupted.context(100))
    interrupted.stop_after = None
    assert experiment.run_task(config, task, interrupted.context(100)) == rows


@pytest.mark.parametrize(
    ("loss", "step", "verdict"),
    [(10.0, 200, PASS), (10.01, 200, FAIL), (10.0, 150, NM), (math.inf, 200, NM)],
)
def test_fig3_reaches_the_logistic_minimum_in_both_directions(loss, step, verdict):
    """Ours: the final (L − L*)/L* ≤ optimum_rtol (1e-3 > 1e-4 fails); a run that did not
    record the last step, or a non-finite loss, is not measured."""
    experiment = Kawaguchi2021Fig3()
    config = experiment.resolve("tiny", overrides=["optimum_rtol=1e-4"])
    rows = [{"task": "t", "step": step, "loss": loss, "loss_star": 10.0}]
    reaches = fig3_report.statements(config, rows)[-1]
    assert reaches.name == "the DELM reaches the global minimum value of the logistic loss"
    assert reaches.kind is Kind.OURS and reaches.verdict is verdict


def test_fig3_without_regularization_or_radius_has_no_accuracy_time():
    """τ = 0, R = ∞: κ = 0, so the PL ratio is not measured and Eq. (11) not applicable."""
    experiment = Kawaguchi2021Fig3()
    config = experiment.resolve("tiny", overrides=["tau=0", "steps=20"])
    (task,) = experiment.tasks(config)
    found = _by_name(experiment.statements(config, experiment.run_task(
        config, task, MemoryCheckpoints().context(100))))  # fmt: skip
    assert found["κ > 0 (τ > 0 for Eq. (11), R < ∞ for Eq. (12))"].verdict is Verdict.UNMET
    (eq11,) = [s for name, s in found.items() if name.startswith("Eq. (11)")]
    assert eq11.verdict is NA


def _eq12_run(*overrides):
    experiment = Kawaguchi2021Fig3()
    config = experiment.resolve("eq12", overrides=list(overrides))
    (task,) = experiment.tasks(config)
    rows = experiment.run_task(config, task, MemoryCheckpoints().context(10**6))
    found = _by_name(experiment.statements(config, rows))
    (eq12,) = [s for name, s in found.items() if name.startswith("Eq. (12)")]
    return config, rows, found, eq12


def test_eq12_is_measured_where_its_hypotheses_hold():
    """τ = 0, R = 2.5: ‖B_t‖₁ stays below (1 − γ)R and the gap is ≤ ε from T_ε on, with
    κ = ρ(R)σ_min(Φ)² and T_ε = m(1+γ)²/(2κ)·log(1/ε_rel) recomputed here: ρ(R) as the
    smallest p(1 − p) over the corners of the box ‖W‖₁ = max_j |W_j| ≤ R (where |Wφ| peaks)."""
    config, rows, found, eq12 = _eq12_run("epsilon=0.1", "steps=400")  # T_ε = 17, T = 20
    assert found["‖B_t‖₁ < (1 − γ)R for all t ∈ [0, T]"].verdict is Verdict.HOLDS
    assert eq12.verdict is PASS and eq12.kind is Kind.THEOREM and eq12.value <= 1.0
    X = fig3.logistic_data(config, "cpu")[0].numpy()  # (d, n)
    corners = np.array(np.meshgrid(*[[-1.0, 1.0]] * config.d)).reshape(config.d, -1).T
    p = 1.0 / (1.0 + np.exp(-config.radius * corners @ X))
    kappa = (p * (1 - p)).min() * np.linalg.svd(X, compute_uv=False).min() ** 2
    assert rows[0]["kappa"] == pytest.approx(kappa, rel=1e-12)
    t_eps = config.d * (1 + config.gamma) ** 2 / (2 * kappa) * math.log(1 / config.epsilon)
    assert f"T_ε = {t_eps:.4g}" in eq12.measured and config.steps * config.lr > t_eps
    assert "× earlier than T_ε" in eq12.detail and "the bound is loose" in eq12.detail


def test_eq12_is_not_applicable_when_the_run_leaves_the_radius():
    """R = 1: ‖B_t‖₁ exceeds (1 − γ)R, and the loss falls below L*_{0,R} (the minimum over the
    ball), which Eq. (12) cannot speak of: not applicable, naming the radius it needs."""
    _, rows, found, eq12 = _eq12_run("radius=1.0", "steps=300")
    assert found["‖B_t‖₁ < (1 − γ)R for all t ∈ [0, T]"].verdict is Verdict.UNMET
    assert eq12.verdict is NA and "radius" in eq12.needs
    assert rows[-1]["loss"] < rows[-1]["loss_star"]


# --- settings, captions, config -----------------------------------------------------------


def test_paper_settings_declare_every_field_and_captions_are_sentences():
    assert_settings_declared_and_captions_sentences(Kawaguchi2021Fig3())


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("tau", -1.0, r"`tau` must be in \[0, inf\); got -1"),
        ("records", 0, r"`records` must be >= 1; got 0"),
    ],
)
def test_bad_config_values_are_rejected_naming_the_field(field, value, message):
    with pytest.raises(ValueError, match=message):
        Fig3Config(**{field: value})

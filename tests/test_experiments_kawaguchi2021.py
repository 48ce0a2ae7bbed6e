"""Kawaguchi (2021) Figures 1–3: tasks, resume, paper settings, and every statement in both
directions (a run or a trajectory where it holds, one where it must not, and no data).

(Plots and the run directory are exercised for every registered experiment by
tests/test_cli_experiments.py.)"""

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from deqlab.data.registry import RawImages
from deqlab.experiments.base import TaskContext
from deqlab.experiments.kawaguchi2021 import (
    appb_report,
    fig1,
    fig1_report,
    fig2,
    fig2_report,
    fig3,
    fig3_report,
    statements,
    thm2_report,
)
from deqlab.experiments.kawaguchi2021.appb import AppBConfig, Kawaguchi2021AppB
from deqlab.experiments.kawaguchi2021.fig1 import Fig1Config, Kawaguchi2021Fig1
from deqlab.experiments.kawaguchi2021.fig2 import Fig2Config, Kawaguchi2021Fig2
from deqlab.experiments.kawaguchi2021.fig3 import Fig3Config, Kawaguchi2021Fig3
from deqlab.experiments.kawaguchi2021.statements import (
    COROLLARY_1,
    COROLLARY_2,
    bound_checks,
    faster_rate_observation,
    gamma_hypothesis,
    hypotheses,
    lambda_bound_check,
)
from deqlab.experiments.kawaguchi2021.thm2 import Kawaguchi2021Thm2, Thm2Config
from deqlab.experiments.kawaguchi2021.trajectory import log_spaced_steps
from deqlab.statements import Kind, Source, Verdict
from deqlab.theory.kawaguchi2021 import lambda_lower_bound

PASS, FAIL, NM, NA = Verdict.PASS, Verdict.FAIL, Verdict.NOT_MEASURED, Verdict.NOT_APPLICABLE


class MemoryCheckpoints:
    """A TaskContext whose checkpoints live in memory; ``stop_after`` interrupts a task."""

    def __init__(self, stop_after: int | None = None):
        self.saved, self.stop_after, self.count = None, stop_after, 0

    def context(self, checkpoint_every: int) -> TaskContext:
        return TaskContext("cpu", checkpoint_every, lambda: self.saved, self._save)

    def _save(self, state, rows):
        self.saved = (state, list(rows))
        self.count += 1
        if self.count == self.stop_after:
            raise KeyboardInterrupt


def _run_all(experiment, config):
    rows = []
    for task in experiment.tasks(config):
        rows += experiment.run_task(config, task, MemoryCheckpoints().context(100))
    return rows


def _by_name(statements):
    return {s.name: s for s in statements}


# --- Corollaries 1–2 and Theorem 1 on synthetic trajectories --------------------------------


def _trajectory(rate, bound_rate, *, key="t", steps=11, loss_star=1.0, gap0=10.0, **constants):
    """L_τ = L* + g₀e^{−rate·τ} under bounds L* + g₀e^{−bound_rate·τ} (dependent) and
    L* + g₀e^{−bound_rate·τ/2} (independent), with hypothesis constants that hold."""
    base = {"task": key, "loss_star": loss_star, "lambda_T": 1.0, "b_norm1": 1.0,
            "rank_ratio": 0.5, "rank_tol": 1e-13, "pl_ratio": 2.0, "sharpness_start": 10.0,
            "sharpness_end": 10.0, **constants}  # fmt: skip
    return [
        {**base, "step": s, "loss": loss_star + gap0 * math.exp(-rate * s),
         "bound_dependent": loss_star + gap0 * math.exp(-bound_rate * s),
         "bound_independent": loss_star + gap0 * math.exp(-bound_rate * s / 2)}
        for s in range(steps)
    ]  # fmt: skip


def _checks(rows, corollary=COROLLARY_1, lr=0.01, gamma=0.5, **kw):
    runs = statements.runs_by_task(rows)
    guards = hypotheses(corollary, runs, lr=lr, gamma=gamma, **kw)
    return guards, bound_checks(corollary, runs, guards, lr=lr)


def test_bound_check_passes_with_the_decay_ratio_after_the_start():
    """The ratio of decay exponents is rate/bound_rate at every τ ≥ 1 (τ = 0 is a tie)."""
    guards, (dependent, independent) = _checks(_trajectory(0.3, 0.2))
    assert all(g.verdict is Verdict.HOLDS for g in guards)
    assert dependent.verdict is PASS and dependent.value == pytest.approx(1.5)
    assert independent.verdict is PASS and independent.value == pytest.approx(3.0)
    assert dependent.margin == pytest.approx(0.5)


def test_bound_check_fails_on_a_violating_trajectory():
    _, (dependent, independent) = _checks(_trajectory(0.15, 0.2))
    assert dependent.verdict is FAIL and dependent.value == pytest.approx(0.75)
    assert independent.verdict is PASS  # 0.15 > 0.2 / 2
    _, (dependent, independent) = _checks(_trajectory(0.08, 0.2))  # 0.08 < 0.2 / 2
    assert independent.verdict is FAIL and independent.value == pytest.approx(0.8)
    assert "initialization-independent" in independent.name and dependent.verdict is FAIL
    _, (_, independent) = _checks(_trajectory(0.08, 0.2), corollary=COROLLARY_2, radius=10.0)
    assert independent.name.startswith("Corollary 2") and independent.verdict is FAIL
    one_step = _trajectory(0.3, 0.2)
    one_step[5]["loss"] = one_step[5]["bound_dependent"] + 1e-6  # above by more than rounding
    assert _checks(one_step)[1][0].verdict is FAIL


def test_bound_check_rounding_ties_and_unresolvable_steps():
    """Above the bound by rounding only: a tie (ratio 1); at L*: holds, not counted."""
    rows = _trajectory(0.3, 0.2)
    rows[3]["loss"] = rows[3]["bound_dependent"] * (1 + 1e-12)
    (dependent, _) = _checks(rows)[1]
    assert dependent.verdict is PASS and dependent.value == pytest.approx(1.0)
    converged = _trajectory(0.3, 0.2)
    for r in converged[5:]:
        r["loss"] = r["loss_star"]  # at L*: holds, but its exponent is not resolvable
    (dependent, _) = _checks(converged)[1]
    assert dependent.value == pytest.approx(1.5) and "6 steps where" in dependent.detail
    at_optimum = _trajectory(80.0, 60.0)  # both reach L* within float64 after one step
    (dependent, _) = _checks(at_optimum)[1]
    assert dependent.verdict is NM and "resolvable" in dependent.detail


@pytest.mark.parametrize(
    "edit",
    [
        lambda rows: rows.__setitem__(4, {**rows[4], "loss": math.nan}),
        lambda rows: rows.pop(0),  # no step 0: L₀ unknown
        lambda rows: rows.clear(),
    ],
)
def test_bound_check_is_not_measured_without_data(edit):
    rows = _trajectory(0.3, 0.2)
    edit(rows)
    _, checks = _checks(rows)
    assert all(c.verdict is NM for c in checks)


@pytest.mark.parametrize(
    ("constants", "kw", "unmet", "needs"),
    [
        ({"rank_ratio": 0.0}, {}, "rank(Φ) = min(n, m)", "rank min(n, m)"),
        ({"pl_ratio": 0.5}, {}, "the loss is the square loss", "PL constant"),
        ({"sharpness_end": 500.0}, {}, "gradient descent follows", "η ≤ 0.002"),
        ({}, {"gamma": 1.5}, "γ ∈ (0, 1)", "γ < 1"),
    ],
)
def test_a_violated_hypothesis_makes_corollary_1_not_applicable(constants, kw, unmet, needs):
    guards, checks = _checks(_trajectory(0.15, 0.2, **constants), **kw)
    failing = [g for g in guards if g.verdict is Verdict.UNMET]
    assert [g.name[: len(unmet)] for g in failing] == [unmet]
    assert all(c.verdict is NA and needs in c.needs for c in checks)
    assert all(c.value is not None for c in checks)  # the measurement is kept


def test_corollary_2_has_the_radius_hypothesis():
    rows = _trajectory(0.3, 0.2, b_norm1=2.0)
    guards, checks = _checks(rows, COROLLARY_2)
    assert [g.name for g in guards][3] == "‖B_t‖₁ < (1 − γ)R for all t ∈ [0, T]"
    assert all(c.verdict is PASS for c in checks)
    guards, checks = _checks(rows, COROLLARY_2, radius=3.0)  # (1 − γ)R = 1.5 < 2
    assert guards[3].verdict is Verdict.UNMET and all(c.verdict is NA for c in checks)


def test_a_violation_beside_an_unmeasured_step_is_unmet_not_unmeasured():
    """One rule over runs (deqlab.statements.worst): ‖B_t‖₁ above (1 − γ)R at one step and
    NaN at another is UNMET (a measured violation is never hidden), and so is λ_T below
    Theorem 1's bound next to a NaN; with no violation the NaN leaves it NOT MEASURED."""
    rows = _trajectory(0.3, 0.2)
    rows[2]["b_norm1"], rows[5]["b_norm1"] = math.nan, 9.0
    guards, _ = _checks(rows, corollary=COROLLARY_2, radius=10.0)  # (1 − γ)R = 5
    radius = next(g for g in guards if g.name.startswith("‖B_t‖₁"))
    assert radius.verdict is Verdict.UNMET and radius.value == 9.0
    rows[5]["b_norm1"] = 1.0
    guards, _ = _checks(rows, corollary=COROLLARY_2, radius=10.0)
    assert next(g for g in guards if g.name.startswith("‖B_t‖₁")).verdict is NM
    low = _trajectory(0.3, 0.2, lambda_T=1.0)
    low[1]["lambda_T"], low[4]["lambda_T"] = math.nan, 0.01
    check = lambda_bound_check({"t": low}, [gamma_hypothesis(0.5)], m=4, gamma=0.5)
    assert check.verdict is FAIL


def test_an_unmeasured_hypothesis_leaves_the_corollary_not_measured():
    _, checks = _checks(_trajectory(0.3, 0.2, sharpness_end=math.nan))
    assert all(c.verdict is NM for c in checks)


def _accuracy(rows, *guards, eps_rel=math.exp(-2.5)):
    """Eq. (10) on ``rows`` with m = 1, γ = 0.5, η = 0.01: T_ε = 2.8125/κ (log(1/ε_rel) = 2.5)."""
    runs = statements.runs_by_task(rows)
    return statements.accuracy_time_check(
        runs, list(guards), equation="Eq. (10)", lr=0.01, m=1, gamma=0.5, eps_rel=eps_rel
    )


@pytest.mark.parametrize(
    ("rate", "kappa", "verdict", "value"),
    [
        (1.0, 56.25, PASS, math.exp(-2.5)),  # T_ε = 0.05 (step 5): gap/ε = e^{-5}/e^{-2.5}
        (0.1, 56.25, FAIL, math.exp(2)),  # slow decay: at step 5 gap/ε = e^{-0.5}/e^{-2.5}
        (1.0, 1.0, NM, None),  # T_ε = 2.8: no step of the 0.1-long run reaches it
    ],
)
def test_accuracy_time_check_in_both_directions(rate, kappa, verdict, value):
    """Eqs. (9)–(12): after T_ε the gap is at most ε; a run that never gets there is not
    measured; the predicted and measured times are reported."""
    found = _accuracy(_trajectory(rate, rate, kappa=kappa))
    assert found.verdict is verdict and found.kind is Kind.THEOREM
    assert (found.value is None) if value is None else found.value == pytest.approx(value)
    assert "T_ε = " in (found.measured if value else found.detail)
    if verdict is PASS:
        assert "measured time to ε 0.03 = 0.6 × T_ε" in found.measured
        assert "slack: every run reached ε at least 1.67× earlier than T_ε" in found.detail
    else:
        assert "slack" not in found.detail
    nan_rows = _trajectory(rate, rate, kappa=kappa)
    nan_rows[3]["loss"] = math.nan
    assert _accuracy(nan_rows).verdict is NM


def test_accuracy_time_needs_a_positive_kappa():
    """τ = 0 and R = ∞ give κ = 0: the hypothesis is unmet and Eqs. (11)–(12) not applicable."""
    rows = _trajectory(1.0, 1.0, kappa=0.0)
    runs = statements.runs_by_task(rows)
    positive = statements.kappa_hypothesis(runs, tau=0.0, radius=math.inf)
    assert positive.verdict is Verdict.UNMET and "τ > 0" in positive.needs
    assert _accuracy(rows, positive).verdict is NA
    held = statements.kappa_hypothesis(statements.runs_by_task(_trajectory(1, 1, kappa=56.25)),
                                        tau=0.1, radius=math.inf)  # fmt: skip
    assert held.verdict is Verdict.HOLDS
    assert statements.accuracy_equation("square", 0.0, math.inf) == "Eq. (10)"
    assert statements.accuracy_equation("logistic", 0.1, math.inf) == "Eq. (11)"
    assert statements.accuracy_equation("logistic", 0.0, 3.0) == "Eq. (12)"
    assert statements.accuracy_equation("logistic", 0.1, 3.0).startswith("Eq. (9)")


def test_lambda_bound_and_faster_rate_in_both_directions():
    m, gamma = 4, 0.5
    lam = lambda_lower_bound(m, gamma)
    guard = [gamma_hypothesis(gamma)]
    source = Source("kawaguchi2021", "Figure 3")
    for lam_T, verdict, faster in (
        (3 * lam, PASS, PASS),
        (lam, PASS, FAIL),
        (0.5 * lam, FAIL, FAIL),
    ):
        rows = _trajectory(0.3, 0.2, lambda_T=lam_T)
        check = lambda_bound_check({"t": rows}, guard, m=m, gamma=gamma)
        assert check.verdict is verdict and check.value == pytest.approx(lam_T / lam)
        assert faster_rate_observation(rows, source, m=m, gamma=gamma).verdict is faster
    nan_rows = _trajectory(0.3, 0.2, lambda_T=math.nan)
    assert lambda_bound_check({"t": nan_rows}, guard, m=m, gamma=gamma).verdict is NM
    assert lambda_bound_check({}, guard, m=m, gamma=gamma).verdict is NM
    assert faster_rate_observation([], source, m=m, gamma=gamma).verdict is NM


# --- Figure 2 ------------------------------------------------------------------------------


def _final_rows(config, task, model, loss, *, step=None):
    step = config.steps if step is None else step
    row = {"task": task, "panel": task[0], "model": model, "init": "x", "step": step}
    return [{**row, "loss": loss, "loss_star": 10.0}]


@pytest.mark.parametrize(
    ("delm_a", "delm_b", "resnet_a", "resnet_b", "verdicts"),
    [
        (10.0, 10.0, 20.0, 10.0, (PASS, PASS, PASS, PASS)),
        (11.0, 11.0, 10.0, 20.0, (FAIL, FAIL, FAIL, FAIL)),
        (10.0, 11.0, 20.0, 10.0, (PASS, FAIL, PASS, PASS)),
        (math.nan, math.nan, math.nan, math.nan, (NM, NM, NM, NM)),
    ],
)
def test_fig2_observations_in_both_directions(delm_a, delm_b, resnet_a, resnet_b, verdicts):
    """DELMs on (a), on (b) (a final gap 0.1 > optimum_rtol fails it), ResNet on (a), (b)."""
    config = Fig2Config(n_random=0, steps=100)
    rows = [
        *_final_rows(config, "a-delm-identity", "DELM", delm_a),
        *_final_rows(config, "b-delm-identity", "DELM", delm_b),
        *_final_rows(config, "a-resnet", "LinearResNet", resnet_a),
        *_final_rows(config, "b-resnet", "LinearResNet", resnet_b),
    ]
    found = fig2_report.statements(config, rows)
    observed = [s for s in found if s.kind is Kind.OBSERVATION][:4]
    assert tuple(s.verdict for s in observed) == verdicts
    assert "uniform" in observed[1].name
    assert (
        "modified identity" in observed[2].detail and "η·λ_max(∇²L(W₀)) = —" in observed[2].detail
    )
    diverged = _final_rows(config, "a-resnet", "LinearResNet", math.inf, step=7)
    statement = fig2_report.statements(config, diverged)[2]
    assert statement.verdict is NM and "diverged: the loss is inf at step 7" in statement.measured
    unfinished = _final_rows(config, "a-delm-identity", "DELM", 10.0, step=50)
    assert fig2_report.statements(config, unfinished)[0].verdict is NM


def test_resnet_sharpness_is_the_top_eigenvalue_of_the_dense_hessian():
    config = Fig2Config(n=30, d=2, resnet_depth=2, resnet_io="gaussian")
    X, Y = fig2.zou_synthetic(30, 2, seed=0).X, fig2.zou_synthetic(30, 2, seed=0).y
    model = fig2.resnet_model(config, X)
    with torch.no_grad():
        for W in model.blocks:
            W.normal_(std=0.3)  # away from W = 0, where the Hessian is simpler
    sizes = [W.numel() for W in model.blocks]

    def loss(theta):
        H = model.input_layer @ X
        for w in theta.split(sizes):
            H = H + w.view(4, 4) @ H
        return ((model.output_layer @ H - Y) ** 2).sum()

    theta = torch.cat([W.detach().reshape(-1) for W in model.blocks])
    dense = torch.linalg.eigvalsh(torch.autograd.functional.hessian(loss, theta))[-1]
    assert fig2.resnet_sharpness(model, X, Y) == pytest.approx(float(dense), rel=1e-9)


def test_a_diverging_resnet_stops_at_its_first_non_finite_loss():
    experiment = Kawaguchi2021Fig2()
    config = experiment.resolve("tiny", overrides=["lr=10.0", "steps=40"])
    rows = experiment.run_task(
        config, experiment.tasks(config)[-2], MemoryCheckpoints().context(100)
    )
    assert rows[-1]["step"] < 40 and not math.isfinite(rows[-1]["loss"])
    assert all(math.isfinite(r["loss"]) for r in rows[:-1])


def test_fig2_tiny_statements():
    """The tiny run: observations decided (Zou et al.'s modified-identity ResNet reaches L*
    on both data sets, so panel (a)'s contrast fails), Corollary 1 not applicable because
    its step is above 1/λ_max, with the step it needs."""
    experiment = Kawaguchi2021Fig2()
    config = experiment.resolve("tiny")
    rows = _run_all(experiment, config)
    assert {r["panel"] for r in rows} == {"a", "b", "c"}
    found = _by_name(experiment.statements(config, rows))
    assert found["DELMs reach the global minimum value on Gaussian data from every "
                 "initialization"].verdict is PASS  # fmt: skip
    resnet = "linear ResNet (identity init) {} the global minimum value on {} data"
    assert found[resnet.format("stays above", "Gaussian")].verdict is FAIL
    assert found[resnet.format("reaches", "uniform")].verdict is PASS
    assert found["Theorem 1: λ_min(D_t) ≥ 1/(m(1+γ)²) at every step"].verdict is PASS
    flow = found["gradient descent follows the gradient flow (Eq. 6)"]
    assert flow.verdict is Verdict.UNMET and flow.value > 1
    corollary = [s for name, s in found.items() if name.startswith("Corollary 1")]
    assert len(corollary) == 2 and all(s.verdict is NA for s in corollary)
    assert all(s.needs.startswith("η ≤ ") and s.value >= 1 for s in corollary)
    assert all(s.kind is not Kind.OURS for s in found.values())


def test_fig2_sweep_tiny_adds_tasks_without_changing_the_figure_rows():
    """tiny-sweep = tiny + the sweep: the figure's tasks and rows are tiny's; at η = 2.5e-3
    every DELM reaches L* and so does the ResNet on both data sets (panel (a)'s contrast
    fails); at η = 0.2 everything diverges (the DELMs' observations FAIL on it, the
    ResNet's are NOT MEASURED)."""
    experiment = Kawaguchi2021Fig2()
    tiny, swept = experiment.resolve("tiny"), experiment.resolve("tiny-sweep")
    assert dataclasses.replace(swept, sweep_lrs=(), sweep_gammas=()) == tiny
    keys = [t.key for t in experiment.tasks(swept)]
    assert keys[: len(experiment.tasks(tiny))] == [t.key for t in experiment.tasks(tiny)]
    sweep = [t for t in experiment.tasks(swept) if t.key.startswith("sweep-")]
    assert len(sweep) == 2 * (2 + 2 * 2)  # per η: 2 ResNets, 2 panels × 2 DELM inits
    rows = [r for t in sweep
            for r in experiment.run_task(swept, t, MemoryCheckpoints().context(100))]  # fmt: skip
    assert all(r["sweep_lr"] in swept.sweep_lrs for r in rows)
    found = _by_name(fig2_report.sweep_statements(swept, rows))
    at = "at η = 0.0025, γ = 0.5 (sweep)"
    assert found[f"Figure 2 (a)–(b) reproduces {at}"].verdict is FAIL
    assert found[f"Figure 2 (a)–(b) reproduces {at}"].value == 3
    assert "docs/findings.md#kawaguchi-fig2" in found[f"Figure 2 (a)–(b) reproduces {at}"].detail
    reach = "DELMs reach the global minimum value on {} data from every initialization {}"
    assert found[reach.format("Gaussian", at)].verdict is PASS
    assert found[reach.format("uniform", at)].verdict is PASS
    blown = found[reach.format("Gaussian", "at η = 0.2, γ = 0.5 (sweep)")]
    assert blown.verdict is FAIL and blown.value == 2 and "diverged at step" in blown.measured
    stays = "linear ResNet (identity init) stays above the global minimum value on Gaussian data"
    assert found[f"{stays} at η = 0.0025 (sweep)"].verdict is FAIL
    assert found[f"{stays} at η = 0.2 (sweep)"].verdict is NM
    figure = experiment.statements(tiny, [])  # the sweep's rows do not enter the figure's
    assert experiment.statements(swept, rows) == [*figure, *found.values()]


@pytest.mark.parametrize(
    "key", ["sweep-lr0.0025-g0.5-b-delm-random1", "sweep-lr0.2-g0.5-a-delm-identity"]
)
def test_a_sweep_delm_resumes_to_the_same_rows_whether_it_converges_or_diverges(key):
    experiment = Kawaguchi2021Fig2()
    config = experiment.resolve("tiny-sweep")
    (task,) = [t for t in experiment.tasks(config) if t.key == key]
    rows = experiment.run_task(config, task, MemoryCheckpoints().context(50))
    interrupted = MemoryCheckpoints(stop_after=2)
    with pytest.raises(KeyboardInterrupt):
        experiment.run_task(config, task, interrupted.context(50))
    interrupted.stop_after = None
    assert experiment.run_task(config, task, interrupted.context(50)) == rows
    assert math.isfinite(rows[-1]["loss"]) == ("0.0025" in key)


def _sweep_rows(config, gaps, resnet_a=20.0, resnet_b=10.0, lr=1e-3, gamma=0.5):
    """Final rows of one sweep point: DELM gaps per (panel, init) (None: diverged at step 7),
    ResNet final losses on (a) and (b); L* = 10."""
    prefix = fig2_report.sweep_key(lr, gamma)
    rows = []
    for (panel, init), gap in gaps.items():
        loss, step = (math.inf, 7) if gap is None else (10.0 * (1 + gap), config.steps)
        rows += [{"task": f"{prefix}-{panel}-delm-{init}", "panel": panel, "model": "DELM",
                  "init": init, "step": step, "loss": loss, "loss_star": 10.0}]  # fmt: skip
    for panel, loss in (("a", resnet_a), ("b", resnet_b)):
        rows += _final_rows(config, f"{fig2_report.sweep_key(lr)}-{panel}-resnet",
                            "LinearResNet", loss)  # fmt: skip
    return rows


@pytest.mark.parametrize(
    ("gaps", "verdicts"),
    [
        ({("a", "identity"): 0.0, ("b", "identity"): 0.0}, (PASS, PASS, PASS)),
        ({("a", "identity"): 0.5, ("b", "identity"): 0.0}, (FAIL, PASS, FAIL)),
        ({("a", "identity"): None, ("b", "identity"): 0.0}, (FAIL, PASS, FAIL)),
        ({("b", "identity"): 0.0}, (NM, PASS, NM)),
    ],
)
def test_fig2_sweep_statements_in_both_directions(gaps, verdicts):
    """Per (η, γ): DELMs on (a), on (b), and all four observations; a diverged DELM fails."""
    config = Fig2Config(n_random=0, steps=100, sweep_lrs=(1e-3,), sweep_gammas=(0.5,))
    found = fig2_report.sweep_statements(config, _sweep_rows(config, gaps))
    resnet_a, resnet_b, delm_a, delm_b, both = found
    assert (resnet_a.verdict, resnet_b.verdict) == (PASS, PASS)
    assert (delm_a.verdict, delm_b.verdict, both.verdict) == verdicts
    assert both.kind is Kind.OURS and "η = 0.001, γ = 0.5" in both.name
    stalled = fig2_report.sweep_statements(config, _sweep_rows(config, gaps, resnet_a=10.0))
    assert stalled[0].verdict is FAIL and stalled[-1].verdict is FAIL


# --- Figure 3 ------------------------------------------------------------------------------


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


# --- Theorem 2 -----------------------------------------------------------------------------


def test_thm2_tiny_statements_pass_and_resume_bit_exactly():
    experiment = Kawaguchi2021Thm2()
    config = experiment.resolve("tiny")
    task = experiment.tasks(config)[1]
    rows = experiment.run_task(config, task, MemoryCheckpoints().context(100))
    assert {r["delta_fraction"] for r in rows} == set(config.delta_fractions)
    found = experiment.statements(config, rows)
    assert [s.verdict for s in found] == [PASS, PASS, PASS]
    assert all(s.kind is Kind.THEOREM and s.value < 1e-12 for s in found)
    interrupted = MemoryCheckpoints(stop_after=2)
    with pytest.raises(KeyboardInterrupt):
        experiment.run_task(config, task, interrupted.context(100))
    interrupted.stop_after = None
    assert experiment.run_task(config, task, interrupted.context(100)) == rows


def _thm2_rows(error):
    return [
        {"task": "square-delm", "loss": "square", "step": step, "delta_fraction": 0.5,
         "velocity_error": error, "multiplier_error": error, "closed_form_error": error}
        for step in (0, 10)
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("rows", "verdict"),
    [(_thm2_rows(1e-13), PASS), (_thm2_rows(1e-3), FAIL), (_thm2_rows(math.nan), NM), ([], NM)],
)
def test_thm2_statements_in_both_directions(rows, verdict):
    found = thm2_report.statements(Thm2Config(), rows)
    assert [s.verdict for s in found] == [verdict] * 3


# --- Appendix B ----------------------------------------------------------------------------


def test_appb_tiny_statements():
    """Eq. (37) holds, the component along 1 grows like 1/(1 − γ) and the rest stays bounded;
    Appendix B's own remainder P₁r/(1 − γ) is not the growing term once σ(A_t) is not doubly
    stochastic (random A₀), where the Perron vector gives it (ours)."""
    experiment = Kawaguchi2021AppB()
    config = experiment.resolve("tiny")
    found = experiment.statements(config, _run_all(experiment, config))
    assert [s.verdict for s in found] == [PASS, PASS, PASS, FAIL, PASS]
    assert [s.kind for s in found] == [Kind.THEOREM] * 4 + [Kind.OURS]
    assert "random 1" in found[3].measured  # exponent 1: it grows like 1/(1 − γ)
    assert all("docs/findings.md#kawaguchi-appb" in s.detail for s in found[3:])


def _appb_rows(along, rest, paper_rest, *, gaps=(1e-14, 1e-5)):
    """One state swept over γ = 0.9, 0.99: norms at γ₂ = 10^s × the norms at γ₁."""
    return [
        {"task": "random", "step": 0, "sweep_gamma": g, "along": 10.0**(along * k),
         "rest": 10.0**(rest * k), "paper_rest": 10.0**(paper_rest * k), "eq37_error": gaps[0],
         "perron_gap": gaps[1]}
        for k, g in enumerate((0.9, 0.99))
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("rows", "verdicts"),
    [
        (_appb_rows(1.0, 0.0, 0.05), [PASS] * 5),
        (_appb_rows(0.5, 0.5, 1.0, gaps=(1e-3, 0.1)), [FAIL] * 5),
        (_appb_rows(math.nan, math.nan, math.nan, gaps=(math.nan, math.nan)), [NM] * 5),
        ([], [NM] * 5),
    ],
)
def test_appb_statements_in_both_directions(rows, verdicts):
    found = appb_report.statements(AppBConfig(), rows)
    assert [s.verdict for s in found] == verdicts
    if verdicts[0] is PASS:
        assert found[1].value == pytest.approx(1.0) and found[2].value == pytest.approx(0.0)


# --- Figure 1 ------------------------------------------------------------------------------


def test_fig1_tiny_rows_statements_and_divergence():
    """Linear model = DELM at initialization (W₀ = B₀U₀⁻¹); a diverging lr is counted."""
    experiment = Kawaguchi2021Fig1()
    config = experiment.resolve("tiny", overrides=["lrs=[1e30, 0.001]"])
    rows = _run_all(experiment, config)
    start = {(r["model"], r["lr"]): r for r in rows if r["epoch"] == 0}
    for lr in config.lrs:
        assert start[("Linear", lr)]["test_loss"] == pytest.approx(start[("DELM", lr)]["test_loss"])
    summary = fig1_report.final_test_losses(config, rows)
    assert summary["DELM"]["best"][0] == 0.001 and summary["Linear"]["diverged"] == 1
    found = experiment.statements(config, rows)
    *observed, rank = found
    assert [s.name for s in observed] == [
        "digits: all models start at about the same test loss",
        "digits: the DELM ends with a lower test loss than Linear (best lrs)",
        "digits: the DELM ends with a lower test loss than DNN-H2 (best lrs)",
    ]
    assert all(s.kind is Kind.OBSERVATION and s.source.quote for s in observed)
    assert all(s.verdict in (PASS, FAIL) for s in observed)
    assert rank.kind is Kind.OURS and rank.verdict is PASS  # 20 points of 64 pixels


def _fig1_rows(config, finals, starts):
    """One trial per model: epoch 0 at ``starts[model]``, the last epoch at ``finals[model]``."""
    return [
        {"dataset": "digits", "model": model, "trial": 0, "lr": config.lrs[0], "epoch": epoch,
         "train_loss": 1.0, "test_loss": loss}
        for model in finals
        for epoch, loss in ((0, starts[model]), (config.epochs, finals[model]))
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("finals", "starts", "verdicts"),
    [
        ({"DELM": 1.0, "Linear": 2.0}, {"DELM": 5.0, "Linear": 6.0}, (PASS, PASS)),
        ({"DELM": 2.0, "Linear": 1.0}, {"DELM": 5.0, "Linear": 15.0}, (FAIL, FAIL)),
        ({"DELM": 1.0, "Linear": math.nan}, {"DELM": 5.0, "Linear": math.nan}, (NM, NM)),
        ({}, {}, (NM, NM)),
    ],
)
def test_fig1_statements_in_both_directions(finals, starts, verdicts):
    config = Fig1Config(datasets=("digits",), lrs=(0.001,), trials=1, depths=())
    found = fig1_report.statements(config, _fig1_rows(config, finals, starts))
    assert tuple(s.verdict for s in found[:-1]) == verdicts


@pytest.mark.parametrize(("dataset", "verdict"), [("sphere", PASS), ("digits", FAIL)])
def test_fig1_stand_in_keeps_the_interpolation_regime(dataset, verdict):
    """rank(Φ_train) = 100 for the sphere stand-in; sklearn digits (8×8) gives 64 < 100."""
    config = Fig1Config(datasets=(dataset,), lrs=(0.001,), trials=1, depths=())
    rank = int(torch.linalg.matrix_rank(fig1.teacher_data(config, dataset, "cpu")["X_train"]))
    rows = [
        {**r, "dataset": dataset, "train_rank": rank}
        for r in _fig1_rows(config, {"DELM": 1.0}, {"DELM": 1.0})
    ]
    statement = fig1_report.statements(config, rows)[-1]
    assert statement.verdict is verdict and statement.value == rank / 100
    assert fig1_report.statements(config, _fig1_rows(config, {}, {}))[-1].verdict is NM


def test_fig1_paper_preset_uses_the_paper_sets_present_and_the_stand_in_for_the_others(
    monkeypatch,
):
    experiment = Kawaguchi2021Fig1()
    monkeypatch.setattr(fig1, "is_present", lambda name: name == "kmnist")
    assert experiment.resolve("paper").datasets == ("kmnist", "sphere")
    assert experiment.datasets(experiment.resolve("paper")) == ("kmnist",)
    monkeypatch.setattr(fig1, "is_present", lambda name: True)
    assert experiment.resolve("quick").datasets == fig1.PAPER_DATASETS
    assert experiment.resolve("paper", overrides=["datasets=['digits']"]).datasets == ("digits",)


# --- Figures 4–8 (Appendix D.2) ------------------------------------------------------------


@pytest.mark.parametrize(
    ("preset", "figure", "changes"),
    [
        ("fig4", 4, {}),
        ("fig5", 5, {"dnn_bias": False}),
        ("fig6", 6, {"dnn_bias": False, "depths": (10, 100, 200)}),
        ("fig7", 7, {"depths": (10, 100, 200)}),
        ("fig8", 8, {"n_train": 0, "n_test": 0, "epochs": 100, "trials": 3}),
    ],
)
def test_appendix_d2_presets_declare_their_figure_and_its_setting(
    preset, figure, changes, monkeypatch
):
    """Each preset is its figure's setting: only the stand-in (for the data sets missing
    here) and our choices are deviations."""
    monkeypatch.setattr(fig1, "is_present", lambda name: name == "mnist")
    experiment = Kawaguchi2021Fig1()
    config = experiment.resolve(preset)
    assert config.figure == figure and all(getattr(config, k) == v for k, v in changes.items())
    wanted = fig1.FIGURE_DATASETS[figure]
    assert config.datasets == (("mnist",) if "mnist" in wanted else ()) + ("sphere",)
    found = {d.setting: d for d in experiment.deviations(config)}
    assert {d.kind for d in found.values()} == {"substitution", "our choice"}
    assert found["datasets"].kind == "substitution" and set(found) == {"datasets", "seed"}


def _deep_rows(config, deep_final, *, diverge=False):
    """DELM and DNN-H10/H100 at each lr: DELM train loss 4 → 1, DNN-H10 1 → 0.5 (faster),
    DNN-H100 1 → ``deep_final`` (or non-finite when ``diverge``)."""
    curves = {"DELM": (4.0, 2.0, 1.0), "DNN-H10": (4.0, 1.0, 0.5),
              "DNN-H100": (1.0, 1.0, math.nan if diverge else deep_final)}  # fmt: skip
    return [
        {"dataset": "sphere", "model": model, "trial": 0, "lr": lr, "epoch": epoch,
         "train_loss": loss, "test_loss": 2.0 if model == "DELM" else 3.0}
        for model, losses in curves.items()
        for lr in config.lrs
        for epoch, loss in zip((0, config.record_every, config.epochs), losses, strict=True)
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("deep_final", "diverge", "verdict"),
    [(1.0, False, PASS), (None, True, PASS), (0.2, False, FAIL)],
)
def test_figure_6_statements_in_both_directions(deep_final, diverge, verdict):
    config = Fig1Config(datasets=("sphere",), lrs=(0.001,), trials=1, depths=(10, 100),
                        epochs=100, record_every=10, dnn_bias=False, figure=6)  # fmt: skip
    found = _by_name(fig1_report.statements(config, _deep_rows(config, deep_final,
                                                               diverge=diverge)))  # fmt: skip
    assert "sphere: all models start at about the same test loss" not in found  # Figure 6
    assert not any("than Linear" in name for name in found)
    faster = found["sphere: the DNNs reduce the training loss faster than the DELM"]
    assert faster.verdict is PASS and faster.value == 2.0 and "Figure 6" in faster.source.location
    stuck = found["sphere: DNNs with H ≥ 100 show gradient explosion or vanishing"]
    assert stuck.verdict is verdict and stuck.source.quote.startswith("We experienced")
    slow = [{**r, "train_loss": 8.0} if r["model"] != "DELM" and r["epoch"] == 10 else r
            for r in _deep_rows(config, 1.0)]  # fmt: skip
    assert fig1_report.statements(config, slow)[2].verdict is FAIL
    assert all(s.verdict is NM for s in fig1_report.statements(config, [])[:-1])


def test_deep_dnns_need_explosion_or_vanishing_at_one_learning_rate_only():
    """Appendix D.2 says the authors experienced explosion and vanishing at H = 100, 200, not
    that these depths train at no lr: H = 100 training at one lr and stalling at the other
    passes; training at both fails."""
    config = Fig1Config(datasets=("sphere",), lrs=(0.001, 0.01), trials=1, depths=(10, 100),
                        epochs=100, record_every=10, dnn_bias=False, figure=6)  # fmt: skip
    name = "sphere: DNNs with H ≥ 100 show gradient explosion or vanishing"

    def verdict(finals):
        rows = [r for lr, final in zip(config.lrs, finals, strict=True)
                for r in _deep_rows(dataclasses.replace(config, lrs=(lr,)), final)]  # fmt: skip
        return _by_name(fig1_report.statements(config, rows))[name]

    mixed = verdict((0.2, 1.0))
    assert mixed.verdict is PASS and "1 vanish" in mixed.measured
    both = verdict((0.2, 0.3))
    assert both.verdict is FAIL and both.value == 1 and "(H = 100)" in both.measured


def test_figure_8_reads_every_image_and_has_no_rank_statement(monkeypatch):
    """n_train = n_test = 0: whole splits (colour as luma, a single split halved, the stand-in
    at MNIST's sizes); the 200-point rank statement is not made."""
    images = np.arange(4 * 3 * 2 * 2, dtype=np.uint8).reshape(4, 3, 2, 2)
    monkeypatch.setattr(fig1, "load_images", lambda name, split: RawImages(
        images, np.zeros(4, dtype=np.int64), Path("x"), 255))  # fmt: skip
    monkeypatch.setattr(fig1, "WHOLE_STANDIN", (6, 2))
    config = Fig1Config(figure=8, n_train=0, n_test=0, datasets=("cifar10",))
    train, test = fig1._pre_images(config, "cifar10", torch.Generator().manual_seed(0))
    assert train.shape == test.shape == (4, 4) and float(train.max()) <= 1.0
    train, test = fig1._pre_images(config, "semeion", torch.Generator().manual_seed(0))
    assert train.shape == test.shape == (4, 2)
    train, test = fig1._pre_images(config, "sphere", torch.Generator().manual_seed(0))
    assert train.shape == (784, 6) and test.shape == (784, 2)
    rows = _fig1_rows(config, {"DELM": 1.0, "Linear": 2.0}, {"DELM": 1.0, "Linear": 1.0})
    rows = [{**r, "dataset": "cifar10"} for r in rows]
    found = fig1_report.statements(config, rows)
    assert len(found) == 4  # Linear and the three DNNs; no same-start, no rank statement
    assert {s.source.location for s in found} == {"Appendix D.2, Figure 8"}
    with pytest.raises(ValueError, match="`n_train` must be 0 exactly when `n_test` is 0"):
        Fig1Config(n_train=0)


# --- settings, captions, configs -------------------------------------------------------------


@pytest.mark.parametrize("experiment", [Kawaguchi2021Fig1(), Kawaguchi2021Fig2(),
                                        Kawaguchi2021Fig3(), Kawaguchi2021Thm2(),
                                        Kawaguchi2021AppB()])  # fmt: skip
def test_paper_settings_declare_every_field_and_captions_are_sentences(experiment):
    for preset in experiment.presets:
        experiment.deviations(experiment.resolve(preset))  # raises on an undeclared field
    assert experiment.figure_captions
    assert all(c[0].isupper() and c.endswith(".") for c in experiment.figure_captions.values())


def test_paper_presets_list_their_substitutions():
    fig1 = Kawaguchi2021Fig1()
    found = {d.setting: d for d in fig1.deviations(fig1.resolve("paper"))}
    assert found["datasets"].kind == "substitution" and "cifar10" in found["datasets"].paper
    fig2 = Kawaguchi2021Fig2()
    found = {d.setting: d for d in fig2.deviations(fig2.resolve("paper"))}
    assert "resnet_io" not in found and found["resnet_width"].kind == "our choice"
    found = {d.setting: d for d in fig2.deviations(fig2.resolve("paper", overrides=[
        "resnet_io=identity"]))}  # fmt: skip
    assert found["resnet_io"].kind == "substitution" and found["resnet_io"].run == "identity"


def test_log_spaced_steps():
    assert log_spaced_steps(1000, 4) == [0, 1, 10, 100, 1000]
    assert log_spaced_steps(0, 5) == [0]


@pytest.mark.parametrize(
    ("config_cls", "field", "value", "message"),
    [
        (Fig2Config, "n", -3, r"`n` must be >= 1; got -3"),
        (Fig2Config, "gamma", 1.5, r"`gamma` must be in \(0, 1\); got 1.5"),
        (Fig2Config, "lr", 0.0, r"`lr` must be in \(0, inf\); got 0"),
        (
            Fig2Config,
            "resnet_io",
            "zou",
            r"`resnet_io` must be one of 'modified_identity', "
            r"'gaussian', 'identity'; got 'zou'",
        ),
        (Fig2Config, "resnet_width", 19, r"`resnet_width` must be 0 or >= d \+ k = 20"),
        (Fig2Config, "sweep_lrs", (1e-4,), r"`sweep_lrs` must be empty exactly when `sweep_gam"),
        (Fig3Config, "tau", -1.0, r"`tau` must be in \[0, inf\); got -1"),
        (Fig3Config, "records", 0, r"`records` must be >= 1; got 0"),
        (Thm2Config, "delta_fractions", (1.0,), r"`delta_fractions` must be in \(0, 1\)"),
        (
            Thm2Config,
            "delta_fractions",
            (),
            r"`delta_fractions` must hold at least 1 value; got \[\]",
        ),
        (
            AppBConfig,
            "gammas",
            (0.99, 0.9),
            r"`gammas` must be strictly increasing; got \[0.99, 0.9\]",
        ),
        (
            Fig1Config,
            "datasets",
            ("blobs",),
            r"`datasets` must be one of .*'sphere'; got 'blobs'",
        ),
        (Fig1Config, "momentum", 1.0, r"`momentum` must be in \[0, 1\); got 1"),
        (Fig1Config, "lrs", (), r"`lrs` must hold at least 1 value; got \[\]"),
    ],
)
def test_bad_config_values_are_rejected_naming_the_field(config_cls, field, value, message):
    with pytest.raises(ValueError, match=message):
        config_cls(**{field: value})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"sweep_lrs": (1e-4,), "sweep_gammas": (0.5, 1.0)}, r"`sweep_gammas` must be in \(0, 1\)"),
        ({"sweep_lrs": (1e-4, 1e-4), "sweep_gammas": (0.5,)}, r"`sweep_lrs` must not repeat"),
        ({"resnet_io": "gaussian", "resnet_width": -1}, r"`resnet_width` must be >= 0; got -1"),
    ],
)
def test_fig2_sweep_and_width_constraints(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Fig2Config(**kwargs)
    assert Fig2Config(resnet_io="gaussian", resnet_width=5).resnet_width == 5  # any width

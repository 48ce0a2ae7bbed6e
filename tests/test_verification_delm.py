"""verify on the DELM (Kawaguchi 2021): λ_min(D_0), λ_max(∇²L), σ_min(Φ), L* and the time
to ε against independent computations; each statement passing and not."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from deqlab.papers.kawaguchi2021.theory import objective_sharpness
from deqlab.statements import Verdict
from deqlab.verification import delm as dl
from deqlab.verification import delm_train as dt
from deqlab.verification.inputs import load_dataset, prepare

GAMMA = 0.8


@pytest.fixture(scope="module")
def init():
    x, y, name = load_dataset("sphere", n=12, d=4, seed=3)
    return dl.initialize(prepare(x, y, name=name), gamma=GAMMA, seed=0)


def verdicts(statements):
    return {s.name: s.verdict for s in statements}


def test_sharpness_matches_the_dense_hessian(init):
    model, X, y = init.model, init.inputs.X, init.inputs.y
    dense = objective_sharpness(model.A.detach(), model.B.detach(), X, y[None], GAMMA)
    assert init.sharpness == pytest.approx(dense, rel=1e-8)


def test_corollary1_quantities_against_numpy(init):
    X, y = init.inputs.X.numpy(), init.inputs.y.numpy()
    assert init.sigma_min == pytest.approx(np.linalg.svd(X)[1][-1], rel=1e-10)
    w, *_ = np.linalg.lstsq(X.T, y, rcond=None)
    assert init.loss_star == pytest.approx(float(((X.T @ w - y) ** 2).sum()), rel=1e-8, abs=1e-10)
    A, B = init.model.A.detach().numpy(), init.model.B.detach().numpy()
    S = np.exp(A) / np.exp(A).sum(axis=0)
    pred = B @ np.linalg.solve(np.eye(4) - GAMMA * S, X)
    assert init.loss0 == pytest.approx(float(((pred[0] - y) ** 2).sum()), rel=1e-10)
    assert init.lambda_bound == pytest.approx(1 / (4 * (1 + GAMMA) ** 2))


def test_time_to_epsilon_in_closed_form(init):
    eps = 1e-2
    gap = init.loss0 - init.loss_star
    expected = 4 * (1 + GAMMA) ** 2 / (4 * init.sigma_min**2) * math.log(gap / eps)
    assert dl.time_to_epsilon(init, init.lambda_bound, eps) == pytest.approx(expected)
    assert dl.time_to_epsilon(init, init.lambda_bound, 2 * gap) == 0.0
    k = dl.numbers(init, 1e-3, eps)
    assert k["time_to_epsilon"]["guaranteed"] == pytest.approx(expected)
    assert k["steps_to_epsilon"]["guaranteed"] == pytest.approx(expected / 1e-3)
    assert k["rate_guaranteed"] == pytest.approx(4 * init.sigma_min**2 * init.lambda_bound)
    assert dl.numbers(init, None, None)["epsilon"] == pytest.approx(1e-3 * gap)


# ---- statements -------------------------------------------------------------------------

RANK = "rank(Φ) = min(n, m)"
PL = "the loss is the square loss ℓ(q, y) = ‖q − y‖² summed over the samples"
FLOW = "gradient descent follows the gradient flow (Eq. 6)"
LAMBDA = "Theorem 1: λ_min(D_t) ≥ 1/(m(1+γ)²) at every step"
BOUNDS = [
    "Corollary 1: L(A_T, B_T) ≤ its bound with λ_T = inf_{t≤T} λ_min(D_t) "
    "(initialization-dependent)",
    "Corollary 1: L(A_T, B_T) ≤ its bound with λ_T = 1/(m(1+γ)²) (initialization-independent)",
]


def test_statements_hold_and_pass(init):
    found = verdicts(dl.statements(init, init.eta_theorem))
    assert all(found[n] is Verdict.HOLDS for n in (RANK, PL, FLOW))
    assert "γ ∈ (0, 1)" not in found  # an argument check: verify refuses any other γ
    assert found[LAMBDA] is Verdict.PASS
    assert FLOW not in verdicts(dl.statements(init, None))  # no GD without an η


def test_statements_unmet_and_failing(init):
    bad = replace(init, pl_ratio=0.5, lambda_D0=init.lambda_bound / 10)
    found = verdicts(dl.statements(bad, 10 / init.sharpness))
    assert all(found[n] is Verdict.UNMET for n in (PL, FLOW))
    assert found[LAMBDA] is Verdict.NOT_APPLICABLE
    good_guards = replace(init, lambda_D0=init.lambda_bound / 10)
    assert verdicts(dl.statements(good_guards, None))[LAMBDA] is Verdict.FAIL


def test_rank_unmet_on_rank_deficient_inputs():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((10, 2)) @ rng.standard_normal((2, 5))  # rank 2 < min(n, m) = 5
    deficient = dl.initialize(prepare(x, rng.standard_normal(10)), gamma=GAMMA, seed=0)
    assert verdicts(dl.statements(deficient, None))[RANK] is Verdict.UNMET


def test_training_on_rank_deficient_inputs_reports_the_run_and_not_the_corollary(init):
    """A constant feature (digits' corner pixels): rank(Φ) UNMET, κ = 0, and --train still
    trains; the corollary's bounds are vacuous and NOT APPLICABLE, the run is reported."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((20, 5))
    x[:, 0] = 0.0
    deficient = dl.initialize(prepare(x, rng.standard_normal(20)), gamma=GAMMA, seed=0)
    assert deficient.kappa == 0.0 and dl.numbers(deficient, None, None)["bound_vacuous"]
    run = dt.train(deficient, steps=3, eta=deficient.eta_theorem)
    found = verdicts(dt.train_statements(deficient, run))
    assert found[RANK] is Verdict.UNMET
    assert all(found[n] is Verdict.NOT_APPLICABLE for n in (*BOUNDS, LAMBDA))
    k = dt.train_numbers(deficient, run)
    assert k["steps"] == 3 and k["status"] == "ok" and k["loss_final"] < deficient.loss0
    assert not dl.numbers(init, None, None)["bound_vacuous"]


@pytest.fixture(scope="module")
def trained(init):
    return dt.train(init, steps=5, eta=init.eta_theorem)


def test_training_passes_corollary1(init, trained):
    assert [r["step"] for r in trained.rows] == [0, 1, 2, 3, 4, 5]
    found = verdicts(dt.train_statements(init, trained))
    assert all(found[n] is Verdict.PASS for n in (*BOUNDS, LAMBDA))
    k = dt.train_numbers(init, trained)
    assert k["steps"] == 5 and k["loss_final"] < init.loss0 and len(k["records"]) == 6


def test_training_fails_on_a_violating_run(init, trained):
    rows = [dict(r) for r in trained.rows]
    for r in rows[1:]:
        r["loss"] = init.loss0 * 2  # the loss rises: above both bounds
        r["lambda_T"] = init.lambda_bound / 10
    found = verdicts(dt.train_statements(init, dt.DELMTraining(trained.eta, rows)))
    assert all(found[n] is Verdict.FAIL for n in (*BOUNDS, LAMBDA))


def test_a_run_that_rises_above_its_bound_then_overflows_fails_and_does_not_crash(init, trained):
    """verify --train with a diverging DELM: the run stops where its loss overflows (its last
    row: that step, an infinite loss; its numbers say why), and the corollary is decided on
    the finite steps: the loss above both bounds there is FAIL, not NOT MEASURED."""
    diverged = dt.train(init, steps=200, eta=1e3 * init.eta_theorem)
    assert diverged.message.startswith("the loss diverged at step")
    assert diverged.rows[-1]["loss"] == math.inf
    assert dt.train_numbers(init, diverged)["status"] == "diverged"
    rows = [dict(r) for r in trained.rows]
    for r in rows[1:]:
        r["loss"] = init.loss0 * 2
    rows.append({**rows[-1], "step": 6, "loss": math.inf})  # then it overflows
    found = verdicts(dt.train_statements(init, dt.DELMTraining(trained.eta, rows, "diverged")))
    assert all(found[n] is Verdict.FAIL for n in BOUNDS)


# ---- Corollary 2: the logistic loss ----------------------------------------------------

TAU = 0.05
LOGISTIC = "the loss is the logistic loss + τq² (τ ≥ 0, y ∈ {0, 1}) summed over the samples"
RANK_M = "rank(Φ) = m"
KAPPA = "κ > 0 (τ > 0 for Eq. (11), R < ∞ for Eq. (12))"
RADIUS = "‖B_t‖₁ < (1 − γ)R for all t ∈ [0, T]"
BOUNDS_2 = [b.replace("Corollary 1", "Corollary 2") for b in BOUNDS]


def _binary(n=12, d=4, seed=3):
    x, y, name = load_dataset("sphere", n=n, d=d, seed=seed)
    return prepare(x, (y > 0).double(), name=name)


@pytest.fixture(scope="module")
def logistic():
    return dl.initialize(_binary(), gamma=GAMMA, seed=0, loss=dl.Loss("logistic", TAU))


def _newton_logistic(X, y, tau):
    """argmin_w Σ_i softplus-form logistic loss + τ(wᵀx_i)² by Newton's method (float64)."""
    w = np.zeros(X.shape[0])
    for _ in range(50):
        q = w @ X
        p = 1 / (1 + np.exp(-q))
        grad = X @ (p - y + 2 * tau * q)
        hess = (X * (p * (1 - p) + 2 * tau)) @ X.T
        w -= np.linalg.solve(hess, grad)
    q = w @ X
    return float((np.logaddexp(0, -q) * y + np.logaddexp(0, q) * (1 - y) + tau * q**2).sum())


def test_corollary2_quantities_against_numpy(logistic):
    X, y = logistic.inputs.X.numpy(), logistic.inputs.y.numpy()
    sigma = np.linalg.svd(X)[1][-1]
    assert logistic.kappa == pytest.approx(2 * TAU * sigma**2, rel=1e-10)  # ρ(∞) = 0
    assert logistic.loss_star == pytest.approx(_newton_logistic(X, y, TAU), rel=1e-8)
    A, B = logistic.model.A.detach().numpy(), logistic.model.B.detach().numpy()
    S = np.exp(A) / np.exp(A).sum(axis=0)
    q = (B @ np.linalg.solve(np.eye(4) - GAMMA * S, X))[0]
    loss0 = (y * np.logaddexp(0, -q) + (1 - y) * np.logaddexp(0, q) + TAU * q**2).sum()
    assert logistic.loss0 == pytest.approx(loss0, rel=1e-12)
    dense = objective_sharpness(
        logistic.model.A.detach(),
        logistic.model.B.detach(),
        logistic.inputs.X,
        logistic.inputs.y[None],
        GAMMA,
        loss="logistic",
        tau=TAU,
    )
    assert logistic.sharpness == pytest.approx(dense, rel=1e-8)


def test_corollary2_radius_and_eq11_time_in_closed_form():
    inputs = _binary()
    R = 0.7
    init = dl.initialize(inputs, gamma=GAMMA, seed=0, loss=dl.Loss("logistic", 0.0, R))
    X = inputs.X.numpy()
    s = 1 / (1 + np.exp(-R * np.abs(X).sum(axis=0).max()))
    rho = s * (1 - s)  # ρ(R) = min_i s(R‖x_i‖₁)(1 − s(R‖x_i‖₁)) for W (1, m)
    assert init.kappa == pytest.approx(rho * np.linalg.svd(X)[1][-1] ** 2, rel=1e-10)
    eps = 1e-3
    gap = init.loss0 - init.loss_star
    eq12 = 4 * (1 + GAMMA) ** 2 / (2 * rho * np.linalg.svd(X)[1][-1] ** 2) * math.log(gap / eps)
    k = dl.numbers(init, None, eps)
    assert k["time_to_epsilon"]["guaranteed"] == pytest.approx(eq12, rel=1e-10)
    assert k["time_equation"] == "Eq. (12)" and k["rho_R"] == pytest.approx(rho, rel=1e-12)


def test_binary_labels_maps_two_classes_and_refuses_more():
    inputs = _binary()
    assert dl.binary_labels(inputs) == (inputs, None)
    signed, mapping = dl.binary_labels(replace(inputs, y=2 * inputs.y - 1))
    assert torch.equal(signed.y, inputs.y) and mapping == {"-1": 0, "1": 1}
    with pytest.raises(dl.InputError, match=r"labels y ∈ \{0, 1\} .* 3 distinct values"):
        dl.binary_labels(replace(inputs, y=torch.arange(12.0) % 3))


def test_corollary2_statements_hold_and_pass(logistic):
    found = verdicts(dl.statements(logistic, logistic.eta_theorem))
    assert all(found[n] is Verdict.HOLDS for n in (RANK_M, LOGISTIC, KAPPA, FLOW))
    assert RADIUS not in found  # R = ∞: ‖B_t‖₁ < ∞ cannot fail
    assert found[LAMBDA] is Verdict.PASS
    run = dt.train(logistic, steps=5, eta=logistic.eta_theorem / 4)  # λ_max(∇²L) grows ×2
    trained = verdicts(dt.train_statements(logistic, run))
    assert trained[FLOW] is Verdict.HOLDS
    assert all(trained[n] is Verdict.PASS for n in (*BOUNDS_2, LAMBDA))
    assert run.rows[-1]["loss"] < logistic.loss0


def test_corollary2_statements_unmet_and_failing(logistic):
    wide = dl.initialize(_binary(n=6, d=8), gamma=GAMMA, seed=0, loss=dl.Loss("logistic", TAU))
    found = verdicts(dl.statements(wide, None))
    assert found[RANK_M] is Verdict.UNMET and found[LAMBDA] is Verdict.NOT_APPLICABLE
    flat = dl.initialize(logistic.inputs, gamma=GAMMA, seed=0, loss=dl.Loss("logistic", 0.0))
    assert verdicts(dl.statements(flat, None))[KAPPA] is Verdict.UNMET  # τ = 0, R = ∞
    small = dl.initialize(logistic.inputs, gamma=GAMMA, seed=0, loss=dl.Loss("logistic", TAU, 1e-3))
    assert verdicts(dl.statements(small, None))[RADIUS] is Verdict.UNMET
    run = dt.train(logistic, steps=3, eta=logistic.eta_theorem / 4)
    rows = [dict(r) for r in run.rows]
    for r in rows[1:]:
        r["loss"] = logistic.loss0 * 2  # the loss rises: above both bounds
    found = verdicts(dt.train_statements(logistic, dt.DELMTraining(run.eta, rows)))
    assert all(found[n] is Verdict.FAIL for n in BOUNDS_2)


def test_training_hypotheses_hold_and_are_unmet(init, trained):
    """The hypotheses train_statements rebuilds over the run: the flow (η·λ_max ≤ 1 at the
    first and last parameters) and rank(Φ), each holding and unmet."""
    found = verdicts(dt.train_statements(init, trained))
    assert all(found[n] is Verdict.HOLDS for n in (RANK, PL, FLOW))
    fast = dt.DELMTraining(4 / init.sharpness, trained.rows)  # η·λ_max(∇²L(θ_0)) = 4
    assert verdicts(dt.train_statements(init, fast))[FLOW] is Verdict.UNMET
    rows = [{**r, "rank_ratio": 0.0} for r in trained.rows]
    found = verdicts(dt.train_statements(init, dt.DELMTraining(trained.eta, rows)))
    assert found[RANK] is Verdict.UNMET and found[BOUNDS[0]] is Verdict.NOT_APPLICABLE


# ---- the time to ε against the run (Eqs. (9)–(12)) ---------------------------------------

TIME = "Eq. (10): L(A_T, B_T) − L* ≤ ε for every T ≥ m(1+γ)²/(2κ)·log((L₀ − L*)/ε)"


@pytest.fixture(scope="module")
def long_run(init):
    """Past T_ε at ε = (L₀ − L*)/2: T_ε/η ≈ 408 steps of the theorem's η on these data."""
    return dt.train(init, steps=420, eta=init.eta_theorem)


def _times(init, run, eps):
    """By hand: Eq. (10)'s T_ε = m(1+γ)²/(2κ)·log(2) with κ = 2σ_min(Φ)², m = d = 4, and the
    recorded (T = τη, (L_T − L*)/ε)."""
    t_eps = 4 * (1 + GAMMA) ** 2 / (2 * 2 * init.sigma_min**2) * math.log(2)
    return t_eps, [(r["step"] * run.eta, (r["loss"] - init.loss_star) / eps) for r in run.rows]


def test_time_to_epsilon_passes_on_the_run(init, long_run):
    eps = 0.5 * (init.loss0 - init.loss_star)
    t_eps, ratios = _times(init, long_run, eps)
    after = [ratio for t, ratio in ratios if t >= t_eps]
    assert len(after) >= 5  # the run goes past T_ε
    found = {s.name: s for s in dt.train_statements(init, long_run, eps)}[TIME]
    assert found.verdict is Verdict.PASS and found.value == pytest.approx(max(after), rel=1e-12)
    first = next(t for t, ratio in ratios if ratio <= 1)
    assert f"measured time to ε {first:.4g}" in found.measured and f"{t_eps:.4g}" in found.measured
    times = dt.train_numbers(init, long_run, eps)["time_to_epsilon"]
    assert times["predicted"] == pytest.approx(t_eps, rel=1e-12)
    assert times["measured"] == pytest.approx(first, rel=1e-12) and first < t_eps


def test_time_to_epsilon_fails_where_the_loss_stays_above_epsilon(init, long_run):
    eps = 0.5 * (init.loss0 - init.loss_star)
    t_eps, _ = _times(init, long_run, eps)
    rows = [dict(r) for r in long_run.rows]
    for r in rows:
        if r["step"] * long_run.eta >= t_eps:
            r["loss"] = init.loss_star + 3 * eps  # above ε after T_ε: Eq. (10) violated
    run = dt.DELMTraining(long_run.eta, rows)
    found = {s.name: s for s in dt.train_statements(init, run, eps)}[TIME]
    assert found.verdict is Verdict.FAIL and found.value == pytest.approx(3.0)


def test_time_to_epsilon_not_measured_before_t_eps_and_not_applicable_unguarded(init, trained):
    found = {s.name: s for s in dt.train_statements(init, trained)}[TIME]  # 5 steps, ε = 10⁻³
    assert found.verdict is Verdict.NOT_MEASURED and "no run recorded a step at or after" in (
        found.detail
    )
    assert dt.train_numbers(init, trained)["time_to_epsilon"]["measured"] is None
    rows = [{**r, "rank_ratio": 0.0} for r in trained.rows]
    unguarded = dt.train_statements(init, dt.DELMTraining(trained.eta, rows))
    assert {s.name: s.verdict for s in unguarded}[TIME] is Verdict.NOT_APPLICABLE


def test_eq11_time_needs_a_positive_kappa(logistic):
    flat = dl.initialize(logistic.inputs, gamma=GAMMA, seed=0, loss=dl.Loss("logistic", 0.0))
    run = dt.train(flat, steps=3, eta=flat.eta_theorem / 4)
    found = {s.name: s.verdict for s in dt.train_statements(flat, run)}
    (eq11,) = [name for name in found if name.startswith("Eq. (11)")]
    assert found[KAPPA] is Verdict.UNMET and found[eq11] is Verdict.NOT_APPLICABLE
    assert dt.train_numbers(flat, run)["time_to_epsilon"]["predicted"] == math.inf


def test_answers_apply_at_d_or_name_the_unmet_hypothesis(init):
    from deqlab.verification.answers import answers_for

    (answer,) = answers_for("delm", init, dl.numbers(init, None, None), None)
    assert answer.status == "applies at this width" and answer.width == init.m
    rng = np.random.default_rng(3)
    x = rng.standard_normal((12, 3))
    x = np.column_stack([x, x[:, 0]])  # a repeated feature: rank(Φ) = 3 < min(n, m) = 4
    deficient = dl.initialize(prepare(x, rng.standard_normal(12)), gamma=GAMMA, seed=0)
    (answer,) = answers_for("delm", deficient, dl.numbers(deficient, None, None), None)
    assert answer.status == "does not apply to these data" and "rank" in answer.why

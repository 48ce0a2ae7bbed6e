"""verify on the DELM (Kawaguchi 2021): λ_min(D_0), λ_max(∇²L), σ_min(Φ), L* and the time
to ε against independent computations; each statement passing and not."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from deqlab.statements import Verdict
from deqlab.theory.kawaguchi2021 import lambda_min_dynamics, objective_sharpness
from deqlab.verify import delm as dl
from deqlab.verify.inputs import load_dataset, prepare

GAMMA = 0.8


@pytest.fixture(scope="module")
def init():
    x, y, name = load_dataset("sphere", n=12, d=4, seed=3)
    return dl.initialize(prepare(x, y, name=name), gamma=GAMMA, seed=0)


def verdicts(statements):
    return {s.name: s.verdict for s in statements}


def test_lambda_min_dynamics_matches_the_full_d_matrix():
    g = torch.Generator().manual_seed(4)
    for m in (1, 5, 9):
        A = torch.randn(m, m, generator=g, dtype=torch.float64)
        B = torch.randn(1, m, generator=g, dtype=torch.float64)
        expected = float(lambda_min_dynamics(A, B, 0.6))
        assert dl.lambda_min_dynamics(A, B, 0.6) == pytest.approx(expected, rel=1e-10)
    with pytest.raises(ValueError, match="one row"):
        dl.lambda_min_dynamics(A, torch.ones(2, m, dtype=torch.float64), 0.6)


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


@pytest.fixture(scope="module")
def trained(init):
    return dl.train(init, steps=5, eta=init.eta_theorem)


def test_training_passes_corollary1(init, trained):
    assert [r["step"] for r in trained.rows] == [0, 1, 2, 3, 4, 5]
    found = verdicts(dl.train_statements(init, trained))
    assert all(found[n] is Verdict.PASS for n in (*BOUNDS, LAMBDA))
    k = dl.train_numbers(init, trained)
    assert k["steps"] == 5 and k["loss_final"] < init.loss0 and len(k["records"]) == 6


def test_training_fails_on_a_violating_run(init, trained):
    rows = [dict(r) for r in trained.rows]
    for r in rows[1:]:
        r["loss"] = init.loss0 * 2  # the loss rises: above both bounds
        r["lambda_T"] = init.lambda_bound / 10
    found = verdicts(dl.train_statements(init, dl.DELMTraining(trained.eta, rows)))
    assert all(found[n] is Verdict.FAIL for n in (*BOUNDS, LAMBDA))

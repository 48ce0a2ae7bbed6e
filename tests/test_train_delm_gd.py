"""DELMGradientDescent (Kawaguchi 2021, Theorem 1, Corollaries 1–2) under the trainer
protocol: the bounds along GD, records every ``record_every`` steps, resume, divergence."""

import math

import pytest
import torch

from deqlab.models.delm import DELM
from deqlab.papers.kawaguchi2021.theory import (
    corollary2_kappa,
    lambda_lower_bound,
    lambda_min_dynamics,
)
from deqlab.train.delm_gd import DELMGDConfig, DELMGradientDescent
from deqlab.train.divergence import DivergenceError


def _zou_like(n, generator):
    X = torch.randn(4, n, generator=generator)
    return X, -X + 0.1 * torch.randn(4, n, generator=generator)


def test_corollary1_bounds_hold_along_gd():
    """Square loss: L(A_T, B_T) ≤ both bounds along GD with a small step; the init-dependent
    λ_T gives the tighter bound; GD reaches L*."""
    generator = torch.Generator().manual_seed(0)
    X, Y = _zou_like(60, generator)
    model = DELM(4, 4, gamma=0.8, generator=generator)
    trainer = DELMGradientDescent(model, X, Y, DELMGDConfig(lr=2e-4, record_every=10))
    trainer.run(600)
    trainer.evaluate()
    h = trainer.history_tensors()
    assert h["step"].tolist() == list(range(0, 601, 10))
    assert h["loss"][0] == h["bound_dependent"][0] == h["bound_independent"][0]
    assert bool((h["loss"] <= h["bound_dependent"] * (1 + 1e-9)).all())
    assert bool((h["bound_dependent"] <= h["bound_independent"] + 1e-9).all())
    assert bool((h["lambda_T"] >= lambda_lower_bound(4, 0.8)).all())
    assert float(h["loss"][-1]) == pytest.approx(trainer.loss_star, rel=1e-6)
    lam = float(lambda_min_dynamics(model.A.detach(), model.B.detach(), 0.8))
    assert float(h["lambda_min"][-1]) == lam  # the record of step 600 is at θ_600


def test_corollary2_bounds_hold_along_gd_and_resume():
    """Logistic loss (τ > 0, R = ∞): both bounds hold; resuming from state_dict continues
    the same trajectory."""
    generator = torch.Generator().manual_seed(1)
    X = torch.randn(3, 50, generator=generator)
    y = (X[:1] + 0.5 * torch.randn(1, 50, generator=generator) > 0).double()
    gd = DELMGDConfig(lr=5e-3, loss="logistic", tau=0.05, record_every=20)
    model = DELM(3, 1, gamma=0.5, generator=generator)
    A0, B0 = model.A.detach().clone(), model.B.detach().clone()
    trainer = DELMGradientDescent(model, X, y, gd)
    trainer.run(400)
    h = trainer.history_tensors()
    assert trainer.kappa == pytest.approx(corollary2_kappa(X, tau=0.05))
    assert bool((h["loss"] <= h["bound_dependent"] * (1 + 1e-9)).all())
    assert bool((h["bound_dependent"] < h["bound_independent"])[1:].all())
    assert bool((h["loss"] >= trainer.loss_star - 1e-9).all())

    fresh = DELMGradientDescent(DELM.from_matrices(A0, B0, gamma=0.5), X, y, gd)
    fresh.run(200)
    resumed = DELMGradientDescent(DELM(3, 1, gamma=0.5), X, y, gd)
    resumed.load_state_dict(fresh.state_dict())
    resumed.run(200)
    assert resumed.records == trainer.records and resumed.step_count == 400


def test_features_below_the_corollary_s_rank_train_with_kappa_zero_and_vacuous_bounds():
    """Φ with a zero row (a constant pixel: rank(Φ) < min(m, n)): κ = 2σ_min(Φ)² = 0, GD
    trains as on any data, and both bounds of Eq. (7) stay at L(A₀, B₀): vacuous, and met."""
    generator = torch.Generator().manual_seed(0)
    X, Y = _zou_like(30, generator)
    X[2] = 0.0
    trainer = DELMGradientDescent(DELM(4, 4, generator=generator), X, Y, DELMGDConfig(lr=1e-3))
    assert trainer.kappa == 0.0
    trainer.run(50)
    h = trainer.history_tensors()
    assert float(h["loss"][-1]) < 0.5 * float(h["loss"][0])
    for bound in ("bound_dependent", "bound_independent"):
        assert bool((h[bound] == h["loss"][0]).all())
    assert float(h["loss"][-1]) >= trainer.loss_star


def test_step_returns_the_record_of_its_step_even_when_not_kept():
    generator = torch.Generator().manual_seed(0)
    X, Y = _zou_like(20, generator)
    gd = DELMGDConfig(lr=1e-3, record_every=3)
    trainer = DELMGradientDescent(DELM(4, 4, generator=generator), X, Y, gd)
    records = trainer.run(4)
    assert [r["step"] for r in records] == [0, 1, 2, 3]
    assert [r["step"] for r in trainer.records] == [0, 3]
    with pytest.raises(ValueError, match="`state` lacks the keys"):
        trainer.load_state_dict({"model": {}})


def test_trainer_rejects_bad_input():
    model, gd = DELM(3, 2), DELMGDConfig(lr=0.1)
    with pytest.raises(ValueError, match=r"`Y` must have shape \(2, 5\)"):
        DELMGradientDescent(model, torch.randn(3, 5), torch.randn(2, 4), gd)
    with pytest.raises(TypeError, match="`model` must be a DELM"):
        DELMGradientDescent(torch.nn.Linear(3, 2), torch.randn(3, 5), torch.randn(2, 5), gd)
    with pytest.raises(TypeError, match="`config` must be a DELMGDConfig; got dict"):
        DELMGradientDescent(model, torch.randn(3, 5), torch.randn(2, 5), {"lr": 0.1})


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("lr", 0.0, "`lr` must be in"),
        ("loss", "hinge", "`loss` must be one of"),
        ("tau", -1.0, "`tau` must be"),
        ("radius", 0.0, "`radius` must be"),
        ("record_every", 0, "`record_every` must be"),
    ],
)
def test_config_names_the_bad_setting(field, value, message):
    with pytest.raises(ValueError, match=message):
        DELMGDConfig(**{"lr": 0.1, field: value})


def test_config_is_frozen():
    with pytest.raises(AttributeError):
        DELMGDConfig(lr=0.1).lr = 0.2  # type: ignore[misc]


def _blowing_up(seed, lr):
    model = DELM(4, 1, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    gen = torch.Generator().manual_seed(1)
    X, Y = torch.randn(4, 6, generator=gen), torch.randn(1, 6, generator=gen)
    return DELMGradientDescent(model, X, Y, DELMGDConfig(lr=lr))


def test_lambda_min_lost_to_rounding_stops_the_run_as_a_divergence():
    """Eq. (33): λ_min(D) ≥ 1/(m(1+γ)²) for every (A, B); at lr = 100 this run computes
    λ_min(D_7) < 0 while its loss is still finite (it was a ValueError on λ_T)."""
    trainer = _blowing_up(seed=2, lr=100.0)
    with pytest.raises(DivergenceError) as caught:
        trainer.run(300)
    assert trainer.stop_reason == "lambda_min_not_positive" and trainer.stopped
    step, (last_step, last_loss) = trainer.step_count, trainer.last_finite
    assert math.isfinite(last_loss) and last_step == step
    assert str(caught.value) == trainer.message
    assert trainer.message.startswith(f"the loss diverged at step {step} with learning rate ")
    assert "λ_min(D) = -" in trainer.message and "Eq. (33)" in trainer.message
    with pytest.raises(RuntimeError, match=r"the run has stopped \(lambda_min_not_positive\)"):
        trainer.step()


def test_a_non_finite_loss_stops_the_run_as_a_divergence():
    trainer = _blowing_up(seed=0, lr=100.0)
    with pytest.raises(DivergenceError, match="the loss L\\(A, B\\) is inf"):
        trainer.run(300)
    assert trainer.stop_reason == "loss_not_finite"
    assert all(r["lambda_min"] > 0 for r in trainer.records)


def test_a_small_step_runs_on():
    trainer = _blowing_up(seed=2, lr=1e-3)
    trainer.run(30)
    assert not trainer.stopped and trainer.step_count == 30

"""MonDEQGD (thesis, Theorem 3.3.5): exact GD steps against the generic implicit gradient,
the hypotheses of the proof in each record, the protocol (stop, evaluate, resume)."""

import math

import pytest
import torch

from deqlab.models.mondeq import MonDEQ
from deqlab.papers.hieu2022.mondeq import sigma_min, step_size_bound
from deqlab.solvers import Anderson, SolverError
from deqlab.solvers.splitting import PeacemanRachford
from deqlab.train.mondeq_gd import MonDEQGD

TIGHT = PeacemanRachford(tol=1e-12, max_iter=5000)


def setup(m=0.5, width=12, N=5, d=3, seed=0, scale=0.6):
    torch.manual_seed(seed)
    model = MonDEQ(d, width, m=m, solver=TIGHT, sigma_A=scale, sigma_B=scale)
    X, y = torch.randn(d, N), torch.randn(N)
    return model, X, y


def test_a_step_is_an_exact_gradient_step_and_the_records_read_the_hypotheses():
    model, X, y = setup()
    generic = MonDEQ(3, 12, m=model.m, solver=Anderson(tol=1e-13, max_iter=500))
    generic.load_state_dict(model.state_dict())
    loss = 0.5 * ((generic(X) - y) ** 2).sum()
    grads = torch.autograd.grad(loss, list(generic.parameters()))
    expected = [p.detach() - 0.01 * g for p, g in zip(generic.parameters(), grads, strict=True)]
    initial = {k: p.detach().clone() for k, p in model.named_parameters()}
    trainer = MonDEQGD(model, X, y, lr=0.01, radius=0.5)
    first = trainer.step()
    second = trainer.evaluate()
    for p, want in zip(model.parameters(), expected, strict=True):
        assert torch.allclose(p.detach(), want, atol=1e-10, rtol=0)
    c = trainer.constants
    assert first["loss"] == pytest.approx(c.loss0) and first["loss_bound"] == pytest.approx(c.loss0)
    assert first["sigma_min"] == pytest.approx(c.lambda0)
    assert first["adjoint_steps"] > 0 and second["adjoint_steps"] == 0
    with torch.no_grad():  # Hypotheses 1-2 at step 1, recomputed from their definitions
        Z = model.equilibrium(X)
    assert second["sigma_min"] == pytest.approx(sigma_min(Z), rel=1e-8)
    assert second["sigma_ok"] == (second["sigma_min"] >= c.lambda0 / 2)
    for name, p in model.named_parameters():
        dist = float(torch.linalg.vector_norm(p.detach() - initial[name]))
        assert second[f"dist_{name}"] == pytest.approx(dist, rel=1e-12)
    in_balls = all(second[f"dist_{n}"] <= c.radii[n] for n in ("A", "B", "U", "u"))
    assert second["in_balls"] == in_balls
    bound = (1 - 0.01 * c.lambda0**2 / 4) * c.loss0  # Eq. (3.20) at k = 1
    assert second["loss_bound"] == pytest.approx(bound, rel=1e-12)
    assert second["loss"] < first["loss"] and trainer.step_count == 1
    assert [r["name"] for r in trainer.conditions] == [
        "Eq. (3.8)",
        "Eq. (3.9)",
        "Eq. (3.16)",
        "Eq. (3.17)",
        "Eq. (3.18)",
    ]
    assert trainer.eta_max == pytest.approx(step_size_bound(c))


def test_bad_input():
    model, X, y = setup()
    with pytest.raises(ValueError, match="`lr` must be in"):
        MonDEQGD(model, X, y, lr=0.0)
    with pytest.raises(ValueError, match=r"`X` must have shape \(3, 'any'\)"):
        MonDEQGD(model, X.T, y, lr=0.1)
    with pytest.raises(TypeError, match="`model` must be a MonDEQ"):
        MonDEQGD(torch.nn.Linear(2, 2), X, y, lr=0.1)


def test_resumes_with_identical_numbers():
    def trainer():
        model, X, y = setup()  # same seed: same θ(0) and data
        return MonDEQGD(model, X, y, lr=0.02)

    full = trainer()
    full.run(3)
    part = trainer()
    part.step()
    again = trainer()
    again.load_state_dict(part.state_dict())
    again.run(2)
    assert again.records == full.records and again.step_count == 3


def test_a_parameter_made_non_finite_stops_the_run_with_its_reason():
    model, X, y = setup()
    trainer = MonDEQGD(model, X, y, lr=0.01)
    first = trainer.step()
    with torch.no_grad():
        model.A[0, 0] = math.inf  # what a diverging step leaves
    records = trainer.run(5)
    assert trainer.stopped and trainer.stop_reason == "parameter_not_finite"
    assert len(records) == 1 and math.isnan(records[0]["loss"]) and records[0]["step"] == 1
    assert trainer.message.startswith("the loss diverged at step 1 with learning rate lr = 0.01")
    assert f"the last finite loss was {first['loss']:.6g} at step 0" in trainer.message
    with pytest.raises(RuntimeError, match=r"the run has stopped \(parameter_not_finite\)"):
        trainer.step()


def test_a_small_step_does_not_stop():
    model, X, y = setup()
    trainer = MonDEQGD(model, X, y, lr=0.01)
    trainer.run(5)
    assert not trainer.stopped and trainer.stop_reason is None and trainer.step_count == 5


def test_a_forward_solve_that_fails_stops_the_run_with_the_solvers_message():
    model, X, y = setup()
    trainer = MonDEQGD(model, X, y, lr=100.0)  # one step makes ‖I − W‖₂ ~ 2e5
    records = trainer.run(5)
    assert trainer.stop_reason == "forward_failed" and trainer.step_count == 1
    assert [r["step"] for r in records] == [0, 1] and math.isnan(records[1]["loss"])
    assert trainer.message.startswith("step 1 with learning rate lr = 100: PeacemanRachford")
    assert "forward solve" in trainer.message
    with pytest.raises(SolverError):  # the same solve, outside the trainer, at θ(1)
        model.equilibrium(X, trainer.Z)


def test_an_adjoint_solve_that_fails_stops_the_run_before_the_update():
    model, X, y = setup()
    trainer = MonDEQGD(model, X, y, lr=0.01)  # Z(0) solved with TIGHT
    model.solver = PeacemanRachford(tol=1e-12, max_iter=20)  # the warm forward needs 1 step
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    records = trainer.run(5)
    assert trainer.stop_reason == "adjoint_failed" and trainer.step_count == 0
    assert "adjoint solve" in trainer.message and "after 20 steps" in trainer.message
    assert len(records) == 1 and records[0]["loss"] == pytest.approx(trainer.constants.loss0)
    assert all(torch.equal(p, before[n]) for n, p in model.named_parameters())
    loss = 0.5 * ((model.equilibrium(X, trainer.Z).T @ model.u - y) ** 2).sum()
    with pytest.raises(SolverError, match="adjoint solve"):  # the same solve, outside
        torch.autograd.grad(loss, list(model.parameters()))


@pytest.mark.parametrize(("factor", "bounded"), [(1.0, True), (1.5, False)])
def test_hypothesis_3_is_read_only_where_theorem_3_3_5_allows_the_step(factor, bounded):
    """η ≤ 4/λ_0² (the first term of the step-size bound): Eq. (3.20) is recorded; beyond,
    its rate is negative and the record has no bound (GD still steps)."""
    model, X, y = setup()
    with torch.no_grad():
        lam = sigma_min(model.equilibrium(X))  # λ_0 from its definition
    trainer = MonDEQGD(model, X, y, lr=factor * 4 / lam**2)
    first = trainer.step()
    assert trainer.step_count == 1 and first["sigma_ok"] and first["in_balls"]
    if bounded:  # (1 − ηλ_0²/4)^0 L(0) at k = 0
        assert first["loss_bound"] == pytest.approx(first["loss"]) and first["loss_ok"]
    else:
        assert first["loss_bound"] is None and first["loss_ok"] is None

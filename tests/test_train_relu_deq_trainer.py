"""Full-batch GD on the ReLU DEQ: exact steps (against cold solves and against the plain
reference step over 40 steps through mask flips), bit-exact resume, stop reasons, Theorem 1
checks on a short run, configuration errors."""

import ast
import io
import math
from pathlib import Path

import pytest
import torch

import deqlab
from deqlab.models import ReLUDEQ
from deqlab.papers.ling2023.margins import theorem1_margins
from deqlab.statements import Run
from deqlab.train import GDConfig, GDTrainer
from deqlab.train.protocol import Trainer
from deqlab.train.relu_deq import reference_step


def _problem(m=48, d=10, n=12, seed=0, dtype=torch.float64):
    model = ReLUDEQ.init(d, m, seed=seed, dtype=dtype)
    gen = torch.Generator().manual_seed(seed + 1)
    X = torch.randn(d, n, generator=gen, dtype=torch.float64)
    X = X / X.norm(dim=0) * d**0.5
    y = torch.randn(n, generator=gen, dtype=torch.float64)
    return model, X.to(dtype), y.to(dtype)


def _params(model):
    return [p.detach().clone() for p in (model.W, model.U, model.a)]


def _rel(a, b):
    return float((a - b).norm() / b.norm())


def _without_time(records):
    """Records minus timings, NaN made comparable (NaN != NaN once unpickled)."""
    return [
        {k: "nan" if v != v else v for k, v in r.items() if k not in ("wall_time_s", "elapsed_s")}
        for r in records
    ]


LR = 2e-3


def test_each_step_is_exact_gradient_descent():
    """Warm starts, cached products and rank-n corrections do not change the maths:
    θ_{τ+1} − θ_τ = −η ∇Φ(θ_τ) with ∇Φ from a cold structured solve."""
    model, X, y = _problem()
    config = GDConfig(lr=LR, tol=1e-12, refresh_every=3, spectral_every=0, metrics_every=0)
    trainer = GDTrainer(model, X, y, config)
    trainer.run(6)
    before = _params(model)
    cold = model.gradients(X, y, tol=1e-13)
    record = trainer.step()
    assert abs(record["loss"] - cold.loss) <= 1e-10 * cold.loss
    for p_new, p_old, g in zip(_params(model), before, (cold.W, cold.U, cold.a), strict=True):
        assert _rel((p_old - p_new) / LR, g) < 1e-8
    assert record["forward_products"] < record["forward_steps"]  # first product was free


def test_every_step_is_exact_through_mask_flips_and_flips_undone():
    """The warm starts' jump handling (rows whose mask flipped, rows whose flips are
    undone, unverified extrapolated starts) never changes a gradient: each of 30 steps
    equals a cold solve's, and the run did see flips and undone flips."""
    model, X, y = _problem(m=64, n=16)
    lr = 2e-3
    trainer = GDTrainer(model, X, y, GDConfig(lr=lr, tol=1e-12, spectral_every=0, metrics_every=0))
    for _ in range(30):
        before = _params(model)
        cold = model.gradients(X, y, tol=1e-13)
        trainer.step()
        for p_new, p_old, g in zip(_params(model), before, (cold.W, cold.U, cold.a), strict=True):
            assert _rel((p_old - p_new) / lr, g) < 1e-8
    assert sum(r["mask_flips"] for r in trainer.records) > 50
    assert sum(r["adjoint_restarts"] for r in trainer.records) > 10


def _reference_run(model, X, y, lr, steps):
    """Losses, final θ and mask flips of ``steps`` plain reference steps from the model's θ."""
    W, U, a = _params(model)
    Z = V = None
    losses, flips = [], 0
    for _ in range(steps):
        step = reference_step(W, U, a, X, y, lr, tol=1e-13, Z0=Z, V0=V)
        flips += 0 if Z is None else int(((step.Z > 0) != (Z > 0)).sum())
        W, U, a, Z, V = step.W, step.U, step.a, step.Z, step.V
        losses.append(step.loss)
    return losses, (W, U, a), flips


def test_the_fast_path_follows_the_reference_step_through_mask_flips():
    """The fast trainer (warm starts, extrapolation, rank-n corrections, flip memory)
    against the plain reference step: 40 GD steps, losses and final θ equal to 1e-10 while
    ReLUs flip; a trainer at tol 1e-4 is visibly off the same comparison."""
    model, X, y = _problem(m=64, n=16)
    lr = 2e-3
    losses, theta, flips = _reference_run(model, X, y, lr, steps=40)
    fast = GDTrainer(model, X, y, GDConfig(lr=lr, tol=1e-12, spectral_every=0, metrics_every=0))
    records = fast.run(40)
    assert flips > 50 and sum(r["mask_flips"] for r in records) > 50
    assert sum(r["adjoint_restarts"] for r in records) > 0
    for record, loss in zip(records, losses, strict=True):
        assert abs(record["loss"] - loss) <= 1e-10 * loss
    for p, q in zip(_params(model), theta, strict=True):
        assert _rel(p, q) < 1e-10
    rough_model, X, y = _problem(m=64, n=16)
    rough = GDTrainer(rough_model, X, y, GDConfig(lr=lr, tol=1e-4, spectral_every=0))
    worst = max(
        abs(r["loss"] - loss) / loss for r, loss in zip(rough.run(5), losses[:5], strict=True)
    )
    assert worst > 1e-8


def test_ablations_follow_the_same_trajectory():
    """adjoint "C"/"V", rank-n corrections and extrapolation on/off: the same losses."""
    losses = []
    for adjoint, rank_n, extrapolate in (("C", True, True), ("V", False, False)):
        model, X, y = _problem()
        cfg = GDConfig(
            lr=LR, tol=1e-12, adjoint=adjoint, rank_n_updates=rank_n, extrapolate=extrapolate
        )
        losses.append([r["loss"] for r in GDTrainer(model, X, y, cfg).run(8)])
    for a, b in zip(*losses, strict=True):
        assert abs(a - b) <= 1e-9 * b


def test_resume_is_bit_exact():
    config = GDConfig(lr=LR, metrics_every=2, spectral_every=3, refresh_every=2)
    model, X, y = _problem()
    straight = GDTrainer(model, X, y, config)
    straight.run(7)

    model_a, X, y = _problem()
    first = GDTrainer(model_a, X, y, config)
    first.run(3)
    buffer = io.BytesIO()
    torch.save(first.state_dict(), buffer)
    first.run(2)  # the saved state must not move with the live trainer
    buffer.seek(0)
    model_b, _, _ = _problem(seed=5)  # other weights: all must come from the state
    resumed = GDTrainer(model_b, X, y, config)
    resumed.load_state_dict(torch.load(buffer, weights_only=True))  # plain data only
    resumed.run(4)
    assert _without_time(resumed.records) == _without_time(straight.records)
    for p, q in zip(_params(model_b), _params(model), strict=True):
        assert torch.equal(p, q)


def test_records_are_tidy_and_measure_what_they_say():
    model, X, y = _problem()
    trainer = GDTrainer(model, X, y, GDConfig(lr=LR, metrics_every=2, spectral_every=4))
    records = trainer.run(5)
    assert [r["step"] for r in records] == list(range(5))
    assert all(isinstance(v, (int, float, str)) for r in records for v in r.values())
    assert math.isnan(records[1]["lambda_min"]) and math.isnan(records[1]["W_norm"])
    assert not math.isnan(records[2]["lambda_min"]) and not math.isnan(records[4]["W_norm"])
    W_norm_now = float(torch.linalg.matrix_norm(model.W.detach(), 2))
    later = GDTrainer(model, X, y, GDConfig(lr=LR, spectral_every=0))
    later.load_state_dict(trainer.state_dict() | {"config": later.state_dict()["config"]})
    bound = later.step()["W_norm_bound"]  # Weyl: ‖W_s‖₂ + ‖W_τ − W_s‖_F >= ‖W_τ‖₂
    assert (
        W_norm_now
        <= bound
        <= records[0]["W_norm"] + float(torch.dist(model.W.detach(), trainer.W0))
    )
    assert records[0]["dist_from_init"] == 0.0
    # product count: forward + adjoint + the W update (steps > 0 need no refresh here)
    r = records[3]
    assert r["products"] == r["forward_products"] + r["adjoint_products"] + 1
    assert r["product_equivalents"] > r["products"]


def test_theorem1_margins_on_a_short_run():
    model, X, y = _problem(m=64)
    lr = 1e-3
    trainer = GDTrainer(model, X, y, GDConfig(lr=lr, spectral_every=1))
    records = trainer.run(15)
    margins = theorem1_margins(Run.from_rows("run", records), lr)
    assert margins == trainer.theorem1()
    assert margins.last_step == 14
    assert margins.max_W_norm == max(r["W_norm"] for r in records[1:]) < 1
    assert margins.min_lambda_ratio > 0.5 and margins.max_loss_ratio <= 1
    assert records[-1]["loss"] < records[0]["loss"]


def test_divergence_stops_with_status_and_keeps_records():
    model, X, y = _problem()
    trainer = GDTrainer(model, X, y, GDConfig(lr=5.0, spectral_every=0))
    records = trainer.run(20)
    assert trainer.stop_reason in ("W_norm_ge_1", "loss_not_finite", "forward_failed")
    assert 1 <= len(records) < 20 and records[-1]["status"] == trainer.stop_reason
    assert isinstance(trainer, Trainer) and trainer.stopped
    assert trainer.message.startswith(f"step {records[-1]['step']}:")
    assert records[0]["status"] == "ok" and math.isfinite(records[0]["loss"])
    with pytest.raises(RuntimeError, match="the run has stopped"):
        trainer.step()
    assert trainer.run(3) == []


def test_W_norm_at_least_one_is_reported_not_used():
    model, X, y = _problem()
    with torch.no_grad():
        model.W.mul_(1.05 / float(torch.linalg.matrix_norm(model.W, 2)))
    trainer = GDTrainer(model, X, y, GDConfig(lr=LR))
    record = trainer.step()
    assert trainer.stop_reason == "W_norm_ge_1" and "‖W‖₂ = 1.05 >= 1" in trainer.message
    assert record["forward_steps"] == 0 and math.isnan(record["loss"])


def test_solver_failure_stops_the_run():
    model, X, y = _problem()
    trainer = GDTrainer(model, X, y, GDConfig(lr=LR, tol=1e-14, max_iter=3))
    trainer.run(2)
    assert trainer.stop_reason == "forward_failed"
    assert "forward solve max_steps after 3 steps" in trainer.message


def test_float32_training_runs():
    model, X, y = _problem(dtype=torch.float32)
    records = GDTrainer(model, X, y, GDConfig(lr=LR, tol=1e-5)).run(5)
    assert len(records) == 5 and records[-1]["loss"] < records[0]["loss"]
    assert model.W.dtype == torch.float32


def test_bad_configuration_and_inputs():
    model, X, y = _problem()
    with pytest.raises(ValueError, match=r"`lr` must be in \(0"):
        GDConfig(lr=0.0)
    with pytest.raises(ValueError, match="`adjoint` must be one of 'C', 'V'"):
        GDConfig(lr=LR, adjoint="E")
    with pytest.raises(TypeError, match="`rank_n_updates` must be a bool"):
        GDConfig(lr=LR, rank_n_updates=1)
    with pytest.raises(TypeError, match="`model` must be a ReLUDEQ"):
        GDTrainer(torch.nn.Linear(2, 2), X, y, GDConfig(lr=LR))
    with pytest.raises(ValueError, match=r"`y` must have shape \(n,\)"):
        GDTrainer(model, X, y[:3], GDConfig(lr=LR))
    trainer = GDTrainer(model, X, y, GDConfig(lr=LR))
    with pytest.raises(ValueError, match="`steps` must be >= 0"):
        trainer.run(-1)
    state = trainer.state_dict()
    other = GDTrainer(model, X, y, GDConfig(lr=2 * LR))
    with pytest.raises(ValueError, match="was saved with config"):
        other.load_state_dict(state)
    with pytest.raises(ValueError, match="is missing keys"):
        other.load_state_dict({"config": {}})
    with pytest.raises(ValueError, match="checkpoint from an older version cannot be resumed"):
        trainer.load_state_dict({k: v for k, v in state.items() if k != "format"})


def test_no_function_of_the_fast_path_is_over_40_lines():
    """Every function of the fast path (kernel, caches, trainer) can be checked by eye."""
    src = Path(deqlab.__file__).parent
    files = [
        src / "models" / "relu_deq_solve.py",
        *sorted((src / "train" / "relu_deq").glob("*.py")),
    ]
    lengths = {
        f"{path.name}:{node.name}": node.end_lineno - node.lineno + 1
        for path in files
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef)
    }
    assert len(lengths) > 50 and max(lengths.values()) <= 40, max(
        lengths.items(), key=lambda kv: kv[1]
    )

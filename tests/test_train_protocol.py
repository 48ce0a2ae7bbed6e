"""The trainer protocol (deqlab/train/protocol.py) on a real trainer: FullBatchGD on least
squares, whose GD iterates have a closed form (run_resumable: tests/test_train_resumable.py)."""

import math

import pytest
import torch

from deqlab.train.protocol import Trainer
from helpers import least_squares_gd


def test_run_takes_the_steps_and_calls_back_with_each_record():
    trainer, X, y = least_squares_gd(lr=0.01)
    seen = []
    records = trainer.run(5, callback=seen.append)
    assert seen == records == trainer.records and [r["step"] for r in records] == [0, 1, 2, 3, 4]
    M, w = torch.eye(3) - 2 * 0.01 * X.T @ X, torch.zeros(3)
    for record in records:  # the loss at the closed-form iterate, in float64
        assert record["loss"] == pytest.approx(float(((X @ w - y) ** 2).sum()), rel=1e-12)
        w = M @ w + 2 * 0.01 * X.T @ y
    torch.testing.assert_close(trainer.model.weight[0].detach(), w, rtol=1e-12, atol=0)
    assert trainer.evaluate()["step"] == 5 == trainer.step_count


def test_a_stop_ends_run_early_and_step_then_raises():
    trainer, _, _ = least_squares_gd(lr=10.0)  # far past 1/λ_max(XᵀX): the loss blows up
    records = trainer.run(1000)
    assert trainer.stopped and trainer.stop_reason == "loss_not_finite"
    assert len(records) < 1000 and not math.isfinite(records[-1]["loss"])
    assert trainer.message.startswith(f"the loss diverged at step {trainer.step_count} ")
    assert trainer.run(3) == []
    with pytest.raises(RuntimeError, match=r"^the run has stopped \(loss_not_finite\): "):
        trainer.step()
    with pytest.raises(ValueError, match="`steps` must be"):
        least_squares_gd()[0].run(-1)


def test_state_round_trip_resumes_identically():
    full, _, _ = least_squares_gd()
    full.run(6)
    part, _, _ = least_squares_gd()
    part.run(2)
    again, _, _ = least_squares_gd()
    again.run(1)  # a state loaded over another one replaces it
    again.load_state_dict(part.state_dict())
    again.run(4)
    assert again.records == full.records and again.step_count == 6


def test_a_trainer_must_say_how_to_step_and_resume():
    class Incomplete(Trainer):
        def step(self):
            return {}

    with pytest.raises(TypeError, match="abstract"):
        Incomplete()

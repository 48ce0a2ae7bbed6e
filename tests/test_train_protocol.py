"""The trainer protocol (train.protocol.Trainer) and run_resumable (train.resumable), on a
real trainer: FullBatchGD on least squares, whose GD iterates have a closed form."""

import math

import pytest
import torch

from deqlab.experiments.base import TaskContext
from deqlab.train.protocol import Trainer
from deqlab.train.resumable import run_resumable
from deqlab.train.sgd import FullBatchGD


def _least_squares(lr=0.1, seed=0):
    """GD on L(w) = ‖Xw − y‖², X (8, 3): w(k) = M^k w(0) + Σ_j<k M^j 2ηXᵀy, M = I − 2ηXᵀX."""
    gen = torch.Generator().manual_seed(seed)
    X, y = torch.randn(8, 3, generator=gen), torch.randn(8, generator=gen)
    model = torch.nn.Linear(3, 1, bias=False)
    with torch.no_grad():
        model.weight.zero_()
    trainer = FullBatchGD(model, lambda: ((model(X)[:, 0] - y) ** 2).sum(), lr=lr)
    return trainer, X, y


def test_run_takes_the_steps_and_calls_back_with_each_record():
    trainer, X, y = _least_squares(lr=0.01)
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
    trainer, _, _ = _least_squares(lr=10.0)  # far past 1/λ_max(XᵀX): the loss blows up
    records = trainer.run(1000)
    assert trainer.stopped and trainer.stop_reason == "loss_not_finite"
    assert len(records) < 1000 and not math.isfinite(records[-1]["loss"])
    assert trainer.message.startswith(f"the loss diverged at step {trainer.step_count} ")
    assert trainer.run(3) == []
    with pytest.raises(RuntimeError, match=r"^the run has stopped \(loss_not_finite\): "):
        trainer.step()
    with pytest.raises(ValueError, match="`steps` must be"):
        _least_squares()[0].run(-1)


def test_state_round_trip_resumes_identically():
    full, _, _ = _least_squares()
    full.run(6)
    part, _, _ = _least_squares()
    part.run(2)
    again, _, _ = _least_squares()
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


def _context(store, every, crash_after=None):
    def save(state, rows):
        store["saved"] = (state, list(rows))
        store["saves"] = store.get("saves", 0) + 1
        if store["saves"] == crash_after:
            raise KeyboardInterrupt  # the task dies right after a checkpoint

    return TaskContext(device="cpu", checkpoint_every=every, load=lambda: store.get("saved"),
                       save=save)  # fmt: skip


def test_run_resumable_resumes_with_the_records_and_rows_of_an_uninterrupted_run():
    def run(store, crash_after=None):
        trainer, _, _ = _least_squares(lr=0.01)
        rows = []
        w0 = lambda: float(trainer.model.weight[0, 0].detach())  # noqa: E731
        before = lambda k: rows.append({"before": k, "w0": w0()})  # noqa: E731
        after = lambda record: rows.append({"after": record["step"], "w0": w0()})  # noqa: E731
        ctx = _context(store, 3, crash_after)
        run_resumable(trainer, 7, ctx, before_step=before, after_step=after, rows=rows)
        return trainer.records, rows

    full = run({})
    store = {}
    with pytest.raises(KeyboardInterrupt):
        run(store, crash_after=1)
    assert store["saved"][0]["step_count"] == 3 and len(store["saved"][1]) == 6
    assert run(store) == full and len(full[0]) == 7
    order = [(k, tag) for k in range(7) for tag in ("before", "after")]
    assert [(r.get("before", r.get("after")), next(iter(r))) for r in full[1]] == order
    # after_step sees θ(k+1): the next before_step measures the same parameters
    assert all(a["w0"] == b["w0"] for a, b in zip(full[1][1::2], full[1][2::2], strict=False))

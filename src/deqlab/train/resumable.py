"""Running a trainer as an experiment task: resume from the last checkpoint, checkpoint
every ``ctx.checkpoint_every`` steps, report progress.

One loop for every trainer of the :class:`~deqlab.train.protocol.Trainer` protocol, so an
interrupted task resumes with the numbers of an uninterrupted one (the trainer's
``state_dict`` holds everything the next step needs).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from deqlab.train.protocol import Record, Trainer

if TYPE_CHECKING:  # the experiments import the trainers
    from deqlab.experiments.base import Row, TaskContext


def run_resumable(
    trainer: Trainer,
    steps: int,
    ctx: TaskContext,
    *,
    before_step: Callable[[int], object] | None = None,
    after_step: Callable[[Record], object] | None = None,
    rows: list[Row] | None = None,
) -> list[Record]:
    """Step ``trainer`` until ``step_count == steps`` or it stops; return its records.

    ``before_step(k)`` runs before step ``k`` (a measurement at θ(k)); ``after_step(record)``
    runs after each step, before its checkpoint (a measurement at θ(k+1)); ``rows``, a list
    the caller fills from either, is saved with every checkpoint and replaced by the saved
    one on resuming.
    """
    rows = [] if rows is None else rows
    resumed = ctx.resume()
    if resumed is not None:
        trainer.load_state_dict(resumed[0])
        rows[:] = resumed[1]
    while trainer.step_count < steps and not trainer.stopped:
        if before_step is not None:
            before_step(trainer.step_count)
        record = trainer.step()
        if after_step is not None:
            after_step(record)
        if trainer.step_count % ctx.checkpoint_every == 0:
            ctx.checkpoint(trainer.state_dict(), list(rows))
        ctx.progress(trainer.step_count, steps)
    return trainer.records

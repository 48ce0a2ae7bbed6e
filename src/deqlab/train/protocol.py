"""One protocol for every trainer: ``step() -> record``, ``records``, ``step_count``, a stop
reason, ``run(steps, callback)`` and ``state_dict``/``load_state_dict``.

An experiment drives any trainer the same way (:func:`deqlab.train.resumable.run_resumable`
checkpoints between steps), so a trainer only says how one step is taken and what resuming
needs. A trainer whose records describe the parameters *before* each update may also offer
``evaluate()``: the record of the current parameters without an update, so that a run of
``k`` steps can end with the record of step ``k``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from deqlab._checks import check_int

Record = dict[str, Any]


class Trainer(ABC):
    """A training loop taken one step at a time.

    ``records`` holds the dicts of the steps taken (``step`` is its index; a trainer may keep
    only every so many, and says so). ``step_count`` is the number of updates applied.
    ``stop_reason`` is None while the run may go on; a step that ends it sets
    ``stop_reason`` (a short identifier such as ``"loss_not_finite"``) and ``message`` (one
    sentence naming the step and what happened) and still returns its record.
    """

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.step_count = 0
        self.stop_reason: str | None = None
        self.message = ""

    @property
    def stopped(self) -> bool:
        """True once a step has ended the run; ``step`` then raises."""
        return self.stop_reason is not None

    @abstractmethod
    def step(self) -> Record:
        """Take one step; append its record to ``records`` and return it."""

    def stop(self, reason: str, message: str) -> None:
        """End the run: no further step may be taken."""
        self.stop_reason, self.message = reason, message

    def check_running(self) -> None:
        """Raise if the run has stopped (the first line of every ``step``)."""
        if self.stopped:
            raise RuntimeError(f"the run has stopped ({self.stop_reason}): {self.message}")

    def run(self, steps: int, callback: Callable[[Record], object] | None = None) -> list[Record]:
        """Take up to ``steps`` steps (fewer if the run stops); return their records."""
        steps = check_int("steps", steps, min_value=0)
        out: list[Record] = []
        for _ in range(steps):
            if self.stopped:
                break
            out.append(self.step())
            if callback is not None:
                callback(out[-1])
        return out

    def protocol_state(self) -> dict[str, Any]:
        """The protocol's own part of ``state_dict``: records, step count and stop reason."""
        return {
            "records": [dict(r) for r in self.records],
            "step_count": self.step_count,
            "stop_reason": self.stop_reason,
            "message": self.message,
        }

    def load_protocol_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`protocol_state` saved."""
        self.records = [dict(r) for r in state["records"]]
        self.step_count = int(state["step_count"])
        self.stop_reason = state["stop_reason"]
        self.message = state["message"]

    @abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume with identical numbers (includes protocol_state)."""

    @abstractmethod
    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a state from :meth:`state_dict`."""

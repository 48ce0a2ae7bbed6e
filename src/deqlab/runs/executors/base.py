"""What every executor shares: a task's spec and result, running one task, the interface.

:func:`run_task` runs one :class:`TaskSpec` from its checkpoint (or from scratch) and returns
a :class:`TaskResult`; a task that raises is a ``failed`` result with its error text (a
failing task never stops the others). An :class:`Executor` runs many and hands each result
to a callback as soon as it is ready.
"""

from __future__ import annotations

import os
import time
import traceback
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from deqlab.experiments.base import Experiment, Row, Task, TaskContext

ProgressFn = Callable[[str, int, int], None]
ResultFn = Callable[["TaskResult"], None]
SaveFn = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class TaskSpec:
    """Everything a worker needs to run one task (picklable: classes travel by reference)."""

    experiment_cls: type[Experiment]
    config: Any
    task: Task
    run_path: str
    device: str
    checkpoint_every: int


@dataclass(frozen=True)
class TaskResult:
    """The outcome of one task: ``status`` is ``finished`` or ``failed``."""

    key: str
    status: str
    rows: list[Row] = field(default_factory=list)
    error: str | None = None
    traceback: str | None = None
    wall_s: float = 0.0
    reused: bool = False


def failed_result(key: str, err: BaseException, wall_s: float = 0.0) -> TaskResult:
    """A ``failed`` result of task ``key``: the first line of ``err`` and its traceback."""
    return TaskResult(
        key=key,
        status="failed",
        error=f"{type(err).__name__}: {err}".splitlines()[0],
        traceback="".join(traceback.format_exception(err)),
        wall_s=wall_s,
    )


def run_task(
    spec: TaskSpec,
    checkpoint: dict[str, Any] | None,
    save: SaveFn,
    progress: ProgressFn | None = None,
) -> TaskResult:
    """Run one task from ``checkpoint`` (or from scratch); ``save`` persists each checkpoint
    ``{"done", "rows", "state"}``, the last one with ``done`` True and the task's rows."""
    key = spec.task.key
    start = time.perf_counter()
    if checkpoint is not None and checkpoint["done"]:
        return TaskResult(key=key, status="finished", rows=checkpoint["rows"], reused=True)

    def save_state(state: Any, rows: list[Row]) -> None:
        save({"done": False, "rows": list(rows), "state": state})

    def load() -> tuple[Any, list[Row]] | None:
        return None if checkpoint is None else (checkpoint["state"], list(checkpoint["rows"]))

    ctx = TaskContext(
        device=spec.device,
        checkpoint_every=spec.checkpoint_every,
        load=load,
        save=save_state,
        progress=(lambda done, total: progress(key, done, total)) if progress else _no_progress,
    )
    try:
        rows = spec.experiment_cls().run_task(spec.config, spec.task, ctx)
        save({"done": True, "rows": rows, "state": None})  # rows suffice
    except Exception as err:
        return failed_result(key, err, time.perf_counter() - start)
    return TaskResult(key=key, status="finished", rows=rows, wall_s=time.perf_counter() - start)


def _no_progress(done: int, total: int) -> None:
    return None


class Executor(ABC):
    """Runs task specs and reports each result (and step progress, where it can)."""

    @abstractmethod
    def run(self, specs: Sequence[TaskSpec], on_result: ResultFn, on_progress: ProgressFn) -> None:
        """Run every spec; call ``on_result`` once per spec, in completion order."""


def default_workers() -> int:
    """One worker per CPU core."""
    return os.cpu_count() or 1

"""Executors: run the tasks of a sweep in this process, a local process pool, or on Ray.

Every executor runs each :class:`TaskSpec` (:func:`run_task`) and hands each
:class:`TaskResult` to a callback as soon as it is ready. A task that raises is returned as a
``failed`` result with its error text; the sweep goes on (a failing task never stops the
others). Tasks resume from their checkpoints, and a task whose checkpoint says ``done`` is
not recomputed (a corrupt checkpoint is set aside by the store and its task restarts).

:mod:`.base` holds what they share, :mod:`.local` the process pool, :mod:`.ray` Ray.
"""

from __future__ import annotations

from deqlab._checks import check_choice
from deqlab.runs.executors.base import Executor, TaskResult, TaskSpec, run_task
from deqlab.runs.executors.local import LocalExecutor, execute_task
from deqlab.runs.executors.ray import RayExecutor

EXECUTORS = ("local", "ray")

__all__ = [
    "EXECUTORS",
    "Executor",
    "LocalExecutor",
    "RayExecutor",
    "TaskResult",
    "TaskSpec",
    "execute_task",
    "make_executor",
    "run_task",
]


def make_executor(kind: str, *, workers: int | None = None, address: str | None = None) -> Executor:
    """The executor named ``kind`` (``local`` or ``ray``); ``workers=None``: one per core."""
    check_choice("executor", kind, EXECUTORS)
    if kind == "ray":
        return RayExecutor(workers, address)
    if address:
        raise ValueError("`address` is only used by the ray executor; got --executor local")
    return LocalExecutor(workers)

"""A run-time estimate from costs measured now, on this machine (``deqlab show --measure S``).

What is measured: the preset's own tasks at the preset's own config, run in this process
(one thread pool, no checkpoints written) and stopped once they have reported a few steps
through ``ctx.progress(done, total)``. For a task ``k`` the clock gives ``f_k``, the seconds
to its first report (set-up, data, its first ``d_k`` steps), and ``s_k``, the mean seconds
of a step between its later reports; its total ``T_k`` is the ``total`` it reports. The
estimate (ours) is

    t ≈ Σ_k [ f_k + (T_k − d_k) s_k ],

with the tasks not sampled within the budget given the mean of the sampled ones. It is
a serial time: ``--workers W`` divides it by at most ``min(W, tasks)``. It assumes that the
steps of a task cost alike (warm-started solvers make later steps cheaper: then it is an
over-estimate) and that the machine's load stays as it is now. A task that reports no
step, or whose first step takes longer than its share of the budget, is not extrapolated:
the estimate then says what it could not measure, or gives a lower bound.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from deqlab._format import format_seconds
from deqlab.experiments.base import Experiment, Task, TaskContext

#: Steps timed in each sampled task (the first one, then the mean of the others).
SAMPLED_STEPS = 3
#: Tasks sampled at most: the first, the middle and the last (sweeps grow along their tasks).
SAMPLED_TASKS = 3


class _Enough(BaseException):
    """Raised from the progress callback once a task has been timed (not an Exception:
    an experiment's own ``except Exception`` does not swallow it)."""


class _OutOfTime(BaseException):
    """Raised by the timer when a task has used its share of the budget."""


@dataclass(frozen=True)
class TaskCost:
    """What the clock said of one task: ``first_s`` to its first report (``first_done``
    steps), ``step_s`` per later step (None when it reported once only), ``total`` steps
    it would run; ``bound``: the budget stopped it before its first report (``first_s`` is
    a lower bound)."""

    key: str
    first_s: float
    first_done: int
    step_s: float | None
    total: int
    bound: bool = False

    @property
    def seconds(self) -> float:
        """``f + (T − d) s`` (``f`` alone when no later step was timed)."""
        return self.first_s + (self.total - self.first_done) * (self.step_s or 0.0)


def sampled_tasks(tasks: list[Task]) -> list[Task]:
    """The first, middle and last task (fewer when there are fewer)."""
    picks = sorted({0, len(tasks) // 2, len(tasks) - 1})[:SAMPLED_TASKS]
    return [tasks[i] for i in picks] if tasks else []


def time_task(experiment: Experiment, config: Any, task: Task, budget_s: float) -> TaskCost | None:
    """Run ``task`` until it has reported :data:`SAMPLED_STEPS` steps (or its end, or
    ``budget_s`` seconds); None when it reported no step and ended within the budget."""
    marks: list[tuple[float, int, int]] = []  # (clock, done, total) of each report

    def progress(done: int, total: int) -> None:
        marks.append((time.perf_counter(), done, total))
        if len(marks) >= SAMPLED_STEPS:
            raise _Enough

    ctx = TaskContext(device="cpu", checkpoint_every=1 << 30, load=lambda: None,
                      save=lambda state, rows: None, progress=progress)  # fmt: skip
    start = time.perf_counter()
    try:
        with _deadline(budget_s):
            experiment.run_task(config, task, ctx)
    except _Enough:
        pass
    except _OutOfTime:
        if not marks:
            return TaskCost(task.key, time.perf_counter() - start, 0, None, 0, bound=True)
    if not marks:
        return None
    (t0, d0, _), (t1, d1, total) = marks[0], marks[-1]
    step_s = (t1 - t0) / (d1 - d0) if d1 > d0 else None
    return TaskCost(task.key, t0 - start, d0, step_s, max(total, d1))


@contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """Raise :class:`_OutOfTime` after ``seconds`` (main thread only; elsewhere no limit)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise _OutOfTime

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def measure_run_time(experiment: Experiment, config: Any, budget_s: float) -> dict[str, Any]:
    """The estimate of the module docstring, as ``deqlab show`` reports it: ``source``
    ``"measured"``, ``seconds`` (None when nothing could be timed), ``lower_bound``,
    ``tasks`` (each sampled task's :class:`TaskCost` fields) and a one-line ``text``."""
    tasks = experiment.tasks(config)
    picked = sampled_tasks(tasks)
    if not picked:
        return _unmeasured("it has no tasks")
    share = budget_s / len(picked)
    try:
        costs = [c for t in picked if (c := time_task(experiment, config, t, share)) is not None]
    except Exception as err:  # a task that cannot run here (e.g. a missing data set)
        why = " ".join(f"{type(err).__name__}: {err}".split())[:200]
        return _unmeasured(f"a task failed here ({why})")
    if not costs:
        return _unmeasured("its tasks report no steps to time")
    seconds = sum(c.seconds for c in costs) / len(costs) * len(tasks)
    bound = any(c.bound for c in costs)
    return {
        "source": "measured",
        "seconds": seconds,
        "lower_bound": bound,
        "tasks": [c.__dict__ | {"seconds": c.seconds} for c in costs],
        "text": f"{'more than' if bound else 'about'} {format_seconds(seconds)} one task at a "
        f"time (measured now on this machine: {_what_was_timed(costs, len(tasks), share)})",
    }


def _what_was_timed(costs: list[TaskCost], n_tasks: int, share: float) -> str:
    late = sum(c.bound for c in costs)
    within = format_seconds(share)
    if late == len(costs):
        return (f"none of the {late} task(s) timed reached its first step within {within}; "
                "a lower bound: a larger --measure times it")  # fmt: skip
    per_step = [c.step_s for c in costs if c.step_s is not None]
    steps = f", {format_seconds(min(per_step))} to {format_seconds(max(per_step))} a step"
    return (
        f"the first steps of {len(costs) - late} of {n_tasks} task(s)"
        + (steps if per_step else "")
        + (f"; {late} did not reach a step within {within}: a lower bound" if late else "")
        + "; extrapolated to each task's steps, assuming its steps cost alike"
    )


def _unmeasured(why: str) -> dict[str, Any]:
    return {"source": "measured", "seconds": None, "lower_bound": False, "tasks": [],
            "text": f"not measured: {why}"}  # fmt: skip

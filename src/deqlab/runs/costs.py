"""A run-time estimate from costs measured now, on this machine (``deqlab show --measure S``).

What ``deqlab reproduce`` spends, and what is timed here for each part:

- start-up: the interpreter and the imports of deqlab, torch and the experiment. Timed as
  the age of this process when it is the ``deqlab`` command (``startup_s``, passed by the
  CLI; the same imports), else not counted;
- the worker processes: with more than one task, the default executor starts
  ``W = min(cores, tasks)`` processes, each paying the same imports (in parallel);
- the tasks: the preset's own tasks at the preset's own config, run in this process (no
  checkpoints written). For a task ``k`` the clock gives ``f_k``, the seconds to its first
  report through ``ctx.progress(done, total)`` (set-up, data, its first ``d_k`` steps), and
  ``s_k``, the mean seconds of a step between its later reports; its total ``T_k`` is the
  ``total`` it reports. A task that ends within its share of the budget is timed whole;
  one that would not is stopped after :data:`SAMPLED_STEPS` reports and extrapolated
  (ours): ``t_k ≈ f_k + (T_k − d_k) s_k``. Tasks not sampled get the mean of the sampled
  ones; the ``W`` workers take the tasks longest first;
- the statements, figures and report: timed on the tasks' rows in a temporary directory,
  when every task ended within the budget (else not counted, and said so).

It assumes the steps of a task cost alike (warm-started solvers make later steps cheaper:
then it over-estimates) and that the machine's load stays as it is now. A task that
reports no step and does not end within its share, or whose first step takes longer than
its share, is not extrapolated: the estimate then gives a lower bound.
"""

from __future__ import annotations

import os
import signal
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from deqlab._format import format_seconds
from deqlab.experiments.base import Experiment, Row, Task, TaskContext

#: Steps timed in a sampled task that will not end within its share of the budget.
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
    it would run; ``elapsed_s``: the whole task, when it ended within its share (its
    ``rows`` kept); ``bound``: the budget stopped it before its first report (``first_s``
    is a lower bound)."""

    key: str
    first_s: float
    first_done: int
    step_s: float | None
    total: int
    bound: bool = False
    elapsed_s: float | None = None
    rows: list[Row] | None = field(default=None, repr=False)

    @property
    def seconds(self) -> float:
        """The whole task when timed whole, else ``f + (T − d) s`` (``f`` alone when no
        later step was timed)."""
        if self.elapsed_s is not None:
            return self.elapsed_s
        return self.first_s + (self.total - self.first_done) * (self.step_s or 0.0)

    def as_dict(self) -> dict[str, Any]:
        """The timings as JSON values (without the rows)."""
        return {k: v for k, v in asdict(self).items() if k != "rows"} | {"seconds": self.seconds}


def sampled_tasks(tasks: list[Task]) -> list[Task]:
    """The first, middle and last task (fewer when there are fewer)."""
    picks = sorted({0, len(tasks) // 2, len(tasks) - 1})[:SAMPLED_TASKS]
    return [tasks[i] for i in picks] if tasks else []


def time_task(experiment: Experiment, config: Any, task: Task, budget_s: float) -> TaskCost:
    """Run ``task`` to its end if that fits in ``budget_s`` seconds, else until it has
    reported :data:`SAMPLED_STEPS` steps (or the budget is spent). A task that fails
    while timed raises: the run would fail there too."""
    marks: list[tuple[float, int, int]] = []  # (clock, done, total) of each report
    start = time.perf_counter()

    def progress(done: int, total: int) -> None:
        marks.append((time.perf_counter(), done, total))
        if len(marks) >= SAMPLED_STEPS and _projected(start, marks) > budget_s:
            raise _Enough

    ctx = TaskContext(device="cpu", checkpoint_every=1 << 30, load=lambda: None,
                      save=lambda state, rows: None, progress=progress)  # fmt: skip
    rows, elapsed = None, None
    try:
        with _deadline(budget_s):
            rows = experiment.run_task(config, task, ctx)
        elapsed = time.perf_counter() - start
    except _Enough:
        pass
    except _OutOfTime:
        if not marks:
            return TaskCost(task.key, time.perf_counter() - start, 0, None, 0, bound=True)
    if not marks:  # ended without a report: timed whole
        return TaskCost(task.key, elapsed, 0, None, 0, elapsed_s=elapsed, rows=rows)
    (t0, d0, _), (t1, d1, total) = marks[0], marks[-1]
    step_s = (t1 - t0) / (d1 - d0) if d1 > d0 else None
    return TaskCost(task.key, t0 - start, d0, step_s, max(total, d1), elapsed_s=elapsed, rows=rows)


def _projected(start: float, marks: list[tuple[float, int, int]]) -> float:
    """Seconds from ``start`` the task would take, extrapolated from its reports."""
    (t0, d0, _), (t1, d1, total) = marks[0], marks[-1]
    per_step = (t1 - t0) / (d1 - d0) if d1 > d0 else 0.0
    return t1 - start + max(0, total - d1) * per_step


@contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """Raise :class:`_OutOfTime` after ``seconds`` (main thread only; elsewhere no limit).

    Never inside an import: an exception there leaves the module half-initialised in
    ``sys.modules`` (torch imports sympy and torch._dynamo lazily, on a task's first use),
    and every later task of this process fails on it; the timer waits for the import.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        if _importing(frame):
            signal.setitimer(signal.ITIMER_REAL, 0.01)
            return
        raise _OutOfTime

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _importing(frame: Any) -> bool:
    """Whether ``frame`` runs inside an import (a frame of importlib's bootstrap below it)."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def process_age() -> float | None:
    """Seconds since this process started (Linux's /proc), or None where it cannot be read."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[-1].split()
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return max(0.0, uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


def _time_tasks(
    experiment: Experiment, config: Any, tasks: list[Task], budget_s: float
) -> list[TaskCost]:
    """The sampled tasks, each with its share of the budget; then, when they all ended and
    the others should fit in what is left, the others too (to time the finish on all rows)."""
    picked = sampled_tasks(tasks)
    start = time.perf_counter()
    share = budget_s / len(picked)
    costs = [time_task(experiment, config, t, share) for t in picked]
    rest = [t for t in tasks if t not in picked]
    mean = statistics.fmean(c.seconds for c in costs)
    for task in rest:
        left = budget_s - (time.perf_counter() - start)
        if any(c.elapsed_s is None for c in costs) or mean > left:
            break
        costs.append(time_task(experiment, config, task, left))
    return costs


def _time_finish(experiment: Experiment, config: Any, rows: list[Row]) -> float:
    """Seconds to derive the statements and draw the figures from ``rows`` (as a run's end
    does, importing the report's modules), in a temporary run directory."""
    from deqlab.runs.rundir import RunDir
    from deqlab.runs.summary import derive_summary

    start = time.perf_counter()
    import deqlab.report  # noqa: F401  (a run's end imports it: part of its cost)

    with tempfile.TemporaryDirectory() as tmp:
        derive_summary(experiment, config, RunDir(Path(tmp)), rows)
    return time.perf_counter() - start


def _makespan(seconds: list[float], workers: int) -> float:
    """Wall time of ``seconds`` of tasks on ``workers`` processes, longest first to the
    least loaded."""
    loads = [0.0] * max(1, workers)
    for s in sorted(seconds, reverse=True):
        loads[loads.index(min(loads))] += s
    return max(loads)


def measure_run_time(
    experiment: Experiment,
    config: Any,
    budget_s: float,
    *,
    startup_s: float | None = None,
    workers: int | None = None,
) -> dict[str, Any]:
    """The estimate of the module docstring, as ``deqlab show`` reports it: ``source``
    ``"measured"``, ``seconds`` (the whole run; None when nothing could be timed),
    ``lower_bound``, ``parts`` (each part's seconds, None where not timed), ``tasks``
    (each timed task's :class:`TaskCost` fields) and a one-line ``text``.

    ``startup_s``: this process's start-up, when it is the ``deqlab`` command; ``workers``:
    the pool ``reproduce`` would use (default: one per core).
    """
    from deqlab.runs.executors.base import default_workers

    tasks = experiment.tasks(config)
    if not tasks:
        return _unmeasured("it has no tasks")
    try:
        costs = _time_tasks(experiment, config, tasks, budget_s)
    except Exception as err:  # a task that cannot run here (e.g. a missing data set)
        why = " ".join(f"{type(err).__name__}: {err}".split())[:200]
        return _unmeasured(f"a task failed here ({why})")
    timed = {c.key: c.seconds for c in costs}
    mean = statistics.fmean(timed.values())
    per_task = [timed.get(t.key, mean) for t in tasks]
    whole = len(costs) == len(tasks) and all(c.rows is not None for c in costs)
    finish_s = (
        _time_finish(experiment, config, [r for c in costs for r in c.rows]) if whole else None
    )
    pool = min(default_workers() if workers is None else workers, len(tasks))
    parts = {
        "startup_s": startup_s,
        "workers": pool,
        "workers_start_s": (startup_s if pool > 1 else 0.0),
        "tasks_serial_s": sum(per_task),
        "tasks_s": _makespan(per_task, pool),
        "finish_s": finish_s,
    }
    added = ("startup_s", "workers_start_s", "tasks_s", "finish_s")
    seconds = sum(parts[k] or 0.0 for k in added)
    bound = any(c.bound for c in costs)
    return {
        "source": "measured",
        "seconds": seconds,
        "lower_bound": bound,
        "parts": parts,
        "tasks": [c.as_dict() for c in costs],
        "text": f"{'more than' if bound else 'about'} {format_seconds(seconds)} "
        f"(measured now on this machine: {_parts_text(parts)}; "
        f"{_what_was_timed(costs, len(tasks), budget_s / len(sampled_tasks(tasks)))})",
    }


def _parts_text(parts: dict[str, Any]) -> str:
    """What the estimate adds up, and what it leaves out."""
    said = []
    if parts["startup_s"] is not None:
        said.append(f"{format_seconds(parts['startup_s'])} to start deqlab")
        if parts["workers"] > 1:
            said.append(f"as much to start {parts['workers']} worker processes")
    pool = parts["workers"]
    tasks = f"{format_seconds(parts['tasks_s'])} of tasks"
    if pool > 1:
        tasks += f" on {pool} workers ({format_seconds(parts['tasks_serial_s'])} one at a time)"
    said.append(tasks)
    if parts["finish_s"] is not None:
        said.append(f"{format_seconds(parts['finish_s'])} for the statements and figures")
    else:
        said.append("plus the statements and figures, not timed (not every task ended)")
    return ", ".join(said)


def _what_was_timed(costs: list[TaskCost], n_tasks: int, share: float) -> str:
    late = sum(c.bound for c in costs)
    within = format_seconds(share)
    if late == len(costs):
        return (f"none of the {late} task(s) timed reached its first step within {within}; "
                "a lower bound: a larger --measure times it")  # fmt: skip
    ended = sum(c.elapsed_s is not None for c in costs)
    extrapolated = len(costs) - late - ended
    clauses = [f"{ended} of {n_tasks} task(s) run to their end"] if ended else []
    if extrapolated:
        per_step = [c.step_s for c in costs if c.step_s is not None and c.elapsed_s is None]
        steps = ""
        if per_step:  # none when each task reported once only
            steps = f", {format_seconds(min(per_step))} to {format_seconds(max(per_step))} a step"
        clauses.append(
            f"the first steps of {extrapolated} of {n_tasks} task(s){steps}, extrapolated to "
            "each task's steps, assuming its steps cost alike"
        )
    if late:
        clauses.append(f"{late} did not reach a step within {within}: a lower bound")
    return "; ".join(clauses)


def _unmeasured(why: str) -> dict[str, Any]:
    return {"source": "measured", "seconds": None, "lower_bound": False, "tasks": [],
            "parts": None, "text": f"not measured: {why}"}  # fmt: skip

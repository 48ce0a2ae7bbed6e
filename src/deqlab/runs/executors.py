"""Executors: run the tasks of a sweep in this process, a local process pool, or on Ray.

Every executor calls :func:`execute_task` on each :class:`TaskSpec` and hands each
:class:`TaskResult` to a callback as soon as it is ready. A task that raises is returned as a
``failed`` result with its error text; the sweep goes on (a failing task never stops the
others). Tasks resume from their checkpoints, and a task whose checkpoint says ``done`` is
not recomputed.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import time
import traceback
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from deqlab._checks import check_choice, check_int
from deqlab.experiments.base import Experiment, Row, Task, TaskContext
from deqlab.runs.store import RunDir

ProgressFn = Callable[[str, int, int], None]
ResultFn = Callable[["TaskResult"], None]

EXECUTORS = ("local", "ray")


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


def _failed(key: str, err: BaseException, wall_s: float = 0.0) -> TaskResult:
    return TaskResult(
        key=key,
        status="failed",
        error=f"{type(err).__name__}: {err}".splitlines()[0],
        traceback="".join(traceback.format_exception(err)),
        wall_s=wall_s,
    )


def execute_task(spec: TaskSpec, progress: ProgressFn | None = None) -> TaskResult:
    """Run one task with checkpointing; return its rows, or its error if it raised."""
    run = RunDir(Path(spec.run_path))
    key = spec.task.key
    start = time.perf_counter()
    try:
        checkpoint = run.load_checkpoint(key)
    except Exception as err:  # a corrupt checkpoint fails this task only
        return _failed(key, err)
    if checkpoint is not None and checkpoint["done"]:
        return TaskResult(key=key, status="finished", rows=checkpoint["rows"], reused=True)

    def save(state: Any, rows: list[Row]) -> None:
        run.save_checkpoint(key, {"done": False, "rows": list(rows), "state": state})

    def load() -> tuple[Any, list[Row]] | None:
        return None if checkpoint is None else (checkpoint["state"], list(checkpoint["rows"]))

    ctx = TaskContext(
        device=spec.device,
        checkpoint_every=spec.checkpoint_every,
        load=load,
        save=save,
        progress=(lambda done, total: progress(key, done, total)) if progress else _no_progress,
    )
    try:
        rows = spec.experiment_cls().run_task(spec.config, spec.task, ctx)
        run.save_checkpoint(key, {"done": True, "rows": rows, "state": None})  # rows suffice
    except Exception as err:
        return _failed(key, err, time.perf_counter() - start)
    return TaskResult(key=key, status="finished", rows=rows, wall_s=time.perf_counter() - start)


def _no_progress(done: int, total: int) -> None:
    return None


class Executor(ABC):
    """Runs task specs and reports each result (and step progress, where it can)."""

    @abstractmethod
    def run(self, specs: Sequence[TaskSpec], on_result: ResultFn, on_progress: ProgressFn) -> None:
        """Run every spec; call ``on_result`` once per spec, in completion order."""


# --- local: in this process (1 worker) or a spawn process pool ---------------------------

_worker_queue: Any = None


def _init_worker(queue: Any, threads: int) -> None:
    global _worker_queue
    _worker_queue = queue
    torch.set_num_threads(threads)


def _queue_progress(key: str, done: int, total: int) -> None:
    _worker_queue.put((key, done, total))


def _execute_in_worker(spec: TaskSpec) -> TaskResult:
    return execute_task(spec, _queue_progress)


def default_workers() -> int:
    """One worker per CPU core."""
    return os.cpu_count() or 1


class LocalExecutor(Executor):
    """``workers == 1``: tasks run one after the other in this process (with its torch
    threads). Otherwise a pool of ``min(workers, tasks)`` processes started with ``spawn``
    (safe with torch's thread pools), each using ``cpu_count // workers`` torch threads.
    ``workers=None``: one process per CPU core.

    Small matrix products gain little from threads, so processes are usually much faster
    (ling2023-fig1 quick, 2 busy cores: 43 s with 2 processes of 1 thread against 184 s in
    one process of 2 threads). Numbers are reproducible for a fixed thread count: resume a
    run with the same ``workers`` to get bit-identical results.
    """

    def __init__(self, workers: int | None = None) -> None:
        self.workers = (
            default_workers() if workers is None else check_int("workers", workers, min_value=1)
        )

    def run(self, specs: Sequence[TaskSpec], on_result: ResultFn, on_progress: ProgressFn) -> None:
        workers = min(self.workers, len(specs))
        if workers <= 1:
            for spec in specs:
                on_result(execute_task(spec, on_progress))
            return
        context = multiprocessing.get_context("spawn")
        queue = context.Queue()
        threads = max(1, (os.cpu_count() or 1) // workers)
        with ProcessPoolExecutor(
            workers, mp_context=context, initializer=_init_worker, initargs=(queue, threads)
        ) as pool:
            pending: dict[Future[TaskResult], TaskSpec] = {
                pool.submit(_execute_in_worker, spec): spec for spec in specs
            }
            try:
                while pending:
                    done, _ = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
                    _drain(queue, on_progress)
                    for future in done:
                        spec = pending.pop(future)
                        try:
                            result = future.result()
                        except Exception as err:  # the worker process died
                            result = _failed(spec.task.key, err)
                        on_result(result)
            except BaseException:
                pool.shutdown(wait=False, cancel_futures=True)
                raise


def _drain(queue: Any, on_progress: ProgressFn) -> None:
    while not queue.empty():
        try:
            on_progress(*queue.get_nowait())
        except Exception:  # queue.Empty: another reader raced us; nothing to report
            return


# --- Ray ----------------------------------------------------------------------------------


class RayExecutor(Executor):
    """Tasks as Ray remote functions (one CPU each; and one GPU each on a CUDA device).

    Uses the Ray connection of this process if there is one; else connects to ``address``;
    else starts a local cluster on 127.0.0.1 with ``workers`` CPUs (default: all cores) and
    shuts it down after. Workers of a cluster started here see this process's ``sys.path``.

    Tasks of a run on ``cuda`` or ``cuda:N`` request ``num_gpus=1`` and run on ``cuda``:
    Ray chooses the GPU of each task (it sets ``CUDA_VISIBLE_DEVICES``), so the index N is
    not used. A cluster without a GPU is an error rather than tasks that never start.
    """

    def __init__(self, workers: int | None = None, address: str | None = None) -> None:
        self.workers = (
            default_workers() if workers is None else check_int("workers", workers, min_value=1)
        )
        self.address = address

    def run(self, specs: Sequence[TaskSpec], on_result: ResultFn, on_progress: ProgressFn) -> None:
        import ray

        started = False
        if not ray.is_initialized():
            if self.address:
                ray.init(address=self.address, log_to_driver=False)
            else:
                ray.init(
                    num_cpus=self.workers,
                    include_dashboard=False,
                    _node_ip_address="127.0.0.1",
                    log_to_driver=False,
                    runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(sys.path)}},
                )
            started = True
        try:
            gpus = gpus_per_task(specs)
            if gpus and ray.cluster_resources().get("GPU", 0) < gpus:
                raise ValueError(
                    "the run's device is CUDA but the Ray cluster has no GPU; "
                    "start it with GPUs or run with --device cpu"
                )
            remote = ray.remote(num_cpus=1, num_gpus=gpus, max_retries=0)(execute_task)
            pending = {remote.remote(ray_spec(spec)): spec for spec in specs}
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
                for ref in ready:
                    spec = pending.pop(ref)
                    try:
                        result = ray.get(ref)
                    except Exception as err:  # the worker died or could not unpickle
                        result = _failed(spec.task.key, err)
                    on_result(result)
        finally:
            if started:
                ray.shutdown()


def gpus_per_task(specs: Sequence[TaskSpec]) -> int:
    """1 when the tasks run on a CUDA device (Ray's ``num_gpus``), else 0."""
    return int(any(spec.device.startswith("cuda") for spec in specs))


def ray_spec(spec: TaskSpec) -> TaskSpec:
    """``spec`` as a Ray task runs it: ``cuda:N`` becomes ``cuda``, the GPU Ray assigned."""
    return replace(spec, device="cuda") if spec.device.startswith("cuda") else spec


def make_executor(kind: str, *, workers: int | None = None, address: str | None = None) -> Executor:
    """The executor named ``kind`` (``local`` or ``ray``); ``workers=None``: one per core."""
    check_choice("executor", kind, EXECUTORS)
    if kind == "ray":
        return RayExecutor(workers, address)
    if address:
        raise ValueError("`address` is only used by the ray executor; got --executor local")
    return LocalExecutor(workers)

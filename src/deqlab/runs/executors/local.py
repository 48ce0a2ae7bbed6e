"""The local executor: tasks in this process (1 worker) or in a ``spawn`` process pool.

Nothing writes into a run once its owner is gone. Pool workers die with the process that
started them (Linux: ``PR_SET_PDEATHSIG``; elsewhere, and as a second line, a thread in each
worker that watches the parent's pid), and a worker checks that its parent is alive before
it writes a checkpoint.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any

import torch

from deqlab._checks import check_int
from deqlab.runs.executors.base import (
    Executor,
    ProgressFn,
    ResultFn,
    TaskResult,
    TaskSpec,
    default_workers,
    failed_result,
    run_task,
)
from deqlab.runs.rundir import RunDir


def execute_task(spec: TaskSpec, progress: ProgressFn | None = None) -> TaskResult:
    """Run one task with checkpointing in ``spec.run_path``; return its rows, or its error.

    In a pool worker whose parent has gone, the worker exits instead of writing.
    """
    run = RunDir(Path(spec.run_path))
    try:
        checkpoint = run.load_checkpoint(spec.task.key)  # a corrupt one is set aside: None
    except Exception as err:  # an unreadable checkpoint directory fails this task only
        return failed_result(spec.task.key, err)

    def save(payload: dict[str, Any]) -> None:
        if not owner_alive():  # the run belongs to a process that is gone: write nothing
            os._exit(1)
        run.save_checkpoint(spec.task.key, payload)

    return run_task(spec, checkpoint, save, progress)


_worker_queue: Any = None
#: The pid of the process that started this pool worker (None outside a pool worker).
_owner_pid: int | None = None
#: Seconds between two looks of a worker's watchdog thread at its parent.
PARENT_POLL_S = 0.5
_PR_SET_PDEATHSIG = 1


def owner_alive() -> bool:
    """False in a pool worker whose parent (the run's owner) is gone; True elsewhere."""
    return _owner_pid is None or os.getppid() == _owner_pid


def die_with_parent(parent_pid: int, *, use_prctl: bool = True) -> None:
    """Make this process exit when ``parent_pid`` (its parent) dies, even by SIGKILL.

    Linux: ``prctl(PR_SET_PDEATHSIG, SIGKILL)``, so the kernel kills it at once. Everywhere
    (and as a second line): a daemon thread that looks every :data:`PARENT_POLL_S` seconds
    whether the parent is still its parent (an orphan is re-parented) and exits otherwise.
    """
    global _owner_pid
    _owner_pid = parent_pid
    if use_prctl and sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # no libc to call: the thread below suffices
            pass
    if not owner_alive():  # the parent died before the death signal was armed
        os._exit(1)
    threading.Thread(target=_watch_parent, name="deqlab-watch-parent", daemon=True).start()


def _watch_parent() -> None:
    while owner_alive():
        time.sleep(PARENT_POLL_S)
    os._exit(1)


def _init_worker(queue: Any, threads: int, parent_pid: int | None = None) -> None:
    global _worker_queue
    if parent_pid is not None:
        die_with_parent(parent_pid)
    _worker_queue = queue
    torch.set_num_threads(threads)


def _queue_progress(key: str, done: int, total: int) -> None:
    _worker_queue.put((key, done, total))


def _execute_in_worker(spec: TaskSpec) -> TaskResult:
    return execute_task(spec, _queue_progress)


class LocalExecutor(Executor):
    """``workers == 1``: tasks run one after the other in this process (with its torch
    threads). Otherwise a pool of ``min(workers, tasks)`` processes started with ``spawn``
    (safe with torch's thread pools), each using ``cpu_count // workers`` torch threads.
    ``workers=None``: one process per CPU core.

    The workers die with this process (even when it is killed with SIGKILL) and write no
    checkpoint once it is gone (see the module docstring).

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
            workers,
            mp_context=context,
            initializer=_init_worker,
            initargs=(queue, threads, os.getpid()),
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
                            result = failed_result(spec.task.key, err)
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

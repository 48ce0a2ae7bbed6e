"""Executors: run the tasks of a sweep in this process, a local process pool, or on Ray.

Every executor runs each :class:`TaskSpec` (:func:`run_task`) and hands each
:class:`TaskResult` to a callback as soon as it is ready. A task that raises is returned as a
``failed`` result with its error text; the sweep goes on (a failing task never stops the
others). Tasks resume from their checkpoints, and a task whose checkpoint says ``done`` is
not recomputed (a corrupt checkpoint is set aside by the store and its task restarts).

Nothing writes into a run once its owner is gone. Pool workers die with the process that
started them (Linux: ``PR_SET_PDEATHSIG``; elsewhere, and as a second line, a thread in each
worker that watches the parent's pid), and a worker checks that its parent is alive before
it writes a checkpoint. Ray tasks write nothing themselves: see :class:`RayExecutor`.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import math
import multiprocessing
import os
import queue as queue_module
import signal
import socket
import sys
import threading
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
from deqlab.runs.rundir import RunDir

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


SaveFn = Callable[[dict[str, Any]], None]


def execute_task(spec: TaskSpec, progress: ProgressFn | None = None) -> TaskResult:
    """Run one task with checkpointing in ``spec.run_path``; return its rows, or its error.

    In a pool worker whose parent has gone, the worker exits instead of writing.
    """
    run = RunDir(Path(spec.run_path))
    try:
        checkpoint = run.load_checkpoint(spec.task.key)  # a corrupt one is set aside: None
    except Exception as err:  # an unreadable checkpoint directory fails this task only
        return _failed(spec.task.key, err)

    def save(payload: dict[str, Any]) -> None:
        if not owner_alive():  # the run belongs to a process that is gone: write nothing
            os._exit(1)
        run.save_checkpoint(spec.task.key, payload)

    return run_task(spec, checkpoint, save, progress)


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


def default_workers() -> int:
    """One worker per CPU core."""
    return os.cpu_count() or 1


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


class RayConnectionError(ValueError):
    """The Ray cluster at ``--address`` cannot be reached (one line: the address, what was
    tried, what to do)."""


#: Seconds to wait for a TCP connection to a cluster's address before ``ray.init``.
RAY_PROBE_TIMEOUT_S = 5.0
#: Seconds ``ray.init`` may take to connect to a reachable cluster.
RAY_INIT_TIMEOUT_S = 30.0
#: Seconds between two progress events of a Ray task (a checkpoint always goes through).
RAY_PROGRESS_EVERY_S = 0.5
#: What ``address`` may name besides ``HOST:PORT`` and ``ray://HOST:PORT``.
RAY_ADDRESS_WORDS = ("auto",)


def ray_host_port(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of a Ray address ``[ray://]HOST:PORT``; None for ``auto``.

    Raises ValueError (one line) for another form.
    """
    text = address.strip()
    if text in RAY_ADDRESS_WORDS:
        return None
    rest = text.removeprefix("ray://")
    host, colon, port = rest.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")  # [::1]:6379
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(
            f"`address` must be HOST:PORT (e.g. 10.0.0.5:6379, the head node's GCS), "
            f"ray://HOST:PORT (Ray Client) or auto; got {address!r}"
        )
    return host, int(port)


def probe_ray_address(address: str, timeout: float | None = None) -> None:
    """Open (and close) a TCP connection to the cluster at ``address`` within ``timeout``
    seconds; raise :class:`RayConnectionError` naming the address and the error otherwise.

    Ray itself retries an unreachable address for minutes; this fails in seconds (default
    ``timeout``: :data:`RAY_PROBE_TIMEOUT_S`).
    """
    timeout = RAY_PROBE_TIMEOUT_S if timeout is None else timeout
    where = ray_host_port(address)
    if where is None:
        return
    host, port = where
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as err:
        why = "timed out" if isinstance(err, TimeoutError) else (err.strerror or str(err))
        raise RayConnectionError(
            f"cannot reach the Ray cluster at {address}: a TCP connection to {host} port "
            f"{port} failed within {timeout:g} s ({why}); start it there (ray start --head "
            f"--port {port}) or leave out --address to start a local cluster"
        ) from None


def init_ray_with_timeout(timeout: float | None = None, **kwargs: Any) -> None:
    """``ray.init(**kwargs)`` connecting to an existing cluster, in a thread; raise
    :class:`RayConnectionError` when it fails or has not returned after ``timeout`` seconds
    (default :data:`RAY_INIT_TIMEOUT_S`; the thread is left behind, a daemon).

    Only to connect: a cluster started by ``ray.init`` dies with the thread that started it
    (see :func:`start_local_ray`).
    """
    import ray

    timeout = RAY_INIT_TIMEOUT_S if timeout is None else timeout
    outcome: dict[str, BaseException | None] = {}

    def connect() -> None:
        try:
            ray.init(**kwargs)
            outcome["error"] = None
        except BaseException as err:  # reported to the caller below
            outcome["error"] = err

    # In a thread, ray.init leaves this process's SIGTERM handler alone (the runner's) and
    # says so in a warning; that warning is not shown.
    quiet = _DropMessage("SIGTERM handler is not set")
    ray_logger = logging.getLogger("ray._private.worker")
    ray_logger.addFilter(quiet)
    thread = threading.Thread(target=connect, name="deqlab-ray-init", daemon=True)
    try:
        thread.start()
        thread.join(timeout)
    finally:
        ray_logger.removeFilter(quiet)
    address = kwargs.get("address") or "a new local cluster"
    if thread.is_alive():
        raise RayConnectionError(
            f"ray.init(address={address!r}) did not connect within {timeout:g} s; is a Ray "
            "head node (ray start --head) running at that address, with the same Ray version?"
        )
    error = outcome.get("error")
    if error is not None:
        message = " ".join(str(error).split())[:400] or type(error).__name__
        raise RayConnectionError(
            f"ray.init(address={address!r}) failed: {type(error).__name__}: {message}"
        ) from None


def start_local_ray(workers: int) -> None:
    """Start a local Ray cluster on 127.0.0.1 with ``workers`` CPUs, in this thread.

    Not in a helper thread: Ray's processes die with the thread that started them (they
    are armed with PR_SET_PDEATHSIG). The SIGTERM handler ``ray.init`` installs is replaced
    by the one this process had (the runner's).
    """
    import ray

    main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGTERM) if main else None
    try:
        ray.init(
            num_cpus=workers,
            include_dashboard=False,
            _node_ip_address="127.0.0.1",
            log_to_driver=False,
            runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(sys.path)}},
        )
    finally:
        if main and previous is not None:
            signal.signal(signal.SIGTERM, previous)


class _DropMessage(logging.Filter):
    """Drops the log records whose message contains ``text``."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def filter(self, record: logging.LogRecord) -> bool:
        return self.text not in record.getMessage()


class RayExecutor(Executor):
    """Tasks as Ray remote functions (one CPU each; and one GPU each on a CUDA device).

    Uses the Ray connection of this process if there is one; else connects to ``address``
    (checked when the executor is made, with a TCP connection of at most
    :data:`RAY_PROBE_TIMEOUT_S`, and ``ray.init`` given
    :data:`RAY_INIT_TIMEOUT_S`: an unreachable cluster is a one-line
    :class:`RayConnectionError` within about 30 s, not Ray's retries for minutes); else
    starts a local cluster on 127.0.0.1 with ``workers`` CPUs (default: all cores) and shuts
    it down after. Workers of a cluster started here see this process's ``sys.path``.

    Results and checkpoints travel through Ray's object store, never through a file system:
    each task is a Ray generator that streams its checkpoints (and progress) to this process,
    which writes them into the run directory as they arrive, and its checkpoint to resume
    from is read here and sent with the task. So a cluster of several nodes needs no shared
    file system (the nodes never open the run directory), and nothing is written into a run
    once this process is gone.

    Tasks of a run on ``cuda`` or ``cuda:N`` request ``num_gpus=1`` and run on ``cuda``:
    Ray chooses the GPU of each task (it sets ``CUDA_VISIBLE_DEVICES``), so the index N is
    not used. A cluster without a GPU is an error rather than tasks that never start.
    """

    def __init__(self, workers: int | None = None, address: str | None = None) -> None:
        self.workers = (
            default_workers() if workers is None else check_int("workers", workers, min_value=1)
        )
        self.address = address
        if address is not None:  # before any run exists: the form, then a TCP connection
            probe_ray_address(address)

    def run(self, specs: Sequence[TaskSpec], on_result: ResultFn, on_progress: ProgressFn) -> None:
        import ray

        started = False
        if not ray.is_initialized():
            if self.address:
                init_ray_with_timeout(address=self.address, log_to_driver=False)
            else:
                start_local_ray(self.workers)
            started = True
        try:
            gpus = gpus_per_task(specs)
            if gpus and ray.cluster_resources().get("GPU", 0) < gpus:
                raise ValueError(
                    "the run's device is CUDA but the Ray cluster has no GPU; "
                    "start it with GPUs or run with --device cpu"
                )
            _stream_specs(ray, specs, gpus, on_result, on_progress)
        finally:
            if started:
                ray.shutdown()


def _stream_specs(
    ray: Any, specs: Sequence[TaskSpec], gpus: int, on_result: ResultFn, on_progress: ProgressFn
) -> None:
    """Submit the specs as streaming tasks; write their checkpoints here as they arrive."""
    remote = ray.remote(num_cpus=1, num_gpus=gpus, max_retries=0)(stream_task)
    pending: dict[Any, tuple[TaskSpec, RunDir]] = {}
    try:
        for spec in specs:
            run = RunDir(Path(spec.run_path))
            try:
                checkpoint = run.load_checkpoint(spec.task.key)  # read here, sent to the task
            except Exception as err:  # an unreadable checkpoint directory fails this task
                on_result(_failed(spec.task.key, err))
                continue
            if checkpoint is not None and checkpoint["done"]:
                on_result(run_task(spec, checkpoint, lambda payload: None))
                continue
            pending[remote.remote(ray_spec(spec), checkpoint)] = (spec, run)
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
            for stream in ready:
                spec, run = pending[stream]
                key = spec.task.key
                try:
                    kind, *payload = ray.get(next(stream))
                except StopIteration:  # the stream ended without its result
                    kind, payload = "result", [_failed(key, RuntimeError("no result"))]
                except Exception as err:  # the worker died or could not unpickle
                    kind, payload = "result", [_failed(key, err)]
                if kind == "checkpoint":
                    run.save_checkpoint(key, payload[0])
                elif kind == "progress":
                    on_progress(key, *payload)
                else:
                    del pending[stream]
                    on_result(payload[0])
    finally:
        for stream in pending:  # interrupted: stop the tasks still running
            with contextlib.suppress(Exception):  # finished already, or the cluster is going
                ray.cancel(stream, force=True)


def stream_task(spec: TaskSpec, checkpoint: dict[str, Any] | None) -> Any:
    """A Ray task as a generator: yields ``("checkpoint", payload)`` for each checkpoint (in
    order), ``("progress", done, total)`` at most every :data:`RAY_PROGRESS_EVERY_S` seconds,
    and last ``("result", TaskResult)``. The task runs in a thread of the Ray worker; each
    checkpoint waits until it has been handed on (at most one is held in memory). Tensors
    travel on the CPU, as a checkpoint file would give them back (``map_location="cpu"``):
    the driver may have no GPU."""
    events: queue_module.Queue[tuple[Any, ...]] = queue_module.Queue(maxsize=1)
    last = [-math.inf]

    def progress(key: str, done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] >= RAY_PROGRESS_EVERY_S or done >= total:
            last[0] = now
            events.put(("progress", done, total))

    def save(payload: dict[str, Any]) -> None:
        events.put(("checkpoint", to_cpu(payload)))

    def work() -> None:
        try:
            result = run_task(spec, checkpoint, save, progress)
            result = replace(result, rows=to_cpu(result.rows))
        except BaseException as err:  # run_task catches Exception; this is the rest
            result = _failed(spec.task.key, err)
        events.put(("result", result))

    threading.Thread(target=work, name=f"deqlab-task-{spec.task.key}", daemon=True).start()
    while True:
        event = events.get()
        yield event
        if event[0] == "result":
            return


def to_cpu(value: Any) -> Any:
    """``value`` with every tensor in its dicts, lists and tuples moved to the CPU."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, dict):
        return {k: to_cpu(v) for k, v in value.items()}
    if isinstance(value, list | tuple) and not hasattr(value, "_fields"):  # not namedtuples
        return type(value)(to_cpu(v) for v in value)
    return value


def gpus_per_task(specs: Sequence[TaskSpec]) -> int:
    """1 when the tasks run on a CUDA device (Ray's ``num_gpus``), else 0."""
    return int(any(spec.device.startswith("cuda") for spec in specs))


#: The run path a Ray task is given: it never opens the run directory (see RayExecutor).
RAY_RUN_PATH = "<on the driver>"


def ray_spec(spec: TaskSpec) -> TaskSpec:
    """``spec`` as a Ray task runs it: ``cuda:N`` becomes ``cuda``, the GPU Ray assigned, and
    the run directory is the driver's alone (checkpoints stream back to it)."""
    device = "cuda" if spec.device.startswith("cuda") else spec.device
    return replace(spec, device=device, run_path=RAY_RUN_PATH)


def make_executor(kind: str, *, workers: int | None = None, address: str | None = None) -> Executor:
    """The executor named ``kind`` (``local`` or ``ray``); ``workers=None``: one per core."""
    check_choice("executor", kind, EXECUTORS)
    if kind == "ray":
        return RayExecutor(workers, address)
    if address:
        raise ValueError("`address` is only used by the ray executor; got --executor local")
    return LocalExecutor(workers)

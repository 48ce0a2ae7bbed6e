"""The Ray executor: tasks as Ray remote functions, on a cluster at ``--address`` or on a
local cluster started for the run.

Ray tasks write nothing themselves: their checkpoints stream back to this process, which
writes them into the run directory (see :class:`RayExecutor`).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import queue as queue_module
import signal
import socket
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from deqlab._checks import check_int
from deqlab.runs.executors.base import (
    Executor,
    ProgressFn,
    ResultFn,
    TaskSpec,
    default_workers,
    failed_result,
    run_task,
)
from deqlab.runs.rundir import RunDir


class RayConnectionError(ValueError):
    """The Ray cluster at ``--address`` cannot be reached (one line: the address, what was
    tried, what to do)."""


#: Seconds to wait for a TCP connection to a cluster's address before ``ray.init``.
RAY_PROBE_TIMEOUT_S = 5.0
#: Seconds a reachable address has to answer as a gRPC server (Ray's GCS) does.
RAY_HANDSHAKE_TIMEOUT_S = 2.0
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
    """Check that a Ray cluster answers at ``address``: a TCP connection within ``timeout``
    seconds, then a gRPC (HTTP/2) handshake within :data:`RAY_HANDSHAKE_TIMEOUT_S`; raise
    :class:`RayConnectionError` naming the address and what failed otherwise.

    Ray itself retries an unreachable address for minutes, and waits as long on a port
    where something else listens; this fails in seconds (default ``timeout``:
    :data:`RAY_PROBE_TIMEOUT_S`).
    """
    timeout = RAY_PROBE_TIMEOUT_S if timeout is None else timeout
    where = ray_host_port(address)
    if where is None:
        return
    host, port = where
    try:
        connection = socket.create_connection((host, port), timeout=timeout)
    except OSError as err:
        why = "timed out" if isinstance(err, TimeoutError) else (err.strerror or str(err))
        raise RayConnectionError(
            f"cannot reach the Ray cluster at {address}: a TCP connection to {host} port "
            f"{port} failed within {timeout:g} s ({why}); start it there (ray start --head "
            f"--port {port}) or leave out --address to start a local cluster"
        ) from None
    with connection:
        answered = answers_http2(connection, RAY_HANDSHAKE_TIMEOUT_S)
    if not answered:
        raise RayConnectionError(
            f"{address} is not a Ray cluster: it accepts TCP connections but gave no gRPC "
            f"(HTTP/2) answer within {RAY_HANDSHAKE_TIMEOUT_S:g} s; give the head node's GCS "
            "address (`ray start --head` prints it) or leave out --address to start a local "
            "cluster"
        )


#: What a gRPC client sends first: the HTTP/2 connection preface and an empty SETTINGS frame
#: (RFC 9113, Section 3.4; a frame header is length (3 bytes), type, flags, stream id (4)).
_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
_HTTP2_SETTINGS = 4


def answers_http2(connection: socket.socket, timeout: float) -> bool:
    """Whether the peer of ``connection`` answers the HTTP/2 preface with a SETTINGS frame
    within ``timeout`` seconds, as every gRPC server does (Ray's GCS and Ray Client's)."""
    connection.settimeout(timeout)
    head = b""
    try:
        connection.sendall(_HTTP2_PREFACE)
        while len(head) < 9:
            chunk = connection.recv(9 - len(head))
            if not chunk:
                return False
            head += chunk
    except OSError:
        return False
    return head[3] == _HTTP2_SETTINGS


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
                on_result(failed_result(spec.task.key, err))
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
                    kind, payload = "result", [failed_result(key, RuntimeError("no result"))]
                except Exception as err:  # the worker died or could not unpickle
                    kind, payload = "result", [failed_result(key, err)]
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
            result = failed_result(spec.task.key, err)
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

"""Faults of the executors and bad inputs to ``kernel``, ``data``, the trainers, the solvers
and the readers: each case asserts the message and the exit code (CLI through typer's
CliRunner or a subprocess), including the many that were handled well already.

``SlowLsq`` (registered here as ``test-slow-lsq``) is :class:`LeastSquaresGD` slowed down by
``$DEQLAB_TEST_SLOW`` seconds a step, so a test can kill a sweep while its workers run.
"""

from __future__ import annotations

import builtins
import errno
import io
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar

import pytest
import torch
from typer.testing import CliRunner

from deqlab.cli.app import app
from deqlab.experiments.registry import register
from test_runs_store import LeastSquaresGD

TESTS = Path(__file__).resolve().parent
runner = CliRunner()


@register
class SlowLsq(LeastSquaresGD):
    """:class:`LeastSquaresGD` sleeping ``$DEQLAB_TEST_SLOW`` seconds at every step."""

    slug = "slow-lsq"
    presets: ClassVar = {"tiny": {"steps": 30}, "quick": {}, "paper": {"steps": 200}}

    def run_task(self, config, task, ctx):
        slow = float(os.environ.get("DEQLAB_TEST_SLOW", "0"))
        report = ctx.progress

        def progress(done: int, total: int) -> None:
            time.sleep(slow)
            report(done, total)

        ctx.progress = progress
        return super().run_task(config, task, ctx)


def invoke(*args: object):
    return runner.invoke(app, [str(a) for a in args])


def one_error(result) -> str:
    """The output's single ``error:`` line (asserting there is exactly one)."""
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.output
    return lines[0]


# --- processes ---------------------------------------------------------------------------------


def _alive(pid: int) -> bool:
    """Running (a zombie, dead but not yet reaped by its new parent, is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rpartition(")")[2].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def _snapshot(directory: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(directory)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in directory.rglob("*")
        if p.is_file()
    }


def _wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)


DRIVER = (
    "import sys; sys.path.insert(0, {tests!r}); import test_faults_executors; "
    "from deqlab.cli.app import main; sys.argv = ['deqlab', *sys.argv[1:]]; main()"
)

linux_only = pytest.mark.skipif(
    not Path("/proc/self/stat").exists(), reason="reads processes from /proc"
)


@linux_only
def test_sigkill_of_the_main_process_takes_the_pool_with_it_and_nothing_writes_after(tmp_path):
    out = tmp_path / "res"
    command = [
        sys.executable, "-c", DRIVER.format(tests=str(TESTS)),
        "reproduce", "test-slow-lsq", "--preset", "tiny", "--set", "steps=4000",
        "--workers", "2", "--checkpoint-every", "1", "--out", str(out), "--quiet",
    ]  # fmt: skip
    env = {**os.environ, "DEQLAB_TEST_SLOW": "0.02"}
    parent = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        checkpoints = out / "test-slow-lsq"
        _wait_for(lambda: len(list(checkpoints.rglob("*.pt"))) == 2, 120, "both tasks to run")
        workers = _children(parent.pid)  # the two workers and multiprocessing's tracker
        assert len(workers) >= 2 and all(_alive(pid) for pid in workers)
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    _wait_for(lambda: not any(_alive(pid) for pid in workers), 5, "the workers to die")
    run_dir = next(checkpoints.iterdir())
    before = _snapshot(run_dir)
    time.sleep(2.0)  # 100 steps' worth: an orphan would have written checkpoints by now
    assert _snapshot(run_dir) == before


@linux_only
@pytest.mark.parametrize("use_prctl", [True, False])
def test_a_worker_dies_with_its_parent(tmp_path, use_prctl):
    """prctl(PR_SET_PDEATHSIG) on Linux, and the watchdog thread alone (as on macOS)."""
    armed = tmp_path / "armed"
    child = (
        "import os, sys, time; from deqlab.runs.executors.local import die_with_parent; "
        f"die_with_parent(int(sys.argv[1]), use_prctl={use_prctl}); "
        f"open({str(armed)!r}, 'w').close(); time.sleep(120)"
    )
    parent_code = (
        "import os, subprocess, sys, time; "
        f"p = subprocess.Popen([sys.executable, '-c', {child!r}, str(os.getpid())]); "
        "print(p.pid, flush=True); time.sleep(120)"
    )
    parent = subprocess.Popen([sys.executable, "-c", parent_code], stdout=subprocess.PIPE)
    try:
        pid = int(parent.stdout.readline())
        _wait_for(armed.exists, 60, "the child to arm its watch")
        assert _alive(pid)
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        parent.stdout.close()
    _wait_for(lambda: not _alive(pid), 3, f"child {pid} to die with its parent")


def test_owner_alive_outside_a_pool_worker():
    from deqlab.runs.executors import local as executors

    assert executors._owner_pid is None and executors.owner_alive()


# --- a read-only place ---------------------------------------------------------------------------


@contextmanager
def read_only(directory: Path):
    """``directory`` made read-only. Root ignores file modes, so there a write under it (a
    file opened for writing, a directory made, a file moved in) fails as it would for
    anyone else: PermissionError (EACCES)."""
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o555)
    patches = pytest.MonkeyPatch()
    if os.geteuid() == 0:
        inside = str(directory.resolve())

        def denied(path) -> bool:
            return os.path.abspath(os.fspath(path)).startswith(inside)

        def refuse(path):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fspath(path))

        real_open, real_os_open = builtins.open, os.open
        real_mkdir, real_replace = os.mkdir, os.replace

        def open_(file, mode="r", *args, **kwargs):
            if isinstance(file, str | os.PathLike) and set(mode) & set("wax+") and denied(file):
                refuse(file)
            return real_open(file, mode, *args, **kwargs)

        def os_open(path, flags, *args, **kwargs):
            if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT) and denied(path):
                refuse(path)
            return real_os_open(path, flags, *args, **kwargs)

        def mkdir(path, *args, **kwargs):
            if denied(path):
                refuse(path)
            return real_mkdir(path, *args, **kwargs)

        def replace(src, dst, *args, **kwargs):
            if denied(dst):
                refuse(dst)
            return real_replace(src, dst, *args, **kwargs)

        patches.setattr(builtins, "open", open_)
        patches.setattr(io, "open", open_)
        patches.setattr(os, "open", os_open)
        patches.setattr(os, "mkdir", mkdir)
        patches.setattr(os, "replace", replace)
    try:
        yield directory
    finally:
        patches.undo()
        directory.chmod(0o755)


# --- trainers ------------------------------------------------------------------------------------


def _relu_deq(name: str | None = None):
    from deqlab.models.relu_deq import ReLUDEQ

    model = ReLUDEQ.init(4, 16, seed=0)
    if name is not None:
        with torch.no_grad():
            getattr(model, name).view(-1)[0] = math.nan
    gen = torch.Generator().manual_seed(1)
    return model, torch.randn(4, 6, generator=gen), torch.randn(6, generator=gen)


@pytest.mark.parametrize(("name", "count"), [("W", "1 of 256"), ("U", "1 of 64"), ("a", "1 of 16")])
def test_relu_deq_trainer_names_the_parameter_that_is_not_finite(name, count):
    from deqlab.train import GDConfig, GDTrainer

    model, X, y = _relu_deq(name)
    with pytest.raises(ValueError) as caught:
        GDTrainer(model, X, y, GDConfig(lr=0.1))
    assert str(caught.value) == (
        f"parameter `{name}` of the ReLUDEQ is not finite ({count} entries NaN/Inf) before "
        "training; the trainer needs finite parameters"
    )


def test_relu_deq_trainer_stops_when_a_parameter_turns_non_finite():
    from deqlab.train import GDConfig, GDTrainer

    model, X, y = _relu_deq()
    trainer = GDTrainer(model, X, y, GDConfig(lr=0.1))
    trainer.step()
    with torch.no_grad():
        model.W[2, 3] = math.inf
    record = trainer.step()
    assert trainer.stop_reason == record["status"] == "parameter_not_finite"
    assert trainer.message == (
        "step 1: parameter `W` of the ReLUDEQ is not finite (1 of 256 entries NaN/Inf): GD with "
        "lr = 0.1 diverged"
    )


def test_relu_deq_trainer_with_a_huge_learning_rate_stops_with_a_status():
    from deqlab.train import GDConfig, GDTrainer

    model, X, y = _relu_deq()
    trainer = GDTrainer(model, X, y, GDConfig(lr=1e6, spectral_every=0))
    records = trainer.run(10)
    assert trainer.stopped and records[-1]["status"] == trainer.stop_reason
    assert trainer.message.startswith(f"step {records[-1]['step']}: ")


def _mondeq(name: str | None = None):
    from deqlab.models.mondeq import MonDEQ

    model = MonDEQ(4, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    if name is not None:
        with torch.no_grad():
            dict(model.named_parameters())[name].view(-1)[0] = math.nan
    gen = torch.Generator().manual_seed(1)
    return model, torch.randn(4, 6, generator=gen), torch.randn(6, generator=gen)


@pytest.mark.parametrize("name", ["A", "B", "U", "u"])
def test_monotone_trainer_names_the_parameter_that_is_not_finite(name):
    from deqlab.train.mondeq_gd import MonDEQGD

    model, X, y = _mondeq(name)
    with pytest.raises(
        ValueError, match=rf"^parameter `{name}` of the MonDEQ is not finite \(1 of"
    ):
        MonDEQGD(model, X, y, lr=0.1)


def test_monotone_trainer_says_when_a_step_made_a_parameter_non_finite():
    from deqlab.train.mondeq_gd import MonDEQGD

    model, X, y = _mondeq()
    trainer = MonDEQGD(model, X, y, lr=0.1)
    first = trainer.step()
    with torch.no_grad():
        model.u[0] = math.nan
    record = trainer.step()
    assert trainer.stopped and math.isnan(record["loss"]) and record["step"] == 1
    assert trainer.message == (
        "the loss diverged at step 1 with learning rate lr = 0.1: parameter `u` of the MonDEQ "
        f"is not finite (1 of 8 entries NaN/Inf); the last finite loss was {first['loss']:.6g} "
        "at step 0; lower the learning rate"
    )


def _delm(name: str | None = None, lr: float = 0.1):
    from deqlab.models.delm import DELM
    from deqlab.train.delm_gd import DELMGDConfig, DELMGradientDescent

    model = DELM(4, 1, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    if name is not None:
        with torch.no_grad():
            getattr(model, name).view(-1)[0] = math.nan
    gen = torch.Generator().manual_seed(1)
    X, Y = torch.randn(4, 6, generator=gen), torch.randn(1, 6, generator=gen)
    return lambda: DELMGradientDescent(model, X, Y, DELMGDConfig(lr=lr))


@pytest.mark.parametrize(("name", "count"), [("A", "1 of 16"), ("B", "1 of 4")])
def test_delm_trainer_names_the_parameter_that_is_not_finite(name, count):
    with pytest.raises(ValueError) as caught:
        _delm(name)()
    assert str(caught.value) == (
        f"parameter `{name}` of the DELM is not finite ({count} entries NaN/Inf) before "
        "training; the trainer needs finite parameters"
    )


def test_delm_divergence_is_reported_as_divergence():
    from deqlab.train.divergence import DivergenceError

    trainer = _delm(lr=1e6)()
    with pytest.raises(DivergenceError) as caught:
        trainer.run(200)
    step = trainer.step_count
    message = str(caught.value)
    assert message.startswith(f"the loss diverged at step {step} with learning rate lr = 1e+06: ")
    assert f"the last finite loss was {trainer.last_finite[1]:.6g} at step {step - 1}" in message
    assert message.endswith("; lower the learning rate") and "`Q` must be finite" not in message


def test_kawaguchi_fig2_with_a_huge_learning_rate_reports_divergence(tmp_path):
    result = invoke(
        "reproduce", "kawaguchi2021-fig2", "--preset", "tiny", "--set", "lr=1e6", "--set",
        "steps=40", "--set", "bound_steps=20", "--workers", 1, "--out", tmp_path, "--quiet",
    )  # fmt: skip
    assert result.exit_code == 1
    failures = [x for x in result.output.splitlines() if x.startswith("task a-delm-identity")]
    assert failures and failures[0].startswith(
        "task a-delm-identity failed: DivergenceError: the loss diverged at step "
    )
    assert "with learning rate lr = 1e+06" in failures[0] and "`Q` must be finite" not in (
        result.output
    )


# --- solvers --------------------------------------------------------------------------------


def test_solvers_name_what_is_wrong():
    from deqlab.solvers import Picard
    from deqlab.solvers.solution import SolverError, get_solver

    z = torch.zeros(3)
    with pytest.raises(
        SolverError, match=r"(?s)^Picard diverged after \d+ steps: .*may not be contractive"
    ):
        Picard(max_iter=50)(lambda x: 2 * x + 1, z)
    with pytest.raises(SolverError, match=r"(?s)^Picard max_steps after 5 steps: .*raise max_iter"):
        Picard(max_iter=5, tol=1e-14)(lambda x: 0.9 * x + 1, z)
    with pytest.raises(ValueError, match=r"^`z0` must be finite; got 1 NaN/Inf entries$"):
        Picard()(lambda x: x, torch.tensor([math.nan]))
    with pytest.raises(ValueError, match=r"^`f\(z0\)` must have the shape of `z0` \(3,\); got"):
        Picard()(lambda x: x[:1], z)
    with pytest.raises(ValueError, match=r"^unknown solver 'nope'; valid names: 'anderson'"):
        get_solver("nope")
    with pytest.raises(ValueError, match=r"^`max_iter` must be >= 1; got 0$"):
        Picard(max_iter=0)


# --- executors ------------------------------------------------------------------------------

EXECUTOR_USAGE = {
    "unknown-executor": (
        ("--executor", "dask"),
        "error: `executor` must be one of 'local', 'ray'; got 'dask'",
    ),
    "no-workers": (("--workers", "0"), "error: Invalid value for '--workers': Input should be"),
    "address-for-local": (
        ("--executor", "local", "--address", "h:1"),
        "error: `address` is only used by the ray executor; got --executor local",
    ),
    "address-form": (
        ("--executor", "ray", "--address", "nonsense"),
        "error: `address` must be HOST:PORT (e.g. 10.0.0.5:6379, the head node's GCS), "
        "ray://HOST:PORT (Ray Client) or auto; got 'nonsense'",
    ),
    "address-refused": (
        ("--executor", "ray", "--address", "127.0.0.1:1"),
        "error: cannot reach the Ray cluster at 127.0.0.1:1: a TCP connection to 127.0.0.1 "
        "port 1 failed within 5 s (Connection refused)",
    ),
}


@pytest.mark.parametrize("case", EXECUTOR_USAGE)
def test_executor_usage_errors_create_no_run(tmp_path, case):
    args, says = EXECUTOR_USAGE[case]
    result = invoke("reproduce", "test-lsq-gd", "--preset", "tiny", "--out", tmp_path, *args)
    assert result.exit_code == 2
    assert one_error(result).startswith(says)
    assert not (tmp_path / "test-lsq-gd").exists()


@pytest.mark.parametrize("answer", ["silent", "closes", "http/1"])
def test_ray_address_that_accepts_tcp_but_is_no_ray_cluster(tmp_path, answer):
    """Issue 26: a listener that is not Ray's GCS (silent, closing, or another protocol)
    is one line and exit 2 within seconds, before any run is recorded."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    reply = {"silent": None, "closes": b"", "http/1": b"HTTP/1.1 400 Bad Request\r\n\r\n"}

    def serve() -> None:
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            if reply[answer] is not None:
                connection.sendall(reply[answer])
                connection.close()

    threading.Thread(target=serve, daemon=True).start()
    out = tmp_path / "res"
    start = time.monotonic()
    try:
        result = invoke("reproduce", "test-lsq-gd", "--preset", "tiny", "--out", out,
                        "--executor", "ray", "--address", f"127.0.0.1:{port}")  # fmt: skip
    finally:
        server.close()
    assert time.monotonic() - start < 10
    assert result.exit_code == 2
    assert one_error(result) == (
        f"error: 127.0.0.1:{port} is not a Ray cluster: it accepts TCP connections but gave no "
        "gRPC (HTTP/2) answer within 2 s; give the head node's GCS address (`ray start --head` "
        "prints it) or leave out --address to start a local cluster"
    )
    assert len(result.output.strip().splitlines()) == 1
    assert not out.exists()  # nothing recorded


def test_the_http2_probe_accepts_a_server_that_answers_with_settings():
    """The other side of the probe: a peer that answers the preface with a SETTINGS frame
    (what a gRPC server, Ray's GCS included, sends first) passes."""
    from deqlab.runs.executors.ray import answers_http2

    server = socket.create_server(("127.0.0.1", 0))
    settings = bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
    threading.Thread(target=lambda: server.accept()[0].sendall(settings), daemon=True).start()
    with server, socket.create_connection(server.getsockname(), timeout=5) as connection:
        assert answers_http2(connection, 5.0)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_failing_task_fails_alone_in_process_and_in_a_pool(tmp_path, workers):
    result = invoke(
        "reproduce", "test-lsq-gd", "--preset", "tiny", "--set", "lrs=[0.05,9.0]",
        "--workers", workers, "--out", tmp_path, "--quiet",
    )  # fmt: skip
    assert result.exit_code == 1
    assert "task lr9 failed: FloatingPointError: GD diverged at step 5 with lr 9.0" in (
        result.output
    )
    assert "failed tasks: lr9" in result.output


def test_a_pool_worker_writes_nothing_once_its_parent_is_gone(tmp_path, monkeypatch):
    """``owner_alive`` is what a worker asks before each checkpoint: with another parent
    recorded (its own died), the worker exits instead of writing."""
    from deqlab.runs.executors import local as executors

    # the owner die_with_parent records, made another process: the state a worker is in once
    # its parent died, short of killing one (die_with_parent with that pid exits at once)
    monkeypatch.setattr(executors, "_owner_pid", os.getppid() + 1)
    assert not executors.owner_alive()
    code = (
        "import os, sys; from pathlib import Path; import deqlab.runs.executors.local as ex; "
        "sys.path.insert(0, sys.argv[1]); from test_runs_store import LeastSquaresGD; "
        "ex._owner_pid = os.getppid() + 1; exp = LeastSquaresGD(); config = exp.resolve('tiny'); "
        "spec = ex.TaskSpec(LeastSquaresGD, config, exp.tasks(config)[0], sys.argv[2], 'cpu', 1); "
        "ex.execute_task(spec); print('wrote')"
    )
    run = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-c", code, str(TESTS), str(run)], capture_output=True, text=True
    )
    assert done.returncode == 1 and "wrote" not in done.stdout
    assert not (run / "checkpoints").exists() or not list((run / "checkpoints").iterdir())


def test_ray_payloads_travel_on_the_cpu_with_their_structure():
    from collections import namedtuple

    from deqlab.runs.executors.ray import to_cpu

    Pair = namedtuple("Pair", "x y")
    w = torch.ones(3, requires_grad=True)
    moved = to_cpu({"state": {"w": w * 2, "trail": [w, (1, "a")]}, "pair": Pair(1, 2)})
    assert not moved["state"]["w"].requires_grad and moved["state"]["w"].device.type == "cpu"
    assert moved["state"]["trail"][1] == (1, "a") and moved["pair"] == Pair(1, 2)

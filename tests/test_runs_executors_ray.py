"""The Ray executor on real Ray clusters started by the tests: one node in this process
(127.0.0.1, 2 CPUs), and two nodes started with ``ray start`` (separate temp dirs); plus an
unreachable or silent address, and the GPU request on a stand-in for Ray."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

import pytest
import torch

from deqlab.experiments.registry import register
from deqlab.runs.executors import TaskSpec, run_task
from deqlab.runs.executors.ray import RAY_RUN_PATH, RayConnectionError, RayExecutor, ray_spec
from deqlab.runs.runner import reproduce
from deqlab.runs.store import RunStore
from deqlab.runs.tables import read_rows_csv
from test_runs_store import LeastSquaresGD

ray = pytest.importorskip("ray")

TESTS = Path(__file__).resolve().parent


@register
class NodeLsq(LeastSquaresGD):
    """:class:`LeastSquaresGD` whose rows say which Ray node computed them."""

    slug = "node-lsq"

    def run_task(self, config, task, ctx):
        rows = super().run_task(config, task, ctx)
        time.sleep(1.0)  # long enough for the tasks to spread over the nodes
        node = ray.get_runtime_context().get_node_id() if ray.is_initialized() else "none"
        return [{**row, "node": node} for row in rows]


@pytest.fixture
def local_cluster():
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        log_to_driver=False,
        # Workers import the test experiment's module from the same sys.path.
        runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(sys.path)}},
    )
    yield
    ray.shutdown()


def test_ray_sweep_matches_serial_and_records_the_failing_task(local_cluster, tmp_path):
    exp = LeastSquaresGD()
    config = exp.resolve("tiny", overrides=["lrs=[0.05,9.0,0.3]"])  # 9 > 2/L: GD diverges
    on_ray = reproduce(
        exp,
        config,
        preset="tiny",
        out=tmp_path / "ray",
        quiet=True,
        executor=RayExecutor(workers=2),
    )
    assert ray.is_initialized()  # a connection made by the caller is left open
    assert on_ray.status == "failed" and on_ray.failed_tasks == ["lr9"]
    tasks = RunStore(tmp_path / "ray").tasks(exp.name, on_ray.path.name)
    assert [(t["task_key"], t["status"]) for t in tasks] == [
        ("lr0.05", "finished"),
        ("lr0.3", "finished"),
        ("lr9", "failed"),
    ]
    serial = reproduce(exp, config, preset="tiny", out=tmp_path / "serial", quiet=True)
    assert read_rows_csv(on_ray.metrics_file) == read_rows_csv(serial.metrics_file)


def _specs(exp, config, run_path: Path) -> list[TaskSpec]:
    return [TaskSpec(type(exp), config, t, str(run_path), "cpu", 10) for t in exp.tasks(config)]


def test_ray_tasks_never_open_the_run_directory_checkpoints_stream_to_the_driver(
    local_cluster, tmp_path
):
    """A worker is given no run directory (as on a node that cannot see the driver's): the
    checkpoint to resume from travels with the task, each new one streams back and the
    driver writes it."""
    exp = LeastSquaresGD()
    config = exp.resolve("tiny")  # steps 30, checkpoints every 10: lr0.05 and lr0.3
    run = RunStore(tmp_path).begin(exp.name, "r" * 12, preset="tiny", device="cpu", config=config)
    specs = _specs(exp, config, run.path)
    assert ray_spec(specs[0]).run_path == RAY_RUN_PATH and not Path(RAY_RUN_PATH).exists()
    saved = []
    run_task(specs[0], None, saved.append)  # lr0.05 from scratch, keeping its checkpoints
    step10 = saved[0]
    assert not step10["done"] and step10["state"]["step"] == 10
    step10["rows"][0]["loss"] = -1.0  # a marker: only a resumed task carries it on
    run.save_checkpoint("lr0.05", step10)
    results, progress = [], []
    RayExecutor(2).run(specs, results.append, lambda *event: progress.append(event))
    by_key = {r.key: r for r in results}
    assert {r.status for r in results} == {"finished"}
    assert by_key["lr0.05"].rows[0]["loss"] == -1.0  # resumed from the driver's checkpoint
    assert by_key["lr0.05"].rows[1:] == saved[-1]["rows"][1:]
    assert by_key["lr0.3"].rows[0]["loss"] != -1.0 and len(by_key["lr0.3"].rows) == 30
    for key, result in by_key.items():  # the last checkpoint of each, written by the driver
        final = torch.load(run.checkpoint_file(key), weights_only=True)
        assert final["done"] and final["rows"] == result.rows
    assert {key for key, *_ in progress} <= {"lr0.05", "lr0.3"}
    rerun = []
    RayExecutor(2).run(specs, rerun.append, lambda *event: None)  # done: read, not recomputed
    assert all(r.reused for r in rerun) and {r.key: r.rows for r in rerun} == {
        k: r.rows for k, r in by_key.items()
    }


def test_a_cluster_started_here_runs_the_sweep_and_is_shut_down(tmp_path):
    """``--executor ray`` without an address: a local cluster lives for the run (started in
    the calling thread, whose SIGTERM handler stays the one it had) and is shut down."""
    from typer.testing import CliRunner

    from deqlab.cli.app import app

    assert not ray.is_initialized()
    before = signal.getsignal(signal.SIGTERM)
    result = CliRunner().invoke(
        app,
        ["reproduce", "test-lsq-gd", "--preset", "tiny", "--executor", "ray", "--workers", "2",
         "--out", str(tmp_path), "--quiet"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "run finished:" in result.output and not ray.is_initialized()
    assert signal.getsignal(signal.SIGTERM) is before
    run_dir = next((tmp_path / "test-lsq-gd").iterdir())
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["lr0.05.pt", "lr0.3.pt"]


# --- unreachable and silent clusters ----------------------------------------------------------


def test_an_unreachable_address_fails_in_seconds_with_one_line_and_no_run(tmp_path):
    from typer.testing import CliRunner

    from deqlab.cli.app import app

    start = time.monotonic()
    result = CliRunner().invoke(
        app,
        ["reproduce", "test-lsq-gd", "--preset", "tiny", "--executor", "ray",
         "--address", "127.0.0.1:1", "--out", str(tmp_path), "--quiet"],
    )  # fmt: skip
    assert time.monotonic() - start < 30
    assert result.exit_code == 2, result.output
    assert result.output.strip() == (
        "error: cannot reach the Ray cluster at 127.0.0.1:1: a TCP connection to 127.0.0.1 "
        "port 1 failed within 5 s (Connection refused); start it there (ray start --head "
        "--port 1) or leave out --address to start a local cluster"
    )
    assert not (tmp_path / "test-lsq-gd").exists()


@pytest.mark.parametrize(
    "address",
    ["nonsense", "127.0.0.1", "127.0.0.1:0", "127.0.0.1:99999", "ray://:10001", "host:port"],
)
def test_a_malformed_address_is_one_line(address):
    with pytest.raises(ValueError, match=r"^`address` must be HOST:PORT \(e\.g\. 10\.0\.0\.5"):
        RayExecutor(1, address=address)


def test_a_silent_address_fails_after_the_init_timeout(tmp_path):
    """A port that accepts connections but is no Ray cluster: ``ray.init`` would wait for
    minutes; it gets RAY_INIT_TIMEOUT_S (5 s here) and the error names the address. In a
    subprocess: the abandoned ``ray.init`` thread stays behind in its process. (The
    executor refuses such an address before ``ray.init``, by its gRPC handshake: see
    test_faults_executors; this is the second line, for a peer that passes it.)"""
    code = (
        "import socket, threading, time\n"
        "server = socket.create_server(('127.0.0.1', 0))\n"
        "threading.Thread(target=lambda: [server.accept() for _ in range(50)], daemon=True)"
        ".start()\n"
        "import deqlab.runs.executors.ray as ex\n"
        "ex.RAY_INIT_TIMEOUT_S = 5\n"
        "address = f'127.0.0.1:{server.getsockname()[1]}'\n"
        "start = time.monotonic()\n"
        "try:\n"
        "    ex.init_ray_with_timeout(address=address, log_to_driver=False)\n"
        "except ex.RayConnectionError as err:\n"
        "    print('ERROR', time.monotonic() - start, err, flush=True)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    line = next(x for x in done.stdout.splitlines() if x.startswith("ERROR"))
    _, seconds, message = line.split(" ", 2)
    assert float(seconds) < 20
    assert message.startswith("ray.init(address='127.0.0.1:")
    assert message.endswith(
        "') did not connect within 5 s; is a Ray head node (ray start --head) running at "
        "that address, with the same Ray version?"
    )


def test_probe_names_a_refused_port():
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    server.close()  # nothing listens there now
    with pytest.raises(RayConnectionError, match=rf"at 127\.0\.0\.1:{port}: a TCP connection"):
        RayExecutor(1, address=f"127.0.0.1:{port}")


# --- two nodes ------------------------------------------------------------------------------------


def _processes() -> dict[int, tuple[int, str]]:
    table = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (
                    (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
                )
                ppid = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
            except OSError:
                continue
            table[int(entry.name)] = (ppid, cmd)
    return table


def _kill_cluster(*temp_dirs: str) -> None:
    """SIGKILL the processes of the clusters started in ``temp_dirs`` and their children
    (not ``ray stop``, which would stop every Ray process on the machine)."""
    table = _processes()
    mine = {pid for pid, (_, cmd) in table.items() if any(d in cmd for d in temp_dirs)}
    mine.discard(os.getpid())
    grown = True
    while grown:
        more = {pid for pid, (ppid, _) in table.items() if ppid in mine} - mine
        mine |= more
        grown = bool(more)
    for pid in mine:
        with contextlib.suppress(OSError):  # gone already
            os.kill(pid, signal.SIGKILL)


#: Ray settings of the two-node cluster and of its driver: no token authentication (newer
#: ``ray start`` may default to it; a driver in this process has its mode fixed already).
RAY_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}


@pytest.fixture
def two_nodes():
    if not Path("/proc/self/cmdline").exists():
        pytest.skip("finds the cluster's processes through /proc to stop them")
    ray_cli = Path(sys.executable).with_name("ray")
    # workers import the test experiments from this sys.path
    env = {**os.environ, **RAY_ENV, "PYTHONPATH": os.pathsep.join(sys.path)}
    head = tempfile.mkdtemp(prefix="rh", dir="/tmp")  # short: socket paths live under it
    node = tempfile.mkdtemp(prefix="rn", dir="/tmp")
    try:
        common = ["--num-cpus=1", "--disable-usage-stats"]
        subprocess.run(
            [ray_cli, "start", "--head", "--port=0", f"--temp-dir={head}",
             "--include-dashboard=false", *common],
            env=env, check=True, capture_output=True, timeout=120,
        )  # fmt: skip
        address = (Path(head) / "ray_current_cluster").read_text().strip()
        subprocess.run(
            [ray_cli, "start", f"--address={address}", f"--temp-dir={node}", *common],
            env=env, check=True, capture_output=True, timeout=120,
        )  # fmt: skip
        yield address
    finally:
        _kill_cluster(head, node)
        for directory in (head, node):
            shutil.rmtree(directory, ignore_errors=True)


#: ``deqlab`` with this module's test experiments registered (a driver of its own).
DRIVER = (
    "import sys; sys.path.insert(0, {tests!r}); import test_runs_executors_ray; "
    "from deqlab.cli.app import main; sys.argv = ['deqlab', *sys.argv[1:]]; main()"
)


def test_a_two_node_cluster_runs_a_sweep_and_the_driver_holds_every_checkpoint(two_nodes, tmp_path):
    """``deqlab reproduce --executor ray --address`` on two nodes: the tasks spread over
    both, and every checkpoint and result reaches the driver's run directory."""
    lrs = "lrs=[0.05,0.1,0.2,0.3]"
    done = subprocess.run(
        [sys.executable, "-c", DRIVER.format(tests=str(TESTS)), "reproduce", "test-node-lsq",
         "--preset", "tiny", "--set", lrs, "--executor", "ray", "--address", two_nodes,
         "--out", str(tmp_path), "--quiet"],
        env={**os.environ, **RAY_ENV}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    run_dir = next((tmp_path / "test-node-lsq").iterdir())
    rows = read_rows_csv(run_dir / "metrics.csv")
    assert len({row["node"] for row in rows}) == 2  # both nodes computed tasks
    for key in ("lr0.05", "lr0.1", "lr0.2", "lr0.3"):
        final = torch.load(run_dir / "checkpoints" / f"{key}.pt", weights_only=True)
        assert final["done"] and len(final["rows"]) == 30
    exp = LeastSquaresGD()
    serial = reproduce(
        exp, exp.resolve("tiny", overrides=[lrs]), preset="tiny", out=tmp_path / "s", quiet=True
    )
    assert [{k: v for k, v in row.items() if k != "node"} for row in rows] == read_rows_csv(
        serial.metrics_file
    )


# --- GPU requests (a stand-in for the few Ray calls, in this process) -----------------------------


class _Ref:
    def __init__(self, value) -> None:
        self.value = value


class _Stream:
    """An ObjectRefGenerator stand-in: ``next`` gives a reference to the next event."""

    def __init__(self, events) -> None:
        self.events = events

    def __next__(self) -> _Ref:
        return _Ref(next(self.events))


class _FakeRay(types.ModuleType):
    def __init__(self, gpus: float) -> None:
        super().__init__("ray")
        self.gpus, self.requested, self.devices = gpus, [], []

    def is_initialized(self) -> bool:
        return True  # "connected": the executor neither starts nor stops a cluster

    def cluster_resources(self) -> dict:
        return {"CPU": 2.0, "GPU": self.gpus}

    def remote(self, **options):
        self.requested.append(options)

        def wrap(fn):
            fake = self

            class Remote:
                @staticmethod
                def remote(spec, checkpoint):
                    fake.devices.append(spec.device)
                    return _Stream(fn(spec, checkpoint))

            return Remote

        return wrap

    def wait(self, refs, num_returns, timeout):
        return refs[:num_returns], refs[num_returns:]

    def get(self, ref):
        return ref.value

    def cancel(self, ref, force=False):
        return None


def test_ray_tasks_request_a_gpu_on_cuda(tmp_path, monkeypatch):
    exp = LeastSquaresGD()
    config = exp.resolve("tiny")
    run = RunStore(tmp_path).begin(exp.name, "r" * 12, preset="tiny", device="cpu", config=config)

    def specs(device):
        return [TaskSpec(LeastSquaresGD, config, t, str(run.path), device, 10)
                for t in exp.tasks(config)]  # fmt: skip

    fake = _FakeRay(gpus=1.0)
    monkeypatch.setitem(sys.modules, "ray", fake)
    results = []
    RayExecutor(2).run(specs("cpu"), results.append, lambda *a: None)
    assert fake.requested[-1] == {"num_cpus": 1, "num_gpus": 0, "max_retries": 0}
    for path in (run.path / "checkpoints").iterdir():
        path.unlink()  # so that the cuda sweep runs its tasks again
    RayExecutor(2).run(specs("cuda:1"), results.append, lambda *a: None)
    assert fake.requested[-1]["num_gpus"] == 1
    assert fake.devices[-2:] == ["cuda", "cuda"]  # Ray picks the GPU: cuda:N becomes cuda
    assert [r.status for r in results] == ["finished"] * 4
    no_gpu = _FakeRay(gpus=0.0)
    monkeypatch.setitem(sys.modules, "ray", no_gpu)
    with pytest.raises(ValueError, match="the Ray cluster has no GPU"):
        RayExecutor(2).run(specs("cuda"), results.append, lambda *a: None)

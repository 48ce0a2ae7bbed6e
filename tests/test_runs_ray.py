"""The Ray executor on a real local Ray cluster (127.0.0.1, 2 CPUs) started by the test."""

from __future__ import annotations

import os
import sys

import pytest

from deqlab.runs.executors import RayExecutor
from deqlab.runs.runner import reproduce
from deqlab.runs.store import RunStore, read_rows_csv
from test_runs_store import LeastSquaresGD

ray = pytest.importorskip("ray")


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
    tasks = RunStore(tmp_path / "ray").tasks(exp.name, on_ray.run.path.name)
    assert [(t["task_key"], t["status"]) for t in tasks] == [
        ("lr0.05", "finished"),
        ("lr0.3", "finished"),
        ("lr9", "failed"),
    ]
    serial = reproduce(exp, config, preset="tiny", out=tmp_path / "serial", quiet=True)
    assert read_rows_csv(on_ray.run.metrics_file) == read_rows_csv(serial.run.metrics_file)

"""Run store, executors and the reproduce pipeline, on a small real experiment.

``LeastSquaresGD`` (defined and registered here, importable by spawned workers through the
inherited ``sys.path``) runs full-batch GD on a seeded least-squares problem, one task per
learning rate, and checks the final loss against the closed-form optimum. A learning rate
beyond 2/L really diverges, which is how the failing-task test fails a task.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest
import tomllib
import torch

from deqlab.experiments.base import Experiment, Task, TaskContext
from deqlab.experiments.config import config_hash
from deqlab.experiments.constraints import DISTINCT, POSITIVE, SEED, Config, Interval
from deqlab.experiments.deviations import measurement, not_given
from deqlab.experiments.registry import register
from deqlab.runs.executors import LocalExecutor, TaskSpec, execute_task
from deqlab.runs.rundir import RunDir, RunStoreError
from deqlab.runs.runner import reproduce
from deqlab.runs.store import RunStore
from deqlab.runs.summary import provenance_warning
from deqlab.runs.tables import read_rows_csv
from deqlab.statements import OURS, Kind, Statement, measure
from helpers import TEST_PAPER


@dataclass(frozen=True)
class LsqConfig(Config):
    n: int = 40
    d: int = 5
    steps: int = 60
    lrs: tuple[float, ...] = (0.05, 0.3)
    seed: int = 0

    constraints: ClassVar = {
        "n": Interval(1),
        "d": Interval(1),
        "steps": Interval(1),
        "lrs": (POSITIVE, DISTINCT),
        "seed": SEED,
    }


def _problem(config: LsqConfig) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(config.seed)
    X = torch.randn(config.n, config.d, generator=gen, dtype=torch.float64)
    y = torch.randn(config.n, generator=gen, dtype=torch.float64)
    return X, y


@register
class LeastSquaresGD(Experiment):
    """GD on Φ(w) = ‖Xw − y‖² / (2n); one task per learning rate."""

    slug = "lsq-gd"
    title = "Full-batch GD on least squares"
    paper = TEST_PAPER
    Config = LsqConfig
    presets: ClassVar = {"tiny": {"steps": 30}, "quick": {}, "paper": {"steps": 200}}
    metric_columns: ClassVar = {
        "task": "task key (lr<learning rate>)",
        "lr": "learning rate η",
        "step": "GD step t",
        "loss": "Φ(w_t) = ‖X w_t − y‖² / (2n)",
    }
    paper_setting: ClassVar = {
        "n": not_given(), "d": not_given(), "steps": not_given(), "lrs": not_given(),
        "seed": measurement(),
    }  # fmt: skip
    default_checkpoint_every = 10

    def tasks(self, config: LsqConfig) -> list[Task]:
        return [Task(f"lr{lr:g}", {"lr": lr}) for lr in config.lrs]

    def run_task(self, config: LsqConfig, task: Task, ctx: TaskContext) -> list[dict]:
        X, y = _problem(config)
        lr = float(task.params["lr"])
        resumed = ctx.resume()
        if resumed is None:
            w, rows, start = torch.zeros(config.d, dtype=torch.float64), [], 0
        else:
            state, rows = resumed
            w, start = state["w"], state["step"]
        for step in range(start, config.steps):
            r = X @ w - y
            loss = float(0.5 * r @ r / config.n)
            if not loss < 1e6:
                raise FloatingPointError(f"GD diverged at step {step} with lr {lr}")
            rows.append({"task": task.key, "lr": lr, "step": step, "loss": loss})
            w = w - lr * (X.T @ r) / config.n
            if (step + 1) % ctx.checkpoint_every == 0:
                ctx.checkpoint({"w": w, "step": step + 1}, rows)
            ctx.progress(step + 1, config.steps)
        return rows

    def statements(self, config: LsqConfig, rows: list[dict]) -> list[Statement]:
        X, y = _problem(config)
        w_star = torch.linalg.lstsq(X, y).solution
        optimum = float(0.5 * (X @ w_star - y).square().sum() / config.n)
        final = {r["task"]: r["loss"] for r in rows}  # the last row of each task wins
        return [
            measure(
                f"{key} reaches the optimum",
                Kind.OURS,
                OURS,
                value=loss - optimum,
                relation="<",
                threshold=1e-3,
                measured=f"{loss:.6g}",
                expected=f"{optimum:.6g} + 1e-3",
            )
            for key, loss in final.items()
        ]

    def plot(self, config: LsqConfig, rows: list[dict], directory: Path) -> list[Path]:
        import matplotlib.pyplot as plt  # imported here: spawned workers never plot

        from deqlab.report import save_figure

        fig, ax = plt.subplots()
        for key in dict.fromkeys(r["task"] for r in rows):
            mine = [r for r in rows if r["task"] == key]
            ax.semilogy([r["step"] for r in mine], [r["loss"] for r in mine], label=key)
        ax.legend()
        return save_figure(fig, directory, "loss")


def _run(tmp_path: Path, **overrides) -> object:
    exp = LeastSquaresGD()
    config = exp.resolve("tiny", overrides=[f"{k}={v}" for k, v in overrides.items()])
    return reproduce(exp, config, preset="tiny", out=tmp_path, quiet=True)


def test_run_directory_layout_and_index(tmp_path):
    outcome = _run(tmp_path)
    run = outcome.path
    assert outcome.status == "finished" and not outcome.reused
    assert run.parent.name == "test-lsq-gd" and len(run.name) == 12
    saved = tomllib.loads((run / "config.toml").read_text())
    assert saved["experiment"] == {
        "name": "test-lsq-gd",
        "preset": "tiny",
        "hash": run.name,
        "device": "cpu",
    }
    assert saved["config"]["steps"] == 30 and saved["config"]["lrs"] == [0.05, 0.3]
    rows = read_rows_csv(run / "metrics.csv")
    assert len(rows) == 2 * 30 and set(rows[0]) == {"task", "lr", "step", "loss"}
    summary = RunDir(outcome.path).read_summary()
    assert summary["status"] == "finished" and summary["config_hash"] == run.name
    assert [t["key"] for t in summary["tasks"]] == ["lr0.05", "lr0.3"]
    statements = summary["statements"]
    assert all(c["verdict"] == "PASS" for c in statements) and len(statements) == 2
    assert summary["deviations"][0]["kind"] == "our choice"
    assert {"figures/loss.png", "figures/loss.pdf"} <= {f["path"] for f in summary["figures"]}
    assert (run / "figures" / "loss.png").stat().st_size > 0
    assert (run / "checkpoints" / "lr0.3.pt").exists()
    with sqlite3.connect(tmp_path / "index.sqlite") as db:
        status, n_tasks, wall = db.execute(
            "SELECT status, n_tasks, wall_s FROM runs WHERE config_hash = ?", (run.name,)
        ).fetchone()
    assert (status, n_tasks) == ("finished", 2) and wall > 0


def test_finished_run_is_reused(tmp_path):
    first = _run(tmp_path)
    mtime = (first.path / "metrics.csv").stat().st_mtime_ns
    second = _run(tmp_path)
    assert second.reused and second.path == first.path
    assert (first.path / "metrics.csv").stat().st_mtime_ns == mtime
    assert len(RunStore(tmp_path).runs()) == 1
    second.report.unlink()  # a reused run whose report was deleted gets it written again
    assert _run(tmp_path).report == second.report and second.report.exists()


def test_failing_task_is_recorded_and_sweep_continues_in_a_process_pool(tmp_path):
    exp = LeastSquaresGD()
    config = exp.resolve("tiny", overrides=["lrs=[0.05,9.0,0.3]"])  # 9 > 2/L: GD diverges
    outcome = reproduce(
        exp, config, preset="tiny", out=tmp_path / "pool", quiet=True, executor=LocalExecutor(2)
    )
    assert outcome.status == "failed" and outcome.failed_tasks == ["lr9"]
    store = RunStore(tmp_path / "pool")
    tasks = {t["task_key"]: t for t in store.tasks("test-lsq-gd", outcome.path.name)}
    assert tasks["lr9"]["status"] == "failed"
    assert tasks["lr9"]["error"].startswith("FloatingPointError: GD diverged at step")
    assert tasks["lr0.05"]["status"] == tasks["lr0.3"]["status"] == "finished"
    (run,) = store.runs()
    assert run["status"] == "failed" and run["n_failed"] == 1 and "lr9" in run["error"]
    rows = read_rows_csv(outcome.metrics_file)
    assert {r["task"] for r in rows} == {"lr0.05", "lr0.3"}  # the others still ran
    serial = reproduce(exp, config, preset="tiny", out=tmp_path / "serial", quiet=True)
    assert read_rows_csv(serial.metrics_file) == rows  # processes change no number


def test_interrupted_task_resumes_to_identical_numbers(tmp_path):
    exp = LeastSquaresGD()
    config = exp.resolve("tiny")
    reference = _run(tmp_path / "ref")
    run = RunStore(tmp_path / "cut").begin(
        exp.name, "h" * 12, preset="tiny", device="cpu", config=config
    )
    spec = TaskSpec(LeastSquaresGD, config, exp.tasks(config)[1], str(run.path), "cpu", 10)

    def interrupt(key: str, done: int, total: int) -> None:
        if done == 25:  # after the checkpoint at step 20: steps 20..24 are lost
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        execute_task(spec, interrupt)
    checkpoint = run.load_checkpoint("lr0.3")
    assert not checkpoint["done"] and checkpoint["state"]["step"] == 20
    resumed = execute_task(spec)
    assert resumed.status == "finished" and not resumed.reused
    expected = [r for r in read_rows_csv(reference.metrics_file) if r["task"] == "lr0.3"]
    assert resumed.rows == expected  # bit-exact: floats round-trip through repr
    assert execute_task(spec).reused  # a done checkpoint is not recomputed


def test_config_hash_depends_on_config_and_device():
    base = LsqConfig()
    assert config_hash("x", base, device="cpu") == config_hash("x", LsqConfig(), device="cpu")
    assert config_hash("x", base, device="cpu") != config_hash("x", base, device="cuda")
    assert config_hash("x", base, device="cpu") != config_hash("x", LsqConfig(n=41), device="cpu")
    assert len(config_hash("x", base, device="cpu")) == 12


def test_unwritable_output_directory_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(RunStoreError, match=r"output directory .* is a file, not a directory$"):
        RunStore(blocker / "results")  # issue 26: it says why, not "not writable: Not a dir…"


def test_force_recomputes_a_finished_run_from_scratch(tmp_path):
    first = _run(tmp_path)
    stale = first.path / "checkpoints" / "stale.pt"
    stale.write_bytes(b"")
    exp = LeastSquaresGD()
    forced = reproduce(
        exp, exp.resolve("tiny"), preset="tiny", out=tmp_path, quiet=True, force=True
    )
    assert not forced.reused and forced.status == "finished" and forced.path == first.path
    assert not stale.exists()  # the checkpoints were discarded, not resumed
    summary = RunDir(forced.path).read_summary()
    assert not any(t["reused"] for t in summary["tasks"])
    assert read_rows_csv(forced.metrics_file) == read_rows_csv(first.metrics_file)
    assert _run(tmp_path).reused  # without force the finished run is reused again


def test_summary_records_version_and_commit_and_reuse_warns_on_another(tmp_path):
    import deqlab

    first = _run(tmp_path)
    env = RunDir(first.path).read_summary()["environment"]
    assert env["deqlab"] == deqlab.__version__ and "git_commit" in env
    assert _run(tmp_path).warnings == []  # same version and commit: silent reuse
    summary = RunDir(first.path).read_summary()
    summary["environment"].update(
        deqlab="0.0.1", git_commit="0123456789abcdef0123", git_dirty=False
    )
    RunDir(first.path).write_summary(summary)
    reused = _run(tmp_path)
    assert reused.reused and len(reused.warnings) == 1
    (warning,) = reused.warnings
    assert "computed by deqlab 0.0.1 (commit 0123456789ab)" in warning
    assert f"this is deqlab {deqlab.__version__}" in warning and "--force" in warning
    del summary["environment"]
    assert "computed by deqlab (unrecorded version) (no git commit)" in provenance_warning(
        first.path, summary
    )


def test_open_existing_store_reads_without_writing(tmp_path):
    with pytest.raises(RunStoreError, match=r"no run index at .*index.sqlite"):
        RunStore.open_existing(tmp_path / "none")
    assert not (tmp_path / "none").exists()
    outcome = _run(tmp_path)
    store = RunStore.open_existing(tmp_path)
    (row,) = store.runs()
    assert row["config_hash"] == outcome.path.name
    assert json.loads(row["config_json"])["steps"] == 30

"""The experiment commands end to end: reproduce (every registered experiment, tiny preset),
list, runs list|show, report; bad input is one line on stderr and a non-zero exit."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from deqlab.cli import app
from deqlab.experiments.registry import BUILTIN_MODULES, experiment_names
from deqlab.runs.tables import read_rows_csv
from test_runs_store import LeastSquaresGD  # registers the test experiment

runner = CliRunner()
BUILTIN = [n for n in experiment_names() if not n.startswith("test-")]  # tests register test-*
assert LeastSquaresGD.name.startswith("test-")


def invoke(*args: str):
    return runner.invoke(app, [str(a) for a in args])


@pytest.mark.parametrize("name", BUILTIN)
def test_every_registered_experiment_runs_tiny_through_the_cli(name, tmp_path):
    result = invoke(
        "reproduce", name, "--preset", "tiny", "--out", tmp_path, "--quiet", "--workers", 1
    )
    assert result.exit_code == 0, result.output
    run_dir = next((tmp_path / name).iterdir())
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["statements"] and summary["figures"]
    assert f"report: {run_dir / 'report.html'}" in result.stdout
    assert (run_dir / "report.html").stat().st_size > 0
    assert read_rows_csv(run_dir / "metrics.csv")


def test_builtin_packages_register_every_experiment_of_their_paper():
    assert len(BUILTIN_MODULES) == 3
    assert {name.split("-")[0] for name in BUILTIN} == {"ling2023", "kawaguchi2021", "hieu2022"}
    figures = {"ling2023-fig1", "ling2023-init", "kawaguchi2021-fig1", "kawaguchi2021-fig2",
               "kawaguchi2021-fig3", "hieu2022-mondeq-gd", "hieu2022-dynamics",
               "hieu2022-landscape"}  # fmt: skip
    assert figures <= set(BUILTIN)


def test_reproduce_reuse_runs_and_report_commands(tmp_path):
    args = ("reproduce", "test-lsq-gd", "--preset", "tiny", "--out", tmp_path, "--workers", 1)
    first = invoke(*args, "--set", "steps=20")
    assert first.exit_code == 0, first.output
    assert "run finished:" in first.stdout and "Statements" in first.stdout
    assert "verdicts: ours: 1 of 2 pass" in first.stdout
    assert "our choice where the paper gives none: n, d, steps, lrs" in first.stdout
    second = invoke(*args, "--set", "steps=20", "--quiet")
    assert second.exit_code == 0 and "reused finished run:" in second.stdout
    listing = invoke("runs", "list", "--out", tmp_path)
    assert (
        listing.exit_code == 0 and "test-lsq-gd" in listing.stdout and "finished" in listing.stdout
    )
    run_dir = next((tmp_path / "test-lsq-gd").iterdir())
    shown = invoke("runs", "show", run_dir.name[:6], "--out", tmp_path)
    assert shown.exit_code == 0, shown.output
    assert (
        "status=finished" in shown.stdout
        and "[PASS] (ours, ours) lr0.3 reaches the optimum" in shown.stdout
    )
    assert "[FAIL] (ours, ours) lr0.05 reaches the optimum" in shown.stdout  # 20 steps are too few
    (run_dir / "report.html").unlink()
    report = invoke("report", run_dir)
    assert report.exit_code == 0 and (run_dir / "report.html").exists()
    assert "test-lsq-gd" in invoke("list").stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("reproduce", "no-such-exp"),
            "error: unknown experiment 'no-such-exp'; known experiments:",
        ),
        (
            ("reproduce", "test-lsq-gd", "--set", "stepz=3"),
            "error: unknown config key 'stepz'; valid keys: n, d, steps, lrs, seed",
        ),
        (
            ("reproduce", "test-lsq-gd", "--set", "steps=1.5"),
            "error: `steps` must be int; got float 1.5",
        ),
        (
            ("reproduce", "test-lsq-gd", "--preset", "huge"),
            "error: unknown preset 'huge' for test-lsq-gd; valid presets: tiny, quick, paper",
        ),
        (
            ("reproduce", "test-lsq-gd", "--executor", "dask"),
            "error: `executor` must be one of 'local', 'ray'; got 'dask'",
        ),
        (
            ("reproduce", "test-lsq-gd", "--device", "tpu"),
            "error: `device` must be cpu, cuda or cuda:N (N a CUDA device index); got 'tpu'",
        ),
        (("runs", "show", "ffff"), "error: no run in"),
    ],
)
def test_bad_input_is_one_line_and_nonzero_exit(args, message, tmp_path):
    if args[0] == "runs":
        invoke("reproduce", "test-lsq-gd", "--preset", "tiny", "--out", tmp_path, "--workers", 1)
    result = invoke(*args, "--out", tmp_path)
    assert result.exit_code == 2
    assert result.stderr.startswith(message) and result.stderr.count("\n") == 1, result.stderr


def test_unwritable_output_directory(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = invoke("reproduce", "test-lsq-gd", "--preset", "tiny", "--out", blocker / "out")
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert "error: output directory" in result.stderr  # issue 26: says why it cannot be used
    assert f"cannot be made: '{blocker}' is a file, not a directory" in result.stderr

"""The experiment commands (deqlab/cli/experiments.py) end to end: reproduce (every registered
experiment, tiny preset), list, runs list|show, report; bad input is one line on stderr and a
non-zero exit. ``deqlab show NAME``: config keys with types, defaults and the preset's values;
data sets needed and present; metric columns; paper setting and deviations; an estimated run
time. ``deqlab list`` says which data sets each preset needs and whether they are present."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
from typer.testing import CliRunner

from deqlab.cli import app
from deqlab.data import write_idx
from deqlab.experiments import deviations
from deqlab.experiments.base import Experiment, Task, TaskContext
from deqlab.experiments.catalog import block, statements_block
from deqlab.experiments.registry import experiment_names, get_experiment, register
from deqlab.papers import reproduced
from deqlab.runs.describe import GENERIC_RUN_TIME, dataset_status
from deqlab.runs.tables import read_rows_csv
from deqlab.statements import Statement
from helpers import TEST_PAPER
from test_runs_store import LeastSquaresGD  # registers the test experiment

runner = CliRunner()
EXPERIMENTS_MD = Path(__file__).resolve().parents[1] / "docs" / "experiments.md"
BUILTIN = [n for n in experiment_names() if not n.startswith("test-")]  # tests register test-*
assert LeastSquaresGD.name.startswith("test-")


def invoke(*args: object):
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
    found = [Statement.from_dict(s) for s in summary["statements"]]
    documented = block(EXPERIMENTS_MD.read_text(encoding="utf-8"), "statements", name)
    assert documented == statements_block(found), "docs/experiments.md is stale: run `make docs`"


def test_every_builtin_experiment_belongs_to_a_reproduced_paper_and_each_has_one():
    papers = reproduced()
    assert {get_experiment(name).paper for name in BUILTIN} == set(papers)
    for name in BUILTIN:
        assert name.split("-")[0] in {paper.key for paper in papers}


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


# --- show, and the data sets in list --------------------------------------------------------


@dataclass(frozen=True)
class ProbeConfig:
    datasets: tuple[str, ...] = ("sphere", "digits", "mnist")
    scale: float = 1.0
    label: str | None = None


@register
class DataProbe(Experiment):
    """Reads nothing; declares data sets (for `show`) and a paper setting of our choices."""

    slug = "data-probe"
    title = "Data probe"
    paper = TEST_PAPER
    Config = ProbeConfig
    presets: ClassVar = {"tiny": {"datasets": ("digits",)}, "quick": {}, "paper": {"scale": 2}}
    paper_setting: ClassVar = {
        "datasets": deviations.paper(("sphere", "digits", "mnist"), "test"),
        "scale": deviations.not_given(), "label": deviations.measurement(),
    }  # fmt: skip

    def tasks(self, config):
        return [Task("only")]

    def run_task(self, config, task, ctx: TaskContext):
        return [{"step": 0, "value": config.scale}]

    def plot(self, config, rows, directory: Path):
        return []

    def statements(self, config, rows):
        return []


def show_json(*args: object) -> dict:
    result = invoke("show", *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _fake_mnist(root: Path, splits=("train", "test")) -> None:
    """A readable MNIST of 3 images per split in ``root/mnist``."""
    prefix = {"train": "train", "test": "t10k"}
    for split in splits:
        write_idx(root / "mnist" / f"{prefix[split]}-images-idx3-ubyte.gz",
                  np.zeros((3, 28, 28), dtype=np.uint8))  # fmt: skip
        write_idx(root / "mnist" / f"{prefix[split]}-labels-idx1-ubyte.gz",
                  np.array([0, 1, 2], dtype=np.uint8))  # fmt: skip


def test_show_json_config_metrics_deviations_and_generic_time(tmp_path):
    info = show_json(LeastSquaresGD.name, "--preset", "tiny", "--out", tmp_path)
    assert info["name"] == "test-lsq-gd" and info["preset"] == "tiny"
    assert info["presets"] == ["tiny", "quick", "paper"]
    fields = {f["name"]: f for f in info["config"]}
    assert fields["steps"] == {"name": "steps", "type": "int", "default": 60, "value": 30}
    assert fields["lrs"] == {"name": "lrs", "type": "tuple[float, ...]", "default": [0.05, 0.3],
                             "value": [0.05, 0.3]}  # fmt: skip
    assert info["metric_columns"] == dict(LeastSquaresGD.metric_columns)
    assert info["datasets"] == []
    assert info["paper_setting"]["n"] == {"role": "not given", "value": None, "where": "",
                                          "substitute": False}  # fmt: skip
    assert info["paper_setting"]["seed"]["role"] == "measurement"
    assert [d["setting"] for d in info["deviations"]] == ["n", "d", "steps", "lrs"]
    assert info["deviations"][2] == {"setting": "steps", "paper": "not given", "run": "30",
                                     "kind": "our choice", "where": ""}  # fmt: skip
    assert info["deviations_sentence"].endswith("paper gives none: n, d, steps, lrs")
    assert info["run_time"]["source"] == "generic" and info["run_time"]["seconds"] is None
    assert info["run_time"]["text"].startswith("seconds (a generic estimate for the 'tiny'")
    assert info["command"] == "deqlab reproduce test-lsq-gd --preset tiny"
    with_set = show_json("test-lsq-gd", "--preset", "tiny", "--set", "steps=7")
    assert {f["name"]: f["value"] for f in with_set["config"]}["steps"] == 7
    assert with_set["config_hash_cpu"] != info["config_hash_cpu"]


def test_show_estimates_from_earlier_runs_of_the_preset(tmp_path):
    out = tmp_path / "results"
    run = invoke("reproduce", "test-lsq-gd", "--preset", "tiny", "--out", out, "--workers", 1,
                 "--quiet")  # fmt: skip
    assert run.exit_code == 0, run.output
    exact = show_json("test-lsq-gd", "--preset", "tiny", "--out", out)["run_time"]
    assert exact["source"] == "this config" and exact["seconds"] > 0
    assert "this config already finished in" in exact["text"] and "reuses it" in exact["text"]
    other = show_json("test-lsq-gd", "--preset", "tiny", "--set", "steps=12", "--out", out)
    assert other["run_time"]["source"] == "earlier runs" and other["run_time"]["runs"] == 1
    assert other["run_time"]["text"].startswith("about ")
    assert "median of 1 finished run(s) of the 'tiny' preset" in other["run_time"]["text"]
    paper = show_json("test-lsq-gd", "--preset", "paper", "--out", out)["run_time"]
    assert paper["source"] == "generic" and paper["text"].startswith(GENERIC_RUN_TIME["paper"])
    assert GENERIC_RUN_TIME == {"tiny": "seconds", "quick": "minutes on 2 CPU cores",
                                "paper": "hours; a GPU is advised"}  # fmt: skip


def test_show_data_sets_present_and_missing(tmp_path):
    info = show_json(DataProbe.name, "--preset", "quick", "--data-dir", tmp_path)
    by_name = {d["name"]: d for d in info["datasets"]}
    assert list(by_name) == ["sphere", "digits", "mnist"]
    assert by_name["sphere"]["present"] and by_name["digits"]["present"]
    assert by_name["mnist"]["present"] is False
    assert by_name["mnist"]["fetch"] == f"deqlab data fetch mnist --dir {tmp_path}"
    assert info["paper_setting"]["label"]["role"] == "measurement"
    assert [d["setting"] for d in info["deviations"]] == ["scale"]
    assert info["deviations_sentence"].endswith("paper gives none: scale")
    assert info["metric_columns"] == {}
    assert {f["name"]: f["type"] for f in info["config"]} == {
        "datasets": "tuple[str, ...]", "scale": "float", "label": "str | None",
    }  # fmt: skip
    _fake_mnist(tmp_path, splits=("train",))
    half = dataset_status("mnist", tmp_path)
    assert half["present"] is False and half["status"] == "missing"  # no test split
    assert half["splits"]["train"]["status"] == "present"
    _fake_mnist(tmp_path)
    info = show_json(DataProbe.name, "--data-dir", tmp_path)
    mnist = info["datasets"][2]
    assert mnist["present"] and mnist["status"] == "present" and mnist["fetch"] is None
    assert mnist["splits"]["test"]["location"].endswith("t10k-images-idx3-ubyte.gz")
    (tmp_path / "mnist" / "t10k-labels-idx1-ubyte.gz").write_bytes(b"\x1f\x8btruncated")
    broken = show_json(DataProbe.name, "--data-dir", tmp_path)["datasets"][2]
    assert not broken["present"] and broken["status"] == "corrupt"
    assert broken["fetch"] == f"deqlab data fetch mnist --dir {tmp_path}"
    text = invoke("show", DataProbe.name, "--data-dir", tmp_path).stdout
    assert re.search(r"│ mnist\s+│ corrupt\s+│ deqlab data fetch mnist", text)
    assert "is not a readable gzip file" in " ".join(text.split())
    assert show_json(DataProbe.name, "--preset", "tiny")["datasets"][0]["name"] == "digits"


def test_show_text_lists_every_section(tmp_path):
    result = runner.invoke(
        app, ["show", "test-data-probe", "--preset", "paper", "--data-dir", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "test-data-probe — Data probe" in text and "preset: paper" in text
    assert "Config (--set KEY=VALUE)" in text
    (scale,) = [line for line in text.splitlines() if "│ scale" in line and "float" in line]
    assert "float" in scale and "1" in scale and "2" in scale  # default 1, preset value 2
    assert "Data sets" in text and "missing" in text and "deqlab data fetch mnist" in text
    assert "metric columns: not documented by this experiment" in text
    assert "paper setting: our choice where the paper gives none: scale" in text
    assert "estimated run time: hours; a GPU is advised (a generic estimate" in text
    assert "run it: deqlab reproduce test-data-probe --preset paper" in text
    lsq = invoke("show", "test-lsq-gd", "--out", tmp_path)
    assert "Metric columns (metrics.csv)" in lsq.stdout and "learning rate η" in lsq.stdout
    assert "Deviations from the paper" in lsq.stdout


def test_list_says_which_data_sets_each_preset_needs(tmp_path):
    result = runner.invoke(app, ["list", "--data-dir", str(tmp_path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    (first,) = [i for i, line in enumerate(lines) if "test-data-probe" in line]
    assert "tiny: digits ✓" in lines[first]
    assert "quick, paper: sphere ✓, digits ✓, mnist ✗" in lines[first + 1]
    assert "missing data sets:" in result.stdout and "mnist" in result.stdout
    fetch_line = next(line for line in lines if line.startswith("missing data sets:"))
    assert "imagenet" not in fetch_line  # fetched by hand: a line of its own
    assert "missing data sets copied by hand: imagenet" in result.stdout
    probe = next(e for e in json.loads(invoke("list", "--json", "--data-dir", tmp_path).stdout)
                 if e["name"] == "test-data-probe")  # fmt: skip
    assert [s["name"] for s in probe["datasets"]["tiny"]] == ["digits"]
    assert [s["present"] for s in probe["datasets"]["quick"]] == [True, True, False]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("show", "no-such-exp"), "error: unknown experiment 'no-such-exp'; known experiments:"),
        (("show", "test-lsq-gd", "--preset", "huge"),
         "error: unknown preset 'huge' for test-lsq-gd; valid presets: tiny, quick, paper"),
        (("show", "test-lsq-gd", "--set", "steps=1.5"), "error: `steps` must be int; got float"),
        (("show", "test-lsq-gd", "--set", "stepz=1"), "error: unknown config key 'stepz'"),
        (("show", "test-lsq-gd", "--config", "missing.toml"),
         "error: config file 'missing.toml' does not exist"),
        (("show",), "error: Missing argument 'NAME'."),
    ],
)  # fmt: skip
def test_show_usage_errors_are_one_line_and_exit_2(args, message):
    result = invoke(*args)
    assert result.exit_code == 2
    assert result.stderr.startswith(message) and result.stderr.count("\n") == 1, result.stderr
    assert result.stdout == ""

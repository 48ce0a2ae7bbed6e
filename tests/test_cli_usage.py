"""The command line as a script or a person calls it: every usage error is one ``error:``
line on stderr naming the argument, with exit code 2; every ``--help`` lists the allowed
values of its choice options and has an example; shell completion is on."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from deqlab.cli import app
from deqlab.cli.experiments import complete_name
from deqlab.data import DATASETS, SOURCES
from deqlab.experiments.registry import experiment_names
from test_runs_store import LeastSquaresGD  # registers the test experiment

runner = CliRunner()
WIDE = {"COLUMNS": "160", "TERMINAL_WIDTH": "160"}


def invoke(*args: object, **kwargs):
    return runner.invoke(app, [str(a) for a in args], **kwargs)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("reproduce",), "error: Missing argument 'NAME'. (see 'deqlab reproduce --help')"),
        (("reproduce", "x", "--workers", "two"), "error: Invalid value for '--workers':"),
        (("reproduce", "x", "--workers", "0"), "error: Invalid value for '--workers':"),
        (("reproduce", "x", "--bogus"), "error: No such option: --bogus"),
        (("reproduce", "test-lsq-gd", "--executor", "dask"),
         "error: `executor` must be one of 'local', 'ray'; got 'dask'"),
        (("reproduce", "test-lsq-gd", "--executor", "local", "--address", "h:1"),
         "error: `address` is only used by the ray executor"),
        (("nope",), "error: No such command 'nope'."),
        (("list", "--bogus"), "error: No such option: --bogus"),
        (("runs", "nope"), "error: No such command 'nope'. (see 'deqlab runs --help')"),
        (("runs", "show"), "error: Missing argument 'REF'."),
        (("runs", "list", "--out", "no/such/dir"), "error: no run index at 'no/such/dir/index"),
        (("report", "no/such/run"), "error: run directory 'no/such/run' does not exist"),
        (("kernel",), "error: give exactly one of --dataset NAME or --input X.npy"),
        (("kernel", "--n", "many"), "error: Invalid value for '--n':"),
        (("kernel", "--dataset", "sphere", "--depth", "-2"),
         "error: `--depth` must be a non-negative integer or 'inf'; got '-2'"),
        (("kernel", "--dataset", "sphere", "--n", "5", "--sigma-w2", "1"),
         "error: `--sigma-w2` must be in (0, 1)"),
        (("kernel", "--dataset", "nope"), "error: `--dataset` must be one of 'sphere', 'mnist'"),
        (("kernel", "--input", "no-such.npy"), "error: `--input` 'no-such.npy': no such file"),
        (("data", "fetch", "nope"), "error: `name` must be one of 'mnist', 'fashion-mnist'"),
        (("data", "fetch", "digits"), "error: `name` must be one of"),
        (("data", "fetch"), "error: Missing argument"),
        (("data", "list", "--dir"), "error: Option '--dir' requires an argument."),
    ],
)  # fmt: skip
def test_usage_errors_are_one_line_on_stderr_and_exit_2(args, message):
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(message), result.stderr
    assert result.stderr.count("\n") == 1 and result.stdout == ""


@pytest.mark.parametrize(
    "command",
    [
        ("kernel", "--dataset", "mnist", "--n", 10),
        ("verify", "--dataset", "mnist", "--n", 10),
        ("reproduce", "ling2023-fig1", "--preset", "paper"),  # sphere, mnist and cifar10
    ],
    ids=lambda c: c[0],
)
def test_a_missing_data_set_is_one_line_and_exit_2_in_every_command(command, tmp_path,
                                                                    monkeypatch):  # fmt: skip
    """A missing input, like a usage error: the line names the data set, where it looked
    (where to put the files) and the fetch command; no run is started (the store's index
    may be created)."""
    data, out = tmp_path / "data", tmp_path / "results"
    data.mkdir()
    monkeypatch.setenv("DEQLAB_DATA", str(data))
    result = invoke(*command, *(("--out", out) if command[0] == "reproduce" else ()))
    assert result.exit_code == 2, result.output
    assert result.stdout == "" and result.stderr.count("\n") == 1
    assert result.stderr.startswith("error: data set 'mnist' (train split) not found: expected")
    assert f"Looked in: {data / 'mnist'} {data}" in result.stderr
    assert result.stderr.endswith("Fetch it with: deqlab data fetch mnist\n")
    assert not (out / "ling2023-fig1").exists()


def test_data_list_reports_a_missing_data_set_and_exits_0(tmp_path):
    """Listing is not reading: ``data list`` succeeds and gives each missing split the
    command that fetches it (what the other commands' error line names)."""
    result = invoke("data", "list", "--dir", tmp_path, "--json")
    assert result.exit_code == 0 and result.stderr == ""
    rows = {(e["name"], e["split"]): e for e in json.loads(result.stdout)}
    assert rows["mnist", "train"]["status"] == "missing"
    assert rows["mnist", "train"]["fetch"] == f"deqlab data fetch mnist --dir {tmp_path}"


def test_a_missing_data_set_under_data_dir_names_that_directory(tmp_path):
    result = invoke("kernel", "--dataset", "cifar10", "--data-dir", tmp_path)
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert f"Looked in: {tmp_path / 'cifar10'} {tmp_path} " in result.stderr
    assert result.stderr.endswith(f"Fetch it with: deqlab data fetch cifar10 --dir {tmp_path}\n")


def test_no_arguments_prints_the_help():
    result = invoke()
    assert result.exit_code == 2 and "Usage:" in result.stdout and "reproduce" in result.stdout


COMMANDS = [
    ("version",), ("list",), ("show",), ("reproduce",), ("report",), ("kernel",),
    ("data", "list"), ("data", "fetch"), ("runs", "list"), ("runs", "show"), ("runs", "diff"),
    ("runs", "index"), (),
]  # fmt: skip


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "deqlab")
def test_every_help_has_an_example(command):
    result = invoke(*command, "--help", env=WIDE)
    assert result.exit_code == 0, result.output
    assert "Example" in result.stdout
    assert f"deqlab {' '.join(command)}".strip() in result.stdout.split("Example", 1)[1]


@pytest.mark.parametrize(
    ("command", "choices"),
    [
        (("reproduce",), ["tiny|quick|paper", "local|ray", "cpu|cuda|cuda:N", "KEY=VALUE"]),
        (("show",), ["tiny|quick|paper", "KEY=VALUE"]),
        (("kernel",), [f"A data set: {', '.join(DATASETS)}.", "standard|ntk", "L|inf"]),
        (("data", "fetch"), ["|".join(SOURCES)]),
    ],
)
def test_help_lists_the_allowed_values_of_choice_options(command, choices):
    result = invoke(*command, "--help", env=WIDE)
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.replace("│", " ").split())  # help text may wrap
    for choice in choices:
        assert choice in text, choice


@pytest.mark.parametrize("command", ["reproduce", "show"])
def test_help_of_a_command_taking_an_experiment_names_them(command):
    text = " ".join(invoke(command, "--help", env=WIDE).stdout.split())
    assert "One of: hieu2022-dynamics," in text and "ling2023-fig1" in text


def test_shell_completion_is_on():
    result = invoke("--help", env=WIDE)
    assert "--install-completion" in result.stdout and "--show-completion" in result.stdout
    # What `--install-completion` installs (the shell is given: no detection needed here).
    script = invoke(prog_name="deqlab", env={"_DEQLAB_COMPLETE": "source_bash"})
    assert script.exit_code == 0 and "_DEQLAB_COMPLETE=complete_bash" in script.stdout
    assert complete_name("ling2023") == ["ling2023-fig1", "ling2023-init"]
    assert set(complete_name("")) == set(experiment_names()) and LeastSquaresGD.name


def _complete(line: str) -> list[str]:
    """What bash completion offers for the last word of ``line``."""
    words = line.split(" ")
    env = {"_DEQLAB_COMPLETE": "complete_bash", "COMP_WORDS": line,
           "COMP_CWORD": str(len(words) - 1)}  # fmt: skip
    return runner.invoke(app, [], prog_name="deqlab", env=env).stdout.split()


def test_shell_completion_answers_experiment_names_and_presets():
    assert _complete("deqlab reproduce ling2023-f") == ["ling2023-fig1"]
    assert _complete("deqlab show test-lsq-gd --preset q") == ["quick"]
    assert _complete("deqlab show no-such --preset ") == ["tiny", "quick", "paper"]


def test_a_real_process_exits_2_with_one_line():
    done = subprocess.run(
        [sys.executable, "-m", "deqlab", "reproduce", "--workers", "x", "y"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("error: Invalid value for '--workers':")
    assert done.stderr.count("\n") == 1

"""``runs diff`` (config, statements side by side, overlaid curves), ``runs index``,
``reproduce --force``, the version/commit reuse warning and ``--device cuda:N``."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3

import pytest
import torch
from typer.testing import CliRunner

from deqlab.cli import app
from deqlab.runs.diff import STEP_COLUMNS, overlay_plan
from test_runs_store import LeastSquaresGD  # registers the test experiment

runner = CliRunner()
NAME = LeastSquaresGD.name


def invoke(*args: object):
    return runner.invoke(app, [str(a) for a in args])


def reproduce(out, *extra: object):
    result = invoke("reproduce", NAME, "--preset", "tiny", "--out", out, "--workers", 1,
                    "--json", *extra)  # fmt: skip
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), result


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """Runs A (20 steps: lr0.05 FAILs) and B (40 steps, three learning rates)."""
    out = tmp_path_factory.mktemp("runs")
    a, _ = reproduce(out, "--set", "steps=20")
    b, _ = reproduce(out, "--set", "steps=40", "--set", "lrs=[0.05,0.3,0.1]")
    return out, a, b


def test_diff_json_config_and_statements_side_by_side(two_runs):
    out, a, b = two_runs
    result = invoke("runs", "diff", a["config_hash"][:6], b["config_hash"], "--out", out, "--json")
    assert result.exit_code == 0, result.output
    diff = json.loads(result.stdout)
    assert diff["a"]["config_hash"] == a["config_hash"] and diff["b"]["path"] == b["path"]
    assert diff["facts"] == []  # same experiment, preset, device, status, version, commit
    assert diff["config"] == [
        {"key": "lrs", "a": [0.05, 0.3], "b": [0.05, 0.3, 0.1], "only_in": None},
        {"key": "steps", "a": 20, "b": 40, "only_in": None},
    ]
    rows = {s["name"]: s for s in diff["statements"]}
    assert list(rows) == [
        "lr0.05 reaches the optimum", "lr0.3 reaches the optimum", "lr0.1 reaches the optimum",
    ]  # fmt: skip
    slow = rows["lr0.05 reaches the optimum"]
    assert (slow["verdict_a"], slow["verdict_b"], slow["changed"]) == ("FAIL", "PASS", True)
    assert slow["measured_a"] != slow["measured_b"] and slow["value_a"] > slow["value_b"]
    new = rows["lr0.1 reaches the optimum"]
    assert new["verdict_a"] is None and new["measured_a"] is None and new["verdict_b"] == "PASS"
    assert rows["lr0.3 reaches the optimum"]["changed"] is False
    assert diff["a"]["verdict_sentence"] == "ours: 1 of 2 pass" and diff["notes"] == []


def test_diff_text_and_overlay_figure(two_runs, tmp_path):
    out, a, b = two_runs
    figure = tmp_path / "figs" / "diff.png"
    result = runner.invoke(
        app,
        ["runs", "diff", a["config_hash"], b["config_hash"], "--out", str(out), "--figure",
         str(figure)],
        env={"COLUMNS": "200"},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert f"A: {NAME} {a['config_hash']} (tiny, cpu, finished)" in text
    assert "Config differences" in text and re.search(r"│ steps\s+│ 20\s+│ 40", text)
    assert re.search(r"│ \* lr0.05 reaches the optimum\s+│ ours\s+│ FAIL\s+│ PASS", text)
    assert "verdicts A: ours: 1 of 2 pass" in text and "verdicts B: ours: 3 of 3 pass" in text
    assert f"figure: {figure} (x: step; panels: loss)" in text
    assert figure.read_bytes().startswith(b"\x89PNG")
    pdf = tmp_path / "diff.pdf"
    assert invoke("runs", "diff", a["config_hash"], b["config_hash"], "--out", out,
                  "--figure", pdf).exit_code == 0  # fmt: skip
    assert pdf.read_bytes().startswith(b"%PDF")


def test_overlay_plan_picks_a_step_column_the_series_and_the_varying_columns():
    rows_a = [{"task": t, "lr": 0.1, "step": s, "loss": 1.0 / (s + 1), "ok": True}
              for t in ("x", "y") for s in range(3)]  # fmt: skip
    rows_b = [{"task": t, "lr": 0.1, "step": s, "loss": 2.0 / (s + 1), "gap": 1.0}
              for t in ("x", "y") for s in range(3)]  # fmt: skip
    plan = overlay_plan(rows_a, rows_b)
    assert plan == {"x": "step", "series": ["task"], "columns": ["loss"], "left_out": []}
    # No text column tells the curves apart: the numeric column with the fewest values
    # does (the width m; the first in table order of m and cond, which are tied).
    rows = [{"dataset": "sphere", "m": m, "cond": m * 7 + 0.5, "step": s, "loss": m / (s + 1),
             "W_norm": float("nan") if s % 2 else 0.5}
            for m in (32, 128) for s in range(6)]  # fmt: skip
    plan = overlay_plan(rows, rows)
    assert plan["series"] == ["m"] and plan["columns"] == ["loss"]  # cond, W_norm: constant
    with pytest.raises(ValueError, match="share no step-like column"):
        overlay_plan([{"width": 1, "loss": 1.0}], [{"width": 2, "loss": 0.5}])
    assert STEP_COLUMNS[0] == "step"


def test_diff_without_a_step_column_exits_1_after_the_diff(two_runs, tmp_path):
    out, a, b = two_runs
    copies = tmp_path / "store"  # a copy of the store whose tables have no step-like column
    shutil.copytree(out, copies)
    for run in (a, b):
        (copies / NAME / run["config_hash"] / "metrics.csv").write_text("lr,width\n0.1,1\n")
    with sqlite3.connect(copies / "index.sqlite") as db:
        db.execute("UPDATE runs SET path = replace(path, ?, ?)", (str(out), str(copies)))
    result = invoke("runs", "diff", a["config_hash"], b["config_hash"], "--out", copies,
                    "--figure", tmp_path / "x.png", "--json")  # fmt: skip
    assert result.exit_code == 1
    assert json.loads(result.stdout)["figure"]["error"].startswith("the two metrics.csv")
    assert result.stderr.startswith("error: no figure: the two metrics.csv files share no step")
    assert result.stderr.count("\n") == 1 and not (tmp_path / "x.png").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("runs", "diff", "ffff", "0000"), "error: no run in"),
        (("runs", "diff", "a"), "error: Missing argument 'B'."),
        (("runs", "diff", "a", "b", "--figure", "x.txt"),
         "error: `--figure` must end in .png, .pdf or .svg; got 'x.txt'"),
        (("runs", "show", "ffff"), "error: no run in"),
    ],
)  # fmt: skip
def test_runs_usage_errors(two_runs, args, message):
    out, _, _ = two_runs
    result = invoke(*args, "--out", out)
    assert result.exit_code == 2
    assert result.stderr.startswith(message) and result.stderr.count("\n") == 1, result.stderr


def test_runs_index_writes_the_html_index(two_runs):
    out, a, b = two_runs
    result = invoke("runs", "index", "--out", out)
    assert result.exit_code == 0, result.output
    assert result.stdout == f"{out / 'index.html'}\n"
    html = (out / "index.html").read_text()
    assert f"{NAME}/{a['config_hash']}/report.html" in html
    assert f"{NAME}/{b['config_hash']}/report.html" in html
    missing = invoke("runs", "index", "--out", out / "nowhere")
    assert missing.exit_code == 2 and "does not exist" in missing.stderr


def test_force_recomputes_and_another_version_warns(tmp_path):
    first, _ = reproduce(tmp_path)
    second, _ = reproduce(tmp_path)
    assert second["reused"] and second["warnings"] == []
    forced, _ = reproduce(tmp_path, "--force")
    assert not forced["reused"] and forced["path"] == first["path"]
    summary_file = tmp_path / NAME / first["config_hash"] / "summary.json"
    summary = json.loads(summary_file.read_text())
    summary["environment"].update(deqlab="0.0.9", git_commit="feedbeef" * 5, git_dirty=False)
    summary_file.write_text(json.dumps(summary))
    reused, result = reproduce(tmp_path)
    assert reused["reused"] and len(reused["warnings"]) == 1
    assert result.stderr.startswith("warning: reusing the finished run ")
    assert "computed by deqlab 0.0.9 (commit feedbeeffeed)" in result.stderr
    assert "Recompute it with --force" in result.stderr
    text = invoke("reproduce", NAME, "--preset", "tiny", "--out", tmp_path, "--quiet")
    assert text.exit_code == 0 and "reused finished run:" in text.stdout
    assert "warning: reusing" in text.stderr and "warning" not in text.stdout


def test_device_cuda_n_is_parsed_and_checked(tmp_path, monkeypatch):
    def run(device):
        return invoke("reproduce", NAME, "--preset", "tiny", "--out", tmp_path, "--device",
                      device, "--quiet", "--json")  # fmt: skip

    bad = run("cuda:x")
    assert bad.exit_code == 2 and bad.stderr == (
        "error: `device` must be cpu, cuda or cuda:N (N a CUDA device index); got 'cuda:x'\n"
    )
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    unavailable = run("cuda:0")
    assert unavailable.exit_code == 2
    assert unavailable.stderr.startswith("error: device 'cuda:0' was requested but CUDA is not")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=None: "Fake GPU")
    too_high = run("cuda:1")
    assert too_high.exit_code == 2 and too_high.stderr == (
        "error: device 'cuda:1' names CUDA device 1, but this machine has 1 (cuda:0 to cuda:0)\n"
    )
    # The test experiment ignores its device, so a run "on cuda:0" really runs here.
    done = run("cuda:0")
    assert done.exit_code == 0, done.output
    doc = json.loads(done.stdout)
    assert doc["device"] == "cuda:0" and doc["status"] == "finished"
    assert json.loads(run("cuda").stdout)["config_hash"] == doc["config_hash"]  # one identity
    assert json.loads(run("cpu").stdout)["config_hash"] != doc["config_hash"]

"""deqlab.runs.run.Run: metrics.csv as a pandas DataFrame, and what Jupyter shows of a run
(its HTML report, its first figure)."""

from __future__ import annotations

import html
import math
import re
from pathlib import Path

import pandas as pd
import pytest

import deqlab
from deqlab.runs.run import Run
from deqlab.runs.tables import read_rows_csv, write_rows_csv
from test_runs_store import LeastSquaresGD  # noqa: F401  (registers the test experiment)


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Run:
    out = tmp_path_factory.mktemp("run") / "results"
    return deqlab.reproduce("test-lsq-gd", "tiny", out=out, workers=1)


def _bare(path: Path) -> Run:
    return Run("test-lsq-gd", "tiny", None, path, "finished", False, "cpu")


def test_metrics_is_the_table_as_a_dataframe(run):
    frame = run.metrics
    assert isinstance(frame, pd.DataFrame)
    assert list(frame.columns) == ["task", "lr", "step", "loss"] and len(frame) == 2 * 30
    assert frame.to_dict("records") == read_rows_csv(run.metrics_file)  # floats bit-exact
    assert frame.groupby("task")["loss"].min().to_dict() == {
        key: min(r["loss"] for r in run.rows if r["task"] == key) for key in ("lr0.05", "lr0.3")
    }


def test_a_blank_cell_is_nan_in_a_numeric_column(tmp_path):
    write_rows_csv(tmp_path / "metrics.csv", [{"step": 0, "gap": None}, {"step": 1, "gap": 0.5}])
    frame = _bare(tmp_path).metrics
    assert math.isnan(frame["gap"][0]) and frame["gap"][1] == 0.5
    assert frame["step"].tolist() == [0, 1]


def test_a_run_without_files_shows_its_repr(tmp_path):
    bare = _bare(tmp_path)
    assert bare.metrics.empty and bare.rows == [] and bare.figures == []
    assert bare._repr_png_() is None
    assert bare._repr_html_() == f"<pre>{html.escape(repr(bare))}</pre>"


def test_jupyter_html_is_the_report_in_an_iframe(run):
    shown = run._repr_html_()
    (srcdoc,) = re.findall(r'^<iframe srcdoc="([^"]*)"', shown)
    assert html.unescape(srcdoc) == run.report.read_text(encoding="utf-8")
    assert "data:image/png;base64," in srcdoc  # the figures are inside the page


def test_jupyter_png_is_the_first_figure(run):
    assert run.figures == [run.path / "figures" / "loss.png"]
    assert run._repr_png_() == (run.path / "figures" / "loss.png").read_bytes()

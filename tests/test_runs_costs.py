"""deqlab.runs.costs: the run-time estimate from the first steps timed now (show --measure).

The test experiment sleeps a known time at every step, so the estimate has a reference:
it must scale with the steps and the tasks, and never fall below the sleeps it will do.
"""

from __future__ import annotations

import json
import sys
import time
from typing import ClassVar

import pytest
from typer.testing import CliRunner

from deqlab.cli.app import app
from deqlab.experiments.registry import register
from deqlab.runs.costs import SAMPLED_STEPS, measure_run_time, sampled_tasks, time_task
from test_runs_store import LeastSquaresGD

SLEEP_S = 0.02


@register
class SleepyLsq(LeastSquaresGD):
    """:class:`LeastSquaresGD` sleeping :data:`SLEEP_S` at every step (a known cost)."""

    slug = "sleepy-lsq"
    presets: ClassVar = {"tiny": {"steps": 30}, "quick": {}, "paper": {"steps": 200}}

    def run_task(self, config, task, ctx):
        report = ctx.progress

        def progress(done: int, total: int) -> None:
            time.sleep(SLEEP_S)
            report(done, total)

        ctx.progress = progress
        return super().run_task(config, task, ctx)


@register
class Silent(LeastSquaresGD):
    """Reports no step: nothing to extrapolate from."""

    slug = "silent-lsq"

    def run_task(self, config, task, ctx):
        ctx.progress = lambda done, total: None
        return super().run_task(config, task, ctx)


@register
class SlowPlotLsq(LeastSquaresGD):
    """Finishes with figures that take :data:`PLOT_S` to draw (a known cost after the tasks)."""

    slug = "slow-plot-lsq"

    def plot(self, config, rows, directory):
        time.sleep(PLOT_S)
        return super().plot(config, rows, directory)


@register
class OneReport(LeastSquaresGD):
    """Reports its first step, then works on past any budget: one report, no step time."""

    slug = "one-report-lsq"

    def run_task(self, config, task, ctx):
        ctx.progress(1, config.steps)
        time.sleep(5)
        return []


PLOT_S = 0.3


def _estimate(steps: int, lrs: str, budget_s: float = 1.0) -> dict:
    exp = SleepyLsq()
    config = exp.resolve("tiny", overrides=[f"steps={steps}", f"lrs={lrs}"])
    return measure_run_time(exp, config, budget_s, workers=1)


def test_the_estimate_scales_with_the_steps_and_the_tasks():
    short, long = _estimate(100, "[0.05,0.3]"), _estimate(200, "[0.05,0.3]")
    wide = _estimate(100, "[0.05,0.1,0.2,0.3]")
    nominal = 100 * 2 * SLEEP_S  # what the sleeps alone will take
    assert nominal <= short["seconds"] < 2.5 * nominal
    assert 1.6 < long["seconds"] / short["seconds"] < 2.4
    assert 1.6 < wide["seconds"] / short["seconds"] < 2.4
    assert [t["total"] for t in long["tasks"]] == [200, 200] and not long["lower_bound"]
    assert short["text"].startswith("about ")
    assert "the first steps of 2 of 2 task(s), " in short["text"]
    assert short["parts"]["finish_s"] is None  # no task ended: no rows to finish on
    assert "plus the statements and figures, not timed (not every task ended)" in short["text"]


def test_one_task_is_timed_over_its_first_reports():
    exp = SleepyLsq()
    config = exp.resolve("tiny", overrides=["steps=50"])
    cost = time_task(exp, config, exp.tasks(config)[0], 0.3)  # 50 steps of 20 ms do not fit
    assert cost.first_done == 1 and cost.total == 50 and cost.elapsed_s is None
    assert cost.step_s >= SLEEP_S and cost.first_s >= SLEEP_S
    assert cost.seconds == pytest.approx(cost.first_s + 49 * cost.step_s)


def test_a_task_that_fits_its_share_is_timed_whole_with_its_rows():
    exp = SleepyLsq()
    config = exp.resolve("tiny", overrides=["steps=5"])
    cost = time_task(exp, config, exp.tasks(config)[0], 10.0)
    assert cost.elapsed_s is not None and cost.seconds == cost.elapsed_s >= 5 * SLEEP_S
    assert [r["step"] for r in cost.rows] == [0, 1, 2, 3, 4]
    assert "rows" not in cost.as_dict() and cost.as_dict()["seconds"] == cost.elapsed_s


def test_sampled_tasks_are_the_first_middle_and_last():
    exp = SleepyLsq()
    config = exp.resolve("tiny", overrides=["lrs=[0.01,0.02,0.03,0.04,0.05]"])
    assert [t.key for t in sampled_tasks(exp.tasks(config))] == ["lr0.01", "lr0.03", "lr0.05"]
    assert SAMPLED_STEPS == 3


def test_the_estimate_adds_the_start_up_the_workers_and_the_figures():
    """Issue 36: a tiny preset was estimated at its tasks alone (0.2 s for a 6.7–20 s run);
    the start-up, the worker processes and the figures are most of such a run."""
    exp = SlowPlotLsq()
    config = exp.resolve("tiny", overrides=["steps=5", "lrs=[0.05,0.1,0.2,0.3]"])
    estimate = measure_run_time(exp, config, 10.0, startup_s=1.5, workers=2)
    parts = estimate["parts"]
    assert parts["startup_s"] == parts["workers_start_s"] == 1.5 and parts["workers"] == 2
    assert parts["finish_s"] >= PLOT_S  # the figures drawn on the rows of all 4 tasks
    assert parts["tasks_s"] < parts["tasks_serial_s"]  # 4 tasks on 2 workers
    assert (
        estimate["seconds"] == pytest.approx(3.0 + parts["tasks_s"] + parts["finish_s"])
        and not estimate["lower_bound"]
    )
    assert estimate["text"].startswith(f"about {estimate['seconds']:.1f} s (measured now")
    assert "1.5 s to start deqlab, as much to start 2 worker processes, " in estimate["text"]
    assert (
        " s for the statements and figures; 4 of 4 task(s) run to their end)" in (estimate["text"])
    )
    alone = measure_run_time(exp, config, 10.0, workers=1)  # the Python API: no start-up
    assert alone["parts"]["startup_s"] is None and alone["parts"]["workers_start_s"] == 0


def test_one_report_and_no_step_time_is_extrapolated_without_failing():
    exp = OneReport()
    estimate = measure_run_time(exp, exp.resolve("tiny", overrides=["lrs=[0.05]"]), 0.5)
    assert estimate["seconds"] is not None and estimate["text"].startswith("about ")
    assert "the first steps of 1 of 1 task(s), extrapolated" in estimate["text"]


def test_the_deadline_waits_for_an_import_to_finish(tmp_path, monkeypatch):
    """An exception raised inside an import leaves a half-initialised module behind (torch
    imports sympy and torch._dynamo on first use: the next task then failed on them)."""
    (tmp_path / "slow_import_i36.py").write_text("import time\ntime.sleep(0.6)\nDONE = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "slow_import_i36", raising=False)

    class Importing(LeastSquaresGD):
        slug = "importing-lsq"

        def run_task(self, config, task, ctx):
            import slow_import_i36  # noqa: F401

            return super().run_task(config, task, ctx)

    exp = Importing()
    cost = time_task(exp, exp.resolve("tiny"), exp.tasks(exp.resolve("tiny"))[0], 0.1)
    assert sys.modules["slow_import_i36"].DONE and cost.first_s >= 0.6


def test_a_first_step_over_the_budget_is_a_lower_bound(monkeypatch):
    monkeypatch.setattr("test_runs_costs.SLEEP_S", 1.5)
    estimate = _estimate(100, "[0.05]", budget_s=1.0)
    assert estimate["lower_bound"] and estimate["text"].startswith("more than ")
    assert 1.0 <= estimate["seconds"] < 1.5  # stopped by the budget, before its first step
    assert estimate["text"].endswith(
        "not timed (not every task ended); none of the 1 task(s) timed reached its first step "
        "within 1.0 s; a lower bound: a larger --measure times it)"
    )


def test_a_task_that_fails_is_not_measured_and_one_without_reports_is_timed_whole():
    exp = Silent()
    silent = measure_run_time(exp, exp.resolve("tiny"), 30.0, workers=1)
    assert (
        silent["text"].startswith("about ")
        and "2 of 2 task(s) run to their end" in (silent["text"])
    )  # no report, but each ended: timed whole
    sleepy = SleepyLsq()
    failing = measure_run_time(sleepy, sleepy.resolve("tiny", overrides=["lrs=[9.0]"]), 30.0)
    assert failing["seconds"] is None and failing["text"].startswith(
        "not measured: a task failed here (FloatingPointError: GD diverged at step 5"
    )  # timed to its end, as it fits: the run fails there too
    broken = measure_run_time(sleepy, sleepy.resolve("tiny", overrides=["lrs=[100000.0]"]), 30.0)
    assert broken["seconds"] is None and broken["text"].startswith(
        "not measured: a task failed here (FloatingPointError: GD diverged at step 1"
    )


def test_show_measure_prints_the_measured_estimate(tmp_path):
    args = ["show", "test-sleepy-lsq", "--preset", "paper", "--out", str(tmp_path)]
    result = CliRunner().invoke(app, [*args, "--measure", "5", "--json"])
    assert result.exit_code == 0, result.output
    run_time = json.loads(result.stdout)["run_time"]
    assert run_time["source"] == "measured"
    assert run_time["parts"]["tasks_serial_s"] >= 2 * 200 * SLEEP_S
    assert run_time["parts"]["startup_s"] is None  # in-process: not a `deqlab` process
    plain = CliRunner().invoke(app, args)
    assert "`--measure 30` times it here" in plain.stdout

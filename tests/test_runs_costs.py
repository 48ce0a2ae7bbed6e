"""deqlab.runs.costs: the run-time estimate from the first steps timed now (show --measure).

The test experiment sleeps a known time at every step, so the estimate has a reference:
it must scale with the steps and the tasks, and never fall below the sleeps it will do.
"""

from __future__ import annotations

import json
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

    name = "test-sleepy-lsq"
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

    name = "test-silent-lsq"

    def run_task(self, config, task, ctx):
        ctx.progress = lambda done, total: None
        return super().run_task(config, task, ctx)


def _estimate(steps: int, lrs: str, budget_s: float = 30.0) -> dict:
    exp = SleepyLsq()
    config = exp.resolve("tiny", overrides=[f"steps={steps}", f"lrs={lrs}"])
    return measure_run_time(exp, config, budget_s)


def test_the_estimate_scales_with_the_steps_and_the_tasks():
    short, long = _estimate(100, "[0.05,0.3]"), _estimate(200, "[0.05,0.3]")
    wide = _estimate(100, "[0.05,0.1,0.2,0.3]")
    nominal = 100 * 2 * SLEEP_S  # what the sleeps alone will take
    assert nominal <= short["seconds"] < 2.5 * nominal
    assert 1.6 < long["seconds"] / short["seconds"] < 2.4
    assert 1.6 < wide["seconds"] / short["seconds"] < 2.4
    assert [t["total"] for t in long["tasks"]] == [200, 200] and not long["lower_bound"]
    assert (
        short["text"].startswith("about ")
        and "the first steps of 2 of 2 task(s)" in (short["text"])
    )


def test_one_task_is_timed_over_its_first_reports():
    exp = SleepyLsq()
    config = exp.resolve("tiny", overrides=["steps=50"])
    cost = time_task(exp, config, exp.tasks(config)[0], 30.0)
    assert cost is not None and cost.first_done == 1 and cost.total == 50
    assert cost.step_s >= SLEEP_S and cost.first_s >= SLEEP_S
    assert cost.seconds == pytest.approx(cost.first_s + 49 * cost.step_s)


def test_sampled_tasks_are_the_first_middle_and_last():
    exp = SleepyLsq()
    config = exp.resolve("tiny", overrides=["lrs=[0.01,0.02,0.03,0.04,0.05]"])
    assert [t.key for t in sampled_tasks(exp.tasks(config))] == ["lr0.01", "lr0.03", "lr0.05"]
    assert SAMPLED_STEPS == 3


def test_a_first_step_over_the_budget_is_a_lower_bound(monkeypatch):
    monkeypatch.setattr("test_runs_costs.SLEEP_S", 1.5)
    estimate = _estimate(100, "[0.05]", budget_s=1.0)
    assert estimate["lower_bound"] and estimate["text"].startswith("more than ")
    assert 1.0 <= estimate["seconds"] < 1.5  # stopped by the budget, before its first step
    assert estimate["text"].endswith(
        "(measured now on this machine: none of the 1 task(s) timed reached its first step "
        "within 1.0 s; a lower bound: a larger --measure times it)"
    )


def test_nothing_to_time_is_not_measured():
    exp = Silent()
    estimate = measure_run_time(exp, exp.resolve("tiny"), 30.0)
    assert estimate["seconds"] is None
    assert estimate["text"] == "not measured: its tasks report no steps to time"
    sleepy = SleepyLsq()
    failing = measure_run_time(sleepy, sleepy.resolve("tiny", overrides=["lrs=[9.0]"]), 30.0)
    assert failing["text"].startswith("about ")  # diverges at step 5: timed before
    broken = measure_run_time(sleepy, sleepy.resolve("tiny", overrides=["lrs=[100000.0]"]), 30.0)
    assert broken["seconds"] is None and broken["text"].startswith(
        "not measured: a task failed here (FloatingPointError: GD diverged at step 1"
    )


def test_show_measure_prints_the_measured_estimate(tmp_path):
    args = ["show", "test-sleepy-lsq", "--preset", "paper", "--out", str(tmp_path)]
    result = CliRunner().invoke(app, [*args, "--measure", "5", "--json"])
    assert result.exit_code == 0, result.output
    run_time = json.loads(result.stdout)["run_time"]
    assert run_time["source"] == "measured" and run_time["seconds"] >= 2 * 200 * SLEEP_S
    plain = CliRunner().invoke(app, args)
    assert "`--measure 30` times its first steps here" in plain.stdout

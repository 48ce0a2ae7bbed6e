"""Kawaguchi (2021) Figures 1–3 at the tiny preset: tasks, claims, and resume.

(Plots and the run directory are exercised for every registered experiment by
tests/test_cli_experiments.py.)"""

import pytest

from deqlab.experiments.base import TaskContext
from deqlab.experiments.kawaguchi2021.fig1 import Fig1Config, Kawaguchi2021Fig1, final_test_losses
from deqlab.experiments.kawaguchi2021.fig2 import Fig2Config, Kawaguchi2021Fig2, log_spaced_steps
from deqlab.experiments.kawaguchi2021.fig3 import Fig3Config, Kawaguchi2021Fig3


class MemoryCheckpoints:
    """A TaskContext whose checkpoints live in memory; ``stop_after`` interrupts a task."""

    def __init__(self, stop_after: int | None = None):
        self.saved, self.stop_after, self.count = None, stop_after, 0

    def context(self, checkpoint_every: int) -> TaskContext:
        return TaskContext("cpu", checkpoint_every, lambda: self.saved, self._save)

    def _save(self, state, rows):
        self.saved = (state, list(rows))
        self.count += 1
        if self.count == self.stop_after:
            raise KeyboardInterrupt


def _run_all(experiment, config):
    rows = []
    for task in experiment.tasks(config):
        rows += experiment.run_task(config, task, MemoryCheckpoints().context(100))
    return rows


def test_fig2_tiny_claims():
    experiment = Kawaguchi2021Fig2()
    config = experiment.resolve("tiny")
    rows = _run_all(experiment, config)
    claims = {c.name: c for c in experiment.claims(config, rows)}
    for name in (
        "every DELM run reaches the global minimum value",
        "the training trajectory stays under both bounds of Corollary 1",
        "the initialization-dependent bound is the tighter one",
    ):
        assert claims[name].passed, claims[name]
    assert {r["model"] for r in rows} == {"DELM", "LinearResNet"}
    assert {r["panel"] for r in rows} == {"a", "b", "c"}


def test_fig3_tiny_claims_and_bit_exact_resume():
    experiment = Kawaguchi2021Fig3()
    config = experiment.resolve("tiny")
    (task,) = experiment.tasks(config)
    rows = experiment.run_task(config, task, MemoryCheckpoints().context(100))
    assert all(c.passed for c in experiment.claims(config, rows))
    interrupted = MemoryCheckpoints(stop_after=5)
    with pytest.raises(KeyboardInterrupt):
        experiment.run_task(config, task, interrupted.context(100))
    interrupted.stop_after = None
    assert experiment.run_task(config, task, interrupted.context(100)) == rows


def test_log_spaced_steps():
    steps = log_spaced_steps(1000, 4)
    assert steps == [0, 1, 10, 100, 1000]
    assert log_spaced_steps(0, 5) == [0]


def test_fig1_tiny_rows_claims_and_divergence():
    """Linear model = DELM at initialization (W₀ = B₀U₀⁻¹); a diverging lr is counted."""
    experiment = Kawaguchi2021Fig1()
    config = experiment.resolve("tiny", overrides=["lrs=[1e30, 0.001]"])
    rows = _run_all(experiment, config)
    start = {(r["model"], r["lr"]): r for r in rows if r["epoch"] == 0}
    for lr in config.lrs:
        assert start[("Linear", lr)]["test_loss"] == pytest.approx(start[("DELM", lr)]["test_loss"])
    summary = final_test_losses(config, rows)
    assert summary["DELM"]["best"][0] == 0.001 and summary["Linear"]["diverged"] == 1
    claims = experiment.claims(config, rows)
    assert [c.name.split(":")[1].split("(best lr)")[1] for c in claims] == [
        " ends with a lower test loss than Linear ",
        " ends with a lower test loss than DNN-H2 ",
    ]


@pytest.mark.parametrize(
    ("config_cls", "field", "value", "message"),
    [
        (Fig2Config, "n", -3, r"`n` must be >= 1; got -3"),
        (Fig2Config, "gamma", 1.5, r"`gamma` must be in \(0, 1\); got 1.5"),
        (Fig2Config, "lr", 0.0, r"`lr` must be in \(0, inf\); got 0"),
        (Fig3Config, "tau", -1.0, r"`tau` must be in \(0, inf\); got -1"),
        (Fig3Config, "records", 0, r"`records` must be >= 1; got 0"),
        (
            Fig1Config,
            "datasets",
            ("sphere",),
            r"`datasets` must be one of .*'digits'; got 'sphere'",
        ),
        (Fig1Config, "momentum", 1.0, r"`momentum` must be in \[0, 1\); got 1"),
        (Fig1Config, "lrs", (), r"`lrs` must hold at least one learning rate"),
    ],
)
def test_bad_config_values_are_rejected_naming_the_field(config_cls, field, value, message):
    with pytest.raises(ValueError, match=message):
        config_cls(**{field: value})

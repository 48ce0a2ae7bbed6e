"""kawaguchi2021-thm2 (experiments/kawaguchi2021/thm2.py and its report): the tiny preset
(statements, bit-exact resume) and the statements in both directions."""

import math

import pytest

from deqlab.experiments.kawaguchi2021 import thm2_report
from deqlab.experiments.kawaguchi2021.thm2 import Kawaguchi2021Thm2, Thm2Config
from deqlab.statements import Kind, Verdict
from helpers import MemoryCheckpoints, assert_settings_declared_and_captions_sentences

PASS, FAIL, NM = Verdict.PASS, Verdict.FAIL, Verdict.NOT_MEASURED


def test_thm2_tiny_statements_pass_and_resume_bit_exactly():
    experiment = Kawaguchi2021Thm2()
    config = experiment.resolve("tiny")
    task = experiment.tasks(config)[1]
    rows = experiment.run_task(config, task, MemoryCheckpoints().context(100))
    assert {r["delta_fraction"] for r in rows} == set(config.delta_fractions)
    found = experiment.statements(config, rows)
    assert [s.verdict for s in found] == [PASS, PASS, PASS]
    assert all(s.kind is Kind.THEOREM and s.value < 1e-12 for s in found)
    interrupted = MemoryCheckpoints(stop_after=2)
    with pytest.raises(KeyboardInterrupt):
        experiment.run_task(config, task, interrupted.context(100))
    interrupted.stop_after = None
    assert experiment.run_task(config, task, interrupted.context(100)) == rows


def _thm2_rows(error):
    return [
        {"task": "square-delm", "loss": "square", "step": step, "delta_fraction": 0.5,
         "velocity_error": error, "multiplier_error": error, "closed_form_error": error}
        for step in (0, 10)
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("rows", "verdict"),
    [(_thm2_rows(1e-13), PASS), (_thm2_rows(1e-3), FAIL), (_thm2_rows(math.nan), NM), ([], NM)],
)
def test_thm2_statements_in_both_directions(rows, verdict):
    found = thm2_report.statements(Thm2Config(), rows)
    assert [s.verdict for s in found] == [verdict] * 3


# --- settings, captions, config -----------------------------------------------------------


def test_paper_settings_declare_every_field_and_captions_are_sentences():
    assert_settings_declared_and_captions_sentences(Kawaguchi2021Thm2())


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("delta_fractions", (1.0,), r"`delta_fractions` must be in \(0, 1\)"),
        ("delta_fractions", (), r"`delta_fractions` must hold at least 1 value; got \[\]"),
    ],
)
def test_bad_config_values_are_rejected_naming_the_field(field, value, message):
    with pytest.raises(ValueError, match=message):
        Thm2Config(**{field: value})

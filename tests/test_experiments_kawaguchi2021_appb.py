"""kawaguchi2021-appb (experiments/kawaguchi2021/appb.py and its report): the tiny preset's
statements and every statement in both directions."""

import math

import pytest

from deqlab.experiments.kawaguchi2021 import appb_report
from deqlab.experiments.kawaguchi2021.appb import AppBConfig, Kawaguchi2021AppB
from deqlab.statements import Kind, Verdict
from helpers import assert_settings_declared_and_captions_sentences, run_all

PASS, FAIL, NM = Verdict.PASS, Verdict.FAIL, Verdict.NOT_MEASURED


def test_appb_tiny_statements():
    """Eq. (37) holds, the component along 1 grows like 1/(1 − γ) and the rest stays bounded;
    Appendix B's own remainder P₁r/(1 − γ) is not the growing term once σ(A_t) is not doubly
    stochastic (random A₀), where the Perron vector gives it (ours)."""
    experiment = Kawaguchi2021AppB()
    config = experiment.resolve("tiny")
    found = experiment.statements(config, run_all(experiment, config))
    assert [s.verdict for s in found] == [PASS, PASS, PASS, FAIL, PASS]
    assert [s.kind for s in found] == [Kind.THEOREM] * 4 + [Kind.OURS]
    assert "random 1" in found[3].measured  # exponent 1: it grows like 1/(1 − γ)
    assert all("docs/findings.md#kawaguchi-appb" in s.detail for s in found[3:])


def _appb_rows(along, rest, paper_rest, *, gaps=(1e-14, 1e-5)):
    """One state swept over γ = 0.9, 0.99: norms at γ₂ = 10^s × the norms at γ₁."""
    return [
        {"task": "random", "step": 0, "sweep_gamma": g, "along": 10.0**(along * k),
         "rest": 10.0**(rest * k), "paper_rest": 10.0**(paper_rest * k), "eq37_error": gaps[0],
         "perron_gap": gaps[1]}
        for k, g in enumerate((0.9, 0.99))
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("rows", "verdicts"),
    [
        (_appb_rows(1.0, 0.0, 0.05), [PASS] * 5),
        (_appb_rows(0.5, 0.5, 1.0, gaps=(1e-3, 0.1)), [FAIL] * 5),
        (_appb_rows(math.nan, math.nan, math.nan, gaps=(math.nan, math.nan)), [NM] * 5),
        ([], [NM] * 5),
    ],
)
def test_appb_statements_in_both_directions(rows, verdicts):
    found = appb_report.statements(AppBConfig(), rows)
    assert [s.verdict for s in found] == verdicts
    if verdicts[0] is PASS:
        assert found[1].value == pytest.approx(1.0) and found[2].value == pytest.approx(0.0)


# --- settings, captions, config -----------------------------------------------------------


def test_paper_settings_declare_every_field_and_captions_are_sentences():
    assert_settings_declared_and_captions_sentences(Kawaguchi2021AppB())


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("gammas", (0.99, 0.9), r"`gammas` must be strictly increasing; got \[0.99, 0.9\]"),
    ],
)
def test_bad_config_values_are_rejected_naming_the_field(field, value, message):
    with pytest.raises(ValueError, match=message):
        AppBConfig(**{field: value})

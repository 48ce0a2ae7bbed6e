"""Paper records: the one place a paper is named, and their bound statement builders."""

from pathlib import Path

import pytest

import deqlab.papers
from deqlab.papers import HIEU, KAWAGUCHI, LING, reproduced
from deqlab.statements import (
    DEQLAB,
    OURS,
    Kind,
    Paper,
    Source,
    Statement,
    Verdict,
    measure,
    ours,
    paper_of,
    theorem,
)


def test_a_paper_is_cited_from_its_record_only():
    assert Source("kawaguchi2021", "Eq. (10)").citation == "Kawaguchi 2021, Eq. (10)"
    assert Source(HIEU, "Lemma 3.3.8").citation == "Hieu 2022 (thesis), Lemma 3.3.8"
    assert Source(LING) == Source("ling2023") and Source(LING).paper == "ling2023"
    assert OURS.citation == "ours" and DEQLAB.cite("anything") == "ours"
    folders = sorted(
        p.parent.name for p in Path(deqlab.papers.__file__).parent.glob("*/__init__.py")
    )
    assert [p.key for p in reproduced()] == folders and {HIEU, KAWAGUCHI, LING} <= set(reproduced())
    assert paper_of("hieu2022") is HIEU
    new = Paper("smith2031", "Smith 2031", "Smith, A new paper (2031)")
    # a new paper is cited by its own short name, never by another paper's fallback
    assert Source("smith2031", "Theorem 2").citation == "Smith 2031, Theorem 2"
    assert Paper("smith2031", "Smith 2031", "Smith, A new paper (2031)") == new
    with pytest.raises(ValueError, match="'smith2031' is already the record of"):
        Paper("smith2031", "Smith et al. 2031", "another")
    with pytest.raises(ValueError, match=r"`Paper\.key` must be a Python identifier"):
        Paper("smith-2031", "S", "S")


def test_bound_builders_equal_the_unbound_ones():
    kw = dict(value=0.5, relation="<", threshold=1.0, measured="max ‖W‖₂ = 0.5")
    bound = LING.theorem("Theorem 1 (i)", name="T1", expected="< 1", **kw)
    plain = measure("T1", Kind.THEOREM, Source("ling2023", "Theorem 1 (i)"), expected="< 1", **kw)
    assert bound == plain and bound.verdict is Verdict.PASS
    assert LING.theorem("Theorem 1 (i)", name="T1", **kw).expected == "< 1"  # the default
    obs = KAWAGUCHI.observation("Figure 2", name="o", quote="DELMs converge", **kw)
    assert obs.kind is Kind.OBSERVATION and obs.source.quote == "DELMs converge"
    mine = ours("speed", **kw)
    assert mine.kind is Kind.OURS and mine.source == OURS and mine.verdict is Verdict.PASS
    assert ours("speed", **{**kw, "value": 2.0}).verdict is Verdict.FAIL


def test_bound_theorem_is_not_applicable_given_an_unmet_hypothesis():
    unmet = LING.hypothesis(
        "Condition 1",
        name="Eq. (9)",
        value=0.1,
        relation=">=",
        threshold=1.0,
        measured="lhs/rhs = 0.1",
        needs="m ≥ 10⁹",
    )
    holds = LING.hypothesis(
        "Assumption 1",
        name="σ_w²",
        value=0.08,
        relation="<",
        threshold=0.125,
        measured="σ_w² = 0.08",
        needs="σ_w² < 1/8",
    )
    assert unmet.verdict is Verdict.UNMET and holds.verdict is Verdict.HOLDS
    assert holds.needs == ""
    kw = dict(name="T1", value=0.5, relation="<", threshold=1.0, measured="0.5")
    guarded = LING.theorem("Theorem 1 (i)", given=[holds, unmet], **kw)
    assert guarded.verdict is Verdict.NOT_APPLICABLE and guarded.needs == "m ≥ 10⁹"
    assert guarded == theorem(LING.theorem("Theorem 1 (i)", **kw), [holds, unmet])
    assert LING.theorem("Theorem 1 (i)", given=[holds], **kw).verdict is Verdict.PASS
    failing = LING.theorem("Theorem 1 (i)", given=[holds], **{**kw, "value": 3.0})
    assert failing.verdict is Verdict.FAIL


def test_bound_not_measured_and_round_trip():
    s = HIEU.not_measured(
        Kind.OBSERVATION,
        "Figure 4.4",
        name="flat",
        expected="flatter",
        why="the models are not trained",
        quote="flatter",
    )
    assert s.verdict is Verdict.NOT_MEASURED and s.detail == "the models are not trained"
    assert Statement.from_dict(s.as_dict()) == s
    assert s.as_dict()["citation"] == "Hieu 2022 (thesis), Figure 4.4"


def test_a_mistyped_keyword_of_a_bound_builder_is_an_error():
    with pytest.raises(TypeError, match="unexpected keyword argument 'treshold'"):
        LING.theorem("T", name="t", value=1.0, relation="<", treshold=2.0, measured="1")
    with pytest.raises(TypeError, match="missing 1 required keyword-only argument: 'measured'"):
        LING.hypothesis("H", name="h", value=1.0, relation="<", threshold=2.0)

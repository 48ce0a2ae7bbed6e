"""Every claim of every paper (deqlab.papers.claims(): the functions declared with @claim) on
a case where it passes, one where it must not, and that failing case with a missing value
beside the violation, which must stay FAIL (a measured violation beside a NaN or inf is
never NOT MEASURED).

The cases are in cases_<paper>.py, one per claim. "Beside" is put in by :func:`beside`,
generically, on the typed measurements: every per-run series gets one more point after its
last (NaN, then inf: a run that stops being measured, or overflows), and every collection
of runs one more run with nothing measured.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import sys
from collections.abc import Mapping

import pytest

import cases_hieu2022
import cases_kawaguchi2021
import cases_ling2023
from cases import Call, Case
from deqlab.papers import claims, reproduced
from deqlab.statements import Run, Series, Statement, Verdict

CLAIMS = claims()
CASES: dict[str, Case] = {
    **cases_ling2023.CASES,
    **cases_kawaguchi2021.CASES,
    **cases_hieu2022.CASES,
}
PASSED = (Verdict.PASS, Verdict.HOLDS)
FAILED = (Verdict.FAIL, Verdict.UNMET)
BLANK = "blank"


def beside(value: object, fill: float | str) -> object:
    """``value`` with a missing value beside every measurement it holds: one more point of
    every series (``fill``: NaN or inf) or, with ``fill`` = :data:`BLANK`, one more run with
    nothing measured in every collection of runs."""
    if isinstance(value, Series):
        return value if fill == BLANK else value.extended(fill)
    if isinstance(value, Run) or _extends(value):
        return value if fill == BLANK else value.extended(fill)  # type: ignore[union-attr]
    if isinstance(value, Mapping):
        found = {k: beside(v, fill) for k, v in value.items()}
        runs = [v for v in value.values() if _blanks(v)]
        if fill == BLANK and runs:
            found[_new_key(value)] = runs[0].blank("not measured")
        return found
    if isinstance(value, list | tuple):
        found = [beside(v, fill) for v in value]
        runs = [v for v in value if _blanks(v)]
        if fill == BLANK and runs:
            found.append(runs[0].blank("not measured"))
        return type(value)(found)
    return value


def _extends(value: object) -> bool:
    return dataclasses.is_dataclass(value) and hasattr(value, "extended")


def _blanks(value: object) -> bool:
    return hasattr(value, "blank")


def _new_key(mapping: Mapping) -> object:
    keys = list(mapping)
    return max(keys) + 1 if keys and all(isinstance(k, int) for k in keys) else "not measured"


def run(claim_name: str, call: Call) -> list[Statement]:
    found = call(CLAIMS[claim_name])
    return found if isinstance(found, list) else [found]


#: Functions of the papers that assemble registered claims (one figure, one table), not claims.
COMPOSITES = {
    "deqlab.papers.hieu2022.claims.lemma_statements",
    "deqlab.papers.hieu2022.gd_proof.step_lemma_statements",
    "deqlab.papers.kawaguchi2021.appendix_b.appendix_b",
    "deqlab.papers.kawaguchi2021.corollaries.corollary_checks",
    "deqlab.papers.kawaguchi2021.figure1.figure_observations",
    "deqlab.papers.kawaguchi2021.theorem2.theorem_2",
    "deqlab.papers.ling2023.figure1.figure1_statements",
    "deqlab.papers.ling2023.initialization.initialization",
}


def test_every_function_that_makes_statements_is_a_registered_claim():
    """A paper's public function returning statements is a claim (so it has its cases) or
    one of the composites above."""
    found = set()
    for module in {sys.modules[name.rsplit(".", 1)[0]] for name in CLAIMS}:
        for name, function in vars(module).items():
            returns = str(getattr(function, "__annotations__", {}).get("return", ""))
            public = inspect.isfunction(function) and not name.startswith("_")
            if public and function.__module__ == module.__name__ and "Statement" in returns:
                found.add(f"{module.__name__}.{name}")
    assert sorted(found - set(CLAIMS) - COMPOSITES) == []
    assert found >= COMPOSITES


def test_every_claim_of_every_paper_has_its_cases():
    assert {name.split(".")[2] for name in CLAIMS} == {p.key for p in reproduced()}
    assert sorted(set(CLAIMS) - set(CASES)) == [], "claims without a pass and a fail case"
    assert sorted(set(CASES) - set(CLAIMS)) == [], "cases of no registered claim"


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_passing_case_passes(name):
    found = run(name, CASES[name].passing)
    assert found and all(s.verdict in PASSED for s in found), [
        (s.name, s.verdict.value, s.measured, s.detail) for s in found if s.verdict not in PASSED
    ]


def _failed(case: Case) -> tuple[Verdict, ...]:
    return FAILED if case.fails_as is None else (case.fails_as,)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_failing_case_fails(name):
    case = CASES[name]
    found = run(name, case.failing)
    assert any(s.verdict in _failed(case) for s in found), [
        (s.name, s.verdict.value) for s in found
    ]


def _with_missing(call: Call, fill: float | str) -> Call:
    return Call(
        tuple(beside(a, fill) for a in call.args),
        {k: beside(v, fill) for k, v in call.kwargs.items()},
    )


@pytest.mark.parametrize("fill", [math.nan, math.inf, BLANK], ids=["nan", "inf", "blank"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_violation_beside_a_missing_value_still_fails(name, fill):
    """Or, for a claim of existence, a PASS beside a missing value still passes."""
    case = CASES[name]
    kept = PASSED if case.exists else _failed(case)
    given = case.passing if case.exists else case.failing
    decided = {s.name for s in run(name, given) if s.verdict in kept}
    found = {s.name: s.verdict for s in run(name, _with_missing(given, fill))}
    assert decided and {n: found.get(n) for n in decided if found.get(n) not in kept} == {}

"""Every claim of every paper (deqlab.papers.claims(): the functions declared with @claim) on
a case where it passes, one where it must not, and that failing case with a missing value
beside the violation, which must stay FAIL (a measured violation beside a NaN or inf is
never NOT MEASURED).

The cases are in cases_<paper>.py, one per claim. "Beside" is put in by :func:`beside`,
generically, on the typed measurements: every per-run series gets one more point after its
last (NaN, then inf: a run that stops being measured, or overflows), and every collection
of runs one more run with nothing measured. And the passing case with one more point where
one measured quantity overflowed (±inf) must fail wherever that infinity breaks it.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import sys
from collections.abc import Mapping, Sequence

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


#: Where :func:`beside` put the new point (a value no case holds).
MARK = 7.125e77
#: The settings of a point (not measurements), and where a new point has them: a wider
#: network, a new seed, a deeper layer, γ closer to 1.
SETTINGS = {
    "m": lambda m: 2 * m,
    "seed": lambda seed: seed + 1,
    "depth": lambda depth: depth + 1,
    "sweep_gamma": lambda gamma: 1 - (1 - gamma) / 10,
}
#: The quantities of a claim that enter its statements only on their satisfying side, so
#: that no infinity there breaks them (+inf satisfies; −inf is not a value they can take).
SATISFYING_ONLY = {
    # the ingredients of the Gaussian bound C (μ, ‖Z(0)‖_F²/(mn)): +inf only loosens it
    "deqlab.papers.ling2023.initialization.initial_loss": {
        ("initial_loss", "series", "theory"),
        ("feature_norm_sq", "series", "measured"),
    },
    # ‖∇_θΦ‖ is the left side of Eqs. (4)–(5), lhs ≥ rhs
    "deqlab.papers.ling2023.theorem1.pl_statements": {("run", "series", "grad_norm")},
}


def _rebuild(value: object, at, path: tuple = ()) -> object:
    """``value`` with each series that :func:`beside` extended (its last point :data:`MARK`)
    replaced by ``at(path, series)``."""
    if isinstance(value, list | tuple) and value and all(_real(x) for x in value):
        return at(path, value) if value[-1] == MARK else value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = [f.name for f in dataclasses.fields(value) if f.init]
        changed = {f: _rebuild(getattr(value, f), at, (*path, f)) for f in fields}
        return dataclasses.replace(value, **changed)
    if isinstance(value, Mapping):
        return {k: _rebuild(v, at, (*path, k)) for k, v in value.items()}
    if isinstance(value, list | tuple) and not isinstance(value, Series):
        return type(value)(_rebuild(v, at, (*path, i)) for i, v in enumerate(value))
    return value


def _real(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _one_more_point(call: Call, slot: tuple | None, value: float) -> Call:
    """``call`` with one more point of every series: a setting as :data:`SETTINGS` says, a
    measurement its last two points continued (or its last repeated), except the series at
    ``slot``, which is ``value`` there."""

    def at(path: tuple, series: Sequence[float]) -> Sequence[float]:
        *kept, _ = series
        last = kept[-1] if kept else 1.0
        if path and path[-1] in SETTINGS:
            last = SETTINGS[path[-1]](last)
        elif len(kept) >= 2 and math.isfinite(kept[-1]) and math.isfinite(kept[-2]):
            last = 2 * kept[-1] - kept[-2]
        new = [*kept, value if path == slot else last]
        return new if isinstance(series, list) else type(series)(new)

    return _rebuilt(call, at)


def _rebuilt(call: Call, at) -> Call:
    """:func:`_rebuild` on the arguments of ``call`` with a point :data:`MARK` beside."""
    marked = _with_missing(call, MARK)
    return Call(
        tuple(_rebuild(a, at, (i,)) for i, a in enumerate(marked.args)),
        {k: _rebuild(v, at, (k,)) for k, v in marked.kwargs.items()},
    )


def _slots(call: Call) -> list[tuple]:
    """The paths of the series :func:`beside` extends in ``call``."""
    found: list[tuple] = []

    def at(path: tuple, series: Sequence[float]) -> Sequence[float]:
        found.append(path)
        return series

    _rebuilt(call, at)
    return found


def _verdicts(name: str, call: Call) -> dict[str, Verdict]:
    return {s.name: s.verdict for s in run(name, call)}


@pytest.mark.parametrize("name", sorted(n for n in CASES if not CASES[n].exists))
def test_an_overflow_that_breaks_a_passing_statement_fails_it(name):
    """The passing case with one more point where one measured quantity is ±inf: each
    statement that passes with that point finite fails for the infinity that breaks it
    (FAIL / UNMET, or NOT APPLICABLE through a hypothesis it broke) or passes for both (it
    does not read that point), never NOT MEASURED for both (deqlab.statements.measures)."""
    case = CASES[name]
    caught = {*_failed(case), *FAILED, Verdict.NOT_APPLICABLE}
    passing = _verdicts(name, _one_more_point(case.passing, None, 0.0))
    lost = []
    for slot in filter(lambda s: _measurement(name, s), _slots(case.passing)):
        up = _verdicts(name, _one_more_point(case.passing, slot, math.inf))
        down = _verdicts(name, _one_more_point(case.passing, slot, -math.inf))
        for statement, verdict in passing.items():
            found = {up.get(statement), down.get(statement)}
            if verdict in PASSED and not (found <= set(PASSED) or found & caught):
                lost.append((slot, statement, sorted(str(v) for v in found)))
    assert lost == []


def _measurement(name: str, slot: tuple) -> bool:
    """Whether the series at ``slot`` is a measurement one of whose infinities can break a
    statement of claim ``name`` (not a setting, not in :data:`SATISFYING_ONLY`)."""
    skipped = SATISFYING_ONLY.get(name, set())
    return slot[-1] not in SETTINGS and not any(slot[-len(k) :] == k for k in skipped)

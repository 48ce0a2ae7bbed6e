"""Every claim of every paper (deqlab.papers.claims(): the functions declared with @claim) on
a case where it passes, one where it must not, and that failing case with a missing value
beside the violation, which must stay FAIL (a measured violation beside a NaN or inf is
never NOT MEASURED).

The cases are in cases_<paper>.py, one per claim. "Beside" is put in by :func:`beside`,
generically, on the typed measurements: every per-run series gets one more point after its
last (NaN, then inf: a run that stops being measured, or overflows), every collection of
runs one more run with nothing measured, numbers by name one more name, a loss surface more
grid rows; a claim of a few given numbers gets each of them missing in turn, which must
never make a FAIL pass. And the passing case with one more point where one measured
quantity overflowed (±inf) must fail wherever that infinity breaks it.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import sys
from collections.abc import Mapping, Sequence

import pytest
import torch

import cases_hieu2022
import cases_kawaguchi2021
import cases_ling2023
from cases import Call, Case
from deqlab.landscape import LossSurface
from deqlab.papers import claims, reproduced
from deqlab.statements import Kind, Run, Series, Statement, Verdict

CLAIMS = claims()
CASES: dict[str, Case] = {
    **cases_ling2023.CASES,
    **cases_kawaguchi2021.CASES,
    **cases_hieu2022.CASES,
}
PASSED = (Verdict.PASS, Verdict.HOLDS)
FAILED = (Verdict.FAIL, Verdict.UNMET)
BLANK = "blank"
#: The name of what :func:`beside` adds.
NOT_MEASURED = "not measured"


def beside(value: object, fill: float | str) -> object:
    """``value`` with a missing value beside every measurement it holds: one more point of
    every series (``fill``: NaN or inf) or, with ``fill`` = :data:`BLANK`, one more run with
    nothing measured in every collection of runs. Numbers by name (widths, models) get one
    more name, its number ``fill`` (NaN for BLANK), and a sequence of names that name;
    a loss surface one more grid row at each end; a list of observations one NOT MEASURED."""
    point = math.nan if fill == BLANK else fill
    if isinstance(value, Series):
        return value if fill == BLANK else value.extended(fill)
    if isinstance(value, Run) or _extends(value):
        return value if fill == BLANK else value.extended(fill)  # type: ignore[union-attr]
    if isinstance(value, LossSurface):
        return _rows_around(value, point)
    if isinstance(value, Mapping) and value and all(map(_real, value.values())):
        return {**value, _new_key(value): point}
    if isinstance(value, Mapping):
        found = {k: beside(v, fill) for k, v in value.items()}
        runs = [v for v in value.values() if _blanks(v)]
        if fill == BLANK and runs:
            found[_new_key(value)] = runs[0].blank("not measured")
        return found
    if isinstance(value, list | tuple) and value and all(isinstance(v, str) for v in value):
        return type(value)([*value, NOT_MEASURED])
    if isinstance(value, list | tuple) and value and all(map(_real, value)):
        return type(value)([*value, point])
    if isinstance(value, list | tuple) and value and all(map(_observed, value)):
        lost = dataclasses.replace(value[0], name=NOT_MEASURED, verdict=Verdict.NOT_MEASURED)
        return type(value)([*value, dataclasses.replace(lost, value=None)])
    if isinstance(value, list | tuple):
        found = [beside(v, fill) for v in value]
        runs = [v for v in value if _blanks(v)]
        if fill == BLANK and runs:
            found.append(runs[0].blank("not measured"))
        return type(value)(found)
    return value


def _rows_around(surface: LossSurface, fill: float) -> LossSurface:
    """``surface`` with one more grid row at each end of its α range (θ* stays the centre),
    every loss there ``fill``."""
    alphas, losses, steps = surface.alphas, surface.losses, surface.solver_steps
    alphas = torch.cat([2 * alphas[:1] - alphas[1:2], alphas, 2 * alphas[-1:] - alphas[-2:-1]])
    row = torch.full_like(losses[:1], fill)
    losses = torch.cat([row, losses, row])
    if steps is not None:
        steps = torch.cat([torch.zeros_like(steps[:1]), steps, torch.zeros_like(steps[:1])])
    return dataclasses.replace(surface, alphas=alphas, losses=losses, solver_steps=steps)


def _observed(value: object) -> bool:
    """A statement that is not a hypothesis (a list of hypotheses guards a theorem: one
    more, not measured, would change what it says)."""
    return isinstance(value, Statement) and value.kind is not Kind.HYPOTHESIS


def _extends(value: object) -> bool:
    return dataclasses.is_dataclass(value) and hasattr(value, "extended")


def _blanks(value: object) -> bool:
    return hasattr(value, "blank")


def _new_key(mapping: Mapping) -> object:
    keys = list(mapping)
    return max(keys) + 1 if keys and all(isinstance(k, int) for k in keys) else NOT_MEASURED


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


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_claim_gets_a_missing_value_beside_its_violation(name):
    """:func:`beside` changes the call of every claim but those that decide on a few given
    numbers (nothing is beside a single measurement): those get each of their numbers
    missing in turn (the test after next), so every claim is checked with a missing value."""
    case = CASES[name]
    given = case.passing if case.exists else case.failing
    fixed = all(map(_plain, [*given.args, *given.kwargs.values()]))
    assert (fixed and _numbers(given)) or not _same(given, _with_missing(given, math.nan))


def _numbers(call: Call) -> list[tuple[int, object]]:
    """Where the given numbers of ``call`` are: (argument, None) for a positional number,
    (argument, key) for a number of a record among them (keyword arguments are settings)."""
    found: list[tuple[int, object]] = []
    for i, a in enumerate(call.args):
        if _real(a):
            found.append((i, None))
        elif isinstance(a, Mapping):
            found += [(i, k) for k, v in a.items() if _real(v)]
    return found


def _without(call: Call, where: tuple[int, object]) -> Call:
    """``call`` with the number at ``where`` (:func:`_numbers`) NaN."""
    i, key = where
    args = list(call.args)
    args[i] = math.nan if key is None else {**args[i], key: math.nan}
    return Call(tuple(args), call.kwargs)


@pytest.mark.parametrize("name", sorted(n for n in CASES if not CASES[n].exists))
def test_a_missing_number_never_makes_a_violation_pass(name):
    """Each given number of the failing call NaN in turn: a statement that failed fails or
    is NOT MEASURED (or the claim refuses the NaN with a clear error), never PASS."""
    case = CASES[name]
    failed = {s.name for s in run(name, case.failing) if s.verdict in _failed(case)}
    passed = []
    for where in _numbers(case.failing):
        try:
            found = run(name, _without(case.failing, where))
        except (TypeError, ValueError):  # a number the claim refuses: not a PASS
            continue
        passed += [(where, s.name) for s in found if s.name in failed and s.verdict in PASSED]
    assert passed == []


def _plain(value: object) -> bool:
    """A number, a word, nothing, an empty list, or a record of those (e.g. an inequality:
    its name, sides and relation)."""
    if value is None or isinstance(value, str | bool) or _real(value):
        return True
    if isinstance(value, Mapping):
        return all(map(_plain, value.values()))
    return isinstance(value, list | tuple) and not value


def _same(a: object, b: object) -> bool:
    """Equal, NaN equal to NaN, through containers, dataclasses and tensors."""
    if a is b:
        return True
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and bool(torch.equal(a, b))
    if _real(a) and _real(b):
        return a == b or (a != a and b != b)  # type: ignore[operator]
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(map(_same, a, b))
    if dataclasses.is_dataclass(a) and type(a) is type(b):
        return all(_same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    return a == b


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

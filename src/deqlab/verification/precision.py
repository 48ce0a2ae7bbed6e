"""Precision driven by the decision: are verify's answers decided by the certified brackets?

Every least eigenvalue verify reads (λ*, λ_min of the DEQ NTK, λ_0; λ_min(D_0) of the DELM)
comes as a certified bracket (:mod:`deqlab.theory.brackets`). Each statement's verdict,
each answer's status and each number the answers print is a function of these values that
is monotone in each of them — Condition 1's margins grow with λ_0 and (through the scaling
λ_0 = mλ*/2) with λ*, the widths it needs shrink, Theorem 2's width scale shrinks with λ*,
λ_0/(mλ*/2) grows with λ_0 and shrinks with λ*, the rates fall — so over the box of brackets
it takes its extremes at the box's corners. :func:`settle` evaluates the check at the best
estimates and at every corner:

- a verdict or status that is the same at every corner is *decided* by the brackets;
- where one differs, the brackets are narrowed (``refine``: a new computation at a
  thousandth of the width, down to :data:`FLOOR`) and the check evaluated again;
- what is still undecided when they cannot be narrowed further — their rounding floor, or a
  subsample that bounds λ* from one side only — is said to be so: the statement becomes NOT
  MEASURED, the answer "cannot be decided at the certified brackets", each naming the
  readings at the two corners and why;
- every number that moves over the corners gets its range, ``numbers["ranges"]`` (path →
  [least, largest]), which the answers print where it shows at their precision.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from deqlab._format import number
from deqlab.statements import Statement, Verdict
from deqlab.theory.brackets import Bracket
from deqlab.verification.answers import UNDECIDED_AT_BRACKETS, Answer, bracket_text

#: No bracket is asked narrower than this (relative): rounding decides below it.
FLOOR = 1e-9
#: Each refinement asks for brackets this many times narrower.
NARROWING = 1e-3
#: Why what is still undecided stays so.
AT_FLOOR = (
    "the brackets cannot be narrowed further: they are as narrow as float64 rounding allows "
    "(about n²u times the mean diagonal of each matrix: Higham's bound)"
)
#: How each bracketed quantity is written in the output.
SYMBOLS = {
    "lambda_star": "λ*",
    "ntk_lambda_min": "λ_min(NTK)",
    "lambda0": "λ_0",
    "lambda_min_D0": "λ_min(D_0)",
}

Corner = dict[str, float]


@dataclass(frozen=True, eq=False)
class Settled:
    """The statements, numbers and answers at the best estimates, the undecided ones marked,
    ``undecided`` one line each (what differs between which corners, and why), and the
    measurements ``init`` they were read from (refined, where that was needed)."""

    init: Any
    statements: list[Statement]
    numbers: dict[str, Any]
    answers: list[Answer]
    undecided: list[str]


def corners(brackets: dict[str, Bracket]) -> list[Corner]:
    """Every combination of the brackets' ends (a bracket with equal ends counts once); none
    without brackets."""
    if not brackets:
        return []
    ends = {name: sorted({b.lower, b.upper}) for name, b in brackets.items()}
    names = list(ends)
    return [dict(zip(names, values, strict=True)) for values in itertools.product(*ends.values())]


def settle(
    init: Any,
    evaluate: Callable[[Any], tuple[list[Statement], dict[str, Any]]],
    answer: Callable[[Any, dict[str, Any], list[Statement]], list[Answer]],
    refine: Callable[[Any, float], Any] | None = None,
) -> Settled:
    """The module docstring's loop. ``init`` has ``brackets()`` (name → Bracket), ``at(corner)``
    and, where ``refine`` is given, ``precision`` (the relative width its brackets were
    asked); ``evaluate(init)`` gives (statements, numbers), ``answer(init,
    numbers, statements)`` the answers; ``refine(init, precision)`` measures again with
    narrower brackets (it, or its result, None: they cannot be)."""
    while True:
        statements, numbers = evaluate(init)
        moved = [(c, init.at(c)) for c in corners(init.brackets())]
        at_corners = [(c, at, *evaluate(at)) for c, at in moved]
        numbers = {**numbers, "ranges": _ranges([numbers, *(n for *_, n in at_corners)])}
        answers = answer(init, numbers, statements)
        said = [(c, answer(at, n, s)) for c, at, s, n in at_corners]
        split_statements = _split_statements(statements, at_corners)
        split_answers = _split_answers(answers, said)
        if not (split_statements or split_answers) or refine is None:
            break
        narrower = init.precision * NARROWING
        open_ = [b for b in init.brackets().values() if not b.at_floor and b.width > 0]
        if narrower < FLOOR or all(b.relative_width <= narrower for b in open_):
            break
        better = refine(init, narrower)
        if better is None:
            break
        init = better
    reason = AT_FLOOR
    marked = [_undecided_statement(s, split_statements.get(s.name), reason) for s in statements]
    told = [_undecided_answer(a, split_answers.get(a.theorem), reason) for a in answers]
    lines = [
        f"{name}: {_readings(readings)}"
        for name, readings in {**split_statements, **split_answers}.items()
    ]
    numbers["undecided"] = [*lines, *([f"why: {reason}"] if lines else [])]
    return Settled(init, marked, numbers, told, numbers["undecided"])


def lines(numbers: dict[str, Any]) -> list[str]:
    """What the output says of the brackets: each ``<name>_bounds`` of ``numbers``, then
    whether every answer is decided at them, or which are not and why."""
    found = []
    for name, symbol in SYMBOLS.items():
        ends = numbers.get(f"{name}_bounds")
        if ends is None:
            continue
        if ends[0] == ends[1]:
            found.append(f"{symbol} = {number(ends[0], 6)} exactly")
        else:
            found.append(bracket_text(symbol, ends, ends[1]))
    if not found:
        return []
    if "subsample" in numbers:
        return [
            "certified one-sided bounds (upper sides: Rayleigh quotients on the subsample S, "
            "Cauchy interlacing; lower: K ⪰ 0, NTK ⪰ K; --json has the proofs): " + "; ".join(found)
        ]
    out = [
        "certified brackets (lower sides: a float64 Cholesky factorization of the matrix "
        "shifted; upper: Rayleigh quotients; rounding bounded; λ_0 also the equilibrium "
        "solve's error; --json has the proofs): " + "; ".join(found)
    ]
    undecided = numbers.get("undecided") or []
    if not undecided:
        return [*out, "  every answer and statement is decided at these brackets"]
    return [*out, "  undecided at these brackets:", *(f"    {line}" for line in undecided)]


def _ranges(numbers: list[dict[str, Any]]) -> dict[str, list[float]]:
    """path → [least, largest] of every number that differs between ``numbers``."""
    leaves = [dict(_leaves(n)) for n in numbers]
    out = {}
    for path in leaves[0]:
        values = [v for v in (leaf.get(path) for leaf in leaves) if isinstance(v, float)]
        if len(values) == len(leaves) and min(values) != max(values):
            out[path] = [min(values), max(values)]
    return out


def _leaves(tree: Any, prefix: str = ""):
    """(dotted path, float) of every real number in nested dicts (ints as floats)."""
    if isinstance(tree, dict):
        for key, value in tree.items():
            if key != "ranges":
                yield from _leaves(value, f"{prefix}{key}.")
    elif isinstance(tree, int | float) and not isinstance(tree, bool):
        yield prefix[:-1], float(tree)


def _split_statements(statements, at_corners) -> dict[str, list[tuple[Corner, str]]]:
    """name → (corner, verdict) pairs, for the statements whose verdict differs between
    corners (or from the estimate's)."""
    out = {}
    for s in statements:
        readings = [(None, s.verdict.value)]
        for corner, _, found, _ in at_corners:
            match = next((t for t in found if t.name == s.name), None)
            readings.append((corner, "absent" if match is None else match.verdict.value))
        if len({verdict for _, verdict in readings}) > 1:
            out[s.name] = readings
    return out


def _split_answers(answers: list[Answer], said) -> dict[str, list[tuple[Corner, str]]]:
    """theorem → (corner, status) pairs, for the answers whose status differs."""
    out = {}
    for a in answers:
        readings = [(None, a.status)]
        for corner, found in said:
            match = next((b for b in found if b.theorem == a.theorem), None)
            readings.append((corner, "absent" if match is None else match.status))
        if len({status for _, status in readings}) > 1:
            out[a.theorem] = readings
    return out


def _readings(readings: list[tuple[Corner | None, str]]) -> str:
    """ "PASS at λ* = 0.0255; FAIL at λ* = 0.0254"-like: each distinct reading once, at the
    first corner that gives it."""
    first: dict[str, Corner | None] = {}
    for corner, reading in readings:
        if corner is not None:
            first.setdefault(reading, corner)
    return "; ".join(f"{reading} at {_corner(corner)}" for reading, corner in first.items())


def _corner(corner: Corner | None) -> str:
    if not corner:
        return "the estimates"
    return ", ".join(f"{SYMBOLS.get(k, k)} = {v:.7g}" for k, v in corner.items())


def _undecided_statement(s: Statement, readings, reason: str) -> Statement:
    if readings is None:
        return s
    detail = f"undecided at the certified brackets: {_readings(readings)} ({reason})"
    return replace(s, verdict=Verdict.NOT_MEASURED, detail=f"{detail}. {s.detail}", needs="")


def _undecided_answer(a: Answer, readings, reason: str) -> Answer:
    if readings is None:
        return a
    why = f"{_readings(readings)} ({reason}); at the estimates: {a.status} — {a.why}"
    return replace(a, status=UNDECIDED_AT_BRACKETS, why=why)

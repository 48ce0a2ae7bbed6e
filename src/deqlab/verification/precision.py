"""Precision driven by the decision: are verify's answers decided by the certified brackets?

Every least eigenvalue verify reads (λ*, λ_min of the DEQ NTK, λ_0; λ_min(D_0) of the DELM)
comes as a certified bracket (:mod:`deqlab.theory.brackets`). Each number the answers print
and each single inequality on one — a hypothesis, a theorem's check alone (its ``value``
against its ``threshold``), an observation — is a function of these values that is monotone
in each of them — Condition 1's margins grow with λ_0 and (through the scaling λ_0 = mλ*/2)
with λ*, the widths it needs shrink, Theorem 2's width scale shrinks with λ*, λ_0/(mλ*/2)
grows with λ_0 and shrinks with λ*, the rates fall — so over the box of brackets it takes its
extremes at the box's corners. A theorem guarded by hypotheses is not: Theorem 2 at n = 10,
m = 40 000 is NOT APPLICABLE at λ* = 0.148378 (its width hypothesis unmet), PASS at 0.148482
and NOT APPLICABLE again at 0.148601 (a FAIL that rests on a constant the paper does not
give), so its verdict agreeing at the corners decides nothing. The check alone and the
hypotheses are settled separately and combined: a theorem is decided where its verdict and
its check alone agree at every corner and, where a hypothesis changed its verdict at some
corner, every hypothesis does (each is then constant over the box, and so is the theorem).
:func:`settle` evaluates the check at the best estimates and at every corner:

- a verdict or status that is the same at every corner is *decided* by the brackets (a
  theorem's: as said above);
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
from deqlab.statements import RELATIONS, Kind, Statement, Verdict, measures
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
    and, where its brackets can be refined, ``precision`` (the relative width they were
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
        open_ = [b for b in init.brackets().values() if not b.at_floor and b.width > 0]
        asked = getattr(init, "precision", None)  # none: its brackets are not refined
        if not open_ or asked is None:
            break
        narrower = asked * NARROWING
        if narrower < FLOOR or all(b.relative_width <= narrower for b in open_):
            break
        better = refine(init, narrower)
        if better is None:
            break
        init = better
    reason = AT_FLOOR
    marked = [_undecided_statement(s, split_statements.get(s.name), reason) for s in statements]
    for a, b in zip(answers, answer(init, numbers, marked), strict=True):
        if (a.status, a.why) != (b.status, b.why):  # it reads an undecided statement
            split_answers.setdefault(a.theorem, _statuses(a.theorem, said))
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
    """name → (corner, reading) pairs, for the statements undecided over the box (module
    docstring): a verdict or a theorem's check alone that differs between corners (or from
    the estimate's), or a theorem its hypotheses changed at some corner beside a hypothesis
    that differs."""
    pairs = {s.name: [(None, s)] for s in statements}
    for corner, _, found, _ in at_corners:
        named = {t.name: t for t in found}
        for name, readings in pairs.items():
            readings.append((corner, named.get(name)))
    hypotheses_split = any(
        len({_verdict(t) for _, t in pairs[s.name]}) > 1
        for s in statements
        if s.kind is Kind.HYPOTHESIS
    )
    out = {}
    for s in statements:
        readings = pairs[s.name]
        verdicts = {_verdict(t) for _, t in readings}
        alone = {_alone(t) for _, t in readings}
        guarded = any(t is not None and _alone(t) != t.verdict.value for _, t in readings)
        if len(verdicts) > 1 or len(alone) > 1 or (guarded and hypotheses_split):
            out[s.name] = [(corner, _reading(t, hypotheses_split)) for corner, t in readings]
    return out


def _verdict(s: Statement | None) -> str:
    return "absent" if s is None else s.verdict.value


def _alone(s: Statement | None) -> str:
    """The verdict of a theorem's check alone (its value against its threshold, hypotheses
    aside); a statement's own verdict otherwise."""
    if s is None or s.kind is not Kind.THEOREM or s.relation not in RELATIONS:
        return _verdict(s)
    if s.threshold is None or not measures(s.value, s.relation, s.threshold):
        return Verdict.NOT_MEASURED.value
    holds = RELATIONS[s.relation](s.value, s.threshold)
    return (Verdict.PASS if holds else Verdict.FAIL).value


def _reading(s: Statement | None, hypotheses_split: bool) -> str:
    """The verdict, and for a theorem its hypotheses changed, its check alone."""
    if s is None or _alone(s) == s.verdict.value:
        return _verdict(s)
    split = ", a hypothesis differing between the corners" if hypotheses_split else ""
    return f"{s.verdict.value} (its check alone {_alone(s)}{split})"


def _split_answers(answers: list[Answer], said) -> dict[str, list[tuple[Corner, str]]]:
    """theorem → (corner, status) pairs, for the answers whose status differs."""
    out = {}
    for a in answers:
        readings = [(None, a.status), *_statuses(a.theorem, said)]
        if len({status for _, status in readings}) > 1:
            out[a.theorem] = readings
    return out


def _statuses(theorem: str, said) -> list[tuple[Corner, str]]:
    """(corner, status) of the answer on ``theorem`` at each corner."""
    found = []
    for corner, answers in said:
        match = next((b for b in answers if b.theorem == theorem), None)
        found.append((corner, "absent" if match is None else match.status))
    return found


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

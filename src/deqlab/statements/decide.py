"""Where verdicts are decided: one number against a threshold, guarded by hypotheses,
or an implication over steps; and the one rule that reduces many values to one.

- :func:`worst`: the value a statement over many runs, widths or steps is decided on;
- :func:`measure`: ``value relation threshold`` → PASS / FAIL (HOLDS / UNMET for a
  hypothesis), NOT MEASURED without a finite value;
- :func:`theorem`: NOT APPLICABLE where a hypothesis is unmet, with what would satisfy it;
- :func:`implication`: "if P then Q" over steps, checked only on the steps where P held.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, TypedDict

from deqlab.statements.statement import (
    OURS_KEY,
    RELATIONS,
    Kind,
    Source,
    Statement,
    Verdict,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack


class _Decided(TypedDict):
    value: float | None
    relation: str
    threshold: float
    measured: str


class Measurement(_Decided, total=False):
    """The keywords of :func:`measure` a bound builder passes on: ``value relation
    threshold`` decides the verdict; ``measured``/``expected`` say it in words; ``needs``
    (hypotheses only) what would satisfy it."""

    expected: str
    detail: str
    needs: str


def worst(values: Iterable[object], relation: str, threshold: float | None = None) -> float | None:
    """The one value a statement over many runs, widths or steps is decided on.

    The worst value is the largest for ``<``/``<=`` and the smallest for ``>``/``>=``.
    A value that violates ``value relation threshold`` is returned even when other values
    are missing (a measured failure is never hidden by a missing run); otherwise ``None``
    when any value is not measured (or there are none), else the worst value. Without a
    ``threshold`` only an infinity on the worst side (+inf for ``<``/``<=``, −inf for
    ``>``/``>=``) violates: it breaks every finite bound.

    ±inf follows :func:`measures`: measured where it violates the bound, not measured where
    it satisfies it.
    """
    _check_relation(relation)
    values = list(values)
    numbers = [float(v) for v in values if _is_number(v)]  # type: ignore[arg-type]
    pick = max if relation in ("<", "<=") else min
    if threshold is None:
        worst_side = math.inf if pick is max else -math.inf
        broken = [v for v in numbers if v == worst_side]
    else:
        broken = [v for v in numbers if not RELATIONS[relation](v, threshold)]
    if broken:
        return pick(broken)
    measured = [v for v in numbers if math.isfinite(v)]
    if not measured or len(measured) < len(values):
        return None
    return pick(measured)


def measures(value: object, relation: str, threshold: float) -> bool:
    """Whether ``value`` is a measurement of ``value relation threshold``: a finite real
    number always; ±inf only where it violates the relation; None, NaN and non-numbers never.

    Every quantity a statement is decided on is finite (a norm, a loss, an eigenvalue, a
    ratio of measured numbers), so ±inf is an overflow: the computation lost the number and
    kept only the side it left the floats on. On the violating side that is a measured
    violation (FAIL / UNMET): the run's own numbers broke the bound, and a failure is never
    hidden. On the satisfying side (e.g. inf ≥ threshold) it is not a measurement: the
    overflow may come from an intermediate step (a division by a difference rounded to 0),
    so the exact quantity need not be beyond the bound, and a lost number is never a PASS.
    Where +inf is the exact value of an inequality's margin (e.g. a ratio lhs/rhs with
    rhs ≤ 0, which holds trivially), the caller leaves that step out before deciding.
    """
    if not _is_number(value):
        return False
    value = float(value)  # type: ignore[arg-type]
    return math.isfinite(value) or not RELATIONS[relation](value, threshold)


def ratio(lhs: object, rhs: object, relation: str) -> float | None:
    """``lhs/rhs``: the margin of ``lhs relation rhs`` as a number a claim decides against 1
    with :func:`worst` (``ratio relation 1`` iff ``lhs relation rhs``, for ``rhs > 0``).

    None where a side is missing (None, NaN) or ``rhs ≤ 0``. Where one side is ±inf (an
    overflow, see :func:`measures`), the infinity that breaks ``ratio relation 1`` if the
    overflow breaks ``lhs relation rhs`` (e.g. ``lhs = inf`` against ``≤``, ``rhs = inf``
    against ``≥``), else None; both sides infinite: None (nothing is left to compare).
    """
    _check_relation(relation)
    if not (_is_number(lhs) and _is_number(rhs)):
        return None
    a, b = float(lhs), float(rhs)  # type: ignore[arg-type]
    if math.isfinite(a) and math.isfinite(b):
        return a / b if b > 0 else None
    if (math.isinf(a) and math.isinf(b)) or RELATIONS[relation](a, b):
        return None
    return math.inf if relation in ("<", "<=") else -math.inf


def _is_number(value: object) -> bool:
    """A real number that is not NaN (±inf included)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value


def _check_relation(relation: str) -> None:
    if relation not in RELATIONS:
        raise ValueError(f"`relation` must be one of {', '.join(RELATIONS)}; got {relation!r}")


def measure(
    name: str,
    kind: Kind,
    source: Source,
    *,
    value: float | None,
    relation: str,
    threshold: float,
    measured: str,
    expected: str = "",
    detail: str = "",
    needs: str = "",
) -> Statement:
    """The statement ``value relation threshold``, decided on the measured ``value``.

    A missing or NaN ``value`` gives NOT MEASURED (never PASS); ±inf is FAIL / UNMET where it
    violates the relation and NOT MEASURED where it satisfies it (:func:`measures`). Hypotheses
    get HOLDS / UNMET; ``needs`` (what would satisfy it) is kept only when it is unmet.
    ``expected`` defaults to ``"relation threshold"``.
    """
    _check_relation(relation)
    if not measures(value, relation, threshold):
        verdict = Verdict.NOT_MEASURED
        value = None
    else:
        holds = RELATIONS[relation](float(value), threshold)  # type: ignore[arg-type]
        if kind is Kind.HYPOTHESIS:
            verdict = Verdict.HOLDS if holds else Verdict.UNMET
        else:
            verdict = Verdict.PASS if holds else Verdict.FAIL
    keep_needs = kind is Kind.HYPOTHESIS and verdict is Verdict.UNMET
    return Statement(
        name,
        kind,
        source,
        verdict,
        measured,
        expected or f"{relation} {threshold:g}",
        value=None if value is None else float(value),
        relation=relation,
        threshold=threshold,
        detail=detail,
        needs=needs if keep_needs else "",
    )


def ours(name: str, **measurement: Unpack[Measurement]) -> Statement:
    """A statement the project adds (kind OURS, cited "ours"), decided by :func:`measure`."""
    return measure(name, Kind.OURS, Source(OURS_KEY), **measurement)


def not_measured(name: str, kind: Kind, source: Source, *, expected: str, why: str) -> Statement:
    """A statement for which the run has no data; ``why`` says what is missing."""
    return Statement(name, kind, source, Verdict.NOT_MEASURED, "—", expected, detail=why)


def theorem(check: Statement, hypotheses: Sequence[Statement]) -> Statement:
    """A theorem ``check`` that applies only where every one of ``hypotheses`` holds.

    Any UNMET hypothesis makes it NOT APPLICABLE (the measurement is kept; the detail names
    each unmet hypothesis, reported with its margin in its own statement, and ``needs``
    gathers what would satisfy them); a NOT MEASURED hypothesis leaves the theorem NOT
    MEASURED unless it was already.
    """
    if check.kind is not Kind.THEOREM:
        raise ValueError(f"`check` must be a theorem statement; got {check.kind.value}")
    if any(h.kind is not Kind.HYPOTHESIS for h in hypotheses):
        raise ValueError("`hypotheses` must all be hypothesis statements")
    unmet = [h for h in hypotheses if h.verdict is Verdict.UNMET]
    unknown = [h for h in hypotheses if h.verdict is Verdict.NOT_MEASURED]
    if unmet:
        why = "hypotheses unmet (margins in their own rows): " + "; ".join(h.name for h in unmet)
        needs = "; ".join(h.needs for h in unmet if h.needs)
        return _replace(check, Verdict.NOT_APPLICABLE, why, needs)
    if unknown and check.verdict is not Verdict.NOT_MEASURED:
        why = "; ".join(f"{h.name} not measured" for h in unknown)
        return _replace(check, Verdict.NOT_MEASURED, why, "")
    return check


def implication(
    check: Callable[[range, str], Statement],
    steps: int,
    premise: Statement,
    first: int | None,
    given: Sequence[Statement] = (),
) -> list[Statement]:
    """The theorem "if P holds at every k′ ≤ k, then Q holds at k → k + 1" over the steps
    k = 0, …, ``steps`` − 1 (an induction step of a proof, e.g. the thesis' Propositions
    5–6): Q is checked only where P held.

    ``premise`` is the HYPOTHESIS statement of P and ``first`` the first step where P fails
    or is not measured (None: it holds at every step of the run). ``check(ks, suffix)``
    builds the theorem statement of Q over the steps ``ks`` (``suffix`` goes at the end of
    its name). Returns Q on the steps before ``first``, guarded by ``given`` (the hypotheses
    of the theorem the step belongs to), and, when P fails within the run, Q on the steps
    from ``first`` on, NOT APPLICABLE with P as its unmet hypothesis (NOT MEASURED where P
    was not measured).
    """
    if premise.kind is not Kind.HYPOTHESIS:
        raise ValueError(f"`premise` must be a hypothesis statement; got {premise.kind.value}")
    end = steps if first is None else min(first, steps)
    found = [theorem(check(range(end), ""), given)]
    if end < steps:
        rest = check(range(end, steps), f", from step {end}")
        found.append(theorem(rest, [*given, premise]))
    return found


def _replace(check: Statement, verdict: Verdict, why: str, needs: str) -> Statement:
    detail = f"{why}. {check.detail}".strip() if check.detail else why
    return Statement(
        check.name,
        check.kind,
        check.source,
        verdict,
        check.measured,
        check.expected,
        value=check.value,
        relation=check.relation,
        threshold=check.threshold,
        detail=detail,
        needs=needs,
    )


def strictly_increasing(values: Iterable[float]) -> bool:
    """True when each value is larger than the one before (ties and NaNs are not)."""
    return all(a < b for a, b in itertools.pairwise(values))


def min_step_gap(values: Sequence[object]) -> float | None:
    """``min_i (v[i+1] − v[i])``, decided by :func:`worst` against 0: > 0 iff strictly
    increasing; ``None`` for < 2 values.

    The number an "increases with …" statement is decided on, so a tie (gap 0) or a
    reversal (gap < 0) fails it, also beside a missing value, and a missing value beside
    no failure leaves it unmeasured. Across a missing value the gap between the measured
    values on either side counts too: no value in between can make ``1, NaN, 0.5`` increase.
    """
    if len(values) < 2:
        return None
    gaps = [
        float(b) - float(a) if _is_number(a) and _is_number(b) else None  # type: ignore[arg-type]
        for a, b in itertools.pairwise(values)
    ]
    measured = [float(v) for v in values if _is_number(v)]  # type: ignore[arg-type]
    across = [b - a for a, b in itertools.pairwise(measured)] if None in gaps else []
    return worst([*gaps, *across], ">", 0.0)


def constant_not_given(check: Statement, needs: str) -> Statement:
    """``check``, a theorem whose width hypothesis holds only with a constant the paper does
    not give (taken as 1), where a FAIL cannot be told from a too small constant: NOT
    APPLICABLE, with ``needs`` (DESIGN: a width hypothesis with a constant the paper does not
    give cannot make a theorem FAIL). Every other verdict is kept."""
    if check.kind is not Kind.THEOREM:
        raise ValueError(f"`check` must be a theorem statement; got {check.kind.value}")
    if check.verdict is not Verdict.FAIL:
        return check
    why = "the width hypothesis cannot be decided without the paper's constant"
    return _replace(check, Verdict.NOT_APPLICABLE, why, needs)

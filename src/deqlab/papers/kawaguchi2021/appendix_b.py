"""Appendix B (the implicit bias of Theorem 2's step as γ → 1) as claims.

Each state (A_t, r_t) of a trajectory is one :class:`~deqlab.statements.Run` whose points
are the γ of the sweep (its series ``sweep_gamma``, a point without a finite γ is not one
of the sweep), with the norms ``along`` (‖P₁ vec V‖), ``rest`` (‖(I − P₁) vec V‖),
``paper_rest`` (Appendix B's g_γ), the gap ``perron_gap`` of the Perron leading term, and
``eq37_error``; its labels ``task`` and constant ``step``.

Growth in 1/(1 − γ) is measured by the exponent between the two largest γ of the sweep,
s = log(‖x(γ₂)‖/‖x(γ₁)‖) / log((1 − γ₁)/(1 − γ₂)): s → 1 for a term growing like
1/(1 − γ), s → 0 for a bounded one.  "Grows" is s ≥ :data:`GROWS`, "bounded" s ≤
:data:`BOUNDED` (both thresholds ours), worst over every state (:func:`worst`).
Statements: Eq. (37) (theorem, float64 tolerance ours); the component along 1 grows; the
rest (I − P₁)vec V stays bounded; Appendix B's remainder g_γ = vec V + P₁r/(1 − γ) stays
bounded; and ours: the leading term is (πᵀr)/(1 − γ)·1 with π the Perron vector of σ(A),
which is P₁r/(1 − γ) only when πᵀr = 1ᵀr/m (e.g. σ(A) doubly stochastic, as at A = 0).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from deqlab.papers.kawaguchi2021 import KAWAGUCHI
from deqlab.statements import (
    Kind,
    Run,
    Statement,
    claim,
    is_measured,
    not_measured,
    number,
    ours,
    worst,
)
from deqlab.statements.paper import OURS

#: Growth exponent at or above which a norm "grows like 1/(1 − γ)" (ours).
GROWS = 0.9
#: Growth exponent at or below which a norm "stays bounded" (ours).
BOUNDED = 0.1
#: Largest relative gap of the Perron leading term at the largest γ (ours).
PERRON_RTOL = 1e-3
APPENDIX_B = "Appendix B"
EQ37 = "Appendix B, Eq. (37)"
FINDING = "docs/findings.md#kawaguchi-appb"

States = Mapping[str, Run]


def sweep(state: Run, column: str) -> list[tuple[float, float]]:
    """(γ, ``column``) at the points of the sweep (a finite γ), by increasing γ."""
    pairs = zip(state["sweep_gamma"], state[column], strict=True)
    return sorted((g, x) for g, x in pairs if is_measured(g))


def growth_exponent(state: Run, column: str) -> float | None:
    """s between the two largest γ of the state (module docstring); None if not measurable."""
    points = sweep(state, column)
    if len(points) < 2:
        return None
    (g1, x1), (g2, x2) = points[-2:]
    if not (is_measured(x1) and is_measured(x2)) or min(x1, x2) <= 0:
        return None
    return math.log(x2 / x1) / math.log((1 - g1) / (1 - g2))


def _where(state: Run) -> str:
    return f"{state.label('task')}, step {state.constant('step'):g}"


@claim
def growth(states: States, column: str, name: str, relation: str, threshold: float) -> Statement:
    """The growth exponent of ``column`` ``relation`` ``threshold`` at every state."""
    expected = f"growth exponent {relation} {threshold:g} (1: like 1/(1 − γ); 0: bounded; the "
    expected += "threshold is ours), worst over every task and recorded step"
    exponents = {_where(s): growth_exponent(s, column) for s in states.values()}
    value = worst(list(exponents.values()), relation, threshold)
    if value is None:
        return KAWAGUCHI.not_measured(
            Kind.THEOREM,
            APPENDIX_B,
            name=name,
            expected=expected,
            why="no sweep, or a sweep with fewer than 2 γ or a zero or non-finite norm",
        )
    where = next(k for k, s in exponents.items() if s == value)
    by_task: dict[str, list[float | None]] = {}
    for state in states.values():
        by_task.setdefault(state.label("task"), []).append(exponents[_where(state)])
    shown = ", ".join(f"{t} {number(worst(v, relation, threshold), 3)}" for t, v in by_task.items())
    return KAWAGUCHI.theorem(
        APPENDIX_B,
        name=name,
        value=value,
        relation=relation,
        threshold=threshold,
        measured=f"{'smallest' if relation == '>=' else 'largest'} exponent = {value:.3g} "
        f"({where}); per task: {shown}",
        expected=expected,
        detail="A_t and r_t = δ_tS_tU_t⁻¹∇L₀ held fixed from the trajectory while γ → 1 in "
        "vec V = −(I − γσ(A_t))⁻ᵀr_t, as Appendix B's argument does"
        + (f"; where it fails: {FINDING}" if column == "paper_rest" else ""),
    )


@claim
def eq37(states: States, *, tolerance: float) -> Statement:
    """Eq. (37): the largest relative gap of −r_tᵀU_t⁻¹ and δ_t d/dt Z_t ≤ ``tolerance``."""
    name = "Eq. (37): V_t = −r_tᵀ(I − γσ(A_t))⁻¹ for the square loss"
    expected = f"≤ {tolerance:g} (agreement in float64; the tolerance is ours)"
    points = [(v, s) for s in states.values() for v in s["eq37_error"]]
    value = worst([v for v, _ in points], "<=", tolerance)
    if value is None:
        why = "no recorded step, or a non-finite gap"
        return KAWAGUCHI.not_measured(Kind.THEOREM, EQ37, name=name, expected=expected, why=why)
    state = next(s for v, s in points if v == value)
    return KAWAGUCHI.theorem(
        EQ37,
        name=name,
        value=value,
        relation="<=",
        threshold=tolerance,
        measured=f"largest relative gap of −r_tᵀU_t⁻¹ and δ_t d/dt Z_t (autograd) = "
        f"{value:.3g} ({_where(state)})",
        expected=expected,
        detail="r_t = δ_tS_tU_t⁻¹∇L₀(Z_t), δ_t = δ̄_t/2: the error vector "
        "the proof of Theorem 2 implies (Appendix B gives no formula for r_t)",
    )


def _largest_gamma(state: Run, column: str) -> tuple[float, float]:
    """(γ, ``column``) at the largest γ of the sweep; NaNs without a sweep."""
    points = sweep(state, column)
    return points[-1] if points else (math.nan, math.nan)


@claim
def perron(states: States) -> Statement:
    """Ours: the term growing like 1/(1 − γ) is (πᵀr)/(1 − γ)·1: the gap at the largest γ
    of each state ≤ :data:`PERRON_RTOL`."""
    name = "the term growing like 1/(1 − γ) is (πᵀr_t)/(1 − γ)·1, π the Perron vector of σ(A_t)"
    expected = f"≤ {PERRON_RTOL:g} at the largest γ (ours)"
    last = {_where(s): _largest_gamma(s, "perron_gap") for s in states.values()}
    value = worst([gap for _, gap in last.values()], "<=", PERRON_RTOL)
    if value is None:
        why = "no sweep, or a non-finite gap"
        return not_measured(name, Kind.OURS, OURS, expected=expected, why=why)
    where, (gamma, _) = next((k, v) for k, v in last.items() if v[1] == value)
    return ours(
        name,
        value=value,
        relation="<=",
        threshold=PERRON_RTOL,
        measured=f"largest |(1 − γ)·mean(vec V) + πᵀr_t|/|πᵀr_t| = {value:.3g} at "
        f"γ = {gamma:g} ({where})",
        expected=expected,
        detail="(σᵀ)ᵏ → 1πᵀ, so (I − γσ)⁻ᵀr = (πᵀr)/(1 − γ)·1 + O(1): Appendix B's "
        f"P₁r/(1 − γ) is this term only when πᵀr = 1ᵀr/m; {FINDING}",
    )


def appendix_b(states: States, *, tolerance: float) -> list[Statement]:
    """Eq. (37), the three growth statements, and the Perron leading term (ours)."""
    return [
        eq37(states, tolerance=tolerance),
        growth(states, "along", "the component of V_t along 1 grows like 1/(1 − γ)", ">=", GROWS),
        growth(states, "rest", "the rest (I − P₁)vec(V_t) stays bounded as γ → 1", "<=", BOUNDED),
        growth(
            states,
            "paper_rest",
            "vec(V_t) = P₁r_t/(1 − γ) + g_γ with g_γ bounded as γ → 1",
            "<=",
            BOUNDED,
        ),
        perron(states),
    ]

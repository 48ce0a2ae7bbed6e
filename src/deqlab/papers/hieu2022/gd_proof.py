"""Theorem 3.3.5 of the thesis (Hieu 2022) and the steps of its proof, on one GD run.

The proof (Section 3.3.3) is an induction over the GD steps. Its steps are implications:
Propositions 5 and 6 and Lemmas 3.3.8–3.3.9 say "if Hypotheses 1 and 3 hold for
``k′ = 1, …, k``, then … at step ``k`` (or ``k + 1``)"; Lemma 3.3.10 also needs Hypothesis 2,
Lemma 3.3.7 only Hypothesis 1, Lemma 3.3.6 nothing. Each is checked only where its premise
held: on the steps ``k → k+1`` with ``k < f``, ``f`` the first step ``≥ 1`` where the premise
fails (or is not measured). From ``f`` on it is NOT APPLICABLE, in a statement of its own
that names the premise statement (a HYPOTHESIS with the failing step and its margin):
:func:`deqlab.statements.implication`.

Propositions 5–6 also use Condition 2 (Eqs. 3.16–3.17) and, like Theorem 3.3.5, the
step-size condition: they are NOT APPLICABLE wherever those are unmet. The lemmas use
neither.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

from deqlab.papers.hieu2022 import HIEU
from deqlab.papers.hieu2022.claims import (
    PROPOSITION_5,
    PROPOSITION_6,
    ball_check,
    condition_hypothesis,
    rate_check,
    sigma_check,
    step_size_hypothesis,
)
from deqlab.papers.hieu2022.mondeq import PARAMETERS, Inequality, gd_rate, rate_defined
from deqlab.papers.hieu2022.mondeq_step import STEP_KEYS
from deqlab.papers.hieu2022.width_fit import WidthFit
from deqlab.statements import Statement, claim, implication, is_measured, number, theorem, worst

#: Per-step inequalities of the proof: key → (label, bound as printed, premise). The
#: premise is the hypotheses that must hold at ``k′ = 1, …, k`` ("" for none).
STEP_LEMMAS: Mapping[str, tuple[str, str, str]] = {
    "lemma3_3_6": ("Lemma 3.3.6", "‖Δ_W‖₂ ≤ 2‖A‖₂‖Δ_A‖₂ + ‖Δ_A‖₂² + 2‖Δ_B‖₂", ""),
    "lemma3_3_7": (
        "Lemma 3.3.7",
        "‖·(k+1) − ·(k)‖ ≤ η‖X‖_F‖ŷ(k) − y‖ × (λ̄_u/m, λ̄_U/m, 2λ̄_UuA/m², 2λ̄_Uu/m², "
        "4λ̄_Uu(λ̄_A² + ηλ₀²λ̄_A²/16 + 1)/m²) for U, u, A, B, W",
        "1",
    ),
    "lemma3_3_8": (
        "Lemma 3.3.8",
        "I₁ = ½‖ŷ(k+1) − ŷ(k)‖² ≤ L(θ_k)[η²C₁₁² + 2η³λ₀²C₁₁C₁₂ + η⁴λ₀C₁₂²], "
        "C₁₁ = ‖X‖_F²(λ̄_u² + 4λ̄_Uu² + 4λ̄_UuA² + λ̄_U²)",
        "13",
    ),
    "lemma3_3_9": (
        "Lemma 3.3.9",
        "I₂ = (ŷ(k+1) − g)ᵀ(ŷ(k) − y) ≤ 2L(θ(k))[η(C₁₁ − λ̄_U²‖X‖_F²) + η²λ₀²C₁₂]",
        "13",
    ),
    "lemma3_3_10": ("Lemma 3.3.10", "I₃ = (g − ŷ(k))ᵀ(ŷ(k) − y) ≤ −ηλ₀²L(θ_k)/2", "123"),
}

#: The record columns of each per-step inequality (Lemma 3.3.7: one per parameter).
STEP_COLUMNS: Mapping[str, tuple[str, ...]] = {
    key: tuple(f"{key}_{p}" for p in STEP_KEYS) if key == "lemma3_3_7" else (key,)
    for key in STEP_LEMMAS
}

Sides = tuple[Sequence[float], Sequence[float]]

#: Ours: Lemma 3.3.6 is checked to rounding (its bound is attained when Δ_B is
#: antisymmetric, as GD's Δ_B is: W depends on B only through B − Bᵀ).
ROUNDING = 1e-10

_EXPECTED = {
    "lemma3_3_6": f"lhs/rhs ≤ 1 (+{ROUNDING:g}, rounding) at every step",
    "lemma3_3_10": "lhs/rhs ≥ 1 at every step (I₃ ≤ bound < 0)",
}


@dataclass(frozen=True)
class GDTrace:
    """One GD run at one width: ``η``, Theorem 3.3.5's bound ``eta_max``, ``λ₀``, the radii
    ``R_·`` and, for steps ``k = 0, …, K``, the losses, ``σ_min(Z(k))`` and the distances
    ``‖·(k) − ·(0)‖_F`` of A, B, U, u. ``sides`` maps each column of :data:`STEP_COLUMNS`
    to the (lhs, rhs) of its inequality at ``k = 0, …, K`` (the step ``k → k+1``; NaN where
    not measured, e.g. at ``K``)."""

    width: int
    eta: float
    eta_max: float
    lambda0: float
    radii: Mapping[str, float]
    losses: Sequence[float]
    sigmas: Sequence[float]
    distances: Mapping[str, Sequence[float]]
    sides: Mapping[str, Sides] = field(default_factory=dict)

    def extended(self, value: float) -> GDTrace:
        """The run with one more step after its last, every measured quantity ``value``."""
        grow = [*self.losses, value], [*self.sigmas, value]
        return replace(
            self,
            losses=grow[0],
            sigmas=grow[1],
            distances={p: [*d, value] for p, d in self.distances.items()},
            sides={c: ([*a, value], [*b, value]) for c, (a, b) in self.sides.items()},
        )


def trace_from_records(
    records: Sequence[Mapping[str, object]],
    *,
    width: int,
    eta: float,
    eta_max: float,
    lambda0: float,
    radii: Mapping[str, float],
) -> GDTrace:
    """The :class:`GDTrace` of the records of :class:`deqlab.train.mondeq_gd.MonDEQGD` (or
    the rows of ``hieu2022-mondeq-gd``), in step order; missing values are NaN."""

    def series(key: str) -> list[float]:
        return [_float(r.get(key)) for r in records]

    columns = [c for cs in STEP_COLUMNS.values() for c in cs]
    return GDTrace(
        width=width,
        eta=eta,
        eta_max=eta_max,
        lambda0=lambda0,
        radii=radii,
        losses=series("loss"),
        sigmas=series("sigma_min"),
        distances={p: series(f"dist_{p}") for p in PARAMETERS},
        sides={c: (series(f"{c}_lhs"), series(f"{c}_rhs")) for c in columns},
    )


def _float(x: object) -> float:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else math.nan


#: The end of the name of Theorem 3.3.5 checked under Eq. (3.17) as its proof needs (ours).
_AS_PROVED = ", under Eq. (3.17) as Proposition 6's proof needs (ours)"


# --- the induction's premise -------------------------------------------------------------


def _hypothesis_excess(trace: GDTrace, k: int) -> dict[str, float]:
    """Hypotheses 1–3 at step ``k`` as excesses, ≤ 0 exactly when they hold:
    ``max_· ‖·(k) − ·(0)‖_F/R_· − 1``, ``λ₀/(2σ_min(Z(k))) − 1`` and
    ``(L(k) − (1 − ηλ₀²/4)^k L(0))/L(0)`` (NaN where η > 4/λ₀²: no bound)."""
    ratio = worst([trace.distances[p][k] / trace.radii[p] for p in PARAMETERS], "<=", 1.0)
    ball = math.nan if ratio is None else ratio - 1
    sigma = trace.lambda0 / (2 * trace.sigmas[k]) - 1 if trace.sigmas[k] > 0 else math.inf
    loss0 = trace.losses[0]
    if rate_defined(trace.lambda0, trace.eta) and loss0 > 0:
        bound = gd_rate(trace.lambda0, trace.eta) ** k * loss0
        loss = (trace.losses[k] - bound) / loss0
    else:
        loss = math.nan
    return {"1": ball, "2": sigma, "3": loss}


_HYPOTHESIS_TEXT = {
    "1": "Hypothesis 1: max ‖·(k) − ·(0)‖_F/R − 1",
    "2": "Hypothesis 2: λ₀/(2σ_min(Z(k))) − 1",
    "3": "Hypothesis 3: (L(k) − (1 − ηλ₀²/4)^k L(0))/L(0)",
}


@dataclass(frozen=True)
class Premise:
    """Where "Hypotheses ``which`` hold for ``k′ = 1, …, k``" first fails: ``first`` is that
    step (None: never, within the run) and ``statement`` the HYPOTHESIS stating it."""

    which: str
    first: int | None
    statement: Statement


def premise(trace: GDTrace, which: str) -> Premise:
    """Hypotheses ``which`` (e.g. ``"13"``) at the steps ``k′ ≥ 1`` of ``trace``.

    The value is the largest excess of :func:`_hypothesis_excess` up to the first step
    where one is > 0 or not measured (there: the largest excess, or not measured).
    """
    label = {"1": "Hypothesis 1", "13": "Hypotheses 1 and 3", "123": "Hypotheses 1, 2 and 3"}
    seen: list[float] = []
    first, why = None, ""
    for k in range(1, len(trace.losses)):
        at_k = _hypothesis_excess(trace, k)
        excess = {h: at_k[h] for h in which}
        seen += excess.values()
        bad = {h: e for h, e in excess.items() if not (is_measured(e) and e <= 0)}
        if bad:
            first = k
            why = "; ".join(f"{_HYPOTHESIS_TEXT[h]} = {number(e)}" for h, e in bad.items())
            break
    largest = worst(seen, "<=", 0.0) if seen else -math.inf
    steps = len(trace.losses) - 1
    where = f"first fails at step {first}: {why}" if first else f"at steps 1–{steps}"
    statement = HIEU.hypothesis(
        f"Section 3.3.3, {label[which]}",
        name=f"{label[which]} at every step k′ ≥ 1 at n = {trace.width} (the premise of the "
        "induction's steps)",
        value=largest,
        relation="<=",
        threshold=0.0,
        measured=f"largest excess {number(largest)} {where} at n = {trace.width}",
        expected="each excess ≤ 0 (the hypothesis holds) at every step",
        needs=f"{label[which]} at step {first} ({why})" if first else "",
    )
    return Premise(which, first, statement)


# --- implications ------------------------------------------------------------------------


def _implication(
    check: Callable[[range, str], Statement],
    steps: int,
    given: Premise,
    outer: Sequence[Statement] = (),
) -> list[Statement]:
    """``check`` as an induction step with premise ``given``
    (:func:`deqlab.statements.implication`)."""
    return implication(check, steps, given.statement, given.first, outer)


def _span(ks: range) -> str:
    return f"steps k = {ks[0]}–{ks[-1]}" if len(ks) else "no step"


@claim
def step_lemma_check(trace: GDTrace, key: str, ks: range, suffix: str) -> Statement:
    """Lemma ``key`` of :data:`STEP_LEMMAS` on the steps ``ks``: the worst ``lhs/rhs``
    (Lemma 3.3.10, whose bound is negative: the smallest, which must be ≥ 1)."""
    label, bound, _ = STEP_LEMMAS[key]
    upper = key != "lemma3_3_10"
    found = []
    for k in ks:
        for column in STEP_COLUMNS[key]:
            lhs_all, rhs_all = trace.sides.get(column, ((), ()))
            lhs, rhs = (x[k] if k < len(x) else math.nan for x in (lhs_all, rhs_all))
            if rhs != 0:
                ratio = lhs / rhs if is_measured(lhs) and is_measured(rhs) else None
                found.append((ratio, k, column, lhs, rhs))
    value = worst([f[0] for f in found], "<=" if upper else ">=", 1.0)
    ties = [f for f in found if value is not None and f[0] == value]
    _, k, column, lhs, rhs = (max if upper else min)(ties) if ties else (None, 0, key, None, None)
    which = f" ({column.rsplit('_', 1)[1]})" if key == "lemma3_3_7" else ""
    slack = ROUNDING if key == "lemma3_3_6" else 0.0
    return HIEU.theorem(
        label,
        name=f"{label} at every GD step at n = {trace.width}{suffix}",
        quote=bound,
        value=value,
        relation="<=" if upper else ">=",
        threshold=1.0 + slack,
        measured=f"{'max' if upper else 'min'} lhs/rhs = {number(value)} over "
        f"{sum(f[0] is not None for f in found)} "
        f"inequalities on {_span(ks)} (worst{which}: lhs {number(lhs, 4)}, bound {number(rhs, 4)}, "
        f"step {k}) at n = {trace.width}",
        expected=_EXPECTED.get(key, "lhs/rhs ≤ 1 at every step"),
    )


def step_lemma_statements(trace: GDTrace, premises: Mapping[str, Premise]) -> list[Statement]:
    """Lemmas 3.3.6–3.3.10 as implications (Lemma 3.3.6 has no premise), from
    ``trace.sides``."""
    steps = len(trace.losses) - 1
    out = []
    for key, (_, _, which) in STEP_LEMMAS.items():
        given = premises[which] if which else None
        check = partial(step_lemma_check, trace, key)
        out += [check(range(steps), "")] if given is None else _implication(check, steps, given)
    return out


@claim
def theorem_3_3_5(
    trace: GDTrace,
    conditions: Sequence[Inequality],
    *,
    fits: Mapping[str, WidthFit | None],
    m: float,
    n_samples: int = 1,
    as_proved: Inequality | None = None,
) -> list[Statement]:
    """Condition 2 (``conditions``: Eqs. 3.16–3.18) and the step size as hypotheses, then
    Theorem 3.3.5 (NOT APPLICABLE unless all hold), the premises of the induction,
    Propositions 5–6 (implications, also under Condition 2) and, where ``trace.sides`` has
    them, Lemmas 3.3.6–3.3.10 (implications).

    ``as_proved`` (ours): Eq. (3.17) as Proposition 6's proof needs it
    (:func:`deqlab.papers.hieu2022.mondeq.eq_3_17_as_proved`). When given it is one more hypothesis,
    and Theorem 3.3.5 is checked a second time, under the printed hypotheses and it: the
    printed statement and the one its proof supports are both decided.

    ``fits`` maps each equation's name to its :class:`WidthFit` (or None); ``n_samples``
    is N, for Eq. (3.18)'s impossibility test (``m²N ≥ 1/20``).
    """
    width, steps = trace.width, len(trace.losses) - 1

    def hypothesis(c: Inequality) -> Statement:
        fit = fits.get(c["name"])
        return condition_hypothesis(
            c, width=width, condition="Condition 2", fit=fit, m=m, n_samples=n_samples
        )

    hypotheses = [hypothesis(c) for c in conditions]
    hypotheses.append(step_size_hypothesis(trace.eta, trace.eta_max, width=width))
    rate = gd_rate(trace.lambda0, trace.eta) if rate_defined(trace.lambda0, trace.eta) else None
    out = [*hypotheses, theorem(rate_check(trace.losses, rate, width=width), hypotheses)]
    if as_proved is not None:
        proved = hypothesis(as_proved)
        check = rate_check(trace.losses, rate, width=width, suffix=_AS_PROVED)
        out += [proved, theorem(check, [*hypotheses, proved])]
    premises = {w: premise(trace, w) for w in ("1", "13", "123")}
    out += [p.statement for p in premises.values()]

    def induction(
        check: Callable[..., Statement], series: object, scale: object, where: tuple[str, str]
    ) -> list[Statement]:
        """``check`` (ball_check or sigma_check) on the steps k + 1 the premise covers."""

        def at(ks: range, suffix: str) -> Statement:
            suffix = f", from step {ks[0] + 1}" if suffix else ""
            steps_after = [k + 1 for k in ks]
            return check(series, scale, width=width, steps=steps_after, where=where, suffix=suffix)

        return _implication(at, steps, premises["13"], hypotheses)

    out += induction(ball_check, trace.distances, trace.radii, PROPOSITION_5)
    out += induction(sigma_check, trace.sigmas, trace.lambda0, PROPOSITION_6)
    if any(any(is_measured(x) for x in lhs) for lhs, _ in trace.sides.values()):
        out += step_lemma_statements(trace, premises)
    return out

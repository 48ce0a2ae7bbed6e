"""The observations of Figure 1 (Section 5) of Ling et al. (2023), as functions of GD runs
over widths, and ours on the runs.

- the convergence speed grows with m (speed = −slope of the least-squares line through
  (τ, ln Φ(τ)), τ <= T, the last step every measured width reached), the final training loss
  Φ(T) falls with m, and ‖W(τ)‖₂ < 1 throughout training;
- ours: GD ran every configured step at every width (a stop, e.g. ‖W‖₂ >= 1, is shown).

Each takes one :class:`~deqlab.papers.ling2023.claims.Width` per width, in increasing m;
its run has the series ``loss``, ``W_norm`` and ``ok`` (1 at a step without a stop) and the
label ``status`` of its last step. An "increases with m" is decided by
:func:`~deqlab.statements.min_step_gap` (a reversal beside a width not measured is FAIL).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from deqlab._fit import linear_fit
from deqlab.papers.ling2023 import LING
from deqlab.papers.ling2023.claims import (
    Width,
    condition1_hypotheses,
    eq9_unreachable,
    learning_rate_hypothesis,
    widths,
)
from deqlab.papers.ling2023.theorem1 import pl_statements, theorem1_statements
from deqlab.statements import Statement, claim, min_step_gap, numbers, ours, worst

SECTION = "Section 5, Figure 1"


def finite_losses(run: Width) -> list[tuple[int, float]]:
    """(τ, Φ(τ)) at the steps with a finite loss."""
    return [(s, v) for s, v in run.run.points("loss") if math.isfinite(v)]


def stop(run: Width) -> str:
    """Where and why the run stopped ("" if it did not)."""
    status = run.run.label("status")
    if status in ("ok", "") or not run.run.steps:
        return ""
    last = run.run.steps[-1]
    why = ""
    if status == "W_norm_ge_1":
        why = f": ‖W‖₂ = {run.run['W_norm'][-1]:.4g} ≥ 1"
    return f"m = {run.m} stopped at step {last} ({status}{why})"


def _rate(run: Width, budget: int) -> float | None:
    pairs = [(t, math.log(v)) for t, v in finite_losses(run) if t <= budget and v > 0]
    if len(pairs) < 2:
        return None
    return -linear_fit([t for t, _ in pairs], [v for _, v in pairs])[0]


@claim
def observations(prefix: str, runs: Sequence[Width]) -> list[Statement]:
    """Figure 1 (Section 5): faster and lower with m, ‖W(τ)‖₂ < 1 throughout training."""
    losses = [finite_losses(r) for r in runs]
    budget = min((found[-1][0] for found in losses if found), default=0)
    measured = len(runs) >= 2 and budget >= 1
    rates = [
        _rate(r, budget) if measured and found else None
        for r, found in zip(runs, losses, strict=True)
    ]
    final = [dict(found).get(budget) if measured else None for found in losses]
    w_max = [worst([v for _, v in r.run.points("W_norm", start=1)], "<", 1.0) for r in runs]
    stops = "; ".join(stop(r) for r in runs if stop(r))
    where = f" ({widths([r.m for r in runs])})"
    return [
        LING.observation(
            SECTION,
            name=f"{prefix}convergence is faster for larger m",
            quote="the convergence speed becomes faster as m increases",
            value=min_step_gap(rates),
            relation=">",
            threshold=0.0,
            measured=f"speed −d ln Φ/dτ = {numbers(rates)}{where}",
            expected=f"increases with m (least-squares slope of ln Φ(τ), τ ≤ {budget})",
            detail="needs two widths and a step τ ≥ 1 reached by every width",
        ),
        LING.observation(
            SECTION,
            name=f"{prefix}the final training loss is smaller for larger m",
            quote="and the final training loss becomes smaller",
            value=min_step_gap([None if v is None else -v for v in final]),
            relation=">",
            threshold=0.0,
            measured=f"Φ({budget}) = {numbers(final)}{where}",
            expected=f"decreases with m at step {budget}, the last step every width reached",
            detail="needs two widths and a step τ ≥ 1 reached by every width",
        ),
        LING.observation(
            SECTION,
            name=f"{prefix}‖W(τ)‖₂ < 1 throughout training",
            quote="The second experiment verifies that ‖W(τ)‖₂ is smaller than 1 "
            "throughout the training",
            value=worst(w_max, "<", 1.0),
            relation="<",
            threshold=1.0,
            measured=f"max over τ ≥ 1 of ‖W(τ)‖₂ = {numbers(w_max)}{where}"
            + (f"; {stops}" if stops else ""),
            expected="< 1 at every step τ ≥ 1 (Lanczos every spectral_every steps and wherever "
            "the trainer's Weyl bound reaches 1)",
        ),
    ]


@claim
def completed(prefix: str, runs: Sequence[Width], steps: int, ms: Sequence[int]) -> Statement:
    """Ours: every width of ``ms`` evaluated all ``steps`` GD steps without a stop."""
    done = {r.m: sum(v == 1.0 for v in r.run["ok"]) / steps for r in runs}
    fractions = [done.get(m, 0.0) for m in ms]
    stops = [stop(r) for r in runs if stop(r)]
    stops += [f"no rows for m = {m}" for m in ms if m not in done]
    return ours(
        f"{prefix}GD ran all {steps} steps at every width",
        value=worst(fractions, ">=", 1.0),
        relation=">=",
        threshold=1.0,
        measured="; ".join(stops) if stops else f"{widths(ms)}: all ran {steps} steps",
        expected="no stop (‖W‖₂ ≥ 1, a failed solve, a non-finite loss) at any width",
        detail=f"steps run / steps: {numbers(fractions)}",
    )


def figure1_statements(
    prefix: str, runs: Sequence[Width], steps: int, configured: Sequence[int], *, n: int
) -> list[Statement]:
    """Every statement of one data set of Figure 1: the observations, ours on the runs, the
    hypotheses of Theorem 1 at initialization (Condition 1, Eq. (10)) and ours on Eq. (9),
    Theorem 1 guarded by them, and the PL inequalities (``configured``: the widths asked
    for, ``steps``: the GD steps of each, ``n``: the number of samples)."""
    hypotheses = [
        *condition1_hypotheses(prefix, runs),
        learning_rate_hypothesis(prefix, runs),
    ]
    unreachable = [eq9_unreachable(prefix, runs, n)] if runs else []
    return [
        *observations(prefix, runs),
        completed(prefix, runs, steps, configured),
        *hypotheses,
        *unreachable,
        *theorem1_statements(prefix, runs, hypotheses),
        *pl_statements(prefix, runs),
    ]

"""Ours across the widths of a GD sweep of monotone DEQs (``hieu2022-mondeq-gd``): GD reaches
a small loss at the widest width, wider is faster, λ₀ = σ_min(Z(0)) grows with the width,
and so does the margin lhs/rhs of each equation of Condition 2. An "increases with the
width" is decided by :func:`~deqlab.statements.min_step_gap` (a reversal beside a width
not measured is FAIL)."""

from __future__ import annotations

import math
from collections.abc import Mapping

from deqlab.statements import Statement, claim, min_step_gap, number, ours


def _shown(values: Mapping[int, float]) -> str:
    return ", ".join(f"n={w}: {number(v, 3)}" for w, v in values.items())


@claim
def sweep_statements(
    finals: Mapping[int, float],
    lambda0: Mapping[int, float],
    margins: Mapping[str, Mapping[int, float]],
    *,
    loss_rtol: float,
    steps: int,
) -> list[Statement]:
    """``finals``: L(K)/L(0) by width (increasing; NaN where not measured), ``lambda0``:
    λ₀ by width, ``margins``: by equation (its label), lhs/rhs at initialization by width."""
    widest = max(finals)
    out = [
        ours(
            f"GD reaches L(K) ≤ {loss_rtol:g}·L(0) at the widest width",
            value=finals[widest],
            relation="<=",
            threshold=loss_rtol,
            measured=f"L(K)/L(0) = {number(finals[widest], 3)} at n = {widest}",
            expected=f"≤ {loss_rtol:g} after K = {steps} steps",
        ),
        ours(
            "wider is faster: L(K)/L(0) decreases with the width",
            value=min_step_gap([-v for v in finals.values()]),
            relation=">",
            threshold=0.0,
            measured=_shown(finals),
            expected="strictly decreasing (smallest decrease > 0)",
        ),
        ours(
            "λ₀ = σ_min(Z(0)) increases with the width",
            value=min_step_gap(list(lambda0.values())),
            relation=">",
            threshold=0.0,
            measured=_shown(lambda0),
            expected="strictly increasing (smallest increase > 0)",
        ),
    ]
    for label, by_width in margins.items():
        logs = [math.log10(v) if v > 0 else math.nan for v in by_width.values()]
        out.append(
            ours(
                f"the margin lhs/rhs of {label} grows with the width",
                value=min_step_gap(logs),
                relation=">",
                threshold=0.0,
                measured=_shown(by_width),
                expected="strictly increasing (smallest increase of log₁₀ lhs/rhs > 0)",
            )
        )
    return out

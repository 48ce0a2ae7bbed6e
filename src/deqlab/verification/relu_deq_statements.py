"""The statements of Ling et al. (2023) that verify checks at initialization: the paper's
claims (:mod:`deqlab.papers.ling2023.claims` and :mod:`~deqlab.papers.ling2023.network`)
fed what :func:`deqlab.verification.relu_deq.initialize` measured.

- Assumptions 1–2 and Theorem 3 (ii), λ* > 0;
- Lemma 1, ‖W(0)‖₂ ≤ 2√2σ_w (its finite-m form), and ‖W(0)‖₂ < 1;
- Theorem 2, λ_0 ≥ mλ*/2, guarded by m ≥ n and by its width with the constant taken as 1;
- Condition 1, Eqs. (7)–(9), their ``needs`` solved under the scaling of the one "width
  needed" number (:func:`deqlab.verification.relu_deq.widths_needed`), and Eq. (10) given η;
- ours: λ_min of the DEQ NTK ≥ λ*.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from deqlab.papers.ling2023 import LING, network
from deqlab.papers.ling2023.claims import (
    Width,
    assumption1,
    condition1_hypotheses,
    learning_rate_hypothesis,
    theorem3_ii,
)
from deqlab.papers.ling2023.network import big
from deqlab.papers.ling2023.theory import EQUATIONS
from deqlab.statements import Kind, Statement, theorem
from deqlab.verification.inputs import assumption2
from deqlab.verification.relu_deq import (
    LEMMA1_P,
    SCALING,
    THEOREM2_T,
    ReLUDEQInit,
    lemma1_value,
    theorem2_scale,
    widths_needed,
)


def statements(init: ReLUDEQInit, eta: float | None) -> list[Statement]:
    """The hypotheses and theorems at initialization (module docstring), each with a
    margin; ``eta`` adds the Eq. (10) hypothesis."""
    a1 = assumption1(init.sigma_w2)
    a2 = assumption2(init.inputs)
    lemma1 = network.lemma1(
        init.W_norm, lemma1_value(init), m=init.width, seed=init.seed, p=LEMMA1_P
    )
    out = [a1, *a2, _theorem3(init, [a1, *a2]), lemma1, network.well_posed(init.W_norm)]
    n, scale = init.inputs.n, theorem2_scale(init.inputs.n, init.lambda_star)
    widths = [
        network.theorem2_width(n, init.width),
        network.theorem2_scale(init.width, scale, t=THEOREM2_T),
    ]
    at = {"m": init.width, "seed": init.seed, "scale": scale, "t": THEOREM2_T}
    given = [a1, *a2, *widths]
    out += [*widths, network.theorem2(init.lambda0, init.predicted_lambda0, given, **at)]
    out += guards(init, eta)[1:]
    ntk, K = init.ntk, init.K
    return [*out, network.ntk_above_kernel(ntk.value, ntk.tolerance, K.value, K.tolerance)]


def width(init: ReLUDEQInit, eta: float) -> Width:
    """The network's width as the claims over widths take it (not trained)."""
    return Width(init.width, eta, init.cond)


def guards(init: ReLUDEQInit, eta: float | None) -> list[Statement]:
    """The hypotheses of Theorem 1: Assumption 1, Eqs. (7)–(9) and, with ``eta``, Eq. (10)."""
    out = [assumption1(init.sigma_w2), *condition_hypotheses(init)]
    if eta is not None and init.cond is not None:
        out.append(learning_rate_hypothesis("", [width(init, eta)]))
    return out


def _theorem3(init: ReLUDEQInit, given: list[Statement]) -> Statement:
    K = init.K
    context = f"λ_max(K) = {K.max_eigenvalue:.6g}, cond(K) = {K.condition_number:.4g}"
    check = theorem3_ii(K.value, K.tolerance, context + (f"; {K.reason}" if K.reason else ""))
    return theorem(check, given)


def condition_hypotheses(init: ReLUDEQInit) -> list[Statement]:
    """Eqs. (7)–(9) (the paper's claim), ``needs`` solved under :data:`SCALING`, the
    scaling of the "width needed" number (:func:`widths_needed`), so both say the same."""
    if init.cond is None:
        return [
            LING.not_measured(
                Kind.HYPOTHESIS,
                f"Condition 1, Eq. ({key[2:]})",
                name=f"Condition 1, Eq. ({key[2:]}) at initialization",
                expected="lhs/rhs ≥ 1",
                why="‖W(0)‖₂ ≥ 1: no δ with ‖W(0)‖₂ + δ < 1",
            )
            for key in EQUATIONS
        ]
    with np.errstate(divide="ignore"):  # λ_0 = 0: Eq. (10)'s 2/λ_0 is inf
        found = condition1_hypotheses("", [width(init, math.nan)])
    needed = widths_needed(init.scaled_constants(), init.width)
    detail = f"δ = {init.cond.delta:.3g}; the width needed is solved under {SCALING}, δ free"
    floor = f"λ_0 > 0, so m ≥ n = {init.inputs.n}; " if init.cond.lambda0 <= 0 else ""
    return [
        replace(
            s,
            detail=detail,
            needs=f"{floor}Eq. ({key[2:]}) alone: m ≥ {big(needed[key])}"
            f"; Condition 1 (one δ): m ≥ {big(needed['condition1'])}",
        )
        if s.needs
        else replace(s, detail=detail)
        for s, key in zip(found, EQUATIONS, strict=True)
    ]

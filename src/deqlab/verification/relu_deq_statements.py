"""The statements of Ling et al. (2023) that verify checks at initialization, built from
what :func:`deqlab.verification.relu_deq.initialize` measured, with the paper's record
(:data:`deqlab.papers.LING`) and the experiments' shared builders.

- Assumptions 1–2 and Theorem 3 (ii), λ* > 0;
- Lemma 1, ‖W(0)‖₂ ≤ 2√2σ_w (its finite-m form), and ‖W(0)‖₂ < 1;
- Theorem 2, λ_0 ≥ mλ*/2, guarded by m ≥ n and by its width m = Ω(n²/λ*² log(n/(λ*t)))
  with the constant taken as 1: the paper does not give the constant, so a width hypothesis
  met with it cannot make the theorem FAIL — NOT APPLICABLE with the reason (DESIGN);
- Condition 1, Eqs. (7)–(9), their ``needs`` solved under the scaling of the one "width
  needed" number (:func:`deqlab.verification.relu_deq.widths_needed`), and Eq. (10) given η;
- ours: λ_min of the DEQ NTK ≥ λ*.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from deqlab._format import number
from deqlab.papers import LING
from deqlab.papers.ling2023.claims import (
    assumption1,
    condition1_hypotheses,
    learning_rate_hypothesis,
    theorem3_ii,
)
from deqlab.papers.ling2023.theory import EQUATIONS
from deqlab.statements import Kind, Statement, Verdict, ours, theorem
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
    out = [a1, *a2, _theorem3(init, [a1, *a2]), _lemma1(init), _well_posed(init)]
    widths = [_width_hypothesis(init), _scale_hypothesis(init)]
    out += [*widths, _undecided(_theorem2(init, [a1, *a2, *widths]))]
    out += guards(init, eta)[1:]
    return [*out, _ntk(init)]


def guards(init: ReLUDEQInit, eta: float | None) -> list[Statement]:
    """The hypotheses of Theorem 1: Assumption 1, Eqs. (7)–(9) and, with ``eta``, Eq. (10)."""
    out = [assumption1(init.sigma_w2), *condition_hypotheses(init)]
    if eta is not None and init.cond is not None:
        out.append(learning_rate_hypothesis("", [init.width], [init.cond], [eta]))
    return out


def _theorem3(init: ReLUDEQInit, given: list[Statement]) -> Statement:
    K = init.K
    context = f"λ_max(K) = {K.max_eigenvalue:.6g}, cond(K) = {K.condition_number:.4g}"
    check = theorem3_ii(K.value, K.tolerance, context + (f"; {K.reason}" if K.reason else ""))
    return theorem(check, given)


def _lemma1(init: ReLUDEQInit) -> Statement:
    bound = lemma1_value(init)
    return LING.theorem(
        "Lemma 1",
        name="Lemma 1: ‖W(0)‖₂ ≤ 2√2σ_w",
        value=init.W_norm,
        relation="<=",
        threshold=bound,
        measured=f"‖W(0)‖₂ = {init.W_norm:.6g} (m = {init.width}, seed {init.seed})",
        expected=f"≤ 2√2σ_w(1 + √(ln(1/p)/(2m))) = {bound:.6g}",
        detail=f"finite-m form of Lemma 1's w.h.p. bound, failing with probability ≤ p = "
        f"{LEMMA1_P:g} (Gaussian concentration of ‖W‖₂)",
    )


def _well_posed(init: ReLUDEQInit) -> Statement:
    return LING.hypothesis(
        "Section 3.1 (δ with ‖W(0)‖₂ + δ < 1); Section 2.2",
        name="‖W(0)‖₂ < 1 (a δ of Section 3.1 exists)",
        value=init.W_norm,
        relation="<",
        threshold=1.0,
        measured=f"‖W(0)‖₂ = {init.W_norm:.6g}",
        expected="< 1: Eq. (1) contracts, Condition 1 is defined",
        needs="σ_w² < 1/8 (Assumption 1 and Lemma 1 give ‖W(0)‖₂ < 1 w.h.p.)",
    )


def _width_hypothesis(init: ReLUDEQInit) -> Statement:
    n, m = init.inputs.n, init.width
    return LING.hypothesis(
        "Theorem 2",
        name="Theorem 2's width m = Ω(n²/λ*² log(n/(λ*t))): at least m ≥ n",
        value=m / n,
        relation=">=",
        threshold=1.0,
        measured=f"m/n = {m}/{n} = {m / n:.4g}",
        expected="≥ 1: below, λ_0 = 0 (Z(0)ᵀZ(0) has rank ≤ m), so the width the theorem "
        "asks for is at least n",
        needs=f"m ≥ {n}",
    )


def _scale_hypothesis(init: ReLUDEQInit) -> Statement:
    m, scale = init.width, theorem2_scale(init.inputs.n, init.lambda_star)
    return LING.hypothesis(
        "Theorem 2",
        name="Theorem 2's width m = Ω(n²/λ*² log(n/(λ*t))), its constant taken as 1",
        value=m / scale,
        relation=">=",
        threshold=1.0,
        measured=f"m / (n²/λ*² log(n/(λ*t))) = {m}/{big(scale)} = {m / scale:.3g} "
        f"(t = {THEOREM2_T:g})",
        expected="≥ 1 at the least: the paper's Ω hides a constant it does not give "
        "(Bernstein's inequality, an ε-net)",
        needs=f"m ≥ C·{big(scale)} for the paper's unknown constant C",
    )


def _undecided(check: Statement) -> Statement:
    """Theorem 2 at a width that meets its hypotheses with the constant taken as 1: a FAIL
    there cannot be told from a too small constant (DESIGN: a width hypothesis with a
    constant the paper does not give cannot make a theorem FAIL)."""
    if check.verdict is not Verdict.FAIL:
        return check
    return replace(
        check,
        verdict=Verdict.NOT_APPLICABLE,
        needs="a width C·n²/λ*² log(n/(λ*t)) with the paper's constant C, which it does not give",
        detail="the width hypothesis cannot be decided: " + check.detail,
    )


def _theorem2(init: ReLUDEQInit, given: list[Statement]) -> Statement:
    name, expected = "Theorem 2: λ_0 ≥ mλ*/2", "≥ 1 (with probability ≥ 1 − t at its width)"
    if init.lambda0 is None:
        missing = LING.not_measured(
            Kind.THEOREM,
            "Theorem 2",
            name=name,
            expected=expected,
            why="‖W(0)‖₂ ≥ 1: no equilibrium is solved",
        )
        return theorem(missing, given)
    pred = init.predicted_lambda0
    ratio = init.lambda0 / pred if pred > 0 else None
    return LING.theorem(
        "Theorem 2",
        name=name,
        value=ratio,
        relation=">=",
        threshold=1.0,
        measured=f"λ_0 = {init.lambda0:.6g}, mλ*/2 = {pred:.6g}: λ_0/(mλ*/2) = "
        f"{number(ratio, 4)} (m = {init.width}, seed {init.seed})",
        expected=expected,
        detail=_theorem2_detail(init) if pred > 0 else "λ* = 0: the ratio is not defined",
        given=given,
    )


def _theorem2_detail(init: ReLUDEQInit) -> str:
    scale = theorem2_scale(init.inputs.n, init.lambda_star)
    return (
        f"m = {init.width} is {init.width / scale:.2g} × n²/λ*² log(n/(λ*t)) = {big(scale)} "
        f"(t = {THEOREM2_T:g}); the theorem asks for a constant multiple of that width and "
        "does not give the constant"
    )


def condition_hypotheses(init: ReLUDEQInit) -> list[Statement]:
    """Eqs. (7)–(9) (the experiments' builder), ``needs`` solved under :data:`SCALING`, the
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
        found = condition1_hypotheses("", [init.width], [init.cond])
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


def _ntk(init: ReLUDEQInit) -> Statement:
    ntk, K = init.ntk, init.K
    slack = ntk.tolerance + K.tolerance
    return ours(
        "DEQ NTK: λ_min(NTK) ≥ λ*",
        value=ntk.value - K.value,
        relation=">=",
        threshold=-slack,
        measured=f"λ_min(NTK) = {ntk.value:.6g}, λ* = {K.value:.6g}",
        expected=f"λ_min(NTK) − λ* ≥ −{slack:.2g} (round-off of both)",
        detail="NTK = K + P⊙K with P ⪰ 0 (Schur product: P⊙K ⪰ 0), the infinite-width limit "
        "of Θ/m for the Assumption 1 network (deqlab.theory.ntk); the kernel of the whole "
        "training dynamics, of which G = ZᵀZ (λ_0) is one term",
    )


def big(x: float) -> str:
    """A width as the statements write it: "∞ (no width)" or "3.2·10¹¹"."""
    return "∞ (no width)" if math.isinf(x) else number(math.ceil(x), 2, power=True)

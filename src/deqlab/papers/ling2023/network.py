"""The claims of Ling et al. (2023) on one network at initialization, as ``deqlab verify``
checks them on the user's data.

- Lemma 1, ‖W(0)‖₂ ≤ 2√2σ_w in its finite-m form, and ‖W(0)‖₂ < 1 (a δ of Section 3.1);
- Theorem 2, λ_0 ≥ mλ*/2, guarded by m ≥ n and by its width m = Ω(n²/λ*² log(n/(λ*t)))
  with the constant taken as 1: the paper does not give the constant, so a width hypothesis
  met with it cannot make the theorem FAIL
  (:func:`~deqlab.statements.constant_not_given`);
- ours: λ_min of the DEQ NTK ≥ λ*.

Each takes the numbers measured on the network (its norms, λ*, λ_0, the least eigenvalue
of the NTK with their round-off) and returns its statement.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from deqlab.papers.ling2023 import LING
from deqlab.statements import (
    Kind,
    Statement,
    claim,
    constant_not_given,
    number,
    ours,
    theorem,
)


def big(x: float) -> str:
    """A width as the statements write it: "∞ (no width)" or "3.2·10¹¹"."""
    return "∞ (no width)" if math.isinf(x) else number(math.ceil(x), 2, power=True)


@claim
def lemma1(W_norm: float, bound: float, *, m: int, seed: int, p: float) -> Statement:
    """Lemma 1, finite-m form: ‖W(0)‖₂ ≤ ``bound`` = 2√2σ_w(1 + √(ln(1/p)/(2m)))."""
    return LING.theorem(
        "Lemma 1",
        name="Lemma 1: ‖W(0)‖₂ ≤ 2√2σ_w",
        value=W_norm,
        relation="<=",
        threshold=bound,
        measured=f"‖W(0)‖₂ = {W_norm:.6g} (m = {m}, seed {seed})",
        expected=f"≤ 2√2σ_w(1 + √(ln(1/p)/(2m))) = {bound:.6g}",
        detail=f"finite-m form of Lemma 1's w.h.p. bound, failing with probability ≤ p = "
        f"{p:g} (Gaussian concentration of ‖W‖₂)",
    )


@claim
def well_posed(W_norm: float) -> Statement:
    """‖W(0)‖₂ < 1: Eq. (1) contracts and Condition 1's δ exists."""
    return LING.hypothesis(
        "Section 3.1 (δ with ‖W(0)‖₂ + δ < 1); Section 2.2",
        name="‖W(0)‖₂ < 1 (a δ of Section 3.1 exists)",
        value=W_norm,
        relation="<",
        threshold=1.0,
        measured=f"‖W(0)‖₂ = {W_norm:.6g}",
        expected="< 1: Eq. (1) contracts, Condition 1 is defined",
        needs="σ_w² < 1/8 (Assumption 1 and Lemma 1 give ‖W(0)‖₂ < 1 w.h.p.)",
    )


@claim
def theorem2_width(n: int, m: int) -> Statement:
    """Theorem 2's width is at least n: below, λ_0 = 0 (Z(0)ᵀZ(0) has rank ≤ m)."""
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


@claim
def theorem2_scale(m: int, scale: float, *, t: float) -> Statement:
    """Theorem 2's width m = Ω(n²/λ*² log(n/(λ*t))) with its constant taken as 1
    (``scale``: n²/λ*² log(n/(λ*t)))."""
    return LING.hypothesis(
        "Theorem 2",
        name="Theorem 2's width m = Ω(n²/λ*² log(n/(λ*t))), its constant taken as 1",
        value=m / scale,
        relation=">=",
        threshold=1.0,
        measured=f"m / (n²/λ*² log(n/(λ*t))) = {m}/{big(scale)} = {m / scale:.3g} (t = {t:g})",
        expected="≥ 1 at the least: the paper's Ω hides a constant it does not give "
        "(Bernstein's inequality, an ε-net)",
        needs=f"m ≥ C·{big(scale)} for the paper's unknown constant C",
    )


@claim
def theorem2(
    lambda0: float | None,
    predicted: float,
    given: Sequence[Statement],
    *,
    m: int,
    seed: int,
    scale: float,
    t: float,
) -> Statement:
    """Theorem 2: λ_0 ≥ mλ*/2 (``predicted``), guarded by ``given``; ``lambda0`` None when
    no equilibrium was solved (‖W(0)‖₂ ≥ 1). A FAIL where the width hypothesis holds only
    with the constant taken as 1 is NOT APPLICABLE (:func:`constant_not_given`)."""
    name, expected = "Theorem 2: λ_0 ≥ mλ*/2", "≥ 1 (with probability ≥ 1 − t at its width)"
    if lambda0 is None:
        missing = LING.not_measured(
            Kind.THEOREM,
            "Theorem 2",
            name=name,
            expected=expected,
            why="‖W(0)‖₂ ≥ 1: no equilibrium is solved",
        )
        return theorem(missing, given)
    ratio = lambda0 / predicted if predicted > 0 else None
    detail = (
        f"m = {m} is {m / scale:.2g} × n²/λ*² log(n/(λ*t)) = {big(scale)} (t = {t:g}); the "
        "theorem asks for a constant multiple of that width and does not give the constant"
        if predicted > 0
        else "λ* = 0: the ratio is not defined"
    )
    check = LING.theorem(
        "Theorem 2",
        name=name,
        value=ratio,
        relation=">=",
        threshold=1.0,
        measured=f"λ_0 = {lambda0:.6g}, mλ*/2 = {predicted:.6g}: λ_0/(mλ*/2) = "
        f"{number(ratio, 4)} (m = {m}, seed {seed})",
        expected=expected,
        detail=detail,
        given=given,
    )
    return constant_not_given(
        check,
        "a width C·n²/λ*² log(n/(λ*t)) with the paper's constant C, which it does not give",
    )


@claim
def ntk_above_kernel(
    ntk_lambda_min: float, ntk_tolerance: float, lambda_star: float, k_tolerance: float
) -> Statement:
    """Ours: λ_min(NTK) ≥ λ* within the round-off of both."""
    slack = ntk_tolerance + k_tolerance
    return ours(
        "DEQ NTK: λ_min(NTK) ≥ λ*",
        value=ntk_lambda_min - lambda_star,
        relation=">=",
        threshold=-slack,
        measured=f"λ_min(NTK) = {ntk_lambda_min:.6g}, λ* = {lambda_star:.6g}",
        expected=f"λ_min(NTK) − λ* ≥ −{slack:.2g} (round-off of both)",
        detail="NTK = K + P⊙K with P ⪰ 0 (Schur product: P⊙K ⪰ 0), the infinite-width limit "
        "of Θ/m for the Assumption 1 network (deqlab.theory.ntk); the kernel of the whole "
        "training dynamics, of which G = ZᵀZ (λ_0) is one term",
    )

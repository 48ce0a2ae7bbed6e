"""Theorem 1 of Ling et al. (2023) and the PL inequalities of Section 2.3 along GD runs.

- :func:`theorem1_statements`: Theorem 1 (i)–(iii) and two quantities its proof bounds,
  over the steps τ >= 1, each guarded by the hypotheses at initialization (NOT APPLICABLE
  when one is unmet, with what it needs);
- :func:`pl_statements`: the PL inequalities of Section 2.3 — Eq. (4), λ_min(H(τ)) >= λ_τ
  and Eq. (5) — over the steps τ >= 1, at any width: consequences of Lemma 2 alone, guarded
  only by its hypothesis (J(τ) invertible, via ‖W(τ)‖₂ < 1).  Once Lemma 2 holds they are
  identities (‖∇_θΦ‖² = 2rᵀHr with H = H1 + H2 + H3, each PSD), so their PASS is a
  consistency check of two computations (the trainer's gradient against H from the exact
  Jacobian), not evidence for Theorem 1.

Each takes one :class:`~deqlab.papers.ling2023.claims.Width` per network width; a statement
over several widths is decided on the worst width (:func:`deqlab.statements.worst`), each
width on its worst step (:class:`~deqlab.papers.ling2023.margins.Theorem1Margins`).
"""

from __future__ import annotations

from collections.abc import Sequence

from deqlab.papers.ling2023 import LING
from deqlab.papers.ling2023.claims import Width, widths
from deqlab.statements import Statement, claim, is_measured, numbers, theorem, worst

#: Beside the PASS of Eqs. (4)–(5): what it shows and what it does not.
IDENTITY = (
    "an identity once Lemma 2 holds (‖∇_θΦ‖² = 2rᵀHr, H1, H2, H3 PSD): a PASS is a "
    "consistency check of two computations, not evidence for Theorem 1"
)


@claim
def theorem1_statements(
    prefix: str, runs: Sequence[Width], hypotheses: Sequence[Statement]
) -> list[Statement]:
    """Theorem 1 (i)–(iii), the per-step contraction and the parameter drift of its proof,
    over τ >= 1 and the widths ``runs``, each guarded by ``hypotheses``."""
    ms, conds, etas = [w.m for w in runs], [w.condition1 for w in runs], [w.eta for w in runs]
    margins = [w.margins() for w in runs]

    def get(field: str) -> list[float | None]:
        return [None if g is None else getattr(g, field) for g in margins]

    drift = [
        None if g is None or c is None else g.max_drift / c.drift_bound
        for g, c in zip(margins, conds, strict=True)
    ]
    rates = [None if g is None else e * g.lambda0 / 2 for e, g in zip(etas, margins, strict=True)]
    factors = get("bound_factor")
    where = f" ({widths(ms)})"
    checks = [
        _check(
            prefix + "Theorem 1 (i): ‖W(τ)‖₂ < 1 for τ ≥ 1",
            "Theorem 1 (i)",
            get("max_W_norm"),
            "<",
            1.0,
            "max ‖W(τ)‖₂",
            where,
            f"Weyl bound between Lanczos steps ≤ {numbers(get('max_W_norm_bound'))}",
        ),
        _check(
            prefix + "Theorem 1 (ii): λ_τ > λ_0/2 for τ ≥ 1",
            "Theorem 1 (ii)",
            get("min_lambda_ratio"),
            ">",
            0.5,
            "min λ_τ/λ_0",
            where,
            f"λ_0 = {numbers(get('lambda0'))}",
        ),
        _check(
            prefix + "Theorem 1 (iii): Φ(τ) ≤ (1 − ηλ_0/2)^τ Φ(0) for τ ≥ 1",
            "Theorem 1 (iii)",
            get("max_loss_ratio"),
            "<=",
            1.0,
            "max Φ(τ)/bound",
            where,
            f"ηλ_0/2 = {numbers(rates)}: by the last step the bound has only fallen to "
            f"{numbers(factors)} × Φ(0)",
        ),
        _check(
            prefix + "proof of Theorem 1 (iii): Φ(τ+1) ≤ (1 − ηλ_0/2) Φ(τ)",
            "Theorem 1, proof (Appendix B.1, step (3))",
            get("max_step_ratio"),
            "<=",
            1.0,
            "max Φ(τ+1)/((1 − ηλ_0/2)Φ(τ))",
            where,
            "over consecutive steps",
        ),
        _check(
            prefix + "proof of Theorem 1: ‖θ(τ) − θ(0)‖ within its drift bound",
            "Theorem 1, proof (Appendix B.1, step (1))",
            drift,
            "<=",
            1.0,
            "max ‖θ(τ) − θ(0)‖/bound",
            where,
            "bound (4/λ_0)√(c_w²+c_u²+c_a²)‖X‖_F‖ŷ(0) − y‖₂ = "
            f"{numbers([None if c is None else c.drift_bound for c in conds])}",
        ),
    ]
    return [theorem(c, hypotheses) for c in checks]


def _check(name, location, values, relation, threshold, what, where, detail) -> Statement:
    expected = f"{relation} {threshold:g} at every width and every step τ ≥ 1"
    return LING.theorem(
        location,
        name=name,
        value=worst(values, relation, threshold),
        relation=relation,
        threshold=threshold,
        measured=f"{what} = {numbers(values)}{where}",
        expected=expected,
        detail=detail,
    )


@claim
def pl_statements(prefix: str, runs: Sequence[Width]) -> list[Statement]:
    """Lemma 2's hypothesis, Eq. (4), λ_min(H(τ)) >= λ_τ and Eq. (5) over the steps τ >= 1
    and the widths ``runs`` (the three guarded by the first)."""
    ms, margins = [w.m for w in runs], [w.pl() for w in runs]

    def get(field: str) -> list:
        return [getattr(g, field) for g in margins]

    where = f" ({widths(ms)})"
    h_steps, eq5_steps = get("h_steps"), get("eq5_steps")
    bounds = get("max_W_norm_bound")
    checked = [b for b, g in zip(bounds, margins, strict=True) if g.checked_steps]
    lemma2 = LING.hypothesis(
        "Section 2.2, Lemma 2",
        name=f"{prefix}Lemma 2: J(τ) invertible (‖W(τ)‖₂ < 1) where Eqs. (4)–(5) are checked",
        quote="J(τ) is invertible if ‖W(τ)‖₂ < 1",
        value=worst(checked, "<", 1.0),  # a width without a checked step has none
        relation="<",
        threshold=1.0,
        measured="max upper bound of ‖W(τ)‖₂ = "
        + ", ".join(f"{b:.4g}" if is_measured(b) else "—" for b in bounds)
        + where,
        expected="< 1 at every step of Eq. (5) (the trainer's Lanczos value or Weyl bound)",
        detail=f"max Lanczos ‖W(τ)‖₂ at those steps = {numbers(get('max_W_norm'))}",
        needs="‖W(τ)‖₂ < 1 at the checked steps (a smaller η keeps W(τ) near W(0))",
    )
    checks = [
        _check(
            prefix + "Eq. (4): ‖∇_θΦ(τ)‖² ≥ 2λ_min(H(τ))Φ(τ) for τ ≥ 1",
            "Section 2.3, Eq. (4)",
            get("min_eq4"),
            ">=",
            1.0,
            "min ‖∇_θΦ‖²/(2λ_min(H)Φ)",
            where,
            f"H(τ) = H1 + H2 + H3 from the exact implicit Jacobian, at {_steps(h_steps)}; "
            f"‖∇_θΦ(τ)‖ from the trainer's own solves; {IDENTITY}",
        ),
        _check(
            prefix + "Section 2.3: λ_min(H(τ)) ≥ λ_τ for τ ≥ 1",
            "Section 2.3, before Eq. (5)",
            get("min_h_ratio"),
            ">=",
            1.0,
            "min λ_min(H(τ))/λ_τ",
            where,
            f"at {_steps(h_steps)}; λ_τ from the trainer's Z(τ); {IDENTITY}",
        ),
        _check(
            prefix + "Eq. (5): ‖∇_θΦ(τ)‖² ≥ 2λ_τΦ(τ) for τ ≥ 1",
            "Section 2.3, Eq. (5)",
            get("min_eq5"),
            ">=",
            1.0,
            "min ‖∇_θΦ‖²/(2λ_τΦ)",
            where,
            f"at {_steps(eq5_steps)}; {IDENTITY}",
        ),
    ]
    return [lemma2, *(theorem(c, [lemma2]) for c in checks)]


def _steps(per_width: Sequence[Sequence[int]]) -> str:
    """``"τ = 10, 20, …, 290 (29 steps per width)"``: the steps a check ran over."""
    counts = sorted({len(s) for s in per_width})
    longest = max(per_width, key=len, default=())
    if not longest:
        return "no step τ ≥ 1"
    shown = ", ".join(map(str, longest[:2])) + (f", …, {longest[-1]}" if len(longest) > 2 else "")
    count = "/".join(map(str, counts))
    return f"τ = {shown} ({count} steps per width)"

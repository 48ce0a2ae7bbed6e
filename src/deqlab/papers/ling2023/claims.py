"""The claims of Ling et al. (2023) on the inputs and at initialization.

- :func:`assumption1`: σ_w² < 1/8 (Assumption 1), a hypothesis of Lemma 1 and Theorems 2–5;
- :func:`assumption2`: Assumption 2 (i) on the inputs, ‖x_i‖ = √d and no two inputs parallel;
- :func:`theorem3_ii`: Theorem 3 (ii), λ* = λ_min(K) > 0;
- :func:`condition1_hypotheses`: Eqs. (7), (8), (9) at initialization, each a hypothesis
  with its margin lhs/rhs and, when unmet, the width it needs
  (:func:`deqlab.papers.ling2023.theory.required_width`, scaling stated in ``needs``);
- :func:`eq9_unreachable` (ours): Eq. (9) holds at no width unless ‖a(0)‖₂ < 1/(2√n);
- :func:`learning_rate_hypothesis`: η below the bound of Eq. (10).

The statements over several widths take one :class:`Width` per network width (its m, η,
Condition 1 at initialization and its GD run, if any) and are decided on the worst width
(:func:`deqlab.statements.worst`: a measured failure is never hidden by a missing width).
Theorem 1 and the PL inequalities along the runs are in :mod:`.theorem1`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from deqlab.models.relu_deq import SIGMA_W2_LIMIT
from deqlab.papers.ling2023 import LING
from deqlab.papers.ling2023.margins import PLMargins, Theorem1Margins, pl_margins, theorem1_margins
from deqlab.papers.ling2023.theory import (
    EQUATIONS,
    MAX_WIDTH,
    Condition1,
    eq9_margin_ceiling,
    required_width,
    width_margin,
)
from deqlab.statements import Run, Statement, claim, number, numbers, ours, worst

#: The scaling under which the needed width is computed (Section 3.2; the other constants
#: of Condition 1 stay as measured at the widest width).
SCALING = "λ_0 ∝ m, ‖U(0)‖₂ ∝ √m"
#: Relative tolerance of ‖x_i‖ = √d (Assumption 2 (i)): float64 rounding of a normalised input.
NORM_RTOL = 1e-9
#: |cos θ_ij| at or above 1 − this is a parallel pair (rounding of a computed cosine is ~1e-16).
PARALLEL_TOL = 1e-12


@dataclass(frozen=True)
class Width:
    """One network width of a run: ``m``, the step size ``eta``, Condition 1 measured at
    initialization (None: not measured, e.g. ‖W(0)‖₂ ≥ 1) and the GD run (its steps and the
    trainer's series: ``loss``, ``lambda_min``, ``W_norm``, …; empty when not trained), with
    the label ``status`` of its last step ("ok" or why it stopped)."""

    m: int
    eta: float
    condition1: Condition1 | None
    run: Run = field(default_factory=lambda: Run("untrained"))

    def margins(self) -> Theorem1Margins | None:
        """Theorem 1's quantities over τ >= 1; None if step 0 lacks Φ(0) or λ_0."""
        try:
            return theorem1_margins(self.run, self.eta)
        except ValueError:
            return None

    def pl(self) -> PLMargins:
        """The PL inequalities of Section 2.3 over τ >= 1 (Eqs. (4)–(5))."""
        return pl_margins(self.run)

    def extended(self, value: float) -> Width:
        """The width with one more step of its run, every quantity ``value``."""
        return replace(self, run=self.run.extended(value))

    def blank(self, key: str) -> Width:
        """The same width, nothing measured."""
        return replace(self, condition1=None, run=self.run.blank(key))


def widths(ms: Sequence[int]) -> str:
    return "m = " + ", ".join(str(m) for m in ms)


def _ms(runs: Sequence[Width]) -> str:
    return widths([w.m for w in runs])


@claim
def assumption1(sigma_w2: float) -> Statement:
    """σ_w² < 1/8 (Assumption 1; Lemma 1 then gives ‖W(0)‖₂ <= 2√2σ_w < 1)."""
    return LING.hypothesis(
        "Assumption 1",
        name="Assumption 1: σ_w² < 1/8",
        value=sigma_w2,
        relation="<",
        threshold=SIGMA_W2_LIMIT,
        measured=f"σ_w² = {sigma_w2:g}",
        expected=f"< {SIGMA_W2_LIMIT:g}",
        needs=f"σ_w² < {SIGMA_W2_LIMIT:g}",
    )


@claim
def assumption2(
    norm_error: float | None,
    max_abs_cos: float | None,
    *,
    pair: tuple[int, int] | None = None,
    note: str = "",
    how_to_normalize: str = "inputs scaled to ‖x_i‖ = √d",
) -> list[Statement]:
    """Assumption 2 (i) as the proofs use it: max_i |‖x_i‖ − √d|/√d ≤ :data:`NORM_RTOL`,
    and max_(i≠j) |cos θ_ij| < 1 − :data:`PARALLEL_TOL` (``pair``: the inputs attaining it).

    The paper states x_i ⊥ x_j; its proofs (Theorem 3 (ii), Theorem 4) use only
    |cos θ_ij| < 1, which is what is checked (real data are never orthogonal). ``note``
    follows the measured norms (e.g. that they were normalised first).
    """
    where = "Assumption 2 (i)"
    names = "" if pair is None else f" (inputs {pair[0]} and {pair[1]})"
    parallel = "a parallel pair" if pair is None else f"inputs {pair[0]} and {pair[1]}"
    return [
        LING.hypothesis(
            where,
            name="Assumption 2 (i): ‖x_i‖ = √d",
            value=norm_error,
            relation="<=",
            threshold=NORM_RTOL,
            measured=f"max_i |‖x_i‖ − √d|/√d = {numbers([norm_error])}{note}",
            expected=f"≤ {NORM_RTOL:g} (rounding of a normalised input)",
            detail="K is defined for any norms (deqlab.theory.kernels completes Eq. (14) off "
            "the sphere), but Lemma 3 and Theorems 2–5 assume the sphere",
            needs=how_to_normalize,
        ),
        LING.hypothesis(
            where,
            name="Assumption 2 (i): no two inputs parallel",
            value=max_abs_cos,
            relation="<",
            threshold=1.0 - PARALLEL_TOL,
            measured=f"max_(i≠j) |cos θ_ij| = {number(max_abs_cos, 15)}{names}",
            expected=f"< 1 − {PARALLEL_TOL:g} (|cos θ_ij| = 1 is a parallel or antiparallel "
            "pair; the proof of Theorem 3 (ii) needs |cos θ_ij| < 1)",
            needs=f"no two inputs parallel: drop or perturb one of {parallel} (e.g. a repeated "
            "image)",
        ),
    ]


@claim
def theorem3_ii(lambda_star: float | None, tolerance: float | None, context: str = "") -> Statement:
    """Theorem 3 (ii): λ* = λ_min(K) > 0, where λ* is 0.0 within the eigensolver's round-off
    ``tolerance`` n·eps·‖K‖₂ (:func:`deqlab.theory.kernels.least_eigenvalue`); ``context``
    (e.g. λ_max and cond(K), or why λ* counts as 0) goes into the detail."""
    tol = "—" if tolerance is None else f"{tolerance:.2g}"
    return LING.theorem(
        "Theorem 3 (ii)",
        name="Theorem 3 (ii): λ* > 0 (K strictly positive definite)",
        value=lambda_star,
        relation=">",
        threshold=0.0,
        measured=f"λ* = λ_min(K) = {'—' if lambda_star is None else f'{lambda_star:.6g}'}",
        expected=f"> 0 beyond round-off (λ* is reported as 0 within n·eps·‖K‖₂ = {tol})",
        detail="K of Eq. (14) for these inputs; the proof needs |cos θ_ij| < 1 for i ≠ j, "
        "which Assumption 2 gives" + (f"; {context}" if context else ""),
    )


@claim
def condition1_hypotheses(prefix: str, runs: Sequence[Width]) -> list[Statement]:
    """Eqs. (7), (8), (9) at initialization over the widths ``runs``: one hypothesis each.

    Margin lhs/rhs at the δ that maximizes Condition 1's smallest margin (per width). When
    unmet, ``needs`` is the width at which the inequality holds for some δ, carried from
    the widest measured width by :data:`SCALING`; Condition 1 needs all three at one δ.
    """
    ms, conds = [w.m for w in runs], [w.condition1 for w in runs]
    out = []
    for key in EQUATIONS:
        margins = [None if c is None else getattr(c, key).margin for c in conds]
        deltas = numbers([None if c is None else c.delta for c in conds])
        out.append(
            LING.hypothesis(
                f"Condition 1, Eq. ({key[2:]})",
                name=f"{prefix}Condition 1, Eq. ({key[2:]}) at initialization",
                value=worst(margins, ">=", 1.0),
                relation=">=",
                threshold=1.0,
                measured=f"lhs/rhs = {numbers(margins)} ({widths(ms)})",
                expected="lhs/rhs ≥ 1 at every width",
                detail=f"δ = {deltas} (the δ maximizing Condition 1's smallest margin); the width "
                f"needed is carried from the widest width, m = {ms[-1] if ms else '—'}, under "
                f"{SCALING} (Section 3.2), the other "
                "constants as measured, δ free",
                needs=_width_needed(key, ms, conds),
            )
        )
    return out


def _width_needed(key: str, ms: Sequence[int], conds: Sequence[Condition1 | None]) -> str:
    measured = [(m, c) for m, c in zip(ms, conds, strict=True) if c is not None]
    if not measured:
        return ""
    m0, cond = measured[-1]
    name = f"Eq. ({key[2:]})"
    needed = required_width(cond.constants, m0, key)
    if math.isinf(needed):
        limit = width_margin(cond.constants, m0, MAX_WIDTH, key)
        return f"{name}: no width (margin → {limit:.2g} as m → ∞; {SCALING})"
    return f"{name}: m ≥ {number(needed, 2, power=True)} (run: m ≤ {m0}; {SCALING})"


@claim
def eq9_unreachable(prefix: str, runs: Sequence[Width], n: int) -> Statement:
    """Ours: Condition 1, Eq. (9) holds at no width for this draw — its margin is at most
    (1 − ‖W(0)‖₂)²/(4n‖a(0)‖₂²) at every δ and width
    (:func:`deqlab.papers.ling2023.theory.eq9_margin_ceiling`), decided on the largest ceiling over
    the widths, which must be < 1 (it is ≥ 1 only when ‖a(0)‖₂ < (1 − ‖W(0)‖₂)/(2√n))."""
    ms, conds = [w.m for w in runs], [w.condition1 for w in runs]
    ceilings = [None if c is None else eq9_margin_ceiling(c.constants, n) for c in conds]
    margins = [None if c is None else c.eq9.margin for c in conds]
    scaled = [None if c is None else 2 * math.sqrt(n) * c.constants.a_norm for c in conds]
    return ours(
        f"{prefix}Condition 1, Eq. (9) holds at no width (its margin ≤ (1 − ‖W(0)‖₂)²/"
        "(4n‖a(0)‖₂²) < 1)",
        value=worst(ceilings, "<", 1.0),
        relation="<",
        threshold=1.0,
        measured=f"ceiling (1 − ‖W(0)‖₂)²/(4n‖a(0)‖₂²) = {numbers(ceilings)}; Eq. (9)'s "
        f"lhs/rhs = {numbers(margins)}; 2√n‖a(0)‖₂ = {numbers(scaled)} ({widths(ms)}, n = {n})",
        expected="< 1 at every width: then no width and no δ satisfies Eq. (9)",
        detail="λ_0 ≤ ‖Z(0)‖_F²/n ≤ ‖U(0)‖₂²‖X‖_F²/(n(1 − ‖W(0)‖₂)²) against "
        "4c_w²‖X‖_F² ≥ 4‖U(0)‖₂²‖a(0)‖₂²‖X‖_F²/(1 − ‖W(0)‖₂)⁴; Section 3.2's scaling "
        "(λ_0 ∝ m, ‖U(0)‖₂² ∝ m) leaves the ratio unchanged, so the width m = Ω(n³/λ*²·log) "
        "the paper claims does not deliver Eq. (9) unless ‖a(0)‖₂ < 1/(2√n); see "
        "docs/findings.md#ling-eq9",
    )


@claim
def learning_rate_hypothesis(prefix: str, runs: Sequence[Width]) -> Statement:
    """η < the bound of Eq. (10) at every width; ``needs`` the smallest bound."""
    ms, conds, etas = [w.m for w in runs], [w.condition1 for w in runs], [w.eta for w in runs]
    bounds = [None if c is None else c.lr_bound for c in conds]
    ratios = [None if b is None else eta / b for eta, b in zip(etas, bounds, strict=True)]
    known = [(b, m) for b, m in zip(bounds, ms, strict=True) if b is not None]
    needs = ""
    if known:
        b, m = min(known)
        needs = f"η < {b:.3g} (Eq. (10) at m = {m}; run: η = {etas[0]:.3g})"
    return LING.hypothesis(
        "Theorem 1, Eq. (10)",
        name=f"{prefix}learning rate below Eq. (10)",
        value=worst(ratios, "<", 1.0),
        relation="<",
        threshold=1.0,
        measured=f"η / bound = {numbers(ratios)} ({widths(ms)})",
        expected="η < min(2/λ_0, 2(c_w²+c_u²)/((c_w²+c_u²+c_a²)² ‖X‖_F²)) at every width",
        needs=needs,
    )

"""The thesis' statements (Hieu 2022), built from measured numbers.

The builders turn the inequalities of :mod:`deqlab.papers.hieu2022.mondeq` and the numbers of a GD
run into :class:`~deqlab.statements.Statement` s, so that ``hieu2022-mondeq-gd`` and a
check of any other monotone DEQ decide verdicts the same way:

- each inequality of Condition 1 or 2 is a HYPOTHESIS ``lhs/rhs ≥ 1`` at one width; when
  it is unmet, ``needs`` gives the width that would satisfy it under a stated scaling
  assumption (:class:`~deqlab.papers.hieu2022.width_fit.WidthFit`: ``lhs/rhs ∝ n^s``, fitted over
  the measured widths);
- the step size is a HYPOTHESIS ``η ≤ η_max`` (the bound of Theorem 3.3.5);
- Theorem 3.3.5's conclusion and the induction hypotheses its proof establishes at every
  step (Propositions 5 and 6) are THEOREM statements over the steps ``k ≥ 1`` (at ``k = 0``
  they hold trivially), NOT APPLICABLE wherever one of those hypotheses is unmet.

For Chapter 4, :func:`untrained` says why a statement about trained models is not measured
when the run's models did not learn.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence

from deqlab.papers.hieu2022 import HIEU
from deqlab.papers.hieu2022.mondeq import Inequality, eq_3_18_possible
from deqlab.papers.hieu2022.width_fit import FIT_WIDTH_FACTOR, WidthFit
from deqlab.statements import Kind, Run, Statement, claim, is_measured, number, ratio, worst

#: Ours: a classifier of ten classes counts as trained at 5× chance training accuracy.
TRAINED_ACCURACY = 0.5

#: (name, location) of the proof steps :func:`ball_check` and :func:`sigma_check` check: by
#: default those of Theorem 3.3.5 (GD); the gradient flow's are in
#: :mod:`deqlab.papers.hieu2022.flow`.
PROPOSITION_5 = (
    "Proposition 5 (Hypothesis 1)",
    "Proposition 5 (Hypothesis 1), proof of Theorem 3.3.5",
)
PROPOSITION_6 = (
    "Proposition 6 (Hypothesis 2)",
    "Proposition 6 (Hypothesis 2), proof of Theorem 3.3.5",
)


@claim
def condition_hypothesis(
    inequality: Inequality,
    *,
    width: int,
    condition: str,
    fit: WidthFit | None,
    m: float,
    n_samples: int = 1,
) -> Statement:
    """One inequality of ``condition`` ("Condition 1" or "Condition 2") at ``width``.

    The value is ``lhs/rhs`` (≥ 1 when it holds). ``needs``: the width from ``fit`` (a
    sweep over widths ``n ≫ N`` when there is none) or, for Eq. (3.18) with
    ``m²N ≥ 1/20`` (``n_samples`` is N), that no width can satisfy it.
    """
    if inequality["relation"] != ">=":
        raise ValueError(f"conditions are lower bounds on λ_0; got {inequality}")
    lhs, rhs = inequality["lhs"], inequality["rhs"]
    margin = ratio(lhs, rhs, ">=")
    if inequality["name"] == "Eq. (3.18)" and not eq_3_18_possible(m, n_samples):
        needs = (
            f"no width: m²N = {m * m * n_samples:.3g} ≥ 1/20, and λ₀² ≤ ‖Z(0)‖_F²/N ≤ "
            "‖X‖_F²‖U(0)‖₂²/(m²N) < rhs/(20m²N) (Lemma 3.3.3); needs m²N < 1/20"
        )
    elif fit:
        needs = fit.needs()
    else:
        needs = f"a sweep over widths n ≥ {FIT_WIDTH_FACTOR}N to extrapolate"
    return HIEU.hypothesis(
        f"{condition}, {inequality['name']}",
        name=f"{condition}, {inequality['name']} at n = {width}",
        value=margin,
        relation=">=",
        threshold=1.0,
        measured=f"lhs/rhs = {number(margin)} (lhs {lhs:.3g}, rhs {rhs:.3g}) at n = {width}",
        expected="lhs ≥ rhs, i.e. lhs/rhs ≥ 1",
        needs=needs,
    )


@claim
def step_size_hypothesis(eta: float, eta_max: float, *, width: int) -> Statement:
    """``η ≤ η_max``, Theorem 3.3.5's step-size condition; ``needs`` says by how much."""
    times = _times(eta / eta_max if eta_max > 0 else math.inf)
    return HIEU.hypothesis(
        "Theorem 3.3.5, step-size condition",
        name=f"η within the step-size bound of Theorem 3.3.5 at n = {width}",
        value=eta,
        relation="<=",
        threshold=eta_max,
        measured=f"η = {eta:.3g}, {times}× the bound {eta_max:.3g} at n = {width}",
        expected="η ≤ min{4/λ₀², ‖X‖_F⁻²(…)⁻¹, ½‖X‖_F⁻¹λ₀⁻¹λ̄_UuA⁻¹, ⅙λ₀⁻²λ̄_uA⁻²}",
        needs=f"η ≤ {eta_max:.3g}, {times}× smaller than the run's",
    )


@claim
def rate_check(
    losses: Sequence[float], rate: float | None, *, width: int, suffix: str = ""
) -> Statement:
    """Theorem 3.3.5's conclusion ``L(k+1) ≤ (1 − ηλ₀²/4) L(k)`` at every step.

    ``losses`` are ``L(0), …, L(K)``; the value is ``max_k L(k+1)/L(k)`` over consecutive
    finite losses (``k + 1 ≥ 1``), against ``rate = 1 − ηλ₀²/4``. The detail says how far
    the bound moves over the run: ``rate^K`` and the steps it needs to halve. ``rate`` None
    (``η > 4/λ₀²``: the factor is negative) is NOT MEASURED; the step-size hypothesis then
    makes the theorem NOT APPLICABLE. ``suffix`` ends the name.
    """
    name = f"Theorem 3.3.5: L(k+1) ≤ (1 − ηλ₀²/4)·L(k) at n = {width}{suffix}"
    quote = "L(k+1) ≤ L(θ_k)[1 − ηλ_0²/4]"
    if rate is None:
        why = "η > 4/λ₀² makes 1 − ηλ₀²/4 negative: no bound to compare with"
        expected = "≤ 1 − ηλ₀²/4 at every step, a factor ≥ 0 (η ≤ 4/λ₀²)"
        return HIEU.not_measured(
            Kind.THEOREM, "Theorem 3.3.5", name=name, expected=expected, why=why, quote=quote
        )
    ratios = [(ratio(b, a, "<="), k + 1) for k, (a, b) in enumerate(itertools.pairwise(losses))]
    value = worst([r for r, _ in ratios], "<=", rate)
    step = max((k for r, k in ratios if r == value), default=0)
    steps = len(losses) - 1
    detail = f"the bound after K = {steps} steps is {rate**steps:.6g}·L(0)"
    if 0 < rate < 1:
        detail += f"; it halves after {math.ceil(math.log(0.5) / math.log(rate))} steps"
    if not all(is_measured(x) for x in losses):
        detail += "; the loss is not finite at some step"
    return HIEU.theorem(
        "Theorem 3.3.5",
        name=name,
        quote=quote,
        value=value,
        relation="<=",
        threshold=rate,
        measured=f"max_k L(k+1)/L(k) = {number(value, 6)} (step {step}) at n = {width}",
        expected=f"≤ 1 − ηλ₀²/4 = {rate:.6g} at every step",
        detail=detail,
    )


@claim
def ball_check(
    distances: Mapping[str, Sequence[float]],
    radii: Mapping[str, float],
    *,
    width: int,
    where: tuple[str, str] = PROPOSITION_5,
    steps: Sequence[int] | None = None,
    suffix: str = "",
) -> Statement:
    """Proposition 5 (Hypothesis 1 at every step): ``‖·(k) − ·(0)‖_F ≤ R_·`` for k ≥ 1.

    ``distances`` map A, B, U, u to ``‖·(k) − ·(0)‖_F`` for ``k = 0, …, K``; the value is
    the largest ``‖·(k) − ·(0)‖_F / R_·`` over the parameters and the ``steps`` (default:
    every ``k ≥ 1``); ``suffix`` ends the name. ``where`` is the proof step's (name,
    location) (for the gradient flow: :data:`FLOW_BALLS`).
    """
    found = [
        (ratio(d, radii[name], "<="), name, k)
        for name, series in distances.items()
        for k, d in enumerate(series)
        if _taken(k, steps)
    ]
    value = worst([r for r, _, _ in found], "<=", 1.0)
    ties = [(f[1], f[2]) for f in found if value is not None and f[0] == value]
    name, step = max(ties) if ties else ("·", 0)
    return HIEU.theorem(
        where[1],
        name=f"{where[0]}: the parameters stay in their balls at n = {width}{suffix}",
        value=value,
        relation="<=",
        threshold=1.0,
        measured=f"max_k ‖{name}(k) − {name}(0)‖_F / R = {number(value)} (step {step}) "
        f"{_over(steps)}at n = {width}",
        expected="≤ 1 for A, B, U, u at every step k ≥ 1",
    )


@claim
def sigma_check(
    sigmas: Sequence[float],
    lambda0: float,
    *,
    width: int,
    where: tuple[str, str] = PROPOSITION_6,
    steps: Sequence[int] | None = None,
    suffix: str = "",
) -> Statement:
    """Proposition 6 (Hypothesis 2 at every step): ``σ_min(Z(k)) ≥ λ₀/2`` for k ≥ 1.

    ``sigmas`` are ``σ_min(Z(k))`` for ``k = 0, …, K``; the value is the smallest
    ``σ_min(Z(k))/λ₀`` over the ``steps`` (default: every ``k ≥ 1``); ``suffix`` ends the
    name. ``where`` is the proof step's (name, location) (for the gradient flow:
    :data:`FLOW_SIGMA`).
    """
    if not lambda0 > 0:
        raise ValueError(f"`lambda0` must be > 0 (σ_min(Z(0)) with n ≥ N); got {lambda0}")
    found = [(ratio(s, lambda0, ">="), k) for k, s in enumerate(sigmas) if _taken(k, steps)]
    value = worst([r for r, _ in found], ">=", 0.5)
    step = min((k for r, k in found if r == value), default=0)
    return HIEU.theorem(
        where[1],
        name=f"{where[0]}: σ_min(Z(k)) ≥ λ₀/2 at n = {width}{suffix}",
        value=value,
        relation=">=",
        threshold=0.5,
        measured=f"min_k σ_min(Z(k))/λ₀ = {number(value)} (step {step}) "
        f"{_over(steps)}at n = {width}",
        expected="≥ 1/2 at every step k ≥ 1",
    )


#: What each lemma bounds, by the key of :data:`deqlab.papers.hieu2022.mondeq_lemmas.LEMMA_KEYS`.
LEMMAS: Mapping[str, tuple[str, str]] = {
    "lemma3_3_2": ("Lemma 3.3.2", "max_j ‖(I − WᵀD_j)⁻¹u‖ ≤ ‖u‖/m (as printed, Lemma C.0.4)"),
    "lemma3_3_3": ("Lemma 3.3.3", "‖Z*‖_F ≤ ‖X‖_F‖U‖₂/m"),
    "lemma3_3_4": ("Lemma 3.3.4", "Eq. (3.15): ‖Z(k) − Z(0)‖_F ≤ ‖X‖_F(‖ΔU‖₂/m + ‖ΔW‖₂‖U(0)‖₂/m²)"),
    "lemma3_3_4_output": (
        "Lemma 3.3.4 (Eq. C.6)",
        "‖ŷ(k) − ŷ(0)‖ ≤ ‖X‖_F(‖ΔU‖₂‖u(k)‖/m + ‖ΔW‖₂‖U(0)‖₂‖u(k)‖/m² + ‖U(0)‖₂‖Δu‖/m)",
    ),
}


@claim
def lemma_check(
    key: str, lhs: Sequence[float], rhs: Sequence[float], *, width: int, run: str
) -> Statement:
    """Lemma ``key`` (:data:`LEMMAS`) at every measured step of ``run``: ``max lhs/rhs ≤ 1``.

    The lemmas hold for every monotone DEQ (no hypothesis), so the statement applies
    everywhere. Pairs with ``rhs = 0`` (Lemma 3.3.4 at ``k = 0``: both sides 0) are skipped.
    """
    label, bound = LEMMAS[key]
    found = [
        (ratio(a, b, "<="), k)
        for k, (a, b) in enumerate(zip(lhs, rhs, strict=True))
        if not (is_measured(b) and b <= 0)  # both sides 0 (Lemma 3.3.4 at k = 0): no ratio
    ]
    value = worst([r for r, _ in found], "<=", 1.0)
    at = max((k for r, k in found if r == value), default=0)
    return HIEU.theorem(
        label,
        name=f"{label} along the {run} at n = {width}",
        quote=bound,
        value=value,
        relation="<=",
        threshold=1.0,
        measured=f"max lhs/rhs = {number(value)} over {sum(r is not None for r, _ in found)} "
        f"measured steps (the "
        f"{_ordinal(at)}) at n = {width}",
        expected="lhs/rhs ≤ 1 at every measured step",
    )


def lemma_statements(runs: Mapping[int, Run], *, run: str) -> list[Statement]:
    """:func:`lemma_check` of each lemma at each width (``runs``: width → its probes, with
    the series ``<key>_lhs`` / ``<key>_rhs``; a probe where a lemma was not evaluated has
    NaN there)."""
    out = []
    for width, key in itertools.product(sorted(runs), LEMMAS):
        probes = runs[width]
        have = [
            k
            for k, _ in enumerate(probes.steps)
            if probes[f"{key}_lhs"][k] == probes[f"{key}_lhs"][k]
        ]
        lhs = [probes[f"{key}_lhs"][k] for k in have]
        rhs = [probes[f"{key}_rhs"][k] for k in have]
        out.append(lemma_check(key, lhs, rhs, width=width, run=run))
    return out


@claim
def proposition_3_check(lhs: float, rhs: float, *, alpha: float, width: int) -> Statement:
    """Proposition 3: ``L[T_α] = ‖I − α(I − W)‖₂ ≤ √(1 − 2αm + α²L[I − W]²)`` at W(0), at
    the forward-backward step ``alpha``; the value is ``lhs/rhs`` (to rounding, 1e-10)."""
    return HIEU.theorem(
        "Proposition 3, Section 3.2.2",
        name=f"Proposition 3: L[T_α] ≤ √(1 − 2αm + α²L[I − W]²) at n = {width}",
        quote="L[T_α] ≤ √(1 − 2αm + α²L[I − W]²)",
        value=ratio(lhs, rhs, "<="),
        relation="<=",
        threshold=1.0 + 1e-10,
        measured=f"‖T_α‖₂ = {number(lhs, 6)}, bound {number(rhs, 6)} at α = {alpha:.3g} = m/L² "
        f"(W(0), n = {width})",
        expected="‖T_α‖₂/bound ≤ 1 (+1e-10, rounding)",
    )


def untrained(accuracies: Mapping[str, float | None]) -> str:
    """Why a statement about trained models is not measured: ``""`` when every model's
    final training accuracy reached :data:`TRAINED_ACCURACY`, else the ones that did not."""
    short = {k: a for k, a in accuracies.items() if not is_measured(a) or a < TRAINED_ACCURACY}
    if not short:
        return ""
    shown = ", ".join(f"{k}: {number(a, 2)}" for k, a in short.items())
    return (
        f"the models are not trained (final training accuracy {shown}; ours: trained means "
        f"≥ {TRAINED_ACCURACY:g}); the statement is about trained models: use more images "
        "or epochs"
    )


def _taken(k: int, steps: Sequence[int] | None) -> bool:
    """Whether step ``k`` is checked: one of ``steps``, or any ``k ≥ 1`` when None."""
    return k >= 1 if steps is None else k in steps


def _over(steps: Sequence[int] | None) -> str:
    """ "over steps a–b (its premise held) " for a restricted check, else ""."""
    if steps is None:
        return ""
    return f"over steps {steps[0]}–{steps[-1]} " if len(steps) else "over no step "


def _times(ratio: float) -> str:
    """A factor as "531" or "1550" (whole numbers from 10 on), else "0.5", "2.4"."""
    return f"{ratio:.0f}" if 10 <= ratio < 1e6 else f"{ratio:.3g}"


def _ordinal(k: int) -> str:
    """``k`` as "1st", "2nd", "3rd", "4th", … (the k-th measured step, counted from 1)."""
    k += 1
    suffix = "th" if 10 <= k % 100 < 20 else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k}{suffix}"

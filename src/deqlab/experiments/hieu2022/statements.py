"""The thesis' statements (Hieu 2022), built from measured numbers.

The builders turn the inequalities of :mod:`deqlab.theory.mondeq` and the numbers of a GD
run into :class:`~deqlab.statements.Statement` s, so that ``hieu2022-mondeq-gd`` and a
check of any other monotone DEQ decide verdicts the same way:

- each inequality of Condition 1 or 2 is a HYPOTHESIS ``lhs/rhs ≥ 1`` at one width; when
  it is unmet, ``needs`` gives the width that would satisfy it under a stated scaling
  assumption (:class:`WidthFit`: ``lhs/rhs ∝ n^s``, fitted over the measured widths);
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
from dataclasses import dataclass

from deqlab.experiments.base import linear_fit
from deqlab.statements import Kind, Source, Statement, is_measured, measure, theorem
from deqlab.theory.mondeq import M_BOUND_3_18, Inequality, gd_rate

#: Ours: a classifier of ten classes counts as trained at 5× chance training accuracy.
TRAINED_ACCURACY = 0.5


def thesis(location: str, quote: str = "") -> Source:
    """A :class:`Source` in the thesis."""
    return Source("hieu2022", location, quote)


@dataclass(frozen=True)
class WidthFit:
    """``log(lhs/rhs) ≈ slope · log n + intercept``, least squares over ``widths``.

    The scaling assumption behind the width a condition needs: its margin ``lhs/rhs`` is a
    power of the width, with the exponent measured on the run's widths.
    """

    widths: tuple[int, ...]
    slope: float
    intercept: float

    @classmethod
    def of(cls, widths: Sequence[int], ratios: Sequence[float]) -> WidthFit | None:
        """The fit, or None for fewer than two widths or a ratio that is not finite and > 0."""
        if len(widths) < 2 or not all(is_measured(r) and r > 0 for r in ratios):
            return None
        logs = [math.log(n) for n in widths]
        slope, intercept, _ = linear_fit(logs, [math.log(r) for r in ratios])
        return cls(tuple(widths), slope, intercept)

    def needs(self) -> str:
        """The width at which the fitted ``lhs/rhs`` reaches 1, with the assumption."""
        fitted = f"lhs/rhs ∝ n^{self.slope:.2f} as fitted over n = {_list(self.widths)}"
        if self.slope <= 0:
            return f"no width: {fitted}, which does not grow with n"
        log_n = -self.intercept / self.slope
        return f"n ≥ {_power(log_n)}, if {fitted}"


def condition_hypothesis(
    inequality: Inequality,
    *,
    width: int,
    condition: str,
    fit: WidthFit | None,
    m: float,
) -> Statement:
    """One inequality of ``condition`` ("Condition 1" or "Condition 2") at ``width``.

    The value is ``lhs/rhs`` (≥ 1 when it holds). ``needs``: the width from ``fit`` (a
    sweep over widths when there is none) and, for Eq. (3.18) with ``m ≥ 1/√20``, that no
    width can satisfy it (Lemma 3.3.3).
    """
    if inequality["relation"] != ">=":
        raise ValueError(f"conditions are lower bounds on λ_0; got {inequality}")
    lhs, rhs = inequality["lhs"], inequality["rhs"]
    ratio = lhs / rhs if rhs > 0 else None
    needs = [fit.needs() if fit else "a sweep over widths to extrapolate (one width measured)"]
    if inequality["name"] == "Eq. (3.18)" and m >= M_BOUND_3_18:
        needs.insert(0, f"m < 1/√20 ≈ {M_BOUND_3_18:.3f} (Lemma 3.3.3: no width otherwise)")
    return measure(
        f"{condition}, {inequality['name']} at n = {width}",
        Kind.HYPOTHESIS,
        thesis(f"{condition}, {inequality['name']}"),
        value=ratio,
        relation=">=",
        threshold=1.0,
        measured=f"lhs/rhs = {_num(ratio)} (lhs {lhs:.3g}, rhs {rhs:.3g}) at n = {width}",
        expected="lhs ≥ rhs, i.e. lhs/rhs ≥ 1",
        needs="; ".join(needs),
    )


def step_size_hypothesis(eta: float, eta_max: float, *, width: int) -> Statement:
    """``η ≤ η_max``, Theorem 3.3.5's step-size condition; ``needs`` says by how much."""
    times = _times(eta / eta_max if eta_max > 0 else math.inf)
    return measure(
        f"η within the step-size bound of Theorem 3.3.5 at n = {width}",
        Kind.HYPOTHESIS,
        thesis("Theorem 3.3.5, step-size condition"),
        value=eta,
        relation="<=",
        threshold=eta_max,
        measured=f"η = {eta:.3g}, {times}× the bound {eta_max:.3g} at n = {width}",
        expected="η ≤ min{4/λ₀², ‖X‖_F⁻²(…)⁻¹, ½‖X‖_F⁻¹λ₀⁻¹λ̄_UuA⁻¹, ⅙λ₀⁻²λ̄_uA⁻²}",
        needs=f"η ≤ {eta_max:.3g}, {times}× smaller than the run's",
    )


def rate_check(losses: Sequence[float], rate: float, *, width: int) -> Statement:
    """Theorem 3.3.5's conclusion ``L(k+1) ≤ (1 − ηλ₀²/4) L(k)`` at every step.

    ``losses`` are ``L(0), …, L(K)``; the value is ``max_k L(k+1)/L(k)`` over consecutive
    finite losses (``k + 1 ≥ 1``), against ``rate = 1 − ηλ₀²/4``. The detail says how far
    the bound moves over the run: ``rate^K`` and the steps it needs to halve.
    """
    ratios = [
        (b / a, k + 1)
        for k, (a, b) in enumerate(itertools.pairwise(losses))
        if is_measured(a) and is_measured(b) and a > 0
    ]
    value, step = max(ratios) if ratios else (None, 0)
    steps = len(losses) - 1
    detail = f"the bound after K = {steps} steps is {rate**steps:.6g}·L(0)"
    if 0 < rate < 1:
        detail += f"; it halves after {math.ceil(math.log(0.5) / math.log(rate))} steps"
    if not all(is_measured(x) for x in losses):
        detail += "; the loss is not finite at some step"
    return measure(
        f"Theorem 3.3.5: L(k+1) ≤ (1 − ηλ₀²/4)·L(k) at n = {width}",
        Kind.THEOREM,
        thesis("Theorem 3.3.5", "L(k+1) ≤ L(θ_k)[1 − ηλ_0²/4]"),
        value=value,
        relation="<=",
        threshold=rate,
        measured=f"max_k L(k+1)/L(k) = {_num(value, 6)} (step {step}) at n = {width}",
        expected=f"≤ 1 − ηλ₀²/4 = {rate:.6g} at every step",
        detail=detail,
    )


def ball_check(
    distances: Mapping[str, Sequence[float]], radii: Mapping[str, float], *, width: int
) -> Statement:
    """Proposition 5 (Hypothesis 1 at every step): ``‖·(k) − ·(0)‖_F ≤ R_·`` for k ≥ 1.

    ``distances`` map A, B, U, u to ``‖·(k) − ·(0)‖_F`` for ``k = 0, …, K``; the value is
    the largest ``‖·(k) − ·(0)‖_F / R_·`` over the parameters and the steps ``k ≥ 1``.
    """
    found = [
        (d / radii[name], name, k)
        for name, series in distances.items()
        for k, d in enumerate(series)
        if k >= 1 and is_measured(d)
    ]
    value, name, step = max(found) if found else (None, "·", 0)
    return measure(
        f"Proposition 5 (Hypothesis 1): the parameters stay in their balls at n = {width}",
        Kind.THEOREM,
        thesis("Proposition 5 (Hypothesis 1), proof of Theorem 3.3.5"),
        value=value,
        relation="<=",
        threshold=1.0,
        measured=f"max_k ‖{name}(k) − {name}(0)‖_F / R = {_num(value)} (step {step}) "
        f"at n = {width}",
        expected="≤ 1 for A, B, U, u at every step k ≥ 1",
    )


def sigma_check(sigmas: Sequence[float], lambda0: float, *, width: int) -> Statement:
    """Proposition 6 (Hypothesis 2 at every step): ``σ_min(Z(k)) ≥ λ₀/2`` for k ≥ 1.

    ``sigmas`` are ``σ_min(Z(k))`` for ``k = 0, …, K``; the value is
    ``min_{k≥1} σ_min(Z(k))/λ₀``.
    """
    if not lambda0 > 0:
        raise ValueError(f"`lambda0` must be > 0 (σ_min(Z(0)) with n ≥ N); got {lambda0}")
    found = [(s / lambda0, k) for k, s in enumerate(sigmas) if k >= 1 and is_measured(s)]
    value, step = min(found) if found else (None, 0)
    return measure(
        f"Proposition 6 (Hypothesis 2): σ_min(Z(k)) ≥ λ₀/2 at n = {width}",
        Kind.THEOREM,
        thesis("Proposition 6 (Hypothesis 2), proof of Theorem 3.3.5"),
        value=value,
        relation=">=",
        threshold=0.5,
        measured=f"min_k σ_min(Z(k))/λ₀ = {_num(value)} (step {step}) at n = {width}",
        expected="≥ 1/2 at every step k ≥ 1",
    )


@dataclass(frozen=True)
class GDTrace:
    """One GD run at one width: ``η``, Theorem 3.3.5's bound ``eta_max``, ``λ₀``, the radii
    ``R_·`` and, for steps ``k = 0, …, K``, the losses, ``σ_min(Z(k))`` and the distances
    ``‖·(k) − ·(0)‖_F`` of A, B, U, u."""

    width: int
    eta: float
    eta_max: float
    lambda0: float
    radii: Mapping[str, float]
    losses: Sequence[float]
    sigmas: Sequence[float]
    distances: Mapping[str, Sequence[float]]


def theorem_3_3_5(
    trace: GDTrace,
    conditions: Sequence[Inequality],
    *,
    fits: Mapping[str, WidthFit | None],
    m: float,
) -> list[Statement]:
    """Condition 2 (``conditions``: Eqs. 3.16–3.18) and the step size as hypotheses, then
    Theorem 3.3.5 and Propositions 5–6 on ``trace``, each NOT APPLICABLE unless all hold.

    ``fits`` maps each equation's name to its :class:`WidthFit` (or None).
    """
    width = trace.width
    hypotheses = [
        condition_hypothesis(c, width=width, condition="Condition 2", fit=fits[c["name"]], m=m)
        for c in conditions
    ]
    hypotheses.append(step_size_hypothesis(trace.eta, trace.eta_max, width=width))
    checks = [
        rate_check(trace.losses, gd_rate(trace.lambda0, trace.eta), width=width),
        ball_check(trace.distances, trace.radii, width=width),
        sigma_check(trace.sigmas, trace.lambda0, width=width),
    ]
    return [*hypotheses, *(theorem(check, hypotheses) for check in checks)]


def untrained(accuracies: Mapping[str, float | None]) -> str:
    """Why a statement about trained models is not measured: ``""`` when every model's
    final training accuracy reached :data:`TRAINED_ACCURACY`, else the ones that did not."""
    short = {k: a for k, a in accuracies.items() if not is_measured(a) or a < TRAINED_ACCURACY}
    if not short:
        return ""
    shown = ", ".join(f"{k}: {_num(a, 2)}" for k, a in short.items())
    return (
        f"the models are not trained (final training accuracy {shown}; ours: trained means "
        f"≥ {TRAINED_ACCURACY:g}); the statement is about trained models: use more images "
        "or epochs"
    )


def _num(x: float | None, digits: int = 3) -> str:
    return "—" if x is None or not is_measured(x) else f"{x:.{digits}g}"


def _times(ratio: float) -> str:
    """A factor as "531" or "1550" (whole numbers from 10 on), else "0.5", "2.4"."""
    return f"{ratio:.0f}" if 10 <= ratio < 1e6 else f"{ratio:.3g}"


def _power(log_n: float) -> str:
    """``e^log_n`` as a number, or as a power of ten beyond the float range."""
    if log_n < 700:
        return f"{math.exp(log_n):.3g}"
    return f"10^{log_n / math.log(10):.0f}"


def _list(widths: Sequence[int]) -> str:
    return ", ".join(str(n) for n in widths)

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
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from deqlab.experiments.base import linear_fit
from deqlab.statements import (
    OURS,
    Kind,
    Source,
    Statement,
    is_measured,
    measure,
    not_measured,
    theorem,
)
from deqlab.theory.mondeq import Inequality, eq_3_18_possible

#: Ours: a classifier of ten classes counts as trained at 5× chance training accuracy.
TRAINED_ACCURACY = 0.5

#: (name, location) of the proof steps :func:`ball_check` and :func:`sigma_check` check: by
#: default those of Theorem 3.3.5 (GD); the gradient flow's are in Theorem 3.3.1's proof.
PROPOSITION_5 = ("Proposition 5 (Hypothesis 1)", "Proposition 5 (Hypothesis 1), proof of "
                 "Theorem 3.3.5")  # fmt: skip
PROPOSITION_6 = ("Proposition 6 (Hypothesis 2)", "Proposition 6 (Hypothesis 2), proof of "
                 "Theorem 3.3.5")  # fmt: skip
FLOW_BALLS = ("Theorem 3.3.1's induction (1)", "Theorem 3.3.1, proof: induction (1), "
              "Eqs. (3.11)–(3.13)")  # fmt: skip
FLOW_SIGMA = ("Theorem 3.3.1's proof (Weyl)", "Theorem 3.3.1, proof: Weyl's inequality after "
              "Eq. (3.14)")  # fmt: skip


def thesis(location: str, quote: str = "") -> Source:
    """A :class:`Source` in the thesis."""
    return Source("hieu2022", location, quote)


#: Ours: the width fits of :class:`WidthFit` use only widths ``n ≥ FIT_WIDTH_FACTOR · N``.
FIT_WIDTH_FACTOR = 4


@dataclass(frozen=True)
class WidthFit:
    """``log(lhs/rhs) ≈ slope · log n + intercept``, least squares over ``widths``.

    The scaling assumption behind the width a condition needs: its margin ``lhs/rhs`` is a
    power of the width, with the exponent measured on the run's widths ``n ≫ N`` (ours:
    ``n ≥ 4N``). Near ``n = N``, ``σ_min(Z(0))`` (λ₀) is near zero and grows much faster
    than any power law far from it, so those widths would dominate the slope.
    """

    widths: tuple[int, ...]
    slope: float
    intercept: float

    @classmethod
    def of(
        cls, widths: Sequence[int], ratios: Sequence[float], *, n_samples: int = 1
    ) -> WidthFit | None:
        """The fit over the widths ``≥ FIT_WIDTH_FACTOR · n_samples``, or None for fewer
        than two such widths or a ratio there that is not finite and > 0."""
        kept = [(n, r) for n, r in zip(widths, ratios, strict=True)
                if n >= FIT_WIDTH_FACTOR * n_samples]  # fmt: skip
        if len(kept) < 2 or not all(is_measured(r) and r > 0 for _, r in kept):
            return None
        logs = [math.log(n) for n, _ in kept]
        slope, intercept, _ = linear_fit(logs, [math.log(r) for _, r in kept])
        return cls(tuple(n for n, _ in kept), slope, intercept)

    def needs(self) -> str:
        """The width at which the fitted ``lhs/rhs`` reaches 1, with the assumption."""
        fitted = (f"lhs/rhs ∝ n^{self.slope:.2f} as fitted over n = {_list(self.widths)} "
                  f"(widths n ≥ {FIT_WIDTH_FACTOR}N only)")  # fmt: skip
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
    ratio = lhs / rhs if rhs > 0 else None
    if inequality["name"] == "Eq. (3.18)" and not eq_3_18_possible(m, n_samples):
        needs = (f"no width: m²N = {m * m * n_samples:.3g} ≥ 1/20, and λ₀² ≤ ‖Z(0)‖_F²/N ≤ "
                 "‖X‖_F²‖U(0)‖₂²/(m²N) < rhs/(20m²N) (Lemma 3.3.3); needs m²N < 1/20")  # fmt: skip
    elif fit:
        needs = fit.needs()
    else:
        needs = f"a sweep over widths n ≥ {FIT_WIDTH_FACTOR}N to extrapolate"
    return measure(
        f"{condition}, {inequality['name']} at n = {width}",
        Kind.HYPOTHESIS,
        thesis(f"{condition}, {inequality['name']}"),
        value=ratio,
        relation=">=",
        threshold=1.0,
        measured=f"lhs/rhs = {num(ratio)} (lhs {lhs:.3g}, rhs {rhs:.3g}) at n = {width}",
        expected="lhs ≥ rhs, i.e. lhs/rhs ≥ 1",
        needs=needs,
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


def rate_check(losses: Sequence[float], rate: float | None, *, width: int) -> Statement:
    """Theorem 3.3.5's conclusion ``L(k+1) ≤ (1 − ηλ₀²/4) L(k)`` at every step.

    ``losses`` are ``L(0), …, L(K)``; the value is ``max_k L(k+1)/L(k)`` over consecutive
    finite losses (``k + 1 ≥ 1``), against ``rate = 1 − ηλ₀²/4``. The detail says how far
    the bound moves over the run: ``rate^K`` and the steps it needs to halve. ``rate`` None
    (``η > 4/λ₀²``: the factor is negative) is NOT MEASURED; the step-size hypothesis then
    makes the theorem NOT APPLICABLE.
    """
    name = f"Theorem 3.3.5: L(k+1) ≤ (1 − ηλ₀²/4)·L(k) at n = {width}"
    source = thesis("Theorem 3.3.5", "L(k+1) ≤ L(θ_k)[1 − ηλ_0²/4]")
    if rate is None:
        why = "η > 4/λ₀² makes 1 − ηλ₀²/4 negative: no bound to compare with"
        expected = "≤ 1 − ηλ₀²/4 at every step, a factor ≥ 0 (η ≤ 4/λ₀²)"
        return not_measured(name, Kind.THEOREM, source, expected=expected, why=why)
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
        name,
        Kind.THEOREM,
        source,
        value=value,
        relation="<=",
        threshold=rate,
        measured=f"max_k L(k+1)/L(k) = {num(value, 6)} (step {step}) at n = {width}",
        expected=f"≤ 1 − ηλ₀²/4 = {rate:.6g} at every step",
        detail=detail,
    )


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
        (d / radii[name], name, k)
        for name, series in distances.items()
        for k, d in enumerate(series)
        if _taken(k, steps) and is_measured(d)
    ]
    value, name, step = max(found) if found else (None, "·", 0)
    return measure(
        f"{where[0]}: the parameters stay in their balls at n = {width}{suffix}",
        Kind.THEOREM,
        thesis(where[1]),
        value=value,
        relation="<=",
        threshold=1.0,
        measured=f"max_k ‖{name}(k) − {name}(0)‖_F / R = {num(value)} (step {step}) "
        f"{_over(steps)}at n = {width}",
        expected="≤ 1 for A, B, U, u at every step k ≥ 1",
    )


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
    found = [(s / lambda0, k) for k, s in enumerate(sigmas) if _taken(k, steps) and is_measured(s)]
    value, step = min(found) if found else (None, 0)
    return measure(
        f"{where[0]}: σ_min(Z(k)) ≥ λ₀/2 at n = {width}{suffix}",
        Kind.THEOREM,
        thesis(where[1]),
        value=value,
        relation=">=",
        threshold=0.5,
        measured=f"min_k σ_min(Z(k))/λ₀ = {num(value)} (step {step}) {_over(steps)}at n = {width}",
        expected="≥ 1/2 at every step k ≥ 1",
    )


#: What each lemma bounds, by the key of :data:`deqlab.theory.mondeq.LEMMA_KEYS`.
LEMMAS: Mapping[str, tuple[str, str]] = {
    "lemma3_3_2": ("Lemma 3.3.2", "max_j ‖(I − WᵀD_j)⁻¹u‖ ≤ ‖u‖/m (as printed, Lemma C.0.4)"),
    "lemma3_3_3": ("Lemma 3.3.3", "‖Z*‖_F ≤ ‖X‖_F‖U‖₂/m"),
    "lemma3_3_4": ("Lemma 3.3.4", "Eq. (3.15): ‖Z(k) − Z(0)‖_F ≤ ‖X‖_F(‖ΔU‖₂/m + ‖ΔW‖₂‖U(0)‖₂/m²)"),
    "lemma3_3_4_output": (
        "Lemma 3.3.4 (Eq. C.6)",
        "‖ŷ(k) − ŷ(0)‖ ≤ ‖X‖_F(‖ΔU‖₂‖u(k)‖/m + ‖ΔW‖₂‖U(0)‖₂‖u(k)‖/m² + ‖U(0)‖₂‖Δu‖/m)",
    ),
}


def lemma_check(
    key: str, lhs: Sequence[float], rhs: Sequence[float], *, width: int, run: str
) -> Statement:
    """Lemma ``key`` (:data:`LEMMAS`) at every measured step of ``run``: ``max lhs/rhs ≤ 1``.

    The lemmas hold for every monotone DEQ (no hypothesis), so the statement applies
    everywhere. Pairs with ``rhs = 0`` (Lemma 3.3.4 at ``k = 0``: both sides 0) are skipped.
    """
    label, bound = LEMMAS[key]
    found = [(a / b, k) for k, (a, b) in enumerate(zip(lhs, rhs, strict=True))
             if is_measured(a) and is_measured(b) and b > 0]  # fmt: skip
    value, at = max(found) if found else (None, 0)
    return measure(
        f"{label} along the {run} at n = {width}",
        Kind.THEOREM,
        thesis(label, bound),
        value=value,
        relation="<=",
        threshold=1.0,
        measured=f"max lhs/rhs = {num(value)} over {len(found)} measured steps (the "
        f"{_ordinal(at)}) at n = {width}",
        expected="lhs/rhs ≤ 1 at every measured step",
    )


def lemma_statements(rows: Sequence[Mapping[str, object]], *, run: str) -> list[Statement]:
    """:func:`lemma_check` of each lemma at each width, from rows with ``width`` and the
    columns ``<key>_lhs`` / ``<key>_rhs`` (rows without them, or with None there — a table
    of rows holds every column — are not measured steps)."""
    widths = sorted({int(r["width"]) for r in rows})
    out = []
    for width, key in itertools.product(widths, LEMMAS):
        have = [r for r in rows
                if int(r["width"]) == width and r.get(f"{key}_lhs") is not None]  # fmt: skip
        lhs = [float(r[f"{key}_lhs"]) for r in have]
        out.append(lemma_check(key, lhs, [float(r[f"{key}_rhs"]) for r in have], width=width,
                               run=run))  # fmt: skip
    return out


def proposition_4_check(
    extrapolated: Sequence[float], raw: Sequence[float], halved: Sequence[float],
    flips: Sequence[int], *, rtol: float, width: int, steps: Sequence[float] = (),
) -> Statement:  # fmt: skip
    """Proposition 4, Eq. (3.7), at the probes of a small-step run where ŷ is smooth.

    Each list holds one entry per probe: ``‖D − (−K r)‖/‖K r‖`` for ``D`` the measured
    change of ŷ per unit time — ``extrapolated`` ``2D_{h/2} − D_h``, ``raw`` ``D_h``,
    ``halved`` ``D_{h/2}`` — and ``flips``, the ReLU derivatives that change within the
    step. Eq. (3.7) is a derivative: probes whose step crosses a kink (``flips > 0``) are
    left out and counted; ``steps`` (``s/h`` per probe) says how many probes had to take a
    step below the run's to cross none. The value is the largest extrapolated error
    (``O(h²)`` when Eq. 3.7 holds); ``rtol`` is ours. The measured text gives the raw
    error and its observed median order ``log₂(raw/halved)`` (1: a first-order error).
    """
    smooth = [(e, a, b) for e, a, b, f in zip(extrapolated, raw, halved, flips, strict=True)
              if f == 0 and is_measured(e) and is_measured(a) and is_measured(b)]  # fmt: skip
    value = max((e for e, _, _ in smooth), default=None)
    orders = [math.log2(a / b) for _, a, b in smooth if a > 0 and b > 0]
    shown = (f"; raw error at step h up to {num(max(a for _, a, _ in smooth))}, median "
             f"observed order {num(statistics.median(orders), 2)}") if orders else ""  # fmt: skip
    kinks = len(flips) - len(smooth)
    return measure(
        f"Proposition 4: dŷ/dt = −K(t)(ŷ − y) along the run at n = {width}",
        Kind.THEOREM,
        thesis("Proposition 4, Eq. (3.7)", "dŷ/dt = −K(t)(ŷ − y)"),
        value=value,
        relation="<=",
        threshold=rtol,
        measured=f"max ‖2D_(h/2) − D_h + K r‖/‖K r‖ = {num(value)} over {len(smooth)} "
        f"probes{shown} at n = {width}",
        expected=f"≤ {rtol:g} (ours) once the O(h) Euler error is removed (Richardson)",
        detail=f"{kinks} of {len(flips)} probes left out: their step crosses a ReLU kink; "
        f"{sum(1 for x in steps if x < 1)} probes at a step below the run's h (down to "
        f"{min(steps, default=1):.3g}·h) to cross none; "
        "K = Σ_p J_p J_pᵀ from the closed-form implicit Jacobians; D_s = "
        "(ŷ(θ − s∇L) − ŷ(θ))/s, D_h the run's own step",
    )


def kernel_floor_check(
    lambda_mins: Sequence[float], sigmas: Sequence[float], *, width: int
) -> Statement:
    """Eq. (3.14): ``λ_min(K(t)) ≥ σ_min(Z(t))²`` at every probe; the value is the smallest
    ``λ_min(K)/σ_min(Z)²``."""
    found = [a / b**2 for a, b in zip(lambda_mins, sigmas, strict=True)
             if is_measured(a) and is_measured(b) and b > 0]  # fmt: skip
    value = min(found, default=None)
    return measure(
        f"Eq. (3.14): λ_min(K(t)) ≥ σ_min(Z(t))² along the run at n = {width}",
        Kind.THEOREM,
        thesis("Theorem 3.3.1, proof, Eq. (3.14)", "λ_min(K(t)) ≥ λ_min(Z(t)ᵀZ(t))"),
        value=value,
        relation=">=",
        threshold=1.0,
        measured=f"min λ_min(K)/σ_min(Z)² = {num(value, 6)} over {len(found)} probes "
        f"at n = {width}",
        expected="≥ 1 at every probe",
    )


@dataclass(frozen=True)
class FlowTrace:
    """The flow at one width, integrated with steps ``h`` and ``h/2``, at the times ``t``
    they share: the losses of both, Theorem 3.3.1's bound ``exp(−λ₀²t/2)L(0)``, and
    ``λ₀``, the radii and (from the probes of the ``h/2`` run) ``σ_min(Z(t))`` and the
    distances ``‖·(t) − ·(0)‖_F``, first entry at ``t = 0``."""

    width: int
    lambda0: float
    radii: Mapping[str, float]
    times: Sequence[float]
    loss_h: Sequence[float]
    loss_h2: Sequence[float]
    bound: Sequence[float]
    sigmas: Sequence[float]
    distances: Mapping[str, Sequence[float]]


def step_error_check(trace: FlowTrace, *, rtol: float) -> Statement:
    """Ours: Euler's error stays below ``rtol`` at every shared time ``t``.

    The error is ``|ln(L_h(t)/L_{h/2}(t))| / (1 + ln(L(0)/L_{h/2}(t)))`` (the ``h/2`` run's
    error to first order): at first the relative error of the loss, once the loss has
    decayed by many e-folds the relative error of their number — the exponent Theorem
    3.3.1 bounds. (The relative error of the loss itself grows like ``h λ² t`` along any
    exponential decay, however small ``h``.)
    """
    start = trace.loss_h2[0] if trace.loss_h2 else math.nan
    errors = [abs(math.log(a / b)) / (1 + math.log(start / b))
              for a, b in zip(trace.loss_h, trace.loss_h2, strict=True)
              if is_measured(a) and is_measured(b) and a > 0 and 0 < b <= start]  # fmt: skip
    value = max(errors, default=None)
    return measure(
        f"the flow's step-size error is below {rtol:g} at n = {trace.width}",
        Kind.OURS,
        OURS,
        value=value,
        relation="<=",
        threshold=rtol,
        measured=f"max_t |ln(L_h/L_(h/2))|/(1 + ln(L(0)/L_(h/2))) = {num(value)} over "
        f"{len(errors)} times at n = {trace.width}",
        expected=f"≤ {rtol:g}: else halve h",
    )


def flow_rate_check(trace: FlowTrace) -> Statement:
    """Theorem 3.3.1's conclusion at the shared times ``t > 0``, on the flow's loss bounded
    from above by ``L_{h/2}(t) + |L_h(t) − L_{h/2}(t)|`` (the ``h/2`` run plus its
    estimated error); the value is the largest ratio of that to the bound."""
    found = [((b + abs(a - b)) / c, t) for t, a, b, c in
             zip(trace.times, trace.loss_h, trace.loss_h2, trace.bound, strict=True)
             if t > 0 and is_measured(a) and is_measured(b) and c > 0]  # fmt: skip
    value, at = max(found) if found else (None, 0.0)
    return measure(
        f"Theorem 3.3.1: L(θ(t)) ≤ exp(−λ₀²t/2)·L(θ(0)) at n = {trace.width}",
        Kind.THEOREM,
        thesis("Theorem 3.3.1", "L(θ(t)) ≤ exp{−λ_0² t/2} L(θ(0))"),
        value=value,
        relation="<=",
        threshold=1.0,
        measured=f"max_t (L + step error)/bound = {num(value)} (t = {at:.3g}) at n = {trace.width}",
        expected="≤ 1 at every t > 0",
        detail=f"λ₀² t/2 reaches {trace.lambda0**2 * max(trace.times, default=0) / 2:.3g} "
        "at the end of the run",
    )


def theorem_3_3_1(
    trace: FlowTrace,
    conditions: Sequence[Inequality],
    *,
    fits: Mapping[str, WidthFit | None],
    m: float,
) -> list[Statement]:
    """Condition 1 (``conditions``: Eqs. 3.8–3.9) as hypotheses, then Theorem 3.3.1 and the
    two steps of its proof (the balls and ``σ_min(Z(t)) ≥ λ₀/2``) on ``trace``, each NOT
    APPLICABLE unless Condition 1 holds. ``fits`` maps each equation to its WidthFit."""
    width = trace.width
    hypotheses = [
        condition_hypothesis(c, width=width, condition="Condition 1", fit=fits[c["name"]], m=m)
        for c in conditions
    ]
    checks = [
        flow_rate_check(trace),
        ball_check(trace.distances, trace.radii, width=width, where=FLOW_BALLS),
        sigma_check(trace.sigmas, trace.lambda0, width=width, where=FLOW_SIGMA),
    ]
    return [*hypotheses, *(theorem(check, hypotheses) for check in checks)]


def untrained(accuracies: Mapping[str, float | None]) -> str:
    """Why a statement about trained models is not measured: ``""`` when every model's
    final training accuracy reached :data:`TRAINED_ACCURACY`, else the ones that did not."""
    short = {k: a for k, a in accuracies.items() if not is_measured(a) or a < TRAINED_ACCURACY}
    if not short:
        return ""
    shown = ", ".join(f"{k}: {num(a, 2)}" for k, a in short.items())
    return (
        f"the models are not trained (final training accuracy {shown}; ours: trained means "
        f"≥ {TRAINED_ACCURACY:g}); the statement is about trained models: use more images "
        "or epochs"
    )


def num(x: float | None, digits: int = 3) -> str:
    """``x`` with ``digits`` significant digits, ``—`` when not measured."""
    return "—" if x is None or not is_measured(x) else f"{x:.{digits}g}"


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


def _power(log_n: float) -> str:
    """``e^log_n`` as a number, or as a power of ten beyond the float range."""
    if log_n < 700:
        return f"{math.exp(log_n):.3g}"
    return f"10^{log_n / math.log(10):.0f}"


def _ordinal(k: int) -> str:
    """``k`` as "1st", "2nd", "3rd", "4th", … (the k-th measured step, counted from 1)."""
    k += 1
    suffix = "th" if 10 <= k % 100 < 20 else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k}{suffix}"


def _list(widths: Sequence[int]) -> str:
    return ", ".join(str(n) for n in widths)

"""The thesis' statements on the gradient flow (Hieu 2022, Section 3.3.1): Proposition 4,
Eq. (3.14), Theorem 3.3.1 and the two steps of its proof, and ours on Euler's error.

Each builder takes numbers measured along a flow integrated by explicit Euler with steps
``h`` and ``h/2`` (:class:`FlowTrace`); ``hieu2022-gradflow`` builds them from its rows.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from deqlab.papers.hieu2022 import HIEU
from deqlab.papers.hieu2022.claims import ball_check, condition_hypothesis, sigma_check
from deqlab.papers.hieu2022.mondeq import Inequality
from deqlab.papers.hieu2022.width_fit import WidthFit
from deqlab.statements import Statement, claim, is_measured, number, ours, ratio, theorem, worst

#: (name, location) of the two steps of Theorem 3.3.1's proof that :func:`theorem_3_3_1`
#: checks with :func:`~deqlab.papers.hieu2022.claims.ball_check` and
#: :func:`~deqlab.papers.hieu2022.claims.sigma_check`.
FLOW_BALLS = (
    "Theorem 3.3.1's induction (1)",
    "Theorem 3.3.1, proof: induction (1), Eqs. (3.11)–(3.13)",
)
FLOW_SIGMA = (
    "Theorem 3.3.1's proof (Weyl)",
    "Theorem 3.3.1, proof: Weyl's inequality after Eq. (3.14)",
)


@claim
def proposition_4_check(
    extrapolated: Sequence[float],
    raw: Sequence[float],
    halved: Sequence[float],
    flips: Sequence[int],
    *,
    rtol: float,
    width: int,
    steps: Sequence[float] = (),
) -> Statement:
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
    smooth = [
        (e, a, b)
        for e, a, b, f in zip(extrapolated, raw, halved, flips, strict=True)
        if f == 0 and is_measured(e) and is_measured(a) and is_measured(b)
    ]
    kept = [e for e, f in zip(extrapolated, flips, strict=True) if f == 0]
    value = worst(kept, "<=", rtol)
    orders = [math.log2(a / b) for _, a, b in smooth if a > 0 and b > 0]
    shown = ""
    if orders:
        largest = number(max(a for _, a, _ in smooth))
        median = number(statistics.median(orders), 2)
        shown = f"; raw error at step h up to {largest}, median observed order {median}"
    kinks = len(flips) - len(smooth)
    return HIEU.theorem(
        "Proposition 4, Eq. (3.7)",
        name=f"Proposition 4: dŷ/dt = −K(t)(ŷ − y) along the run at n = {width}",
        quote="dŷ/dt = −K(t)(ŷ − y)",
        value=value,
        relation="<=",
        threshold=rtol,
        measured=f"max ‖2D_(h/2) − D_h + K r‖/‖K r‖ = {number(value)} over {len(smooth)} "
        f"probes{shown} at n = {width}",
        expected=f"≤ {rtol:g} (ours) once the O(h) Euler error is removed (Richardson)",
        detail=f"{kinks} of {len(flips)} probes left out: their step crosses a ReLU kink; "
        f"{sum(1 for x in steps if x < 1)} probes at a step below the run's h (down to "
        f"{min(steps, default=1):.3g}·h) to cross none; "
        "K = Σ_p J_p J_pᵀ from the closed-form implicit Jacobians; D_s = "
        "(ŷ(θ − s∇L) − ŷ(θ))/s, D_h the run's own step",
    )


@claim
def kernel_floor_check(
    lambda_mins: Sequence[float], sigmas: Sequence[float], *, width: int
) -> Statement:
    """Eq. (3.14): ``λ_min(K(t)) ≥ σ_min(Z(t))²`` at every probe; the value is the smallest
    ``λ_min(K)/σ_min(Z)²``."""
    found = [ratio(a, b * b, ">=") for a, b in zip(lambda_mins, sigmas, strict=True)]
    value = worst(found, ">=", 1.0)
    return HIEU.theorem(
        "Theorem 3.3.1, proof, Eq. (3.14)",
        name=f"Eq. (3.14): λ_min(K(t)) ≥ σ_min(Z(t))² along the run at n = {width}",
        quote="λ_min(K(t)) ≥ λ_min(Z(t)ᵀZ(t))",
        value=value,
        relation=">=",
        threshold=1.0,
        measured=f"min λ_min(K)/σ_min(Z)² = {number(value, 6)} over "
        f"{sum(v is not None for v in found)} probes "
        f"at n = {width}",
        expected="≥ 1 at every probe",
    )


#: Ours: the inner parameters count as learning features when they raise the kernel's
#: smallest eigenvalue by this share over the readout's ``σ_min(Z)²``.
FEATURE_SHARE = 0.01


@claim
def feature_learning_check(
    lambda_mins: Sequence[float], sigmas: Sequence[float], *, width: int
) -> Statement:
    """Ours: the flow is more than linear regression on u — A, B and U raise ``λ_min(K(t))``
    above ``σ_min(Z(t))²`` (the part of u alone, ``ZᵀZ``) by at least :data:`FEATURE_SHARE`
    at some probe. The value is the largest ``λ_min(K)/σ_min(Z)² − 1``. It tells how much a
    PASS of Theorem 3.3.1 says about training a DEQ rather than its output layer."""
    found = [
        a / b**2 - 1
        for a, b in zip(lambda_mins, sigmas, strict=True)
        if is_measured(a) and is_measured(b) and b > 0
    ]
    found += [None] * (len(lambda_mins) - len(found))  # a probe not measured
    value = worst(found, "<", FEATURE_SHARE)  # some probe ≥ the share: exists, by worst's dual
    return ours(
        f"A, B and U add to the kernel: the flow is not linear regression on u at n = {width}",
        value=value,
        relation=">=",
        threshold=FEATURE_SHARE,
        measured=f"max λ_min(K)/σ_min(Z)² − 1 = {number(value)} over "
        f"{sum(v is not None for v in found)} probes at "
        f"n = {width}",
        expected=f"≥ {FEATURE_SHARE:g} at some probe (ours)",
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

    def extended(self, value: float) -> FlowTrace:
        """The flow with one more shared time after its last (``t`` its last + 1) and one
        more probe, every measured quantity ``value``."""
        last = self.times[-1] if self.times else 0.0
        return replace(
            self,
            times=[*self.times, last + 1.0],
            loss_h=[*self.loss_h, value],
            loss_h2=[*self.loss_h2, value],
            bound=[*self.bound, value],
            sigmas=[*self.sigmas, value],
            distances={p: [*d, value] for p, d in self.distances.items()},
        )


@claim
def step_error_check(trace: FlowTrace, *, rtol: float) -> Statement:
    """Ours: Euler's error stays below ``rtol`` at every shared time ``t``.

    The error is ``|ln(L_h(t)/L_{h/2}(t))| / (1 + ln(L(0)/L_{h/2}(t)))`` (the ``h/2`` run's
    error to first order): at first the relative error of the loss, once the loss has
    decayed by many e-folds the relative error of their number — the exponent Theorem
    3.3.1 bounds. (The relative error of the loss itself grows like ``h λ² t`` along any
    exponential decay, however small ``h``.)
    """
    start = trace.loss_h2[0] if trace.loss_h2 else math.nan
    errors = [_step_error(a, b, start) for a, b in zip(trace.loss_h, trace.loss_h2, strict=True)]
    value = worst(errors, "<=", rtol)
    return ours(
        f"the flow's step-size error is below {rtol:g} at n = {trace.width}",
        value=value,
        relation="<=",
        threshold=rtol,
        measured=f"max_t |ln(L_h/L_(h/2))|/(1 + ln(L(0)/L_(h/2))) = {number(value)} over "
        f"{sum(e is not None for e in errors)} times at n = {trace.width}",
        expected=f"≤ {rtol:g}: else halve h",
    )


def _step_error(a: float, b: float, start: float) -> float | None:
    """The error of :func:`step_error_check` at losses ``a = L_h(t)``, ``b = L_{h/2}(t)``:
    inf where exactly one of the runs overflowed (they disagree beyond any bound), None
    where one is missing or not in (0, L(0)]."""
    if a == a and b == b and math.isinf(a) != math.isinf(b):
        return math.inf
    if is_measured(a) and is_measured(b) and a > 0 and 0 < b <= start:
        return abs(math.log(a / b)) / (1 + math.log(start / b))
    return None


@claim
def flow_rate_check(trace: FlowTrace) -> Statement:
    """Theorem 3.3.1's conclusion at the shared times ``t > 0``, on the flow's loss bounded
    from above by ``L_{h/2}(t) + |L_h(t) − L_{h/2}(t)|`` (the ``h/2`` run plus its
    estimated error); the value is the largest ratio of that to the bound."""
    found = [
        (ratio(b + abs(a - b), c, "<="), t)
        for t, a, b, c in zip(trace.times, trace.loss_h, trace.loss_h2, trace.bound, strict=True)
        if t > 0
    ]
    value = worst([r for r, _ in found], "<=", 1.0)
    at = max((t for r, t in found if r == value), default=0.0)
    return HIEU.theorem(
        "Theorem 3.3.1",
        name=f"Theorem 3.3.1: L(θ(t)) ≤ exp(−λ₀²t/2)·L(θ(0)) at n = {trace.width}",
        quote="L(θ(t)) ≤ exp{−λ_0² t/2} L(θ(0))",
        value=value,
        relation="<=",
        threshold=1.0,
        measured=f"max_t (L + step error)/bound = {number(value)} (t = {at:.3g}) at "
        f"n = {trace.width}",
        expected="≤ 1 at every t > 0",
        detail=f"λ₀² t/2 reaches {trace.lambda0**2 * max(trace.times, default=0) / 2:.3g} "
        "at the end of the run",
    )


@claim
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

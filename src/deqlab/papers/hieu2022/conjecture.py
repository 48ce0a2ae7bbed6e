"""Conjecture 1 of the thesis (Hieu 2022, Section 3.1) on one GD run: "Under suitable
conditions, optimizing DEQ model using (S)GD algorithm attain linear convergence rate".

The thesis leaves the conditions open and proves the conjecture for monotone DEQs under
Condition 2 (Theorem 3.3.5), so it is checked like a theorem under a hypothesis of ours, a
stable step size (:func:`stable_step_hypothesis`), and a linear rate is read on a finite run
by whether its decay settles (:func:`linear_share`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from deqlab.papers.hieu2022 import HIEU
from deqlab.statements import Statement, claim, is_measured, number, worst

#: Ours: Conjecture 1's "suitable conditions" include a stable step size, η·λ_max(K(0)) below
#: this (K of Eq. 3.7): GD on the linearised model ŷ(θ₀) + J(θ − θ₀) converges exactly then.
STABLE_STEP = 2.0
#: Ours: Conjecture 1's linear rate, read on a finite run — the decay of ln L per step over
#: the last quarter of the run keeps at least this share of that over the third quarter. A
#: linear rate, with one rate or several, settles on its slowest: the share tends to 1; a
#: power law L ∝ (k + k₀)^−p slows down for ever: the share tends to ln(4/3)/ln(3/2) = 0.71
#: once K ≫ k₀, whatever p.
LINEAR_SHARE = 0.85
#: Ours: below this share of L(0) the loss is rounding (float64 residuals to ~1e-10, squared):
#: the steps from the first one below it are not read.
LOSS_FLOOR = 1e-20


@claim
def stable_step_hypothesis(
    eta: float, kernel_max: float, gram_max: float, *, width: int
) -> Statement:
    """Ours, Conjecture 1's "suitable conditions": ``η·λ_max(K(0)) < 2`` (:data:`STABLE_STEP`),
    with ``kernel_max`` = λ_max(K(0)) of Eq. (3.7); the measured text also gives
    ``η·λ_max(Z(0)ᵀZ(0))`` (``gram_max``), the part of the output layer u alone."""
    value = eta * kernel_max
    times = f"{value / STABLE_STEP:.3g}" if is_measured(value) else "—"
    return HIEU.hypothesis(
        "Section 3.1, Conjecture 1: 'under suitable conditions' (ours: a stable step size)",
        name=f"Conjecture 1's suitable conditions (ours): a stable step size at n = {width}",
        value=value,
        relation="<",
        threshold=STABLE_STEP,
        measured=f"η·λ_max(K(0)) = {number(value)} (η·λ_max(Z(0)ᵀZ(0)) = "
        f"{number(eta * gram_max)}, the output layer u alone) at n = {width}",
        expected=f"η·λ_max(K(0)) < {STABLE_STEP:g}: GD on the linearised model converges "
        "(K = Σ_p J_p J_pᵀ of Eq. 3.7)",
        needs=f"η < 2/λ_max(K(0)) = {STABLE_STEP / kernel_max if kernel_max else math.inf:.3g}, "
        f"{times}× smaller than the run's",
    )


def linear_share(losses: Sequence[float]) -> tuple[float | None, str, int]:
    """The share of :data:`LINEAR_SHARE` on ``L(0), …, L(K)``, what it was read on, and how
    many losses are not measured (NaN) up to the first below ``LOSS_FLOOR·L(0)``.

    The run is read up to its last measured loss above ``LOSS_FLOOR·L(0)`` (a NaN inside the
    run or after that loss, where the run stopped being measured, is counted, not read);
    with ``Q₂ = K/2``, ``Q₃ = 3K/4`` the share is
    ``[ln(L(Q₃)/L(K))/(K − Q₃)] / [ln(L(Q₂)/L(Q₃))/(Q₃ − Q₂)]``, 0 when the loss did not
    fall over the third quarter or became infinite (diverged), None for a NaN at one of those
    steps or fewer than three steps to read.
    """
    if not losses or not is_measured(losses[0]) or losses[0] <= 0:
        return None, "L(0) is not a positive number", 0
    infinite = [k for k, x in enumerate(losses) if isinstance(x, float) and math.isinf(x)]
    if infinite:
        return 0.0, f"the loss diverged (infinite at step {infinite[0]})", 0
    floor = LOSS_FLOOR * losses[0]
    above = list(itertools.takewhile(lambda x: not (is_measured(x) and x <= floor), losses))
    missing = sum(not is_measured(x) for x in above)
    K = max(k for k, x in enumerate(above) if is_measured(x))  # the last loss read
    q2, q3 = K // 2, 3 * K // 4
    if not q2 < q3 < K:
        return None, f"{K + 1} steps above {LOSS_FLOOR:g}·L(0): too few to read a rate", missing
    ends = (above[q2], above[q3], above[K])
    read = f"L({q2}), L({q3}), L({K}) = {', '.join(number(x) for x in ends)}"
    if not all(is_measured(x) and x > 0 for x in ends):
        return None, read, missing
    third = math.log(ends[0] / ends[1]) / (q3 - q2)
    last = math.log(ends[1] / ends[2]) / (K - q3)
    return (last / third if third > 0 else 0.0), read, missing


@claim
def conjecture_1_check(
    losses: Sequence[float], *, width: int, given: Sequence[Statement] = ()
) -> Statement:
    """Conjecture 1 (Section 3.1), "under suitable conditions, optimizing DEQ model using (S)GD
    algorithm attain linear convergence rate", on one GD run: the loss keeps its rate of decay
    to the end of the run (:func:`linear_share` ≥ :data:`LINEAR_SHARE`, ours: a finite run's
    reading of a linear rate, with one rate or several). The thesis proves it for monotone
    DEQs under Condition 2 (Theorem 3.3.5), so it is checked like a theorem: NOT APPLICABLE
    where one of ``given`` (ours: :func:`stable_step_hypothesis`) is unmet. A loss not
    measured (inside the run or after it stopped) is a missing value beside the share: a
    failing share is FAIL, a passing one NOT MEASURED (:func:`~deqlab.statements.worst`)."""
    share, read, missing = linear_share(losses)
    value = worst([share, *[math.nan] * missing], ">=", LINEAR_SHARE)  # a NaN hides no failure
    return HIEU.theorem(
        "Section 3.1, Conjecture 1",
        name=f"Conjecture 1: GD converges at a linear rate at n = {width}",
        given=given,
        quote="Under suitable conditions, optimizing DEQ model using (S)GD algorithm attain "
        "linear convergence rate",
        value=value,
        relation=">=",
        threshold=LINEAR_SHARE,
        measured=f"decay of ln L per step, last quarter / third quarter = {number(share)}; "
        f"{read} (K = {len(losses) - 1}{f', {missing} losses not measured' if missing else ''}) "
        f"at n = {width}",
        expected=f"≥ {LINEAR_SHARE:g} (ours): the rate settles (a linear rate → 1; "
        "L ∝ k^−p → 0.71)",
    )

"""Conjecture 1 of the thesis (papers/hieu2022/conjecture.py) on constructed loss
trajectories: linear decay with one or several rates passes, power laws fail, a NaN hides no
failure, and an unstable step makes it NOT APPLICABLE."""

import math

import pytest

from deqlab.papers.hieu2022.conjecture import conjecture_1_check, stable_step_hypothesis
from deqlab.statements import Kind, Verdict

PASS, FAIL, NA, NM = Verdict.PASS, Verdict.FAIL, Verdict.NOT_APPLICABLE, Verdict.NOT_MEASURED
HOLDS, UNMET = Verdict.HOLDS, Verdict.UNMET


def _least_squares_losses(eigenvalues, eta, steps, residual=1.0):
    """L(k) = ½‖(I − ηH)^k r₀‖² of GD on ½‖Hθ‖-type least squares with Hessian eigenvalues
    ``eigenvalues`` and r₀ = ``residual`` along each: exactly linear, one rate per mode."""
    return [
        0.5 * sum((residual * (1 - eta * lam) ** k) ** 2 for lam in eigenvalues)
        for k in range(steps + 1)
    ]


def test_conjecture_1_passes_linear_decay_with_two_rates():
    """Eigenvalues 1 and 0.02 at η = 1: the first mode is gone after one step, the second
    decays at (0.98)² per step. The earlier reading (second half ≥ ½ first half of the decay
    of ln L) gave 0.446 and FAILed this exactly linear run."""
    losses = _least_squares_losses([1.0, 0.02], eta=1.0, steps=25)
    first, second = math.log(losses[12] / losses[0]), math.log(losses[25] / losses[12])
    assert second / first == pytest.approx(0.446, abs=1e-3)
    two_rates = conjecture_1_check(losses, width=8)
    assert two_rates.verdict is PASS and two_rates.value == pytest.approx(1.0)
    assert two_rates.kind is Kind.THEOREM and "linear convergence rate" in two_rates.source.quote
    both = conjecture_1_check(_least_squares_losses([0.3, 0.05], eta=1.0, steps=40), width=8)
    assert both.verdict is PASS and both.value == pytest.approx(1.0, abs=1e-4)
    # below 1e-20·L(0) the loss is rounding: a run that reaches it and stalls still passes
    floored = [max(x, 1e-31) for x in _least_squares_losses([0.9], eta=1.0, steps=40)]
    assert conjecture_1_check(floored, width=8).verdict is PASS


@pytest.mark.parametrize("power", [1, 2])
def test_conjecture_1_fails_a_sublinear_decay(power):
    """L ∝ (k + 1)^−p: the decay of ln L per step keeps shrinking, the share tends to
    ln(4/3)/ln(3/2) = 0.71 whatever p."""
    sublinear = conjecture_1_check([(k + 1.0) ** -power for k in range(26)], width=8)
    assert sublinear.verdict is FAIL and 0.65 < sublinear.value < 0.75
    long = conjecture_1_check([(k + 1.0) ** -power for k in range(4001)], width=8)
    assert long.value == pytest.approx(math.log(4 / 3) / math.log(3 / 2), abs=1e-3)


def test_conjecture_1_without_a_rate_to_read():
    assert conjecture_1_check([1.0, 0.5, 0.4, 0.5, 0.1], width=8).value == 0.0  # rose in Q3
    diverged = conjecture_1_check([1.0, 0.5, 2.0, math.inf], width=8)
    assert diverged.verdict is FAIL and "diverged (infinite at step 3)" in diverged.measured
    halving = [1.0, math.nan, 0.25, 0.125, 0.0625, 0.03125]  # passes, beside a NaN
    assert conjecture_1_check(halving, width=8).verdict is NM
    slowing = [1.0, math.nan, 0.5, 0.25, 0.2, 0.17]  # fails, beside a NaN
    assert conjecture_1_check(slowing, width=8).verdict is FAIL
    assert conjecture_1_check([1.0, 0.5, math.nan, 0.2, 0.1], width=8).verdict is NM
    assert conjecture_1_check([1.0, 0.5], width=8).verdict is NM


def test_conjecture_1_reads_the_run_up_to_where_it_stopped_being_measured():
    """Losses not measured after the run's last measured one (it stopped) are not read but
    counted: the rate read on the measured part decides a failure, and a pass beside them
    is NOT MEASURED."""
    tail = [math.nan] * 3
    sublinear = conjecture_1_check([(k + 1.0) ** -1 for k in range(21)] + tail, width=8)
    assert sublinear.verdict is FAIL and 0.65 < sublinear.value < 0.8
    assert "L(10), L(15), L(20)" in sublinear.measured and "3 losses not measured" in (
        sublinear.measured
    )
    linear = conjecture_1_check([0.5**k for k in range(21)] + tail, width=8)
    assert linear.verdict is NM and "L(10), L(15), L(20)" in linear.measured
    assert conjecture_1_check([0.5**k for k in range(21)], width=8).verdict is PASS


def test_conjecture_1_is_not_applicable_outside_a_stable_step_size():
    """Ours: "suitable conditions" include η·λ_max(K(0)) < 2; outside, NOT APPLICABLE with the
    quantity and by how much."""
    linear = _least_squares_losses([0.5], eta=1.0, steps=20)
    sublinear = [1 / (k + 1) for k in range(21)]
    stable = stable_step_hypothesis(1e-3, 1500.0, 1000.0, width=8)
    assert stable.verdict is HOLDS and stable.value == pytest.approx(1.5)
    assert "η·λ_max(Z(0)ᵀZ(0)) = 1, the output layer u alone" in stable.measured
    assert conjecture_1_check(linear, width=8, given=[stable]).verdict is PASS
    assert conjecture_1_check(sublinear, width=8, given=[stable]).verdict is FAIL
    unstable = stable_step_hypothesis(1e-3, 6840.0, 6840.0, width=8)
    assert unstable.verdict is UNMET and "η < 2/λ_max(K(0)) = 0.000292, 3.42× smaller" in (
        unstable.needs
    )
    outside = conjecture_1_check(sublinear, width=8, given=[unstable])
    assert outside.verdict is NA and outside.value is not None and "3.42×" in outside.needs
    unknown = stable_step_hypothesis(1e-3, math.nan, math.nan, width=8)
    assert conjecture_1_check(linear, width=8, given=[unknown]).verdict is NM

"""The practical stand-ins where a theorem cannot apply (ours: measurements, not guarantees).

From H(0) = JJᵀ, the Gauss–Newton curvature of Φ at θ(0) (∇²Φ ≈ JᵀJ, whose nonzero spectrum
is that of H; for the ReLU DEQ H1 + H2 + H3 of Eq. (4)), and the PL ratio
μ = ‖∇Φ‖²/(2Φ) = rᵀHr/rᵀr (Lemma 2):

- the step η_c = 1/λ_max(H(0)): GD on the quadratic model of Φ is stable for η < 2/λ_max,
  and the descent lemma's decrease Φ(τ+1) ≤ (1 − η(2 − ηλ_max)μ(τ))Φ(τ) is largest at
  η = 1/λ_max;
- the rate 1 − μ(0)/λ_max that the PL ratio measured at θ(0) predicts at η_c, and
  1 − λ_min(H(0))/λ_max, the rate for the residual's slowest direction (μ ≥ λ_min(H):
  Eq. (4));
- with training, the measured rate (Φ(T)/Φ(0))^(1/T) at the η trained with, and beside it
  what the descent lemma predicts at that η — from μ(0), and from μ(τ) along the run (its
  geometric mean over the steps, ∏(1 − η(2 − ηλ_max)μ(τ))^(1/T)). The prediction from
  μ(0) is valid only while μ(τ) stays near μ(0): the residual's fast directions (large
  rᵀHr/rᵀr) are spent in the first steps and μ falls, so the run is as slow as the
  directions left (:attr:`PLAlongRun.validity`: up to the first step with μ(τ) < μ(0)/2);
- the steps to a target loss at the measured rate and at the one predicted from μ(0).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

#: A target loss of this fraction of Φ(0) when none is given.
TARGET_FRACTION = 1e-3


@dataclass(frozen=True)
class PLAlongRun:
    """μ(τ) = ‖∇Φ(τ)‖²/(2Φ(τ)) over a run: at its start and end, its least (and where), the
    first step with μ(τ) < μ(0)/2 (None: none), and the rate ∏(1 − η(2 − ηλ_max)μ(τ))^(1/T)
    it predicts step by step."""

    start: float
    end: float
    least: float
    least_step: int
    fell_at: int | None
    rate: float

    @property
    def validity(self) -> str:
        """How long the prediction from μ(0) held, in words."""
        if self.fell_at is None:
            return "throughout the run: μ(τ) ≥ μ(0)/2 at every step"
        if self.fell_at <= 1:
            return "at θ(0) only: μ fell below μ(0)/2 at the first step"
        return f"up to step {self.fell_at - 1}: μ fell below μ(0)/2 at step {self.fell_at}"


@dataclass(frozen=True)
class StandIns:
    """The practical stand-ins of the module docstring (ours); None: not measured."""

    curvature: float | None
    eta: float | None
    pl_ratio: float | None
    rate_predicted: float | None
    rate_worst: float | None = None
    eta_trained: float | None = None
    rate_measured: float | None = None
    target_loss: float | None = None
    steps_measured_rate: float | None = None
    steps_predicted_rate: float | None = None
    rate_trained_predicted: float | None = None
    along: PLAlongRun | None = None

    def as_dict(self) -> dict[str, object]:
        return asdict(self)

    def lines(self) -> list[str]:
        """The stand-ins as terminal lines, each labelled ours."""
        if self.curvature is None:
            return []
        out = [
            f"ours: largest useful step from the measured curvature: η = 1/λ_max(H(0)) = "
            f"{self.eta:.3g} (stable below 2/λ_max = {2 * self.eta:.3g})",
            f"ours: the rate the measured PL ratio μ = ‖∇Φ(0)‖²/(2Φ(0)) = "
            f"{self.pl_ratio:.3g} predicts at that η: 1 − μ/λ_max = "
            f"{self.rate_predicted:.6g} per step"
            + (
                ""
                if self.rate_worst is None
                else f" (1 − λ_min(H(0))/λ_max = "
                f"{self.rate_worst:.6g} for the slowest direction of the residual)"
            ),
        ]
        if self.rate_measured is not None:
            out += self._training_lines()
        return [*out, "ours: these are measurements at θ(0), not guarantees of the papers"]

    def _training_lines(self) -> list[str]:
        eta = self.eta_trained
        out = [
            f"ours: measured rate (Φ(T)/Φ(0))^(1/T) at the η trained with ({eta:.3g}): "
            f"{self.rate_measured:.6g} per step",
        ]
        along = self.along
        if self.rate_trained_predicted is not None and along is not None:
            out.append(
                f"ours: predicted at that η by the descent lemma, 1 − η(2 − ηλ_max)μ: "
                f"{self.rate_trained_predicted:.6g} per step from μ(0), valid while μ(τ) stays "
                f"near μ(0) — {along.validity}; along the run μ(τ) = ‖∇Φ(τ)‖²/(2Φ(τ)) went "
                f"from {along.start:.3g} to {along.end:.3g} (least {along.least:.3g}, at step "
                f"{along.least_step}), and μ(τ) step by step predicts {along.rate:.6g} per step"
            )
        predicted = self.steps_predicted_rate
        out.append(
            f"ours: steps to Φ = {self.target_loss:.3g}: "
            f"{_steps(self.steps_measured_rate)} at the measured rate, {_steps(predicted)} at "
            "the rate predicted from μ(0)" + ("" if along is None else f", valid {along.validity}")
        )
        return out


def _steps(x: float | None) -> str:
    return "never (no decrease)" if x is None or not math.isfinite(x) else f"{math.ceil(x):,}"


def steps_to(loss0: float, target: float, rate: float | None) -> float | None:
    """log(target/Φ(0))/log(rate): the steps a linear rate takes from Φ(0) to ``target``."""
    if rate is None or not 0 < rate < 1 or loss0 <= 0:
        return None if rate is None else math.inf
    if target >= loss0:
        return 0.0
    return math.log(target / loss0) / math.log(rate)


def measured_rate(loss0: float, loss_T: float, steps: int) -> float | None:
    """(Φ(T)/Φ(0))^(1/T), the mean rate per step of a run (None without steps or a loss)."""
    if not steps or not loss0 > 0 or not loss_T >= 0:
        return None
    return (loss_T / loss0) ** (1 / steps)


def descent_rate(eta: float, curvature: float, mu: float) -> float:
    """1 − η(2 − ηλ_max)μ: the descent lemma's factor on Φ per step on the quadratic model
    with curvature λ_max and PL ratio μ (module docstring)."""
    return 1.0 - eta * (2.0 - eta * curvature) * mu


def pl_along(records: list[dict], eta: float, curvature: float) -> PLAlongRun | None:
    """:class:`PLAlongRun` from the records' ``loss`` (Φ) and ``grad_norm`` (‖∇Φ‖) over the
    steps τ < T (the last record has no step after it); None where fewer than two steps
    have both."""
    pairs = [
        (int(r["step"]), r["grad_norm"] ** 2 / (2.0 * r["loss"]))
        for r in records[:-1]
        if _finite(r.get("loss")) and _finite(r.get("grad_norm")) and r["loss"] > 0
    ]
    if len(pairs) < 2 or pairs[0][0] != 0:
        return None
    mu0 = pairs[0][1]
    fell_at = next((step for step, mu in pairs if mu < mu0 / 2), None)
    least_step, least = min(pairs, key=lambda p: p[1])
    factors = [descent_rate(eta, curvature, mu) for _, mu in pairs]
    rate = math.nan
    if all(f > 0 for f in factors):
        rate = math.exp(sum(math.log(f) for f in factors) / len(factors))
    return PLAlongRun(mu0, pairs[-1][1], least, least_step, fell_at, rate)


def _finite(x: object) -> bool:
    return isinstance(x, int | float) and math.isfinite(x)


def standins(numbers: dict, training: dict | None, target: float | None) -> StandIns:
    """:class:`StandIns` from the numbers (``curvature``, ``pl_ratio0``, ``loss0``, and
    ``H_lambda_min0`` where measured) and, with training, its measured rate and its records'
    PL ratio; ``target`` defaults to :data:`TARGET_FRACTION` Φ(0)."""
    top, mu = numbers.get("curvature"), numbers.get("pl_ratio0")
    if top is None or mu is None or not top > 0:
        return StandIns(None, None, None, None)
    bottom = numbers.get("H_lambda_min0")
    eta, rate = 1.0 / top, 1.0 - mu / top
    worst = None if bottom is None else 1.0 - bottom / top
    if training is None:
        return StandIns(top, eta, mu, rate, worst)
    loss0 = numbers["loss0"]
    target = TARGET_FRACTION * loss0 if target is None else target
    measured, trained = training.get("rate_measured"), training["eta"]
    at_trained = descent_rate(trained, top, mu)
    return StandIns(
        top,
        eta,
        mu,
        rate,
        worst,
        trained,
        measured,
        target,
        steps_to(loss0, target, measured),
        steps_to(loss0, target, at_trained),
        at_trained,
        pl_along(training.get("records") or [], trained, top),
    )

"""The hypotheses of Kawaguchi (2021)'s Corollaries 1–2 and Theorem 1's times, each measured
over every recorded DELM trajectory: γ ∈ (0, 1) (Eq. 4), the rank of Φ, the loss (through
the PL inequality with the corollary's κ, Definition 1), ‖B_t‖₁ < (1 − γ)R (Corollary 2),
κ > 0 (Eqs. 11–12), and the gradient flow (Eq. 6), of which our runs are the GD
discretization with the step η actually used.  Each takes the runs as :class:`Runs` (one
:class:`~deqlab.statements.Run` per trajectory, its step 0 the initialization); a value over
several runs and steps is the worst one (:func:`deqlab.statements.worst`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from deqlab.papers.kawaguchi2021 import KAWAGUCHI
from deqlab.statements import Run, Statement, claim, number, worst

#: The trajectories by key: their ``loss``, ``loss_star``, ``lambda_T``, the bounds,
#: ``b_norm1`` at each recorded step, and what was measured at step 0 (``rank_ratio``,
#: ``rank_tol``, ``pl_ratio``, ``kappa``, ``sharpness_start``, ``sharpness_end``).
Runs = Mapping[str, Run]


@dataclass(frozen=True)
class Corollary:
    """What differs between Corollaries 1 and 2: name, location, loss, κ, rank, radius."""

    name: str
    location: str
    loss: str
    kappa: str
    rank: str
    radius_hypothesis: bool


COROLLARY_1 = Corollary(
    "Corollary 1",
    "Corollary 1 (Section 3.1.3, Appendix A.3)",
    "the square loss ℓ(q, y) = ‖q − y‖² summed over the samples",
    "κ = 2σ_min(Φ)²",
    "min(n, m)",
    False,
)
COROLLARY_2 = Corollary(
    "Corollary 2",
    "Corollary 2 (Section 3.1.3, Appendix A.4)",
    "the logistic loss + τq² (τ ≥ 0, y ∈ {0, 1}) summed over the samples",
    "κ = (2τ + ρ(R))σ_min(Φ)²",
    "m",
    True,
)


@claim
def gamma_hypothesis(gamma: float) -> Statement:
    """γ ∈ (0, 1) (Eq. 4): σ(A) is column-stochastic, so γσ(A) contracts in ‖·‖₁."""
    return KAWAGUCHI.hypothesis(
        "Section 2.1, Eq. (4)",
        name="γ ∈ (0, 1)",
        value=gamma,
        relation="<",
        threshold=1.0,
        measured=f"γ = {gamma:g}",
        expected="γ < 1 (γ > 0 is checked by the config)",
        needs="γ < 1",
    )


@claim
def hypotheses(
    corollary: Corollary, runs: Runs, *, lr: float, gamma: float, radius: float = math.inf
) -> list[Statement]:
    """The corollary's hypotheses, each measured over every run of ``runs`` (R: Cor. 2)."""
    found = [
        gamma_hypothesis(gamma),
        _rank_hypothesis(corollary, runs),
        _pl_hypothesis(corollary, runs),
    ]
    if corollary.radius_hypothesis:
        found.append(_radius_hypothesis(runs, gamma, radius))
    return [*found, _flow_hypothesis(corollary, runs, lr)]


def _starts(runs: Runs, column: str) -> list[float]:
    """``column`` at each run's first step (measured once there); NaN where missing."""
    return [run[column][0] if run.steps else math.nan for run in runs.values()]


def recorded(runs: Runs, column: str) -> list[float]:
    """``column`` at every recorded step of every run."""
    return [v for run in runs.values() for v in run[column]]


def _rank_hypothesis(corollary: Corollary, runs: Runs) -> Statement:
    tol = worst(_starts(runs, "rank_tol"), "<")
    threshold = tol if tol is not None else 0.0
    value = worst(_starts(runs, "rank_ratio"), ">", threshold)
    return KAWAGUCHI.hypothesis(
        corollary.location,
        name=f"rank(Φ) = {corollary.rank}",
        value=value,
        relation=">",
        threshold=threshold,
        measured=f"smallest σ_r(Φ)/σ_1(Φ) over {count_runs(runs)} = {number(value, 4)}",
        expected=f"> max(n, m)·ε = {number(tol, 4)} (numerically of rank {corollary.rank})",
        needs=f"inputs whose feature matrix Φ has rank {corollary.rank} (generic inputs, at "
        "least m of them for rank m)",
    )


def _pl_hypothesis(corollary: Corollary, runs: Runs) -> Statement:
    value = worst(_starts(runs, "pl_ratio"), ">=", 1.0)
    return KAWAGUCHI.hypothesis(
        f"{corollary.location}; Definition 1 (PL inequality)",
        name=f"the loss is {corollary.loss}",
        value=value,
        relation=">=",
        threshold=1.0,
        measured=f"smallest ½‖∇L₀(Z₀)‖²/(κ(L₀(Z₀) − L*)) over {count_runs(runs)} = "
        f"{number(value, 4)}",
        expected=f"≥ 1: L₀ satisfies the PL inequality with {corollary.kappa} (what this loss "
        "gives), measured at each run's initial predictor Z₀ = B₀U₀⁻¹",
        needs=f"the loss of {corollary.name}, whose PL constant is {corollary.kappa}",
    )


def _radius_hypothesis(runs: Runs, gamma: float, radius: float) -> Statement:
    norms = recorded(runs, "b_norm1")
    value = worst(norms, "<", (1 - gamma) * radius)
    return KAWAGUCHI.hypothesis(
        COROLLARY_2.location,
        name="‖B_t‖₁ < (1 − γ)R for all t ∈ [0, T]",
        value=value,
        relation="<",
        threshold=(1 - gamma) * radius,
        measured=f"largest recorded ‖B_t‖₁ = {number(value, 4)} ({len(norms)} recorded steps)",
        expected=f"< (1 − γ)R = {(1 - gamma) * radius:g} (R = {radius:g})",
        needs="a larger radius R (with L*_R in place of L*)",
    )


def _flow_hypothesis(corollary: Corollary, runs: Runs, lr: float) -> Statement:
    ends = _starts(runs, "sharpness_start") + _starts(runs, "sharpness_end")
    sharpness = worst(ends, "<=", 1.0 / lr)
    value = None if sharpness is None else lr * sharpness
    needs = f"η ≤ {1 / sharpness:.3g} (1/λ_max at the measured λ_max)" if sharpness else ""
    return KAWAGUCHI.hypothesis(
        f"Eq. (6); {corollary.name} is stated for the gradient flow",
        name="gradient descent follows the gradient flow (Eq. 6)",
        value=value,
        relation="<=",
        threshold=1.0,
        measured=f"η·λ_max(∇²L) = {lr:g} × {number(sharpness, 4)} = {number(value, 4)} "
        f"(largest at the first and last parameters of {count_runs(runs)})",
        expected="≤ 1 (our criterion: by the descent lemma each step then decreases L by at "
        "least half of what the flow does over the same time η)",
        needs=needs,
    )


@claim
def kappa_hypothesis(runs: Runs, *, tau: float, radius: float) -> Statement:
    """κ = (2τ + ρ(R))σ_min(Φ)² > 0: with τ = 0 and R = ∞ Eqs. (11)–(12) give no time."""
    value = worst(_starts(runs, "kappa"), ">", 0.0)
    return KAWAGUCHI.hypothesis(
        "Section 3.1.3, Eqs. (11)–(12)",
        name="κ > 0 (τ > 0 for Eq. (11), R < ∞ for Eq. (12))",
        value=value,
        relation=">",
        threshold=0.0,
        measured=f"smallest κ over {count_runs(runs)} = {number(value, 4)} (τ = {tau:g}, "
        f"R = {radius:g})",
        expected="> 0",
        needs="τ > 0, or a finite radius R",
    )


def count_runs(runs: Runs) -> str:
    """ "3 runs", "1 run": how many runs a measured value was taken over."""
    return f"{len(runs)} run" + ("" if len(runs) == 1 else "s")

"""Figure 3: the run as the claims take it, and the figure.

The claims (:mod:`deqlab.papers.kawaguchi2021`): the paper's observation that the
initialization-dependent bound converges faster (Appendix D.2); Corollary 2 (radius R) with
both λ_T and Theorem 1's bound on λ_T, guarded by Corollary 2's hypotheses; Eq. (11)
(τ > 0, R = ∞) or Eq. (12) (τ = 0, R < ∞): the time to reach ε, guarded by the same
hypotheses and κ > 0.  For R < ∞ the gap is taken to L*_{0,R} = min_{‖W‖₁≤R} L₀(W) ≤ L*_R,
which Theorem 1's proof (Eq. 31) allows: a claim at least as strong as Eq. (12)'s.  Ours:
the trajectory reaches L* within ``optimum_rtol``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from deqlab.experiments.base import Row
from deqlab.experiments.kawaguchi2021.plots import plot_bounds, setting_subtitle
from deqlab.papers.kawaguchi2021 import KAWAGUCHI
from deqlab.papers.kawaguchi2021.corollaries import (
    accuracy_equation,
    corollary_checks,
    faster_rate_observation,
)
from deqlab.papers.kawaguchi2021.figure2 import Reach, reaches
from deqlab.papers.kawaguchi2021.hypotheses import COROLLARY_2, hypotheses, kappa_hypothesis
from deqlab.statements import Statement, runs_from_rows

if TYPE_CHECKING:
    from deqlab.experiments.kawaguchi2021.fig3 import Fig3Config

FASTER = KAWAGUCHI.source(
    "Appendix D.2, Figure 3",
    "the theoretical upper bound with initialization-dependent λT demonstrates a faster "
    "convergence rate",
)


def statements(config: Fig3Config, rows: list[Row]) -> list[Statement]:
    """The observation, Corollary 2's hypotheses and theorems, and ours."""
    runs = runs_from_rows(rows)
    run = next(iter(runs.values()), None)
    m, gamma = config.d, config.gamma
    guards = hypotheses(COROLLARY_2, runs, lr=config.lr, gamma=gamma, radius=config.radius)
    positive = kappa_hypothesis(runs, tau=config.tau, radius=config.radius)
    equation = accuracy_equation("logistic", config.tau, config.radius)
    return [
        faster_rate_observation(run, FASTER, m=m, gamma=gamma),
        *guards,
        positive,
        *corollary_checks(
            COROLLARY_2,
            runs,
            guards,
            m=m,
            gamma=gamma,
            lr=config.lr,
            equation=equation,
            eps_rel=config.epsilon,
            time_guards=[positive],
        ),
        reaches(run, Reach(config.steps, config.optimum_rtol)),
    ]


def plot(config: Fig3Config, rows: list[Row], directory: Path) -> list[Path]:
    import matplotlib.pyplot as plt  # imported here: spawned workers never plot

    from deqlab.report import figure_style, save_figure

    with figure_style():
        fig, ax = plt.subplots(figsize=(5.5, 4.6))
        plot_bounds(ax, rows)
        setting_subtitle(
            fig,
            f"Figure 3: logistic loss and Corollary 2's bounds (R = {config.radius:g})",
            f"Gaussian inputs, n = {config.n}, d = m = {config.d}, label noise "
            f"{config.label_noise:g}, inputs × {config.input_scale:g}, τ = {config.tau:g}; "
            f"γ = {config.gamma:g}; GD, η = {config.lr:g}",
        )
        return save_figure(fig, directory, "fig3")

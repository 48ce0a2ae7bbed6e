"""Appendix B: the sweeps as the claims take them
(:mod:`deqlab.papers.kawaguchi2021.appendix_b`), and the figure.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from deqlab.experiments.base import Row
from deqlab.experiments.kawaguchi2021.plots import legend_below, setting_subtitle
from deqlab.papers.kawaguchi2021.appendix_b import appendix_b
from deqlab.statements import Run, Statement

if TYPE_CHECKING:
    from deqlab.experiments.kawaguchi2021.appb import AppBConfig


def _states(rows: Sequence[Row]) -> dict[tuple[str, int], list[Row]]:
    """The sweep rows of each (task, step), sorted by γ."""
    found: dict[tuple[str, int], list[Row]] = {}
    for r in rows:
        found.setdefault((str(r["task"]), int(r["step"])), []).append(r)
    return {k: sorted(v, key=lambda r: float(r["sweep_gamma"])) for k, v in found.items()}


def states(rows: Sequence[Row]) -> dict[str, Run]:
    """One run per state (task, step) of the trajectories: its points the γ of the sweep."""
    return {
        f"{task}-{step}": Run.from_rows(
            f"{task}-{step}",
            [{**r, "point": i} for i, r in enumerate(sweep)],
            constants=("step",),
            labels=("task",),
            step="point",
        )
        for (task, step), sweep in _states(rows).items()
    }


def statements(config: AppBConfig, rows: list[Row]) -> list[Statement]:
    """Eq. (37), the three growth statements, and the Perron leading term (ours)."""
    return appendix_b(states(rows), tolerance=config.tolerance)


def plot(config: AppBConfig, rows: list[Row], directory: Path) -> list[Path]:
    """One panel per initialization: the three norms against 1/(1 − γ), at each step."""
    import matplotlib.pyplot as plt  # imported here: spawned workers never plot

    from deqlab.report import figure_style, save_figure

    by_state = _states(rows)
    tasks = sorted({task for task, _ in by_state})
    with figure_style():
        fig, axes = plt.subplots(1, max(len(tasks), 1), figsize=(11.0, 5.0), squeeze=False)
        styles = {
            "along": ("‖P₁ vec V‖ (along 1)", "-"),
            "rest": ("‖(I − P₁) vec V‖", "--"),
            "paper_rest": ("‖vec V + P₁r/(1 − γ)‖ (App. B's g_γ)", ":"),
        }
        for ax, task in zip(axes[0], tasks, strict=False):
            steps = sorted(step for t, step in by_state if t == task)
            for column, (label, line) in styles.items():
                for i, step in enumerate(steps):
                    sweep = by_state[(task, step)]
                    x = [1 / (1 - float(r["sweep_gamma"])) for r in sweep]
                    ax.loglog(
                        x,
                        [float(r[column]) for r in sweep],
                        line,
                        color=f"C{i}",
                        label=f"{label}, step {step}",
                    )
            ax.set(xlabel="1/(1 − γ)", ylabel="norm", title=f"A₀: {task}")
            legend_below(ax, ncol=2)
        setting_subtitle(
            fig,
            "Appendix B: Theorem 2's step along 1 and the rest as γ → 1",
            f"square loss, Gaussian inputs, n = {config.n}, d = m = {config.d}, m_y = 1; "
            f"trajectories at γ = {config.gamma:g}, GD η = {config.lr:g}; A_t, r_t held fixed",
        )
        return save_figure(fig, directory, "appb")

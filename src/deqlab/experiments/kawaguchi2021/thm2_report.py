"""Theorem 2: the trajectories as the claims take them
(:mod:`deqlab.papers.kawaguchi2021.theorem2`), and the figure.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from deqlab.experiments.base import Row
from deqlab.experiments.kawaguchi2021.plots import legend_below, setting_subtitle
from deqlab.papers.kawaguchi2021.theorem2 import theorem_2
from deqlab.statements import Run, Statement, runs_from_rows

if TYPE_CHECKING:
    from deqlab.experiments.kawaguchi2021.thm2 import Thm2Config

#: Where an exact 0 is drawn on the log axis.
FLOOR = 1e-18


def runs(rows: list[Row]) -> dict[str, Run]:
    """One run per (loss, δ_t/δ̄_t): its recorded steps."""
    keyed = [{**r, "run": f"{r['task']}-{r['delta_fraction']:g}"} for r in rows]
    return runs_from_rows(keyed, key="run", constants=("delta_fraction",), labels=("task", "loss"))


def statements(config: Thm2Config, rows: list[Row]) -> list[Statement]:
    """The three statements of Theorem 2 (:func:`theorem_2`)."""
    return theorem_2(runs(rows), tolerance=config.tolerance)


def plot(config: Thm2Config, rows: list[Row], directory: Path) -> list[Path]:
    """Relative gaps of Eq. (13) and of the multiplier per step, one curve per loss and δ."""
    import matplotlib.pyplot as plt  # imported here: spawned workers never plot
    from matplotlib.ticker import FuncFormatter

    from deqlab.report import add_reference_line, figure_style, save_figure

    with figure_style():
        fig, axes = plt.subplots(1, 2, figsize=(11.0, 4.8))
        panels = {
            "velocity_error": "(a) Eq. (13): d/dt f vs (1/δ)Vφ",
            "multiplier_error": "(b) KKT multiplier: |2μδ − 1|",
        }
        curves = sorted({(str(r["loss"]), float(r["delta_fraction"])) for r in rows})
        for ax, (column, title) in zip(axes, panels.items(), strict=True):
            for loss, fraction in curves:
                mine = [r for r in rows if r["loss"] == loss and r["delta_fraction"] == fraction]
                steps = [int(r["step"]) for r in mine]
                values = [max(float(r[column]), FLOOR) for r in mine]
                ax.plot(steps, values, marker="o", label=f"{loss}, δ = {fraction:g}·δ̄")
            ax.set_xscale("symlog", linthresh=1.0)  # linear up to 1, so step 0 shows
            ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
            ax.set_yscale("log")
            add_reference_line(ax, config.tolerance, "tolerance (ours)")
            ax.set(
                xlabel="# of iterations",
                ylabel="relative gap (exact 0 drawn at 10⁻¹⁸)",
                title=title,
            )
            legend_below(ax)
        setting_subtitle(
            fig,
            "Theorem 2: the DELM's flow is a trust-region Newton step",
            f"Gaussian inputs, n = {config.n}, d = m = {config.d}, m_y = 1; γ = "
            f"{config.gamma:g}; square loss and logistic loss (τ = {config.tau:g}); GD, "
            f"η = {config.lr:g}",
        )
        return save_figure(fig, directory, "thm2")

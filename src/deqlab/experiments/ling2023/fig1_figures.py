"""The figures of Figure 1 (Ling et al. 2023), one panel per data set, one line per width.

- ``loss``: Φ(τ) against the GD step, log scale; the Theorem 1 bound (1 − ηλ_0/2)^τ Φ(0)
  dashed beside each width for which Condition 1 holds;
- ``w_norm``: 1 − ‖W(τ)‖₂ (Lanczos, where measured) on a log axis: the widths' norms
  differ by a few thousandths, which a linear axis up to 1 would draw as one line;
- ``lambda_ratio``: λ_τ/λ_0 with the line at 1/2 (Theorem 1 (ii)).

Each panel's title gives the data set, n, d and η, the figure's title σ_w²; the legend
sits outside the panels, so no reference line is covered.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.axes import Axes

from deqlab.experiments.ling2023.fig1_report import WidthRun
from deqlab.report import add_reference_line, figure_style, save_figure, sequential_colors

Panel = Callable[[Axes, WidthRun, str], None]


def _loss(ax: Axes, run: WidthRun, color: str) -> None:
    ax.semilogy(run.steps, run.loss, color=color, label=f"m = {run.m}")
    if run.condition1 is not None and run.condition1.holds and run.lambda_0 > 0:
        ax.semilogy(
            run.steps,
            run.theorem1_bound(),
            color=color,
            linestyle="--",
            linewidth=1.0,
            label=f"Thm 1 (iii) bound, m = {run.m}",
        )


def _w_gap(ax: Axes, run: WidthRun, color: str) -> None:
    steps = [s for s, v in run.W_norm if v < 1]
    gaps = [1.0 - v for _, v in run.W_norm if v < 1]
    ax.semilogy(steps, gaps, "o-", markersize=2.5, color=color, label=f"m = {run.m}")


def _lambda_ratio(ax: Axes, run: WidthRun, color: str) -> None:
    if run.lambda_0 > 0:
        steps, values = zip(*run.lambda_min, strict=True)
        ax.plot(steps, [v / run.lambda_0 for v in values], color=color, label=f"m = {run.m}")


def _setting(runs: list[WidthRun]) -> str:
    run = runs[0]
    return f"{run.dataset}: n = {run.n}, d = {run.d}, η = {run.eta:.3g}"


def _figure(
    datasets: dict[str, list[WidthRun]],
    panel: Panel,
    title: str,
    ylabel: str,
    reference: tuple[float, str] | None,
    directory: Path,
    name: str,
) -> list[Path]:
    with figure_style():
        fig, axes = plt.subplots(
            1, len(datasets), figsize=(4.2 * len(datasets) + 1.6, 3.6), squeeze=False
        )
        for ax, runs in zip(axes[0], datasets.values(), strict=True):
            for run, color in zip(runs, sequential_colors(len(runs)), strict=True):
                panel(ax, run, color)
            if reference is not None:
                add_reference_line(ax, *reference)
            ax.set_title(_setting(runs), fontsize=9.5)
            ax.set_xlabel(r"GD step $\tau$")
            ax.set_ylabel(ylabel)
        handles, labels = axes[0, -1].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside right center")
        fig.suptitle(title)
        return save_figure(fig, directory, name)


def plot_fig1(datasets: dict[str, list[WidthRun]], sigma_w2: float, directory: Path) -> list[Path]:
    """Write the three figures; return their PNG and PDF paths."""
    setting = rf"full-batch GD, $\sigma_w^2$ = {sigma_w2:g}"
    fits = [
        r.m
        for runs in datasets.values()
        for r in runs
        if r.condition1 is not None and r.condition1.holds
    ]
    note = "" if fits else "\n(Condition 1 holds for no width: no Theorem 1 (iii) bound drawn)"
    return [
        *_figure(
            datasets,
            _loss,
            f"Training loss, {setting}{note}",
            r"loss $\Phi(\tau)$",
            None,
            directory,
            "loss",
        ),
        *_figure(
            datasets,
            _w_gap,
            rf"Distance of $\|W(\tau)\|_2$ from 1, {setting}",
            r"$1 - \|W(\tau)\|_2$",
            None,
            directory,
            "w_norm",
        ),
        *_figure(
            datasets,
            _lambda_ratio,
            rf"Least Gram eigenvalue, {setting}",
            r"$\lambda_\tau/\lambda_0$",
            (0.5, "1/2 (Theorem 1 (ii))"),
            directory,
            "lambda_ratio",
        ),
    ]

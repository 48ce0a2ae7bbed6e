"""The figures of Figure 1 (Ling et al. 2023), one panel per data set, one line per width.

- ``loss``: Φ(τ) against the GD step, log scale; the Theorem 1 bound (1 − ηλ_0/2)^τ Φ(0)
  dashed beside each width for which Condition 1 holds;
- ``w_norm``: ‖W(τ)‖₂ (Lanczos, where measured) with the line at 1 (well-posedness);
- ``lambda_ratio``: λ_τ/λ_0 with the line at 1/2 (Theorem 1 (ii)).
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
    if run.condition1 and run.lambda_0 > 0:
        ax.semilogy(run.steps, run.theorem1_bound(), color=color, linestyle="--", linewidth=1.0,
                    label=f"Thm 1 bound, m = {run.m}")  # fmt: skip


def _w_norm(ax: Axes, run: WidthRun, color: str) -> None:
    steps, values = zip(*run.W_norm, strict=True) if run.W_norm else ((), ())
    ax.plot(steps, values, color=color, label=f"m = {run.m}")


def _lambda_ratio(ax: Axes, run: WidthRun, color: str) -> None:
    if run.lambda_0 > 0:
        steps, values = zip(*run.lambda_min, strict=True)
        ax.plot(steps, [v / run.lambda_0 for v in values], color=color, label=f"m = {run.m}")


def _figure(
    datasets: dict[str, list[WidthRun]],
    panel: Panel,
    ylabel: str,
    reference: tuple[float, str] | None,
    directory: Path,
    name: str,
) -> list[Path]:
    with figure_style():
        fig, axes = plt.subplots(
            1, len(datasets), figsize=(4.2 * len(datasets), 3.4), squeeze=False
        )
        for ax, (dataset, runs) in zip(axes[0], datasets.items(), strict=True):
            for run, color in zip(runs, sequential_colors(len(runs)), strict=True):
                panel(ax, run, color)
            if reference is not None:
                add_reference_line(ax, *reference)
            note = "" if any(r.condition1 for r in runs) else " (Condition 1 fails for every m)"
            ax.set_title(dataset + (note if panel is _loss else ""))
            ax.set_xlabel(r"GD step $\tau$")
            ax.set_ylabel(ylabel)
            ax.legend()
        return save_figure(fig, directory, name)


def plot_fig1(datasets: dict[str, list[WidthRun]], directory: Path) -> list[Path]:
    """Write the three figures; return their PNG and PDF paths."""
    w_line = (1.0, r"$\|W\|_2 = 1$")
    half = (0.5, r"$\lambda_0/2$")
    return [
        *_figure(datasets, _loss, r"loss $\Phi(\tau)$", None, directory, "loss"),
        *_figure(datasets, _w_norm, r"$\|W(\tau)\|_2$", w_line, directory, "w_norm"),
        *_figure(datasets, _lambda_ratio, r"$\lambda_\tau/\lambda_0$", half, directory,
                 "lambda_ratio"),
    ]  # fmt: skip

"""Figures 1 and 4–8: the runs as the claims take them, and the figures.

:func:`runs` turns the tidy rows of :mod:`.fig1` into one
:class:`~deqlab.statements.Run` per (data set, model, learning rate, trial); the
observations of the figure ``config.figure`` reproduces are
:mod:`deqlab.papers.kawaguchi2021.figure1`'s, per data set, then the rank (ours, when the
training set is a sample).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import torch

from deqlab.experiments.base import Row
from deqlab.experiments.kawaguchi2021.plots import setting_subtitle
from deqlab.papers.kawaguchi2021.figure1 import (
    Choice,
    TrainingGrid,
    choices,
    figure_observations,
    full_rank,
    of_model,
)
from deqlab.statements import Run, Statement, runs_from_rows

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from deqlab.experiments.kawaguchi2021.fig1 import Fig1Config


def runs(rows: list[Row]) -> list[Run]:
    """One run per (data set, model, learning rate, trial): the recorded epochs."""
    found = runs_from_rows(
        [{**r, "run": f"{r['dataset']}-{r['model']}-t{r['trial']}-lr{r['lr']:g}"} for r in rows],
        key="run",
        constants=("lr", "trial", "train_rank"),
        labels=("dataset", "model"),
        step="epoch",
    )
    return list(found.values())


def grid(config: Fig1Config) -> TrainingGrid:
    return TrainingGrid(
        config.lrs, config.trials, config.epochs, config.record_every, config.depths
    )


def statements(config: Fig1Config, rows: list[Row]) -> list[Statement]:
    """Per data set, the observations of ``config.figure``; then the rank (ours)."""
    everything = runs(rows)
    found = []
    for dataset in config.datasets:
        mine = [r for r in everything if r.label("dataset") == dataset]
        found += figure_observations(config.figure, dataset, mine, grid(config))
    if config.n_train == 0:
        return found
    return [*found, full_rank(config.datasets, everything, n_train=config.n_train)]


def plot(config: Fig1Config, rows: list[Row], directory: Path) -> list[Path]:
    """One figure per data set: Linear vs DELM (top), DNNs vs DELM (bottom); test, train."""
    import matplotlib.pyplot as plt  # imported here: spawned workers never plot

    from deqlab.report import CATEGORICAL_COLORS, figure_style, save_figure

    readable = [c for c in CATEGORICAL_COLORS if c != "#F0E442"]  # no yellow on white

    paths: list[Path] = []
    with figure_style():
        for dataset in config.datasets:
            mine = [r for r in runs(rows) if r.label("dataset") == dataset]
            if not mine:  # its tasks failed (e.g. the data set is not installed)
                continue
            summary = choices(mine, grid(config))
            fig, axes = plt.subplots(2, 2, figsize=(11.5, 7.0))
            delm = [("DELM", "best"), ("DELM", "worst")]
            linear = [("Linear", "best"), ("Linear", "worst"), *delm]
            dnn = [*((m, "best") for m in summary if m.startswith("DNN")), *delm]
            colors = dict(zip(dict.fromkeys(linear + dnn), readable, strict=False))
            for row_axes, curves, title in ((axes[0], linear, "Linear"), (axes[1], dnn, "DNN")):
                for ax, column in zip(row_axes, ("test_loss", "train_loss"), strict=True):
                    for curve in curves:
                        _plot_mean_std(ax, mine, summary, *curve, column, colors[curve])
                    ax.set(xlabel="epoch", ylabel=column.replace("_", " "), yscale="log")
                    ax.set_title(f"{title} vs DELM")
                row_axes[1].legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8)
            bias = "" if config.dnn_bias else " (no bias)"
            sizes = (
                "all images"
                if config.n_train == 0
                else (f"n_train = {config.n_train}, n_test = {config.n_test}")
            )
            setting_subtitle(
                fig,
                f"Figure {config.figure}: DELM vs linear model vs ReLU DNNs{bias}, "
                f"{dataset} (teacher targets)",
                f"{sizes}, m_x = m = {config.m_x}, "
                f"γ = {config.gamma:g}; SGD: batch {config.batch_size}, momentum "
                f"{config.momentum:g}, {config.epochs} epochs; mean ± sd over {config.trials} "
                "trials",
            )
            paths += save_figure(fig, directory, f"fig{config.figure}-{dataset}")
    return paths


def _plot_mean_std(
    ax: Axes,
    runs: list[Run],
    summary: dict[str, Choice],
    model: str,
    which: str,
    column: str,
    color: str,
) -> None:
    """Mean ± one standard deviation over trials of ``column`` for the chosen lr."""
    choice = getattr(summary.get(model), which, None)
    if choice is None:
        return
    lr = choice[0]
    mine = of_model(runs, model, lr)
    epochs = list(mine[0].steps)
    values = torch.tensor([list(r[column]) for r in mine])  # (trials, records)
    mean, std = values.mean(dim=0), values.std(dim=0, correction=0)
    label = (
        f"{model} ({which}, lr {lr:g})" if model in ("DELM", "Linear") else f"{model} (lr {lr:g})"
    )
    ax.plot(epochs, mean, label=label, color=color)
    ax.fill_between(epochs, (mean - std).clamp_min(1e-12), mean + std, color=color, alpha=0.2)

"""``hieu2022-dynamics``: the statistics of its solver trajectories (tidy rows) that the
claims of :mod:`deqlab.papers.hieu2022.dynamics` take, the statements and the figures.

Observations of the thesis (Section 4.1), each quoted with its location:

- Section 4.1.1, Figs. 4.1–4.2: with the small initialisation the iterates ``z^[i]`` are
  steadier after the first step than with N(0, 1) — measured as the median over inputs of
  the mean relative residual (Eq. 4.2) over the solver steps ``i ≥ 1``;
- Section 4.1.2, Fig. 4.3: the dynamics become more complex during training — more solver
  steps at the last snapshot than before training (NOT MEASURED when the solver already
  used all ``max_iter`` evaluations before training);
- Section 4.1.2, Fig. 4.3: after the first epoch the classes move to different regions —
  the between/within-class spread of the final PCA points grows from epoch 0.

The last two are about trained models: NOT MEASURED when the model did not learn
(:func:`deqlab.papers.hieu2022.claims.untrained`).

Ours: the small initialisation needs fewer solver steps than N(0, 1), and its median final
relative residual meets ``tol``.

Figures: ``residuals`` (Fig. 4.1), ``pca_init`` (Fig. 4.2), ``pca_training`` (Fig. 4.3).
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from statistics import median
from typing import TYPE_CHECKING

import torch

from deqlab.experiments.base import Row
from deqlab.papers.hieu2022.claims import untrained
from deqlab.papers.hieu2022.dynamics import (
    apart,
    fewer_steps,
    final_residual,
    longer,
    steadier,
)
from deqlab.statements import Statement

if TYPE_CHECKING:
    from deqlab.experiments.hieu2022.dynamics import DynamicsConfig

Trajectories = dict[int, list[Row]]  # sample -> rows in step order


def trajectories(rows: list[Row], panel: str, key: str) -> dict[float, Trajectories]:
    """``{init_std or epoch: {sample: rows by step}}`` of ``panel``."""
    out: dict[float, Trajectories] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        if row["panel"] == panel:
            out[row[key]][int(row["sample"])].append(row)
    return {
        k: {s: sorted(v, key=lambda r: int(r["step"])) for s, v in samples.items()}
        for k, samples in sorted(out.items())
    }


def solver_steps(samples: Trajectories) -> int:
    """Number of points where the solver evaluated ``f`` (the same for every sample)."""
    return max(len(t) for t in samples.values())


def strict_median(values: list[float]) -> float:
    """The median, NaN unless every value is finite (a missing one leaves it unmeasured)."""
    if not values or not all(math.isfinite(v) for v in values):
        return math.nan
    return median(values)


def unsteadiness(samples: Trajectories) -> float:
    """Median over inputs of the mean relative residual over the solver steps ``i ≥ 1``
    (NaN when no input has a step after the first, or a residual is not finite)."""
    means = [
        sum(float(r["residual"]) for r in t[1:]) / (len(t) - 1) for t in samples.values() if t[1:]
    ]
    return strict_median(means)


def separation(samples: Trajectories) -> float:
    """Between-class over within-class spread of the final PCA points (Fisher ratio)."""
    finals = [t[-1] for t in samples.values()]
    points = torch.tensor([[float(r["pc1"]), float(r["pc2"])] for r in finals])
    labels = torch.tensor([int(r["label"]) for r in finals])
    centre = points.mean(0)
    between = within = 0.0
    for c in labels.unique():
        group = points[labels == c]
        between += len(group) * float(((group.mean(0) - centre) ** 2).sum())
        within += float(((group - group.mean(0)) ** 2).sum())
    return between / within if within > 0 else math.nan


def accuracy(rows: list[Row], epoch: int) -> float | None:
    """Training accuracy of ``epoch`` (None when the run has no row for it)."""
    found = [r["train_acc"] for r in rows if r["panel"] == "train" and r["epoch"] == epoch]
    return float(found[0]) if found else None


def statements(config: DynamicsConfig, rows: list[Row]) -> list[Statement]:
    """The statements of the module docstring."""
    return [*_initialisation(config, rows), *_training(config, rows)]


def _initialisation(config: DynamicsConfig, rows: list[Row]) -> list[Statement]:
    init = trajectories(rows, "init", "init_std")
    small, large = min(config.init_stds), max(config.init_stds)
    pair = {"small": small, "large": large}
    if small == large or small not in init or large not in init:
        why = "needs the trajectories of two initialisations"
        nan = math.nan
        return [
            steadier(nan, nan, **pair, why=why),
            fewer_steps(0, 0, **pair, max_iter=config.max_iter, why=why),
            final_residual(nan, **pair, tol=config.tol, why=why),
        ]
    final = strict_median([float(t[-1]["residual"]) for t in init[small].values()])
    return [
        steadier(unsteadiness(init[small]), unsteadiness(init[large]), **pair),
        fewer_steps(
            solver_steps(init[small]), solver_steps(init[large]), **pair, max_iter=config.max_iter
        ),
        final_residual(final, **pair, tol=config.tol),
    ]


def _training(config: DynamicsConfig, rows: list[Row]) -> list[Statement]:
    training = trajectories(rows, "training", "epoch")
    later = [e for e in training if e > 0]
    if 0 not in training or not later:
        why = "needs snapshots before and after training"
        return [
            longer(0, 0, last=0, max_iter=config.max_iter, why=why),
            apart(math.nan, math.nan, first=0, why=why),
        ]
    first, last = min(later), max(later)
    before, after = solver_steps(training[0]), solver_steps(training[last])
    return [
        longer(
            before,
            after,
            last=last,
            max_iter=config.max_iter,
            not_trained=untrained({f"epoch {last}": accuracy(rows, last)}),
        ),
        apart(
            separation(training[0]),
            separation(training[first]),
            first=first,
            not_trained=untrained({f"epoch {first}": accuracy(rows, first)}),
        ),
    ]


def _setting(config: DynamicsConfig, split: str) -> str:
    return (
        f"{config.dataset} {split} inputs, {config.n_traj} shown; cell channels "
        f"{config.channels}/{config.inner_channels}, Anderson tol {config.tol:g}, "
        f"max_iter {config.max_iter}"
    )


def _panels(groups, title: str, draw, subtitle: str, directory: Path, name: str):
    import matplotlib.pyplot as plt

    from deqlab.report import figure_style, save_figure

    with figure_style():
        fig, axes = plt.subplots(1, len(groups), figsize=(4.2 * len(groups), 4.0), squeeze=False)
        for ax, (key, samples) in zip(axes[0], groups.items(), strict=True):
            for sample_rows in samples.values():
                draw(ax, sample_rows)
            ax.set_title(title.format(key))
        handles, labels = axes[0][0].get_legend_handles_labels()
        unique = dict(zip(labels, handles, strict=True))
        fig.legend(unique.values(), unique.keys(), loc="outside lower center", ncol=6)
        fig.suptitle(subtitle, fontsize=10)
        return save_figure(fig, directory, name)


def _residual(tol: float):
    def draw(ax, rows: list[Row]) -> None:
        ax.semilogy(
            [int(r["step"]) for r in rows],
            [float(r["residual"]) for r in rows],
            linewidth=0.7,
            alpha=0.7,
        )
        if not ax.get_legend_handles_labels()[1]:
            ax.axhline(tol, color="0.35", linestyle="--", linewidth=1.0, label="tol", zorder=1)
        ax.set(xlabel="solver step i", ylabel="relative residual (Eq. 4.2)")

    return draw


def _pca(colored: bool):
    import matplotlib

    classes = matplotlib.colormaps["tab10"]  # ten classes, ten colours

    def draw(ax, rows: list[Row]) -> None:
        label = int(rows[0]["label"])
        color = classes(label % 10) if colored else "0.3"
        x, y = [float(r["pc1"]) for r in rows], [float(r["pc2"]) for r in rows]
        ax.plot(
            x,
            y,
            linewidth=0.7,
            alpha=0.8,
            color=color,
            marker=".",
            markersize=2,
            label=f"class {label}" if colored else "z^[i], one input",
        )
        ax.plot(
            x[-1:],
            y[-1:],
            marker="o",
            markersize=4,
            linestyle="",
            color="k",
            label="last iterate z^[K]",
        )
        ax.plot(
            x[:1],
            y[:1],
            marker="o",
            markersize=7,
            linestyle="",
            markerfacecolor="none",
            color="k",
            label="start z^[0] = 0",
        )
        ax.set(xlabel="PC 1", ylabel="PC 2")

    return draw


def plot(config: DynamicsConfig, rows: list[Row], directory: Path) -> list[Path]:
    """Write Figures 4.1–4.3; return their files."""
    init = trajectories(rows, "init", "init_std")
    training = trajectories(rows, "training", "epoch")
    test, train = _setting(config, "test"), _setting(config, "training")
    trained = f"{train}; init N(0, {config.train_std:g}), Adam lr {config.lr:g}"
    return [
        *_panels(init, "init N(0, {:g})", _residual(config.tol), test, directory, "residuals"),
        *_panels(init, "init N(0, {:g})", _pca(False), test, directory, "pca_init"),
        *_panels(training, "after epoch {}", _pca(True), trained, directory, "pca_training"),
    ]

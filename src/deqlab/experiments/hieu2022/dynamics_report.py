"""Claims and figures of ``hieu2022-dynamics``, computed from its tidy rows.

Claims (thesis, Section 4.1):

- the small initialisation needs fewer solver steps than N(0, 1) (Fig. 4.1);
- with the small initialisation the median final relative residual meets ``tol``;
- training makes the forward dynamics longer: more solver steps at the last snapshot than
  before training (Section 4.1.2, as in Bai et al. 2021);
- the classes separate in the PCA plane during training: the ratio of between-class to
  within-class spread of the final states grows (Fig. 4.3).

Figures: ``residuals`` (Fig. 4.1), ``pca_init`` (Fig. 4.2), ``pca_training`` (Fig. 4.3).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from statistics import median

import torch

from deqlab.experiments.base import Claim, Row

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
    return between / within if within > 0 else float("inf")


def dynamics_claims(config, rows: list[Row]) -> list[Claim]:
    """The named checks of the module docstring."""
    init = trajectories(rows, "init", "init_std")
    small, large = min(init), max(init)
    steps = {s: solver_steps(t) for s, t in init.items()}
    final = median(float(t[-1]["residual"]) for t in init[small].values())
    training = trajectories(rows, "training", "epoch")
    first, last = min(training), max(training)
    length = {e: solver_steps(t) for e, t in training.items()}
    spread = {e: separation(t) for e, t in training.items()}
    return [
        Claim(
            f"N(0, {small:g}) init needs fewer solver steps than N(0, {large:g}) (Fig. 4.1)",
            steps[small] < steps[large],
            f"{steps[small]} vs {steps[large]} steps",
            "fewer with the small initialisation",
        ),
        Claim(
            f"N(0, {small:g}) init: the median final relative residual meets tol",
            final <= config.tol,
            f"median final residual {final:.3g}",
            f"<= tol = {config.tol:g}",
        ),
        Claim(
            "training lengthens the forward dynamics (more solver steps)",
            length[last] > length[first],
            f"epoch {first}: {length[first]} steps, epoch {last}: {length[last]} steps",
            "more steps after training",
        ),
        Claim(
            "classes separate in the PCA plane during training (Fig. 4.3)",
            spread[last] > spread[first],
            f"between/within spread: epoch {first}: {spread[first]:.3g}, "
            f"epoch {last}: {spread[last]:.3g}",
            "larger after training",
        ),
    ]


def _panels(groups: dict[float, Trajectories], title: str, draw, directory: Path, name: str):
    import matplotlib.pyplot as plt

    from deqlab.report import figure_style, save_figure

    with figure_style():
        fig, axes = plt.subplots(1, len(groups), figsize=(4.2 * len(groups), 3.6), squeeze=False)
        for ax, (key, samples) in zip(axes[0], groups.items(), strict=True):
            for sample_rows in samples.values():
                draw(ax, sample_rows)
            ax.set_title(title.format(key))
        return save_figure(fig, directory, name)


def _residual(ax, rows: list[Row]) -> None:
    ax.semilogy([int(r["step"]) for r in rows], [float(r["residual"]) for r in rows],
                linewidth=0.7, alpha=0.7)  # fmt: skip
    ax.set(xlabel="solver step i", ylabel="relative residual (Eq. 4.2)")


def _pca(colored: bool):
    def draw(ax, rows: list[Row]) -> None:
        color = f"C{int(rows[0]['label'])}" if colored else None
        x, y = [float(r["pc1"]) for r in rows], [float(r["pc2"]) for r in rows]
        ax.plot(x, y, linewidth=0.7, alpha=0.8, color=color, marker=".", markersize=2)
        ax.plot(x[-1:], y[-1:], marker="o", markersize=4, color=color or "k")
        ax.set(xlabel="PC 1", ylabel="PC 2")

    return draw


def plot_dynamics(config, rows: list[Row], directory: Path) -> list[Path]:
    """Write Figures 4.1–4.3; return their files."""
    init = trajectories(rows, "init", "init_std")
    training = trajectories(rows, "training", "epoch")
    return [
        *_panels(init, "init N(0, {:g})", _residual, directory, "residuals"),
        *_panels(init, "init N(0, {:g})", _pca(False), directory, "pca_init"),
        *_panels(training, "after epoch {}", _pca(True), directory, "pca_training"),
    ]

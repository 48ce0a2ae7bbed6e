"""Statements and figures of ``hieu2022-dynamics``, computed from its tidy rows.

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
from deqlab.papers import HIEU
from deqlab.papers.hieu2022.claims import untrained
from deqlab.statements import DEQLAB, Kind, Source, Statement, ours

if TYPE_CHECKING:
    from deqlab.experiments.hieu2022.dynamics import DynamicsConfig

Trajectories = dict[int, list[Row]]  # sample -> rows in step order

STEADY = HIEU.source(
    "Section 4.1.1, Figs. 4.1–4.2",
    "the sequence of z^[i] is more chaos in the normal initialization setting while in small "
    "initialization, z^[i] stay quite steady after the first step",
)
COMPLEX = HIEU.source(
    "Section 4.1.2, Fig. 4.3",
    "the dynamic of DEQ becomes more complex during training, which can be interpreted as the "
    "model becoming deeper and more complex",
)
CLASSES = HIEU.source(
    "Section 4.1.2, Fig. 4.3",
    "After the first epoch, one can see from Fig. 4.3 that the hidden states of DEQ "
    "corresponding to different classes are moved to a different region of the space",
)


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


def unsteadiness(samples: Trajectories) -> float:
    """Median over inputs of the mean relative residual over the solver steps ``i ≥ 1``
    (NaN when no input has a step after the first)."""
    means = [
        sum(float(r["residual"]) for r in t[1:]) / (len(t) - 1) for t in samples.values() if t[1:]
    ]
    return median(means) if means else math.nan


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


def _not_measured(source: Source, name: str, expected: str, why: str) -> Statement:
    """The observation of the thesis at ``source``, NOT MEASURED because ``why``."""
    return HIEU.not_measured(
        Kind.OBSERVATION, source.location, quote=source.quote, name=name, expected=expected, why=why
    )


def _initialisation(config: DynamicsConfig, rows: list[Row]) -> list[Statement]:
    init = trajectories(rows, "init", "init_std")
    small, large = min(config.init_stds), max(config.init_stds)
    names = (
        f"z^[i] steadier after the first step with N(0, {small:g}) than N(0, {large:g})",
        f"N(0, {small:g}) init needs fewer solver steps than N(0, {large:g})",
        f"N(0, {small:g}) init: the median final relative residual meets tol",
    )
    if small == large or small not in init or large not in init:
        why = "needs the trajectories of two initialisations"
        return [
            _not_measured(STEADY, names[0], "ratio < 1", why),
            DEQLAB.not_measured(Kind.OURS, "", name=names[1], expected="fewer steps", why=why),
            DEQLAB.not_measured(
                Kind.OURS, "", name=names[2], expected=f"≤ {config.tol:g}", why=why
            ),
        ]
    chaos = {s: unsteadiness(init[s]) for s in (small, large)}
    ratio = chaos[small] / chaos[large] if chaos[large] > 0 else math.nan
    steps = {s: solver_steps(init[s]) for s in (small, large)}
    final = median(float(t[-1]["residual"]) for t in init[small].values())
    return [
        HIEU.observation(
            STEADY.location,
            quote=STEADY.quote,
            name=names[0],
            value=ratio,
            relation="<",
            threshold=1.0,
            measured=f"median mean residual over steps i ≥ 1: {chaos[small]:.3g} with "
            f"N(0, {small:g}), {chaos[large]:.3g} with N(0, {large:g})",
            expected="ratio small/large < 1",
        ),
        ours(
            names[1],
            value=steps[small],
            relation="<",
            threshold=steps[large],
            measured=f"{steps[small]} vs {steps[large]} evaluations of f",
            expected=f"fewer with N(0, {small:g}) (max_iter = {config.max_iter})",
        ),
        ours(
            names[2],
            value=final,
            relation="<=",
            threshold=config.tol,
            measured=f"median final residual {final:.3g}",
            expected=f"≤ tol = {config.tol:g}",
        ),
    ]


def _training(config: DynamicsConfig, rows: list[Row]) -> list[Statement]:
    training = trajectories(rows, "training", "epoch")
    later = [e for e in training if e > 0]
    complex_name = "training makes the forward dynamics longer (more solver steps)"
    classes_name = "after the first epoch the classes move apart in the PCA plane"
    if 0 not in training or not later:
        why = "needs snapshots before and after training"
        return [
            _not_measured(COMPLEX, complex_name, "more", why),
            _not_measured(CLASSES, classes_name, "larger", why),
        ]
    first, last = min(later), max(later)
    return [
        _longer(config, training, last, untrained({f"epoch {last}": accuracy(rows, last)})),
        _apart(training, first, untrained({f"epoch {first}": accuracy(rows, first)})),
    ]


def _longer(
    config: DynamicsConfig, training: dict[float, Trajectories], last: int, not_trained: str
) -> Statement:
    name = "training makes the forward dynamics longer (more solver steps)"
    before, after = solver_steps(training[0]), solver_steps(training[last])
    expected = f"more evaluations of f after epoch {last} than before training"
    if not_trained:
        return _not_measured(COMPLEX, name, expected, not_trained)
    if before >= config.max_iter:
        why = f"the solver already used all max_iter = {config.max_iter} evaluations at epoch 0"
        return _not_measured(COMPLEX, name, expected, why)
    return HIEU.observation(
        COMPLEX.location,
        quote=COMPLEX.quote,
        name=name,
        value=after,
        relation=">",
        threshold=before,
        measured=f"epoch 0: {before}, epoch {last}: {after} evaluations of f",
        expected=expected,
    )


def _apart(training: dict[float, Trajectories], first: int, not_trained: str) -> Statement:
    name = "after the first epoch the classes move apart in the PCA plane"
    expected = f"between/within-class spread of the last iterates larger at epoch {first}"
    if not_trained:
        return _not_measured(CLASSES, name, expected, not_trained)
    before, after = separation(training[0]), separation(training[first])
    return HIEU.observation(
        CLASSES.location,
        quote=CLASSES.quote,
        name=name,
        value=after,
        relation=">",
        threshold=before,
        measured=f"between/within spread: epoch 0: {before:.3g}, epoch {first}: {after:.3g}",
        expected=expected,
    )


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

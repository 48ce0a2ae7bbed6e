"""Figure 1's statements and figures, read from the tidy rows of :mod:`.fig1`.

The paper's observations (Section 2.2, Figure 1), per data set: all models start at about
the same test loss, and after training the DELM (at its best learning rate) has a lower
test loss than the linear model and every DNN (each at its best learning rate).  Best
and worst learning rates are chosen among those whose runs all finished, by the mean
final test loss over trials (Section 2.2).  Ours: rank(Φ_train) = n_train on every data
set, the interpolation regime of the paper's 200-point design (a stand-in of lower rank,
such as sklearn's 8×8 digits with 100 points, fails it).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from deqlab.experiments.base import Row
from deqlab.experiments.kawaguchi2021.plots import setting_subtitle
from deqlab.statements import OURS, Kind, Source, Statement, is_measured, measure, not_measured

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from deqlab.experiments.kawaguchi2021.fig1 import Fig1Config

#: "Approximately the same" read as: the largest mean initial test loss is at most this
#: factor times the smallest (ours: the paper gives no number).
INITIAL_FACTOR = 2.0
SAME_START = Source(
    "kawaguchi2021", "Section 2.2, Figure 1",
    "all models preformed approximately the same at initial points",
)  # fmt: skip
OUTPERFORM = Source(
    "kawaguchi2021", "Section 2.2, Figure 1",
    "deep equilibrium linear models outperformed both linear models and DNNs in test errors "
    "after training",
)  # fmt: skip


def statements(config: Fig1Config, rows: list[Row]) -> list[Statement]:
    """Per data set: the same start, and the DELM's lower final test loss than each model."""
    found = []
    for dataset in config.datasets:
        mine = [r for r in rows if r["dataset"] == dataset]
        found.append(_same_start(config, dataset, mine))
        summary = final_test_losses(config, mine)
        others = ["Linear", *(f"DNN-H{h}" for h in config.depths)]
        found += [_outperforms(config, dataset, summary, model) for model in others]
    return [*found, _full_rank(config, rows)]


def _full_rank(config: Fig1Config, rows: list[Row]) -> Statement:
    """min over data sets of rank(Φ_train)/n_train ≥ 1 (ours)."""
    name = "rank(Φ_train) = n_train on every data set (interpolation regime)"
    expected = "rank(Φ_train)/n_train ≥ 1 on every data set"
    ranks: dict[str, object] = {}
    for r in rows:
        ranks.setdefault(str(r["dataset"]), r.get("train_rank"))
    missing = [d for d in config.datasets if not is_measured(ranks.get(d))]
    if missing:
        return not_measured(name, Kind.OURS, OURS, expected=expected,
                            why=f"no rank recorded for {', '.join(missing)}")  # fmt: skip
    worst = min(config.datasets, key=lambda d: float(ranks[d]))
    value = float(ranks[worst]) / config.n_train
    return measure(
        name, Kind.OURS, OURS, value=value, relation=">=", threshold=1.0,
        measured=f"smallest rank(Φ_train)/n_train = {ranks[worst]}/{config.n_train} ({worst}); "
        + ", ".join(f"{d} {ranks[d]}" for d in config.datasets),
        expected=expected,
        detail="Φ_train = R X_pre (m_x × n_train): below full rank the models cannot "
        "interpolate the training points, which the 200-point design relies on (Appendix D.2)",
    )  # fmt: skip


def _same_start(config: Fig1Config, dataset: str, rows: list[Row]) -> Statement:
    starts: dict[str, list[float]] = {}
    for r in rows:
        if int(r["epoch"]) == 0 and r["lr"] == config.lrs[0]:
            starts.setdefault(str(r["model"]), []).append(float(r["test_loss"]))
    means = {m: sum(v) / len(v) for m, v in starts.items()}
    finite = means and all(is_measured(v) and v > 0 for v in means.values())
    value = max(means.values()) / min(means.values()) if finite else None
    shown = ", ".join(f"{m} {v:.4g}" for m, v in means.items())
    return measure(
        f"{dataset}: all models start at about the same test loss", Kind.OBSERVATION,
        SAME_START, value=value, relation="<=", threshold=INITIAL_FACTOR,
        measured=f"largest/smallest mean initial test loss = "
        f"{'—' if value is None else f'{value:.3g}'} ({shown or 'no rows'})",
        expected=f"≤ {INITIAL_FACTOR:g}",
        detail=f"mean over {config.trials} trials at epoch 0; the factor {INITIAL_FACTOR:g} is "
        "our reading of 'approximately the same'",
    )  # fmt: skip


def _outperforms(config: Fig1Config, dataset: str, summary: dict, model: str) -> Statement:
    name = f"{dataset}: the DELM ends with a lower test loss than {model} (best lrs)"
    expected = "DELM / other < 1 (final test loss, each at its best learning rate)"
    delm, other = summary.get("DELM", {}).get("best"), summary.get(model, {}).get("best")
    if delm is None or other is None:
        missing = "DELM" if delm is None else model
        return not_measured(name, Kind.OBSERVATION, OUTPERFORM, expected=expected,
                            why=f"no learning rate of {missing} finished all trials")  # fmt: skip
    (delm_lr, delm_loss), (lr, loss) = delm, other
    return measure(
        name, Kind.OBSERVATION, OUTPERFORM, value=delm_loss / loss, relation="<", threshold=1.0,
        measured=f"DELM {delm_loss:.4g} (lr {delm_lr:g}) / {model} {loss:.4g} (lr {lr:g}) = "
        f"{delm_loss / loss:.3g}", expected=expected,
        detail=f"mean over {config.trials} trials at epoch {config.epochs}; diverged runs: "
        f"{summary[model]['diverged']} ({model}), {summary['DELM']['diverged']} (DELM)",
    )  # fmt: skip


def final_test_losses(config: Fig1Config, rows: list[Row]) -> dict[str, dict]:
    """Per model: the best and worst (lr, mean final test loss) among the lrs whose runs all
    reached the last epoch with a finite loss, and the number of diverged runs."""
    summary: dict[str, dict] = {}
    for model in dict.fromkeys(r["model"] for r in rows):
        finals: dict[float, list[float]] = {}
        diverged = 0
        for lr in config.lrs:
            for trial in range(config.trials):
                run = [
                    r for r in rows if r["model"] == model and r["lr"] == lr and r["trial"] == trial
                ]
                last = run[-1] if run else None
                finished = last is not None and last["epoch"] == config.epochs
                if finished and is_measured(last["test_loss"]):
                    finals.setdefault(lr, []).append(float(last["test_loss"]))
                else:
                    diverged += last is not None
                    finals.setdefault(lr, []).append(math.inf)
        means = {lr: sum(v) / len(v) for lr, v in finals.items() if all(map(math.isfinite, v))}
        best = min(means.items(), key=lambda kv: kv[1]) if means else None
        worst = max(means.items(), key=lambda kv: kv[1]) if means else None
        summary[str(model)] = {"best": best, "worst": worst, "diverged": diverged}
    return summary


def plot(config: Fig1Config, rows: list[Row], directory: Path) -> list[Path]:
    """One figure per data set: Linear vs DELM (top), DNNs vs DELM (bottom); test, train."""
    import matplotlib.pyplot as plt  # imported here: spawned workers never plot

    from deqlab.report import CATEGORICAL_COLORS, figure_style, save_figure

    readable = [c for c in CATEGORICAL_COLORS if c != "#F0E442"]  # no yellow on white

    paths: list[Path] = []
    with figure_style():
        for dataset in config.datasets:
            mine = [r for r in rows if r["dataset"] == dataset]
            if not mine:  # its tasks failed (e.g. the data set is not installed)
                continue
            summary = final_test_losses(config, mine)
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
            setting_subtitle(
                fig, f"Figure 1: DELM vs linear model vs ReLU DNNs, {dataset} (teacher targets)",
                f"n_train = {config.n_train}, n_test = {config.n_test}, m_x = m = {config.m_x}, "
                f"γ = {config.gamma:g}; SGD: batch {config.batch_size}, momentum "
                f"{config.momentum:g}, {config.epochs} epochs; mean ± sd over {config.trials} "
                "trials",
            )  # fmt: skip
            paths += save_figure(fig, directory, f"fig1-{dataset}")
    return paths


def _plot_mean_std(
    ax: Axes, rows: list[Row], summary: dict, model: str, which: str, column: str, color: str
) -> None:
    """Mean ± one standard deviation over trials of ``column`` for the chosen lr."""
    choice = summary.get(model, {}).get(which)
    if choice is None:
        return
    lr = choice[0]
    runs = [[r for r in rows if r["model"] == model and r["lr"] == lr and r["trial"] == t]
            for t in dict.fromkeys(r["trial"] for r in rows)]  # fmt: skip
    epochs = [r["epoch"] for r in runs[0]]
    values = torch.tensor([[float(r[column]) for r in run] for run in runs])  # (trials, records)
    mean, std = values.mean(dim=0), values.std(dim=0, correction=0)
    label = (
        f"{model} ({which}, lr {lr:g})" if model in ("DELM", "Linear") else f"{model} (lr {lr:g})"
    )
    ax.plot(epochs, mean, label=label, color=color)
    ax.fill_between(epochs, (mean - std).clamp_min(1e-12), mean + std, color=color, alpha=0.2)

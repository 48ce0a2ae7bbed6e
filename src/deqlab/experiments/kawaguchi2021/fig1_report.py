"""Figures 1 and 4–8's statements and figures, read from the tidy rows of :mod:`.fig1`.

The paper's observations, per data set, quoted for the figure ``config.figure`` reproduces
(:data:`OBSERVATIONS`): all models start at about the same test loss (Figures 1, 4); after
training the DELM (at its best learning rate) has a lower test loss than the linear model
(Figures 1, 4, 8) and every DNN (all), each at its best learning rate; with the deeper
DNNs (Figures 6–7) the DNNs reduce the training loss faster than the DELM, and the
depths H ≥ 100 show gradient explosion or vanishing (at some learning rate: the paper
says "we experienced" them, not that these depths never train).  Best and worst learning
rates are chosen among those whose runs all finished, by the mean final test loss over
trials (Section 2.2).  Ours: rank(Φ_train) = n_train on every data set, the interpolation
regime of the 200-point design (Figures 1, 4–7; a stand-in of lower rank, such as
sklearn's 8×8 digits with 100 points, fails it).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from deqlab.experiments.base import Row
from deqlab.experiments.kawaguchi2021.plots import setting_subtitle
from deqlab.papers import KAWAGUCHI
from deqlab.statements import OURS, Kind, Source, Statement, is_measured, not_measured, ours

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from deqlab.experiments.kawaguchi2021.fig1 import Fig1Config

#: "Approximately the same" read as: the largest mean initial test loss is at most this
#: factor times the smallest (ours: the paper gives no number).
INITIAL_FACTOR = 2.0
#: "Trains" read as: the mean final train loss is below this fraction of the initial (ours).
TRAINS = 0.99
#: Figure -> (same-start source or None, outperform source, compared with Linear too,
#: the figure of the deeper-DNN observations or None).
OBSERVATIONS = {
    1: (
        KAWAGUCHI.source(
            "Section 2.2, Figure 1",
            "all models preformed approximately the same at initial points",
        ),
        KAWAGUCHI.source(
            "Section 2.2, Figure 1",
            "deep equilibrium linear models "
            "outperformed both linear models and DNNs in test errors after training",
        ),
        True,
        None,
    ),
    4: (
        KAWAGUCHI.source(
            "Appendix D.2, Figure 4",
            "all models preformed approximately the same at initial points",
        ),
        KAWAGUCHI.source(
            "Appendix D.2, Figure 4",
            "deep equilibrium linear models "
            "outperformed both linear models and nonlinear DNNs in test errors after "
            "training",
        ),
        True,
        None,
    ),
    5: (
        None,
        KAWAGUCHI.source(
            "Appendix D.2, Figure 5",
            "deep equilibrium linear models outperformed nonlinear DNNs in test errors",
        ),
        False,
        None,
    ),
    6: (
        None,
        KAWAGUCHI.source(
            "Appendix D.2, Figure 6",
            "deep equilibrium linear models outperformed nonlinear DNNs in test errors",
        ),
        False,
        6,
    ),
    7: (
        None,
        KAWAGUCHI.source(
            "Appendix D.2, Figure 7",
            "deep equilibrium linear models outperformed nonlinear DNNs in test errors",
        ),
        False,
        7,
    ),
    8: (
        None,
        KAWAGUCHI.source(
            "Appendix D.2, Figure 8",
            "deep equilibrium linear "
            "models outperformed both linear models and nonlinear DNNs in test "
            "errors",
        ),
        True,
        None,
    ),
}


def _deep_sources(figure: int) -> tuple[Source, Source]:
    where = f"Appendix D.2, Figure {figure}"
    return (
        KAWAGUCHI.source(
            where,
            "DNNs can reduce training errors faster than deep equilibrium linear models",
        ),
        KAWAGUCHI.source(
            where,
            "We experienced gradient explosion and gradient "
            "vanishing for DNNs with depth H = 100 and H = 200.",
        ),
    )


def statements(config: Fig1Config, rows: list[Row]) -> list[Statement]:
    """Per data set, the observations of ``config.figure``; then the rank (ours)."""
    start, outperform, with_linear, deep = OBSERVATIONS[config.figure]
    found = []
    for dataset in config.datasets:
        mine = [r for r in rows if r["dataset"] == dataset]
        if start is not None:
            found.append(_same_start(config, dataset, mine, start))
        summary = final_test_losses(config, mine)
        others = [*(["Linear"] if with_linear else []), *(f"DNN-H{h}" for h in config.depths)]
        found += [_outperforms(config, dataset, summary, m, outperform) for m in others]
        if deep is not None:
            faster, stuck = _deep_sources(deep)
            found += [
                _trains_faster(config, dataset, mine, summary, faster),
                _deep_do_not_train(config, dataset, mine, stuck),
            ]
    return found if config.n_train == 0 else [*found, _full_rank(config, rows)]


def _mean_curve(rows: list[Row], model: str, lr: float, column: str) -> dict[int, float]:
    """Epoch -> mean of ``column`` over the trials of ``model`` at ``lr`` (finite values)."""
    values: dict[int, list[float]] = {}
    for r in rows:
        if r["model"] == model and r["lr"] == lr and is_measured(r[column]):
            values.setdefault(int(r["epoch"]), []).append(float(r[column]))
    return {epoch: sum(v) / len(v) for epoch, v in values.items()}


def _trains_faster(
    config: Fig1Config, dataset: str, rows: list[Row], summary: dict, source: Source
) -> Statement:
    """DELM train loss / the lowest DNN train loss at the first recorded epoch after 0,
    each at its best learning rate: > 1 when a DNN has reduced it faster (ours: "faster"
    read at the first record, epoch ``record_every``)."""
    name = f"{dataset}: the DNNs reduce the training loss faster than the DELM"
    expected = "DELM / fastest DNN train loss > 1 at the first recorded epoch (best lrs)"
    epoch = min(config.record_every, config.epochs)
    losses = {}
    for model in ["DELM", *(f"DNN-H{h}" for h in config.depths)]:
        best = summary.get(model, {}).get("best")
        if best is not None:
            losses[model] = _mean_curve(rows, model, best[0], "train_loss").get(epoch)
    dnn = {m: v for m, v in losses.items() if m != "DELM" and is_measured(v) and v > 0}
    if not is_measured(losses.get("DELM")) or not dnn:
        why = f"no finished DELM or DNN train loss at epoch {epoch}"
        return not_measured(name, Kind.OBSERVATION, source, expected=expected, why=why)
    fastest = min(dnn, key=dnn.get)
    value = float(losses["DELM"]) / dnn[fastest]
    return KAWAGUCHI.observation(
        source.location,
        name=name,
        quote=source.quote,
        value=value,
        relation=">",
        threshold=1.0,
        measured=f"DELM {losses['DELM']:.4g} / {fastest} {dnn[fastest]:.4g} = {value:.3g} at "
        f"epoch {epoch}",
        expected=expected,
        detail=f"train losses at epoch {epoch}: "
        + ", ".join(f"{m} {v:.4g}" for m, v in dnn.items()),
    )


def _deep_do_not_train(
    config: Fig1Config, dataset: str, rows: list[Row], source: Source
) -> Statement:
    """Appendix D.2: "We experienced gradient explosion and gradient vanishing for DNNs with
    depth H = 100 and H = 200."  Read (ours) as: every depth H ≥ 100 has a learning rate at
    which a run explodes (a diverged run) or vanishes (the mean train loss ends ≥
    :data:`TRAINS` × the initial one); decided on the number of such depths with neither
    at any lr, which must be 0.  (The paper does not say that they train at no lr.)"""
    name = f"{dataset}: DNNs with H ≥ 100 show gradient explosion or vanishing"
    expected = (
        f"0 depths H ≥ 100 at which every lr trains (mean final / initial train loss "
        f"< {TRAINS:g}, no diverged run)"
    )
    deep = [h for h in config.depths if h >= 100]
    ratios = {}
    for h in deep:
        for lr in config.lrs:
            mine = [r for r in rows if r["model"] == f"DNN-H{h}" and r["lr"] == lr]
            if not mine:
                continue
            curve = _mean_curve(mine, f"DNN-H{h}", lr, "train_loss")
            ends = [r for r in mine if r["epoch"] == config.epochs and is_measured(r["train_loss"])]
            finished = 0 in curve and len(ends) == config.trials
            ratios[(h, lr)] = curve[config.epochs] / curve[0] if finished else math.inf
    if not deep or len(ratios) < len(deep) * len(config.lrs):
        why = "no depth H ≥ 100, or a depth and lr without runs"
        return not_measured(name, Kind.OBSERVATION, source, expected=expected, why=why)
    exploded = [k for k, v in ratios.items() if v == math.inf]
    vanished = [k for k, v in ratios.items() if TRAINS <= v < math.inf]
    healthy = [h for h in deep if all(ratios[(h, lr)] < TRAINS for lr in config.lrs)]
    return KAWAGUCHI.observation(
        source.location,
        name=name,
        quote=source.quote,
        value=len(healthy),
        relation="<=",
        threshold=0.0,
        measured=f"{len(healthy)} of {len(deep)} depths train at every lr"
        + (f" (H = {', '.join(map(str, healthy))})" if healthy else "")
        + f"; (H, lr) pairs: {len(exploded)} explode (a diverged run), {len(vanished)} vanish "
        f"(final/initial train loss ≥ {TRAINS:g}), of {len(ratios)}",
        expected=expected,
        detail=f"explosion read as a diverged run and vanishing as a train loss that does not "
        f"fall (the threshold {TRAINS:g} is ours; no gradient norms are recorded); the "
        "paper says it experienced them, not that these depths train at no learning rate",
    )


def _full_rank(config: Fig1Config, rows: list[Row]) -> Statement:
    """min over data sets of rank(Φ_train)/n_train ≥ 1 (ours)."""
    name = "rank(Φ_train) = n_train on every data set (interpolation regime)"
    expected = "rank(Φ_train)/n_train ≥ 1 on every data set"
    ranks: dict[str, object] = {}
    for r in rows:
        ranks.setdefault(str(r["dataset"]), r.get("train_rank"))
    missing = [d for d in config.datasets if not is_measured(ranks.get(d))]
    if missing:
        return not_measured(
            name,
            Kind.OURS,
            OURS,
            expected=expected,
            why=f"no rank recorded for {', '.join(missing)}",
        )
    worst = min(config.datasets, key=lambda d: float(ranks[d]))
    value = float(ranks[worst]) / config.n_train
    return ours(
        name,
        value=value,
        relation=">=",
        threshold=1.0,
        measured=f"smallest rank(Φ_train)/n_train = {ranks[worst]}/{config.n_train} ({worst}); "
        + ", ".join(f"{d} {ranks[d]}" for d in config.datasets),
        expected=expected,
        detail="Φ_train = R X_pre (m_x × n_train): below full rank the models cannot "
        "interpolate the training points, which the 200-point design relies on (Appendix D.2)",
    )


def _same_start(config: Fig1Config, dataset: str, rows: list[Row], source: Source) -> Statement:
    starts: dict[str, list[float]] = {}
    for r in rows:
        if int(r["epoch"]) == 0 and r["lr"] == config.lrs[0]:
            starts.setdefault(str(r["model"]), []).append(float(r["test_loss"]))
    means = {m: sum(v) / len(v) for m, v in starts.items()}
    finite = means and all(is_measured(v) and v > 0 for v in means.values())
    value = max(means.values()) / min(means.values()) if finite else None
    shown = ", ".join(f"{m} {v:.4g}" for m, v in means.items())
    return KAWAGUCHI.observation(
        source.location,
        name=f"{dataset}: all models start at about the same test loss",
        quote=source.quote,
        value=value,
        relation="<=",
        threshold=INITIAL_FACTOR,
        measured=f"largest/smallest mean initial test loss = "
        f"{'—' if value is None else f'{value:.3g}'} ({shown or 'no rows'})",
        expected=f"≤ {INITIAL_FACTOR:g}",
        detail=f"mean over {config.trials} trials at epoch 0; the factor {INITIAL_FACTOR:g} is "
        "our reading of 'approximately the same'",
    )


def _outperforms(
    config: Fig1Config, dataset: str, summary: dict, model: str, source: Source
) -> Statement:
    name = f"{dataset}: the DELM ends with a lower test loss than {model} (best lrs)"
    expected = "DELM / other < 1 (final test loss, each at its best learning rate)"
    delm, other = summary.get("DELM", {}).get("best"), summary.get(model, {}).get("best")
    if delm is None or other is None:
        missing = "DELM" if delm is None else model
        why = f"no learning rate of {missing} finished all trials"
        return not_measured(name, Kind.OBSERVATION, source, expected=expected, why=why)
    (delm_lr, delm_loss), (lr, loss) = delm, other
    return KAWAGUCHI.observation(
        source.location,
        name=name,
        quote=source.quote,
        value=delm_loss / loss,
        relation="<",
        threshold=1.0,
        measured=f"DELM {delm_loss:.4g} (lr {delm_lr:g}) / {model} {loss:.4g} (lr {lr:g}) = "
        f"{delm_loss / loss:.3g}",
        expected=expected,
        detail=f"mean over {config.trials} trials at epoch {config.epochs}; diverged runs: "
        f"{summary[model]['diverged']} ({model}), {summary['DELM']['diverged']} (DELM)",
    )


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
    ax: Axes, rows: list[Row], summary: dict, model: str, which: str, column: str, color: str
) -> None:
    """Mean ± one standard deviation over trials of ``column`` for the chosen lr."""
    choice = summary.get(model, {}).get(which)
    if choice is None:
        return
    lr = choice[0]
    runs = [
        [r for r in rows if r["model"] == model and r["lr"] == lr and r["trial"] == t]
        for t in dict.fromkeys(r["trial"] for r in rows)
    ]
    epochs = [r["epoch"] for r in runs[0]]
    values = torch.tensor([[float(r[column]) for r in run] for run in runs])  # (trials, records)
    mean, std = values.mean(dim=0), values.std(dim=0, correction=0)
    label = (
        f"{model} ({which}, lr {lr:g})" if model in ("DELM", "Linear") else f"{model} (lr {lr:g})"
    )
    ax.plot(epochs, mean, label=label, color=color)
    ax.fill_between(epochs, (mean - std).clamp_min(1e-12), mean + std, color=color, alpha=0.2)

"""The observations of Figures 1 and 4–8 (Section 2.2, Appendix D.2): DELMs vs linear models
vs DNNs, as functions of the training runs.

Each claim takes the runs of one data set: one :class:`~deqlab.statements.Run` per (model,
learning rate, trial), its steps the recorded epochs, its series ``train_loss`` and
``test_loss``, its labels ``dataset`` and ``model`` (DELM, Linear or DNN-H<depth>) and its
constants ``lr``, ``trial`` and ``train_rank`` (rank(Φ_train)). A run that diverged stops
early: its last epoch is before ``epochs`` or its loss there is not finite. Best and worst
learning rates are chosen among those whose runs all finished, by the mean final test loss
over trials (Section 2.2). "Approximately the same", "trains" and the reading of "gradient
explosion and vanishing" are ours (:data:`INITIAL_FACTOR`, :data:`TRAINS`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from deqlab.papers.kawaguchi2021 import KAWAGUCHI
from deqlab.statements import (
    OURS,
    Kind,
    Run,
    Source,
    Statement,
    claim,
    is_measured,
    not_measured,
    number,
    ours,
    worst,
)

#: "Approximately the same" read as: the largest mean initial test loss is at most this
#: factor times the smallest (ours: the paper gives no number).
INITIAL_FACTOR = 2.0
#: "Trains" read as: the mean final train loss is below this fraction of the initial (ours).
TRAINS = 0.99


@dataclass(frozen=True)
class TrainingGrid:
    """How the runs were trained: the learning rates tried, trials per rate, epochs, the
    epoch of the first record after 0 and the DNN depths."""

    lrs: tuple[float, ...]
    trials: int
    epochs: int
    record_every: int = 1
    depths: tuple[int, ...] = ()


@dataclass(frozen=True)
class Choice:
    """A model's best and worst learning rate: (lr, mean final test loss) each, None when
    no rate finished all trials, and how many of its runs diverged."""

    best: tuple[float, float] | None
    worst: tuple[float, float] | None
    diverged: int


def of_model(runs: Sequence[Run], model: str, lr: float | None = None) -> list[Run]:
    """The runs of ``model`` (at ``lr``), in order."""
    return [r for r in runs if r.label("model") == model and (lr is None or r.constant("lr") == lr)]


def mean(values: Sequence[float]) -> float:
    """The mean, NaN unless every value is finite (a missing trial leaves it unmeasured)."""
    if not values or not all(is_measured(v) for v in values):
        return math.nan
    return math.fsum(values) / len(values)


def mean_at(runs: Sequence[Run], column: str, epoch: int) -> float:
    """The mean over ``runs`` of ``column`` at ``epoch`` (NaN if one lacks it)."""
    return mean([r.at(column, epoch) for r in runs])


def choices(runs: Sequence[Run], grid: TrainingGrid) -> dict[str, Choice]:
    """Per model (in order of appearance): its best and worst learning rate among those
    whose runs all reached the last epoch with a finite test loss, and its diverged runs."""
    found = {}
    for model in dict.fromkeys(r.label("model") for r in runs):
        means, diverged = {}, 0
        for lr in grid.lrs:
            finals = [r.at("test_loss", grid.epochs) for r in of_model(runs, model, lr)]
            diverged += sum(not is_measured(v) for v in finals)
            if len(finals) == grid.trials and all(is_measured(v) for v in finals):
                means[lr] = mean(finals)
        best = min(means.items(), key=lambda kv: kv[1]) if means else None
        last = max(means.items(), key=lambda kv: kv[1]) if means else None
        found[model] = Choice(best, last, diverged)
    return found


@claim
def same_start(dataset: str, runs: Sequence[Run], source: Source, *, lr: float) -> Statement:
    """All models start at about the same test loss: the largest mean initial test loss
    (at ``lr``) over the smallest, ≤ :data:`INITIAL_FACTOR`, decided on every pair of models
    (:func:`worst`: a measured gap beside a model not measured is FAIL)."""
    models = dict.fromkeys(r.label("model") for r in runs)
    means = {m: mean_at(of_model(runs, m, lr), "test_loss", 0) for m in models}
    trials = max((len(of_model(runs, m, lr)) for m in models), default=0)
    pairs = itertools.permutations(means.values(), 2)
    ratios = [a / b if a > 0 and b > 0 else math.nan for a, b in pairs]
    value = worst(ratios, "<=", INITIAL_FACTOR)
    shown = ", ".join(f"{m} {v:.4g}" for m, v in means.items())
    return KAWAGUCHI.observation(
        source.location,
        name=f"{dataset}: all models start at about the same test loss",
        quote=source.quote,
        value=value,
        relation="<=",
        threshold=INITIAL_FACTOR,
        measured=f"largest/smallest mean initial test loss = {number(value, 3)} "
        f"({shown or 'no rows'})",
        expected=f"≤ {INITIAL_FACTOR:g}",
        detail=f"mean over {trials} trials at epoch 0; the factor {INITIAL_FACTOR:g} is our "
        "reading of 'approximately the same'",
    )


@claim
def outperforms(
    dataset: str, runs: Sequence[Run], model: str, source: Source, grid: TrainingGrid
) -> Statement:
    """The DELM ends with a lower test loss than ``model``, each at its best learning rate."""
    name = f"{dataset}: the DELM ends with a lower test loss than {model} (best lrs)"
    expected = "DELM / other < 1 (final test loss, each at its best learning rate)"
    chosen = choices(runs, grid)
    delm, other = chosen.get("DELM"), chosen.get(model)
    if delm is None or other is None or delm.best is None or other.best is None:
        missing = "DELM" if delm is None or delm.best is None else model
        why = f"no learning rate of {missing} finished all trials"
        return not_measured(name, Kind.OBSERVATION, source, expected=expected, why=why)
    (delm_lr, delm_loss), (lr, loss) = delm.best, other.best
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
        detail=f"mean over {grid.trials} trials at epoch {grid.epochs}; diverged runs: "
        f"{other.diverged} ({model}), {delm.diverged} (DELM)",
    )


@claim
def trains_faster(
    dataset: str, runs: Sequence[Run], source: Source, grid: TrainingGrid
) -> Statement:
    """DELM train loss / the lowest DNN train loss at the first recorded epoch after 0,
    each at its best learning rate: > 1 when a DNN has reduced it faster (ours: "faster"
    read at the first record, epoch ``record_every``)."""
    name = f"{dataset}: the DNNs reduce the training loss faster than the DELM"
    expected = "DELM / fastest DNN train loss > 1 at the first recorded epoch (best lrs)"
    epoch = min(grid.record_every, grid.epochs)
    chosen = choices(runs, grid)
    losses = {}
    for model in ["DELM", *(f"DNN-H{h}" for h in grid.depths)]:
        choice = chosen.get(model)
        if choice is not None and choice.best is not None:
            losses[model] = mean_at(of_model(runs, model, choice.best[0]), "train_loss", epoch)
    delm = losses.get("DELM")
    dnn = {m: losses.get(m) for m in (f"DNN-H{h}" for h in grid.depths)}
    ratios = {
        m: delm / v if is_measured(delm) and is_measured(v) and v > 0 else None
        for m, v in dnn.items()
    }
    value = worst(list(ratios.values()), "<=", 1.0)  # some DNN faster: exists, by worst's dual
    if value is None or not is_measured(delm):
        why = f"no finished DELM or DNN train loss at epoch {epoch}"
        return not_measured(name, Kind.OBSERVATION, source, expected=expected, why=why)
    fastest = next(m for m, r in ratios.items() if r == value)
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
        + ", ".join(f"{m} {number(v, 4)}" for m, v in dnn.items()),
    )


@claim
def deep_do_not_train(
    dataset: str, runs: Sequence[Run], source: Source, grid: TrainingGrid
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
    deep = [h for h in grid.depths if h >= 100]
    ratios = {}
    for h, lr in itertools.product(deep, grid.lrs):
        mine = of_model(runs, f"DNN-H{h}", lr)
        if mine:
            ends = [r.at("train_loss", grid.epochs) for r in mine]
            start = mean_at(mine, "train_loss", 0)
            finished = len(ends) == grid.trials and all(is_measured(v) for v in ends)
            ratios[(h, lr)] = mean(ends) / start if finished and start > 0 else math.inf
    if not deep or len(ratios) < len(deep) * len(grid.lrs):
        why = "no depth H ≥ 100, or a depth and lr without runs"
        return not_measured(name, Kind.OBSERVATION, source, expected=expected, why=why)
    exploded = [k for k, v in ratios.items() if v == math.inf]
    vanished = [k for k, v in ratios.items() if TRAINS <= v < math.inf]
    healthy = [h for h in deep if all(ratios[(h, lr)] < TRAINS for lr in grid.lrs)]
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


@claim
def full_rank(datasets: Sequence[str], runs: Sequence[Run], *, n_train: int) -> Statement:
    """Ours: rank(Φ_train)/n_train ≥ 1 on every data set, decided by :func:`worst` over the
    data sets (a data set without a recorded rank is not measured)."""
    name = "rank(Φ_train) = n_train on every data set (interpolation regime)"
    expected = "rank(Φ_train)/n_train ≥ 1 on every data set"
    ranks = {d: _rank(runs, d) for d in datasets}
    value = worst([v / n_train for v in ranks.values()], ">=", 1.0)
    if value is None:
        missing = [d for d, v in ranks.items() if not is_measured(v)] or list(datasets)
        why = f"no rank recorded for {', '.join(missing)}"
        return not_measured(name, Kind.OURS, OURS, expected=expected, why=why)
    least = next(d for d, v in ranks.items() if v / n_train == value)
    return ours(
        name,
        value=value,
        relation=">=",
        threshold=1.0,
        measured=f"smallest rank(Φ_train)/n_train = {ranks[least]:g}/{n_train} ({least}); "
        + ", ".join(f"{d} {number(v)}" for d, v in ranks.items()),
        expected=expected,
        detail="Φ_train = R X_pre (m_x × n_train): below full rank the models cannot "
        "interpolate the training points, which the 200-point design relies on (Appendix D.2)",
    )


def _rank(runs: Sequence[Run], dataset: str) -> float:
    return next((r.constant("train_rank") for r in runs if r.label("dataset") == dataset), math.nan)


def _figure(where: str, words: str) -> Source:
    return KAWAGUCHI.source(where, words)


_START = "all models preformed approximately the same at initial points"
_DNNS = "deep equilibrium linear models outperformed nonlinear DNNs in test errors"


@dataclass(frozen=True)
class Observations:
    """What one figure says: its same-start source (None: it says nothing of the start),
    its outperform source, whether it compares with the linear model, and whether it has
    the deeper DNNs' observations (Figures 6–7)."""

    start: Source | None
    outperform: Source
    with_linear: bool
    deep: bool = False


#: Figure -> its observations, quoted.
OBSERVATIONS = {
    1: Observations(
        _figure("Section 2.2, Figure 1", _START),
        _figure(
            "Section 2.2, Figure 1",
            "deep equilibrium linear models outperformed both linear models and DNNs in test "
            "errors after training",
        ),
        True,
    ),
    4: Observations(
        _figure("Appendix D.2, Figure 4", _START),
        _figure(
            "Appendix D.2, Figure 4",
            "deep equilibrium linear models outperformed both linear models and nonlinear DNNs "
            "in test errors after training",
        ),
        True,
    ),
    5: Observations(None, _figure("Appendix D.2, Figure 5", _DNNS), False),
    6: Observations(None, _figure("Appendix D.2, Figure 6", _DNNS), False, deep=True),
    7: Observations(None, _figure("Appendix D.2, Figure 7", _DNNS), False, deep=True),
    8: Observations(
        None,
        _figure(
            "Appendix D.2, Figure 8",
            "deep equilibrium linear models outperformed both linear models and nonlinear DNNs "
            "in test errors",
        ),
        True,
    ),
}


def deep_sources(figure: int) -> tuple[Source, Source]:
    """The two observations of the deeper DNNs in Figure ``figure`` (6 or 7)."""
    where = f"Appendix D.2, Figure {figure}"
    return (
        _figure(
            where, "DNNs can reduce training errors faster than deep equilibrium linear models"
        ),
        _figure(
            where,
            "We experienced gradient explosion and gradient vanishing for DNNs with depth "
            "H = 100 and H = 200.",
        ),
    )


def figure_observations(
    figure: int, dataset: str, runs: Sequence[Run], grid: TrainingGrid
) -> list[Statement]:
    """The observations of Figure ``figure`` (:data:`OBSERVATIONS`) on one data set's runs."""
    said = OBSERVATIONS[figure]
    found = []
    if said.start is not None:
        found.append(same_start(dataset, runs, said.start, lr=grid.lrs[0]))
    others = [*(["Linear"] if said.with_linear else []), *(f"DNN-H{h}" for h in grid.depths)]
    found += [outperforms(dataset, runs, m, said.outperform, grid) for m in others]
    if said.deep:
        faster, stuck = deep_sources(figure)
        found += [
            trains_faster(dataset, runs, faster, grid),
            deep_do_not_train(dataset, runs, stuck, grid),
        ]
    return found

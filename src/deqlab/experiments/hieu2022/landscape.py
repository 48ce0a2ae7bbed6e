"""Thesis (Hieu 2022), Section 4.2.1: loss landscapes of the conv DEQ vs weight-tied nets.

The DEQ of Eq. (4.1) (:class:`deqlab.models.ConvDEQ`) and explicit networks repeating the
same cell 6, 11 and 18 times (:class:`deqlab.models.WeightTiedConvNet`) are trained alike
(Adam, lr 1e-3, cosine annealing, batch 100; the thesis: CIFAR-10, 50 epochs — CIFAR-10 is
not on this disk, so the offline default is Fashion-MNIST; ``dataset=cifar10`` after
``deqlab data fetch cifar10``). Around each minimiser the cross-entropy on ``n_eval``
training images is evaluated on a ``grid × grid`` lattice over ``[−1, 1]²`` along two
filter-normalised random directions (:func:`deqlab.landscape.loss_surface`, Li et al. 2018).
Presets: ``paper`` is the thesis's setting (CIFAR-10); ``hour`` keeps its optimiser and
batch size on Fashion-MNIST with 2000 images, 10 epochs, 8-channel cells, 100 evaluation
images and a 31² grid, sized by ours from a cell's cost (≈ 0.04 s per 100 images of 28²) to
take about an hour on 2 CPU cores; the 51² grid alone would take longer there.

Rows: ``model`` ("deq", "repeat6", …), then either ``alpha``, ``beta``, ``loss`` (surface)
or ``epoch``, ``train_loss``, ``train_acc`` (training). The size of the small-loss
neighbourhood of Figure 4.4: the area of ``{L ≤ L(θ*) + flat_delta}`` in direction units
(:meth:`LossSurface.flat_area`; ``flat_delta`` is ours, the thesis reads contour plots).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import nn
from torch.nn import functional as F

from deqlab.experiments.base import Experiment, Row, Task, TaskContext
from deqlab.experiments.blocks import ConvDEQBlock, MinibatchTraining
from deqlab.experiments.constraints import INCREASING, NONEMPTY, POSITIVE, Interval
from deqlab.experiments.deviations import PaperValue, measurement, not_given, paper
from deqlab.experiments.hieu2022 import landscape_report
from deqlab.experiments.hieu2022.dynamics import image_tensors
from deqlab.experiments.hieu2022.training import train_classifier
from deqlab.experiments.registry import register
from deqlab.landscape import dataset_loss, loss_surface
from deqlab.models.conv_deq import ConvDEQ, WeightTiedConvNet
from deqlab.papers import HIEU
from deqlab.solvers import Anderson

_SAME = "Section 4.2.1: 'the same architecture with DEQ model in the above section' (Eq. 4.1)"
#: What the thesis says about each config field (Section 4.2).
PAPER_SETTING: dict[str, PaperValue] = {
    "dataset": paper("cifar10", "Section 4.2.1", substitute=True),
    "n_train": paper(50_000, "Section 4.2.1: trained on CIFAR-10 (its 50,000 training images)"),
    "n_eval": not_given("Section 4.2 does not say on how many images the surface is evaluated"),
    "repeats": paper((6, 11, 18), "Section 4.2.1: repeat-6, 11, 18"),
    "channels": not_given(_SAME),
    "inner_channels": not_given(_SAME),
    "groups": not_given(_SAME),
    "init_std": not_given("Section 4.2 gives no initialisation"),
    "epochs": paper(50, "Section 4.2.1"),
    "batch_size": paper(100, "Section 4.2.1"),
    "lr": paper(1e-3, "Section 4.2.1: Adam, cosine annealing, initial learning rate 0.001"),
    "tol": not_given("Section 4.2 gives no solver tolerance"),
    "max_iter": not_given("Section 4.2 gives no solver iteration limit"),
    "grid": paper(51, "Section 4.2.1: 'the resolution is 51×51' over [−1, 1]²"),
    "flat_delta": not_given("Figure 4.4 is read off contour plots: the loss level is ours"),
    "grid_batch": measurement(),
    "seed": measurement(),
}


@dataclass(frozen=True)
class LandscapeConfig(ConvDEQBlock, MinibatchTraining):
    """Defaults: the thesis's Section 4.2.1 settings (offline data set, see docstring)."""

    dataset: str = "fashion-mnist"
    n_train: int = 60_000
    n_eval: int = 1000
    repeats: tuple[int, ...] = (6, 11, 18)
    init_std: float = 0.01
    grid: int = 51
    flat_delta: float = 0.5
    #: Grid points of a row evaluated together (deqlab.landscape_batch); 0: one at a time.
    grid_batch: int = 0

    constraints: ClassVar = {
        "n_train": Interval(10),
        "n_eval": Interval(10),
        "repeats": (NONEMPTY, Interval(1), INCREASING),
        "init_std": POSITIVE,
        "grid": Interval(3),
        "flat_delta": POSITIVE,
        "grid_batch": Interval(0),
    }


def _model(config: LandscapeConfig, key: str, in_channels: int, device: str) -> nn.Module:
    torch.manual_seed(config.seed)
    sizes = {
        "channels": config.channels,
        "inner_channels": config.inner_channels,
        "groups": config.groups,
        "init_std": config.init_std,
    }
    if key == "deq":
        solver = Anderson(tol=config.tol, max_iter=config.max_iter, throw=False)
        model = ConvDEQ(in_channels, 10, solver=solver, **sizes)
    else:
        model = WeightTiedConvNet(int(key.removeprefix("repeat")), in_channels, 10, **sizes)
    return model.to(device=device, dtype=torch.float32)


@register
class Hieu2022Landscape(Experiment):
    """Filter-normalised loss surfaces of the DEQ and of weight-tied repeat-k networks."""

    slug = "landscape"
    title = "Loss landscapes: conv DEQ vs weight-tied repeat-6/11/18 (Figure 4.4)"
    paper = HIEU
    report = landscape_report
    where = "Section 4.2"
    Config = LandscapeConfig
    presets: ClassVar = {
        "tiny": {
            "dataset": "digits",
            "n_train": 20,
            "n_eval": 10,
            "repeats": (1, 2),
            "channels": 4,
            "inner_channels": 4,
            "groups": 2,
            "epochs": 1,
            "batch_size": 10,
            "max_iter": 10,
            "grid": 3,
            "grid_batch": 3,
        },
        "quick": {
            "n_train": 1000,
            "n_eval": 200,
            "channels": 8,
            "inner_channels": 8,
            "groups": 4,
            "epochs": 5,
            "batch_size": 32,
            "grid": 11,
            "max_iter": 30,
            "grid_batch": 11,
        },
        "hour": {
            "n_train": 2000,
            "n_eval": 100,
            "channels": 8,
            "inner_channels": 8,
            "groups": 4,
            "epochs": 10,
            "grid": 31,
            "max_iter": 30,
            "grid_batch": 31,
        },
        "paper": {"dataset": "cifar10", "n_train": 50_000},
    }
    paper_setting: ClassVar = PAPER_SETTING
    figure_captions: ClassVar = {
        "landscapes": (
            "Figure 4.4: contours of the training loss L(θ* + α d₁ + β d₂) around each trained "
            "model's parameters θ* (star) along two filter-normalised random directions; the "
            "thick contour is L(θ*) + flat_delta, whose enclosed area the statements compare."
        ),
    }
    metric_columns: ClassVar = {
        "model": "deq or repeat<k> (the cell of Eq. 4.1 applied k times)",
        "alpha": "coordinate along the first filter-normalised direction (likewise beta)",
        "loss": "cross-entropy on the n_eval training images at θ* + α d₁ + β d₂",
        "solver_steps": "forward-solver evaluations of f at that grid point (0 without a DEQ; "
        "each solve warm-started from the previous point of the snake-order walk)",
        "epoch": "training epoch (training rows)",
        "train_loss": "mean cross-entropy of the epoch (training rows)",
    }
    default_checkpoint_every = 1

    def tasks(self, config: LandscapeConfig) -> list[Task]:
        keys = ["deq", *(f"repeat{k}" for k in config.repeats)]
        return [Task(key) for key in keys]

    def run_task(self, config: LandscapeConfig, task: Task, ctx: TaskContext) -> list[Row]:
        images, labels = image_tensors(config.dataset, "train", config.n_train, config.seed)
        images, labels = images.to(ctx.device), labels.to(ctx.device)
        model = _model(config, task.key, images.shape[1], ctx.device)
        rows = train_classifier(model, images, labels, config, ctx, base={"model": task.key})
        evaluation = torch.arange(0, len(labels), max(len(labels) // config.n_eval, 1))
        x, y = images[evaluation[: config.n_eval]], labels[evaluation[: config.n_eval]]
        model.eval()
        surface = loss_surface(
            model,
            dataset_loss(F.cross_entropy, [(x, y)]),
            steps=config.grid,
            batch=config.grid_batch or None,
            generator=torch.Generator().manual_seed(config.seed + 1),
            progress=False,
        )
        grid = surface.alphas.tolist()
        rows += [
            {
                "model": task.key,
                "alpha": a,
                "beta": b,
                "loss": float(surface.losses[i, j]),
                "solver_steps": int(surface.solver_steps[i, j]),
            }
            for i, a in enumerate(grid)
            for j, b in enumerate(grid)
        ]
        return rows

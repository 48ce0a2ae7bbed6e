"""Thesis (Hieu 2022), Section 4.1: forward dynamics of the convolutional DEQ (Figs. 4.1–4.3).

The model is :class:`deqlab.models.ConvDEQ` (the cell of Eq. 4.1, GroupNorm, Anderson).
Tasks:

- ``init-std<s>`` (one per ``init_stds``, the thesis's N(0, 1) and N(0, 0.01)): the solver's
  iterates ``z^[i]`` from ``z = 0`` on ``n_traj`` test images of the untrained model; their
  relative residuals, Eq. (4.2) (Figure 4.1), and their projection on the first two
  principal components of all iterates (Figure 4.2).
- ``training``: the model with ``train_std`` initialisation trained with Adam (lr 1e-3) and
  cosine annealing (thesis: MNIST, 40 epochs; offline default Fashion-MNIST, MNIST after
  ``deqlab data fetch mnist``); after each epoch in ``snapshot_epochs`` (0 = before
  training) the PCA trajectories of ``n_traj`` training images, coloured by class
  (Figure 4.3), and the epoch's loss and accuracy.

Rows: ``panel`` ("init" | "training" | "train"), ``init_std``, ``epoch``, ``sample``,
``label``, ``step``, ``residual``, ``pc1``, ``pc2``; "train" rows hold ``train_loss``,
``train_acc``, ``solver_steps`` (mean Anderson steps of the epoch's forward solves).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import nn

from deqlab.data import get_dataset
from deqlab.experiments.base import Experiment, Row, Task, TaskContext
from deqlab.experiments.blocks import ConvDEQBlock, MinibatchTraining
from deqlab.experiments.constraints import POSITIVE, Interval
from deqlab.experiments.deviations import PaperValue, measurement, not_given, paper
from deqlab.experiments.hieu2022 import dynamics_report
from deqlab.experiments.hieu2022.training import train_classifier
from deqlab.experiments.registry import register
from deqlab.models.conv_deq import ConvDEQ
from deqlab.papers import HIEU
from deqlab.solvers import Anderson

_CHANNELS = "Eq. (4.1) gives no channel counts"
#: What the thesis says about each config field (Section 4.1).
PAPER_SETTING: dict[str, PaperValue] = {
    "dataset": paper(
        "mnist",
        "Section 4.1: MNIST test inputs (Figs. 4.1–4.2), training inputs (Fig. 4.3)",
        substitute=True,
    ),
    "n_train": paper(60_000, "Section 4.1.2: 'we train the previous model on MNIST'"),
    "n_traj": not_given("Figs. 4.1–4.3 do not say how many inputs they plot"),
    "channels": not_given(_CHANNELS),
    "inner_channels": not_given(_CHANNELS),
    "groups": not_given("Eq. (4.1): group norm, number of groups not given"),
    "init_stds": paper(
        (1.0, 0.01),
        "Section 4.1.1: N(0, 1) and N(0, 0.01), read as standard deviations "
        "(normal_(0, 0.01) of the DEQ tutorial code)",
    ),
    "train_std": not_given("Section 4.1.2 trains 'the previous model' of either init"),
    "epochs": paper(40, "Section 4.1.2"),
    "snapshot_epochs": not_given("Fig. 4.3: its epochs are not given in the text"),
    "batch_size": not_given("Section 4.1.2 gives none (Section 4.2.1 uses 100)"),
    "lr": paper(1e-3, "Section 4.1.2: Adam, learning rate 0.001, CosineAnnealingLR"),
    "tol": paper(1e-2, "Section 4.1.2 (Fig. 4.3's caption says 1e-3)"),
    "max_iter": paper(50, "Section 4.1.2 (Fig. 4.3's caption says 100)"),
    "seed": measurement(),
}


@dataclass(frozen=True)
class DynamicsConfig(ConvDEQBlock, MinibatchTraining):
    """Defaults: the thesis's Section 4.1 settings on Fashion-MNIST (see module docstring)."""

    dataset: str = "fashion-mnist"
    n_train: int = 60_000
    n_traj: int = 30
    init_stds: tuple[float, ...] = (1.0, 0.01)
    train_std: float = 0.01
    epochs: int = 40
    snapshot_epochs: tuple[int, ...] = (0, 1, 10, 40)
    tol: float = 1e-2

    constraints: ClassVar = {
        "n_train": Interval(10),
        "n_traj": Interval(2),
        "init_stds": POSITIVE,
        "train_std": POSITIVE,
        "snapshot_epochs": Interval(0, "epochs"),
    }


def image_tensors(dataset: str, split: str, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` images (equal per class) as ``(n, C, H, W)`` float32 in [0, 1], int labels.

    CIFAR-10 keeps its colour channels (``C = 3``); the other data sets have ``C = 1``.
    sklearn's digits has a single split: its "test" images are drawn from that split.
    """
    colour = dataset == "cifar10"
    split = "train" if dataset == "digits" else split
    data = get_dataset(
        dataset,
        n_per_class=max(n // 10, 1),
        classes=tuple(range(10)),
        labels="index",
        normalize=False,
        grayscale=not colour,
        split=split,
        seed=seed,
        dtype=torch.float32,
    )
    channels = 3 if colour else 1
    side = math.isqrt(data.X.shape[0] // channels)
    return data.X.T.reshape(-1, channels, side, side), data.y


def _model(config: DynamicsConfig, std: float, in_channels: int, device: str) -> ConvDEQ:
    torch.manual_seed(config.seed)
    solver = Anderson(tol=config.tol, max_iter=config.max_iter, throw=False)
    model = ConvDEQ(
        in_channels,
        10,
        channels=config.channels,
        inner_channels=config.inner_channels,
        groups=config.groups,
        init_std=std,
        solver=solver,
    )
    return model.to(device=device, dtype=torch.float32)


def pca_2d(points: torch.Tensor) -> torch.Tensor:
    """Projections ``(P, 2)`` of ``points`` ``(P, D)`` on their first two principal axes."""
    centered = points - points.mean(dim=0)
    gram = centered @ centered.T  # (P, P): cheaper than the (D, D) covariance when P < D
    _, vectors = torch.linalg.eigh(gram.double())
    top = vectors[:, -2:].flip(1).to(points.dtype)  # (P, 2)
    axes = centered.T @ top  # (D, 2), unnormalised principal axes
    return centered @ (axes / torch.linalg.vector_norm(axes, dim=0).clamp_min(1e-30))


def trajectory_rows(model: ConvDEQ, images, labels, base: Row) -> list[Row]:
    """One row per (sample, solver step): residual (Eq. 4.2) and the 2-D PCA projection."""
    model.eval()
    iterates, residuals = model.trajectory(images)  # (S, B, C, H, W), (S, B)
    steps, batch = residuals.shape
    projected = pca_2d(iterates.reshape(steps * batch, -1)).reshape(steps, batch, 2)
    # one transfer each, not one per (sample, step) entry
    label, residual, pc = (t.tolist() for t in (labels, residuals, projected))
    return [
        {
            **base,
            "sample": b,
            "label": int(label[b]),
            "step": s,
            "residual": residual[s][b],
            "pc1": pc[s][b][0],
            "pc2": pc[s][b][1],
        }
        for b in range(batch)
        for s in range(steps)
    ]


@register
class Hieu2022Dynamics(Experiment):
    """Forward dynamics of the conv DEQ under two initialisations and during training."""

    slug = "dynamics"
    title = "Forward dynamics of a convolutional DEQ (Figures 4.1–4.3)"
    paper = HIEU
    report = dynamics_report
    where = "Section 4.1"
    Config = DynamicsConfig
    presets: ClassVar = {
        "tiny": {
            "dataset": "digits",
            "n_train": 20,
            "n_traj": 20,
            "channels": 4,
            "inner_channels": 4,
            "groups": 2,
            "epochs": 1,
            "snapshot_epochs": (0, 1),
            "batch_size": 10,
            "max_iter": 12,
        },
        "quick": {
            "n_train": 2000,
            "n_traj": 20,
            "channels": 16,
            "inner_channels": 32,
            "epochs": 3,
            "snapshot_epochs": (0, 1, 3),
            "batch_size": 32,
            "max_iter": 30,
        },
        "paper": {},
    }
    paper_setting: ClassVar = PAPER_SETTING
    figure_captions: ClassVar = {
        "residuals": (
            "Figure 4.1: the relative residual ‖f(z) − z‖/‖f(z)‖ (Eq. 4.2) along the Anderson "
            "iterates z^[i] from z^[0] = 0, one line per test input, for the untrained model "
            "with each initialisation."
        ),
        "pca_init": (
            "Figure 4.2: the iterates z^[i] of the same inputs projected on their first two "
            "principal components, from z^[0] = 0 (open circle) to the last iterate (dot)."
        ),
        "pca_training": (
            "Figure 4.3: the iterates z^[i] of training inputs in their principal plane "
            "before training and after the given epochs, coloured by class."
        ),
    }
    metric_columns: ClassVar = {
        "panel": "init (Figs. 4.1–4.2), training (Fig. 4.3) or train (epoch metrics)",
        "init_std": "standard deviation of the cell's convolution weights",
        "epoch": "training epochs done before the snapshot",
        "step": "solver step i of z^[i]",
        "residual": "relative residual ‖f(z) − z‖/‖f(z)‖, Eq. (4.2)",
        "pc1": "first principal component of z^[i] (likewise pc2)",
        "train_loss": "mean cross-entropy of the epoch (train rows)",
        "solver_steps": "mean Anderson steps of the epoch's forward solves (train rows)",
    }
    default_checkpoint_every = 1

    def tasks(self, config: DynamicsConfig) -> list[Task]:
        inits = [Task(f"init-std{s:g}", {"std": s}) for s in config.init_stds]
        return [*inits, Task("training")]

    def run_task(self, config: DynamicsConfig, task: Task, ctx: TaskContext) -> list[Row]:
        if task.key != "training":
            std = float(task.params["std"])
            images, labels = image_tensors(config.dataset, "test", config.n_traj, config.seed)
            base: Row = {"panel": "init", "init_std": std, "epoch": 0}
            model = _model(config, std, images.shape[1], ctx.device)
            return trajectory_rows(model, images.to(ctx.device), labels, base)
        return self._train(config, ctx)

    def _train(self, config: DynamicsConfig, ctx: TaskContext) -> list[Row]:
        images, labels = image_tensors(config.dataset, "train", config.n_train, config.seed)
        images, labels = images.to(ctx.device), labels.to(ctx.device)
        shown = torch.arange(0, len(labels), max(len(labels) // config.n_traj, 1))
        shown = shown[: config.n_traj]
        model = _model(config, config.train_std, images.shape[1], ctx.device)

        def snapshot(epoch: int, net: nn.Module) -> list[Row]:
            if epoch not in config.snapshot_epochs:
                return []
            base = {"panel": "training", "init_std": config.train_std, "epoch": epoch}
            return trajectory_rows(net, images[shown], labels[shown], base)

        return train_classifier(
            model,
            images,
            labels,
            config,
            ctx,
            on_epoch=snapshot,
            base={"panel": "train", "init_std": config.train_std},
        )

"""Thesis (Hieu 2022), Section 4.2.2 and Figure 4.5 (= Figure 3.1): the landscape of an MDEQ.

The thesis plots the loss surface of "a large DEQ model, particularly an MDEQ model"
(Bai et al. 2020) "trained on ImageNet", on "1024 examples of ImageNet test set, [...] about
50 images for each of 20 classes", by the method of Section 4.2: ``L(θ* + α d₁ + β d₂)``
along two filter-normalised random directions on a grid over ``[−1, 1]²``
(:func:`deqlab.landscape.loss_surface`). Here a small :class:`deqlab.models.MDEQ` is trained
(Adam, cosine annealing, as Section 4.2.1; the thesis gives no training setting for its
MDEQ) and its surface measured on ``n_eval`` held-out images.

Data: the defaults and the ``paper`` preset are the thesis's ImageNet setting (20 classes,
1024 evaluation images of the validation split, 224 × 224; needs ImageNet on disk,
:mod:`deqlab.data.imagenet`, and a GPU) and refuse to start without the data. ``quick``
runs on CIFAR-10 (3 × 32 × 32) when it is on this machine, else on its stand-in, sklearn's
8 × 8 digits up-sampled to 32 × 32 and repeated over three channels (listed as a
substitution; digits has one split, so its evaluation images are drawn from the same
images with another seed). ``tiny`` uses the stand-in.

Rows: ``model`` ("mdeq"), then training rows (``epoch``, ``train_loss``, ``train_acc``,
``solver_steps``), residual rows (``epoch``, ``residual``: the solver's largest relative
residual on the evaluation images at initialisation, ``epoch`` 0, and after every epoch)
and surface rows (``alpha``, ``beta``, ``loss``; over the convolution weights, the weight
normalisation folded in; ``capped_points``, the same on every surface row: the number of
grid evaluations at which a batch solve used all ``max_iter`` iterations).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import nn
from torch.nn import functional as F

from deqlab.data import get_dataset
from deqlab.experiments.base import Experiment, Row, Task, TaskContext
from deqlab.experiments.blocks import MinibatchTraining
from deqlab.experiments.constraints import NONEMPTY, POSITIVE, Interval, OneOf, Rule
from deqlab.experiments.deviations import PaperValue, measurement, not_given, paper
from deqlab.experiments.hieu2022 import mdeq_landscape_report
from deqlab.experiments.hieu2022.training import train_classifier
from deqlab.experiments.registry import register
from deqlab.landscape import dataset_loss, loss_surface
from deqlab.models.mdeq import MDEQ
from deqlab.papers import HIEU
from deqlab.solvers import Anderson, Broyden

DATASETS = ("imagenet", "cifar10", "digits")
SOLVERS = {"anderson": Anderson, "broyden": Broyden}
STANDIN = "digits"
_SIZES = "Section 4.2.2 does not give the MDEQ's sizes (Bai et al.'s ImageNet MDEQ-Small: "
_TRAINING = "Section 4.2.2 gives no training setting for its MDEQ (Section 4.2.1: "
#: What the thesis says about each config field (Section 4.2.2).
PAPER_SETTING: dict[str, PaperValue] = {
    "dataset": paper("imagenet", "Section 4.2.2: 'trained on ImageNet dataset'", substitute=True),
    "classes": paper(
        20,
        "Section 4.2.2: the 1024 images are of 20 classes (the thesis's MDEQ "
        "was trained on ImageNet; we train on the same 20 classes)",
    ),
    "n_train": not_given("Section 4.2.2: 'trained on ImageNet' (how many images is not said)"),
    "n_eval": paper(1024, "Section 4.2.2: '1024 examples of ImageNet test set'"),
    "image_size": not_given(f"{_SIZES}224 × 224 images)"),
    "channels": not_given(f"{_SIZES}channels 32, 64, 128, 256)"),
    "expansion": not_given(f"{_SIZES}expansion 5)"),
    "groups": not_given(f"{_SIZES}8 groups)"),
    "downsample": not_given(f"{_SIZES}two stride-2 stem layers)"),
    "epochs": not_given(f"{_TRAINING}50 epochs for the conv DEQ)"),
    "batch_size": not_given(f"{_TRAINING}batch 100)"),
    "lr": not_given(f"{_TRAINING}Adam, cosine annealing, lr 0.001)"),
    "solver": not_given("Section 4.2.2 gives no solver (Bai et al.'s code: Broyden)"),
    "tol": not_given(
        "Section 4.2.2 gives no solver tolerance (Bai et al.'s code stops "
        "Broyden at ‖f(z) − z‖ < 1e-5 √(state size), else after F_THRES steps)"
    ),
    "max_iter": not_given(
        "Section 4.2.2 gives no solver iteration limit (Bai et al.'s "
        "ImageNet MDEQ-Small: F_THRES = 26 Broyden steps)"
    ),
    "grid": paper(51, "Section 4.2.1: 'the resolution is 51×51' over [−1, 1]² (Section 4.2)"),
    "flat_delta": not_given("Figure 4.5 is a plot: the loss level of 'flat' is ours"),
    "flat_fraction": not_given("Section 3.1 calls the minimum 'flat': the fraction is ours"),
    "seed": measurement(),
}


def _class_limit(config: MDEQLandscapeConfig) -> int:
    """At most 1000 classes on ImageNet, 10 on the others."""
    return 1000 if config.dataset == "imagenet" else 10


CLASSES = Rule(
    lambda c: 2 <= c.classes <= _class_limit(c),
    lambda c: f"be in [2, {_class_limit(c)}] for {c.dataset}",
)


@dataclass(frozen=True)
class MDEQLandscapeConfig(MinibatchTraining):
    """Defaults: the thesis's ImageNet setting (sizes of Bai et al.'s MDEQ-Small)."""

    dataset: str = "imagenet"
    classes: int = 20
    n_train: int = 26_000
    n_eval: int = 1024
    image_size: int = 224
    channels: tuple[int, ...] = (32, 64, 128, 256)
    expansion: int = 5
    groups: int = 8
    downsample: int = 2
    solver: str = "broyden"
    tol: float = 1e-3
    max_iter: int = 26
    grid: int = 51
    flat_delta: float = 0.5
    flat_fraction: float = 0.25

    constraints: ClassVar = {
        "dataset": OneOf(DATASETS),
        "solver": OneOf(tuple(SOLVERS)),
        "classes": CLASSES,
        "n_train": Interval("classes"),
        "n_eval": Interval("classes"),
        "grid": Interval(3),
        "image_size": Interval(1),
        "expansion": Interval(1),
        "groups": Interval(1),
        "max_iter": Interval(1),
        "downsample": Interval(0),
        "channels": (NONEMPTY, Interval(1)),
        "tol": POSITIVE,
        "flat_delta": POSITIVE,
        "flat_fraction": POSITIVE,
    }


def _balanced(images: torch.Tensor, labels: torch.Tensor, n: int, classes: int):
    """The first ``n`` images in class-interleaved order (per-class counts differ by ≤ 1)."""
    rank = torch.empty_like(labels)
    for c in labels.unique():
        where = (labels == c).nonzero().flatten()
        rank[where] = torch.arange(len(where))
    keep = torch.argsort(rank * classes + labels)[:n]
    return images[keep], labels[keep]


def load_images(config: MDEQLandscapeConfig, split: str, n: int, seed: int):
    """``n`` images ``(n, 3, image_size, image_size)`` in [0, 1] and labels, balanced."""
    per_class = -(-n // config.classes)
    if config.dataset == "imagenet":
        from deqlab.data.imagenet import read_imagenet

        images, labels = read_imagenet(
            "val" if split == "test" else split,
            classes=config.classes,
            n_per_class=per_class,
            size=config.image_size,
            seed=seed,
        )
        return _balanced(images, labels, n, config.classes)
    data = get_dataset(
        config.dataset,
        n_per_class=per_class,
        classes=tuple(range(config.classes)),
        labels="index",
        normalize=False,
        grayscale=False,
        seed=seed,
        dtype=torch.float32,
        split="train" if config.dataset == STANDIN else split,
    )
    channels = 3 if config.dataset == "cifar10" else 1
    side = round((data.X.shape[0] // channels) ** 0.5)
    images = data.X.T.reshape(-1, channels, side, side)
    if side != config.image_size:
        images = F.interpolate(images, size=config.image_size, mode="bilinear", align_corners=False)
    return _balanced(images.expand(-1, 3, -1, -1).contiguous(), data.y, n, config.classes)


def build_model(config: MDEQLandscapeConfig, device: str) -> MDEQ:
    """The MDEQ of ``config`` (seeded; the authors' initialisation and weight normalisation),
    solved per image by ``config.solver`` (tol, max_iter; not raising)."""
    torch.manual_seed(config.seed)
    solver = SOLVERS[config.solver](
        tol=config.tol, max_iter=config.max_iter, throw=False, per_sample=True
    )
    model = MDEQ(
        3,
        config.classes,
        channels=config.channels,
        expansion=config.expansion,
        groups=config.groups,
        downsample=config.downsample,
        solver=solver,
    )
    return model.to(device=device, dtype=torch.float32)


def eval_residual(model: MDEQ, batches: list[tuple[torch.Tensor, torch.Tensor]]) -> float:
    """The largest relative residual ``‖f(z) − z‖ / ‖f(z)‖`` of the solver's answer over
    the images of ``batches`` (the solver's own per-image measure, max over batches)."""
    residual = 0.0
    with torch.no_grad():
        for xb, _ in batches:
            model.features(xb)
            residual = max(residual, float(model.deq.last_forward.residual))
    return residual


class CappedSolves:
    """Counts, per call of a loss function, the forward solves of ``model.deq`` that used all
    ``max_iter`` iterations (a forward hook on the DEQ, so warm starts are kept).

    ``points`` ends as the number of calls (grid evaluations) with at least one such solve.
    """

    def __init__(self, model: MDEQ, loss_fn: Callable[[nn.Module], float], max_iter: int):
        self.loss_fn, self.max_iter = loss_fn, max_iter
        self.solves = self.points = 0
        self.hook = model.deq.register_forward_hook(self._count)

    def _count(self, deq: nn.Module, inputs: object, output: object) -> None:
        self.solves += deq.last_forward.n_steps >= self.max_iter

    def __call__(self, module: nn.Module) -> float:
        before = self.solves
        value = self.loss_fn(module)
        self.points += self.solves > before
        return value


def cifar10_present() -> bool:
    """Whether both CIFAR-10 splits are on this machine and readable."""
    from deqlab.data import check_split

    return all(check_split("cifar10", split).status == "present" for split in ("train", "test"))


@register
class Hieu2022LandscapeMDEQ(Experiment):
    """The filter-normalised loss surface of a trained multiscale DEQ."""

    slug = "landscape-mdeq"
    title = "Loss landscape of a trained MDEQ (Figures 3.1 and 4.5)"
    paper = HIEU
    report = mdeq_landscape_report
    where = "Section 4.2.2"
    Config = MDEQLandscapeConfig
    presets: ClassVar = {
        "tiny": {
            "dataset": "digits",
            "classes": 10,
            "n_train": 40,
            "n_eval": 20,
            "image_size": 8,
            "channels": (4, 4),
            "expansion": 1,
            "groups": 2,
            "downsample": 0,
            "epochs": 1,
            "batch_size": 20,
            "max_iter": 8,
            "grid": 3,
        },
        "quick": {
            "dataset": "cifar10",
            "classes": 10,
            "n_train": 1000,
            "n_eval": 200,
            "image_size": 32,
            "channels": (8, 16),
            "expansion": 2,
            "groups": 4,
            "downsample": 0,
            "epochs": 8,
            "batch_size": 50,
            "max_iter": 22,
            "grid": 15,
        },
        "paper": {},
    }
    paper_setting: ClassVar = PAPER_SETTING
    figure_captions: ClassVar = {
        "mdeq-landscape": (
            "Figures 3.1 and 4.5: the loss L(θ* + α d₁ + β d₂) of the trained MDEQ on the "
            "n_eval held-out images around its parameters θ* (star), along two "
            "filter-normalised random directions, as contours (thick: L(θ*) + flat_delta, "
            "local minima of the grid marked ×) and as a surface."
        ),
    }
    metric_columns: ClassVar = {
        "model": "mdeq",
        "alpha": "coordinate along the first filter-normalised direction (likewise beta)",
        "loss": "cross-entropy on the n_eval held-out images at θ* + α d₁ + β d₂",
        "epoch": "training epoch (training rows)",
        "train_loss": "mean cross-entropy of the epoch (training rows)",
        "solver_steps": "mean forward solver steps per batch of the epoch (training rows)",
        "residual": "the solver's largest relative residual on the held-out images after the "
        "epoch (epoch 0: at initialisation)",
        "capped_points": "grid evaluations at which a batch solve used all max_iter iterations "
        "(surface rows; the same on each)",
    }
    default_checkpoint_every = 1

    def resolve(self, preset: str = "quick", **kwargs: object) -> MDEQLandscapeConfig:
        """As :meth:`Experiment.resolve`; CIFAR-10 gives way to the stand-in (digits) when it
        is not on this machine (``deqlab data fetch cifar10`` to run on CIFAR-10 itself)."""
        config = super().resolve(preset, **kwargs)
        if config.dataset == "cifar10" and not cifar10_present():
            config = dataclasses.replace(config, dataset=STANDIN)
        return config

    def tasks(self, config: MDEQLandscapeConfig) -> list[Task]:
        return [Task("mdeq")]

    def run_task(self, config: MDEQLandscapeConfig, task: Task, ctx: TaskContext) -> list[Row]:
        images, labels = load_images(config, "train", config.n_train, config.seed)
        x, y = load_images(config, "test", config.n_eval, config.seed + 1)
        images, labels, x, y = (t.to(ctx.device) for t in (images, labels, x, y))
        model = build_model(config, ctx.device)
        batches = [
            (x[i : i + config.batch_size], y[i : i + config.batch_size])
            for i in range(0, len(y), config.batch_size)
        ]

        def residual_row(epoch: int, net: MDEQ) -> list[Row]:
            return [{"model": task.key, "epoch": epoch, "residual": eval_residual(net, batches)}]

        rows = train_classifier(
            model, images, labels, config, ctx, base={"model": task.key}, on_epoch=residual_row
        )
        model.cell.fold_weight_norm()  # the surface is over the convolution weights
        counted = CappedSolves(model, dataset_loss(F.cross_entropy, batches), config.max_iter)
        surface = loss_surface(
            model,
            counted,
            steps=config.grid,
            generator=torch.Generator().manual_seed(config.seed + 2),
            progress=False,
        )
        counted.hook.remove()
        grid = surface.alphas.tolist()
        return rows + [
            {
                "model": task.key,
                "alpha": a,
                "beta": b,
                "loss": float(surface.losses[i, j]),
                "capped_points": counted.points,
            }
            for i, a in enumerate(grid)
            for j, b in enumerate(grid)
        ]

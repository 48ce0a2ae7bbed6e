"""Kawaguchi (2021), Appendix D.1: the data of Figure 1 and Figures 4–8 (:mod:`.fig1`).

Data sets: the paper's CIFAR-10, CIFAR-100 and Kuzushiji-MNIST (Figure 1; Appendix D.2,
Figure 4, adds MNIST, SVHN, SEMEION and Fashion-MNIST).  The ``paper`` and ``quick``
presets read those of the paper's sets that are on this machine and replace the others by
one stand-in (:func:`paper_datasets`, listed in the deviations): ``sphere``, points on the
sphere of radius √784 in R^784 (MNIST's pixel count), so that Φ = R X_pre keeps rank
n_train = 100 — the interpolation regime the 200-point design relies on (sklearn's 8×8
``digits`` has rank ≤ 64 < 100 and is no stand-in; the ``tiny`` preset uses it with 20
points).

:func:`teacher_data` draws the projected images x = R x_pre and the teacher targets
y = B* z*(x; A*) + δ that :mod:`.fig1`'s docstring describes.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch

from deqlab.data.inventory import check_split
from deqlab.data.preprocess import to_grayscale
from deqlab.data.registry import (
    IMAGE_DATASETS,
    dataset_splits,
    get_dataset,
    load_images,
    n_classes,
)
from deqlab.models.delm import DELM

if TYPE_CHECKING:
    from deqlab.experiments.kawaguchi2021.fig1 import Fig1Config

#: Figure 1's data sets (Section 2.2, Appendix D.1).
PAPER_DATASETS = ("cifar10", "cifar100", "kmnist")
#: Figure 4's (Appendix D.2, "Additional datasets").
FIG4_DATASETS = ("mnist", "svhn", "semeion", "fashion-mnist")
#: Figures 5–8's panels (a)–(g) (Appendix D.2).
ALL_DATASETS = ("kmnist", "cifar10", "cifar100", "fashion-mnist", "mnist", "semeion", "svhn")
#: The figures this experiment reproduces (Section 2.2; Appendix D.2) and their data sets.
FIGURE_DATASETS = {
    1: PAPER_DATASETS,
    4: FIG4_DATASETS,
    5: ALL_DATASETS,
    6: ALL_DATASETS,
    7: ALL_DATASETS,
    8: ALL_DATASETS,
}
#: The stand-in's train and test sizes when every image is used (Figure 8): MNIST's.
WHOLE_STANDIN = (60_000, 10_000)
#: The stand-in for the paper's sets that are missing, and its dimension (MNIST's pixels).
STANDIN, STANDIN_DIM = "sphere", 784
#: The data sets Figure 1 can run on.
FIG1_DATASETS = (*IMAGE_DATASETS, STANDIN)


def is_present(name: str) -> bool:
    """Whether every split of image set ``name`` is on this machine and readable."""
    return all(check_split(name, split).status == "present" for split in dataset_splits(name))


def paper_datasets(wanted: tuple[str, ...] = PAPER_DATASETS) -> tuple[str, ...]:
    """The sets of ``wanted`` present here, then :data:`STANDIN` if any is missing."""
    present = tuple(name for name in wanted if is_present(name))
    return present + ((STANDIN,) if len(present) < len(wanted) else ())


def teacher_data(config: Fig1Config, dataset: str, device: str) -> dict[str, torch.Tensor]:
    """Projected images and teacher targets: X_train (m_x, n_train), y_train (1, n_train), …"""
    generator = torch.Generator().manual_seed(config.seed)
    pre_train, pre_test = _pre_images(config, dataset, generator)
    m = config.m_x
    f64 = {"generator": generator, "dtype": torch.float64}
    R = torch.randn(m, pre_train.shape[0], **f64) / math.sqrt(m)
    A_star, B_star = torch.randn(m, m, **f64), torch.randn(1, m, **f64)
    teacher = DELM.from_matrices(A_star, B_star, gamma=config.gamma)
    data = {}
    for split, pre in (("train", pre_train), ("test", pre_test)):
        X = R @ pre  # (m_x, n)
        with torch.no_grad():
            y = teacher(X) + torch.randn(1, X.shape[1], **f64)  # (1, n)
        data[f"X_{split}"], data[f"y_{split}"] = X.to(device), y.to(device)
    return data


def _pre_images(
    config: Fig1Config, dataset: str, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """x_pre of the training and test points (d_pre, n), pixels in [0, 1] (images).

    ``n_train = n_test = 0``: every image of each split (Figure 8); a single-split set is
    halved at random, the stand-in has MNIST's 60000 + 10000 points.
    """
    whole = config.n_train == 0
    n_train, n_test = (
        (WHOLE_STANDIN if dataset == STANDIN else (0, 0))
        if whole
        else (config.n_train, config.n_test)
    )
    if dataset == STANDIN:
        both = get_dataset(STANDIN, n=n_train + n_test, d=STANDIN_DIM, seed=config.seed).X
    elif dataset_splits(dataset) == ("train",):  # one split: draw both sets, halve at random
        both = (
            _whole(dataset, "train")
            if whole
            else get_dataset(dataset, n=n_train + n_test, **_image_options(config, dataset)).X
        )
        n_train = both.shape[1] // 2 if whole else n_train
    elif whole:
        return _whole(dataset, "train"), _whole(dataset, "test")
    else:
        options = _image_options(config, dataset)
        return (
            get_dataset(dataset, n=n_train, split="train", **options).X,
            get_dataset(dataset, n=n_test, split="test", **options).X,
        )
    order = torch.randperm(both.shape[1], generator=generator)
    return both[:, order[:n_train]], both[:, order[n_train:]]


def _whole(dataset: str, split: str) -> torch.Tensor:
    """Every image of a split as columns (d_pre, N), pixels in [0, 1], colour as luma."""
    raw = load_images(dataset, split)
    images = torch.as_tensor(raw.images, dtype=torch.float64) / raw.pixel_max  # (N, C, H, W)
    if images.shape[1] == 3:
        images = to_grayscale(images)
    return images.reshape(images.shape[0], -1).T


def _image_options(config: Fig1Config, dataset: str) -> dict[str, object]:
    """Images drawn from every class, raw pixels in [0, 1]."""
    classes = tuple(range(n_classes(dataset)))
    return {
        "n_per_class": None,
        "classes": classes,
        "labels": "index",
        "normalize": False,
        "seed": config.seed,
    }

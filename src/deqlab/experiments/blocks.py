"""Blocks of config fields that several experiments share, each with its constraints.

An experiment config inherits the blocks it uses and adds its own fields; a block's
defaults are the papers' settings, and a config may override one by declaring the field
again (its place in the config stays the block's)::

    @dataclass(frozen=True)
    class Thm2Config(DELMSynthetic):
        noise: float = 0.1
        steps: int = 2000        # the block's field, this experiment's default
        constraints: ClassVar = {"noise": NONNEGATIVE}

Kawaguchi (2021) Section 4: synthetic data and full-batch GD on a DELM (:class:`DELMSynthetic`).
Hieu (2022) Chapter 4: a convolutional DEQ cell (:class:`ConvDEQBlock`) trained by Adam on
mini-batches (:class:`MinibatchTraining`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from deqlab.experiments.constraints import FRACTION, POSITIVE, SEED, Config, Interval

AT_LEAST_1 = Interval(1)


@dataclass(frozen=True)
class DELMSynthetic(Config):
    """n samples of dimension d, a DELM with γ, trained by GD with step ``lr`` for
    ``steps`` steps from ``seed`` (Kawaguchi 2021, Section 4 and Appendix D)."""

    n: int = 1000
    d: int = 10
    gamma: float = 0.8
    lr: float = 1e-5
    steps: int = 2000
    seed: int = 0

    constraints: ClassVar = {
        "n": AT_LEAST_1,
        "d": AT_LEAST_1,
        "gamma": FRACTION,
        "lr": POSITIVE,
        "steps": AT_LEAST_1,
        "seed": SEED,
    }


@dataclass(frozen=True)
class ConvDEQBlock(Config):
    """The conv residual DEQ cell of the thesis (Section 4.1.1): ``channels`` and
    ``inner_channels`` with GroupNorm over ``groups``, solved to ``tol`` in at most
    ``max_iter`` iterations."""

    channels: int = 48
    inner_channels: int = 64
    groups: int = 8
    tol: float = 1e-3
    max_iter: int = 50

    constraints: ClassVar = {
        "channels": AT_LEAST_1,
        "inner_channels": AT_LEAST_1,
        "groups": AT_LEAST_1,
        "tol": POSITIVE,
        "max_iter": AT_LEAST_1,
    }


@dataclass(frozen=True)
class MinibatchTraining(Config):
    """Adam with cosine annealing over ``epochs`` of mini-batches of ``batch_size``,
    step ``lr``, from ``seed`` (the thesis, Sections 4.1.2 and 4.2.1)."""

    epochs: int = 50
    batch_size: int = 100
    lr: float = 1e-3
    seed: int = 0

    constraints: ClassVar = {
        "epochs": AT_LEAST_1,
        "batch_size": AT_LEAST_1,
        "lr": POSITIVE,
        "seed": SEED,
    }

"""The convolutional residual DEQ of the thesis, Chapter 4, and its weight-tied explicit twin.

The cell, Eq. (4.1), with GroupNorm as ``norm`` and ``*`` a 3 × 3 convolution:

    f(z, x) = norm(relu(z + norm(x + W₂ * norm(relu(W₁ * z))))),

(as in the Deep Implicit Layers tutorial of Duvenaud, Kolter & Johnson 2020, whose model the
thesis uses). The input ``x`` is injected from a small stem (conv 3 × 3 + GroupNorm); the
head is GroupNorm → average pool to 4 × 4 → linear. `ConvDEQ` takes the equilibrium
``z* = f(z*, x)`` (Anderson, exact implicit gradient, :class:`deqlab.DEQ`); `WeightTiedConvNet`
applies the same cell ``k`` times from ``z = 0`` (repeat-6/11/18 of Section 4.2.1).
``init_std`` is the standard deviation of the entries of W₁, W₂ (thesis, Section 4.1.1:
N(0, 1) versus the small N(0, 0.01), read as ``normal_(0, 0.01)`` like the tutorial code).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from deqlab._checks import check_int, check_positive, check_tensor
from deqlab.implicit import DEQ, Backward, Implicit
from deqlab.solvers import Anderson, Solver

#: Forward solver of Section 4.1.2 (Anderson, tol 1e-2, 50 iterations); not raising on
#: non-convergence, so that a badly initialised model (N(0, 1)) can still be trained and
#: inspected; ``last_forward.status`` tells.
DEFAULT_SOLVER = Anderson(tol=1e-2, max_iter=50, throw=False)


def _check_groups(channels: int, groups: int, name: str) -> None:
    if channels % groups:
        raise ValueError(
            f"`{name}` = {channels} must be divisible by `groups` = {groups} (GroupNorm)"
        )


class ConvDEQCell(nn.Module):
    """``f(z, x)`` of Eq. (4.1); ``z`` and ``x`` of shape ``(B, channels, H, W)``."""

    def __init__(
        self,
        channels: int = 48,
        inner_channels: int = 64,
        *,
        groups: int = 8,
        kernel_size: int = 3,
        init_std: float = 0.01,
    ) -> None:
        super().__init__()
        channels = check_int("channels", channels, min_value=1)
        inner_channels = check_int("inner_channels", inner_channels, min_value=1)
        groups = check_int("groups", groups, min_value=1)
        kernel_size = check_int("kernel_size", kernel_size, min_value=1)
        if kernel_size % 2 == 0:
            raise ValueError(f"`kernel_size` must be odd (same padding); got {kernel_size}")
        _check_groups(channels, groups, "channels")
        _check_groups(inner_channels, groups, "inner_channels")
        pad = kernel_size // 2
        self.conv1 = nn.Conv2d(channels, inner_channels, kernel_size, padding=pad, bias=False)
        self.conv2 = nn.Conv2d(inner_channels, channels, kernel_size, padding=pad, bias=False)
        self.norm1 = nn.GroupNorm(groups, inner_channels)
        self.norm2 = nn.GroupNorm(groups, channels)
        self.norm3 = nn.GroupNorm(groups, channels)
        std = check_positive("init_std", init_std)
        with torch.no_grad():
            self.conv1.weight.normal_(0.0, std)
            self.conv2.weight.normal_(0.0, std)

    def forward(self, z: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        y = self.norm1(F.relu(self.conv1(z)))
        return self.norm3(F.relu(z + self.norm2(x + self.conv2(y))))


def relative_residual(fz: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """Eq. (4.2) per sample: ``‖f(z) − z‖₂ / ‖f(z)‖₂`` over all but dim 0; shape ``(B,)``."""
    diff = torch.linalg.vector_norm((fz - z).flatten(1), dim=1)
    return diff / torch.linalg.vector_norm(fz.flatten(1), dim=1).clamp_min(1e-12)


class _ConvClassifier(nn.Module):
    """Stem → core (``z`` from the injected input) → head; the core is the subclass's."""

    def __init__(self, in_channels: int, num_classes: int, channels: int, groups: int) -> None:
        super().__init__()
        in_channels = check_int("in_channels", in_channels, min_value=1)
        num_classes = check_int("num_classes", num_classes, min_value=2)
        self.stem = nn.Sequential(
            nn.Conv2d(in_channels, channels, 3, padding=1), nn.GroupNorm(groups, channels)
        )
        self.head = nn.Sequential(
            nn.GroupNorm(groups, channels),
            nn.AdaptiveAvgPool2d(4),
            nn.Flatten(),
            nn.Linear(channels * 16, num_classes),
        )

    def inject(self, images: torch.Tensor) -> torch.Tensor:
        """The injected input ``x = stem(images)``, shape ``(B, channels, H, W)``."""
        images = check_tensor("images", images, ndim=4)
        expected = self.stem[0].in_channels
        if images.shape[1] != expected:
            raise ValueError(
                f"`images` must have shape (B, {expected}, H, W); got {tuple(images.shape)}"
            )
        return self.stem(images)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Class logits ``(B, num_classes)`` for images ``(B, in_channels, H, W)``."""
        return self.head(self.features(self.inject(images)))


def experiment_deq(cell: nn.Module, solver: Solver, backward: Backward | None) -> DEQ:
    """The DEQ layer of the thesis' conv models, with the experiments' strictness: a
    raising solver raises, one with ``throw=False`` returns its best iterate silently (the
    tables record the residual); every sample iterates until the last one converges (no
    row compaction); ``backward`` defaults to ``Implicit()``."""
    if not isinstance(solver, Solver):
        raise TypeError(f"`solver` must be a Solver (Picard, Anderson, Broyden); got {solver!r}")
    backward = Implicit() if backward is None else backward
    on_failure = "raise" if solver.throw else "record"
    return DEQ(cell, solver=solver, backward=backward, on_failure=on_failure, row_compaction=False)


class ConvDEQ(_ConvClassifier):
    """Classifier whose core is the equilibrium ``z* = f(z*, x)`` of Eq. (4.1), from ``z = 0``.

    ``solver`` defaults to :data:`DEFAULT_SOLVER`; ``backward`` to the exact implicit gradient.
    ``deq.last_forward`` holds the latest `Solution`.
    """

    def __init__(
        self,
        in_channels: int = 1,
        num_classes: int = 10,
        *,
        channels: int = 48,
        inner_channels: int = 64,
        groups: int = 8,
        init_std: float = 0.01,
        solver: Solver | None = None,
        backward: Backward | None = None,
    ) -> None:
        cell = ConvDEQCell(channels, inner_channels, groups=groups, init_std=init_std)
        super().__init__(in_channels, num_classes, channels, groups)
        self.deq = experiment_deq(cell, DEFAULT_SOLVER if solver is None else solver, backward)

    @property
    def cell(self) -> ConvDEQCell:
        """The cell ``f`` of Eq. (4.1) (registered once, as ``deq.cell``)."""
        return self.deq.cell

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.deq(x)

    @torch.no_grad()
    def trajectory(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The solver's iterates ``z^[i]`` and their relative residuals (Eq. 4.2).

        Runs the model's solver from ``z = 0`` and records every point where it evaluates
        ``f``: returns ``iterates`` of shape ``(steps, B, C, H, W)`` and ``residuals`` of
        shape ``(steps, B)`` (thesis, Figures 4.1–4.3).
        """
        x = self.inject(images)
        iterates, residuals = [], []

        def f(z: torch.Tensor) -> torch.Tensor:
            fz = self.cell(z, x)
            iterates.append(z)
            residuals.append(relative_residual(fz, z))
            return fz

        self.deq.solver(f, torch.zeros_like(x))
        return torch.stack(iterates), torch.stack(residuals)


class WeightTiedConvNet(_ConvClassifier):
    """Explicit network applying the cell of Eq. (4.1) ``repeats`` times: ``z ← f(z, x)``."""

    def __init__(
        self,
        repeats: int,
        in_channels: int = 1,
        num_classes: int = 10,
        *,
        channels: int = 48,
        inner_channels: int = 64,
        groups: int = 8,
        init_std: float = 0.01,
    ) -> None:
        cell = ConvDEQCell(channels, inner_channels, groups=groups, init_std=init_std)
        super().__init__(in_channels, num_classes, channels, groups)
        self.cell = cell
        self.repeats = check_int("repeats", repeats, min_value=1)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        z = torch.zeros_like(x)
        for _ in range(self.repeats):
            z = self.cell(z, x)
        return z

"""The multiscale deep equilibrium model (MDEQ; Bai, Koltun & Kolter 2020), small sizes.

The thesis visualises the loss landscape of a trained MDEQ (Hieu 2022, Figure 3.1 in
Section 3.1 and Figure 4.5 in Section 4.2.2). Its state holds ``S`` resolutions at once,
``z = (z_1, …, z_S)`` with ``z_s`` of shape ``(B, c_s, H / 2^{s−1}, W / 2^{s−1})``, and one
cell ``f`` updates them all; the model takes the equilibrium across scales

    z* = f(z*, x),        f(z, x)_i = post_i( Σ_j F_ij( b_j(z_j, x_j) ) ),

(Bai et al. 2020, Section 3.2, their Figure 2):

- **residual block** per scale, ``b_s(z, x) = GN(ReLU(z + GN(W₂ * ReLU(GN(W₁ * z)) + x)))``
  (``*`` a 3 × 3 convolution, ``W₁`` widening ``c_s`` to ``expansion · c_s`` channels, GN
  GroupNorm); the input ``x = stem(images)`` is injected at the finest scale only
  (``x_1 = x``, ``x_s = 0`` for ``s > 1``), as in the authors' code;
- **multiscale fusion** ``F_ij`` from scale ``j`` to ``i``: the identity for ``i = j``;
  up-sampling for ``j > i`` (1 × 1 convolution, GN, nearest up-sampling by ``2^{j−i}``);
  down-sampling for ``j < i`` (``i − j`` stride-2 3 × 3 convolutions with GN, ReLU between);
- **post-fusion** ``post_i(u) = GN(V_i * ReLU(u))`` with ``V_i`` a 1 × 1 convolution (its
  GroupNorm with half the groups, as the authors' ``NUM_GROUPS // 2``).

As in the authors' code (``lib/models/mdeq_core.py``, ``lib/models/mdeq.py`` of
github.com/locuslab/mdeq): every convolution starts from ``N(0, 0.01²)`` (``init_std``), and
``W₁``, ``W₂``, ``V_i`` are weight-normalised, ``W = g · v / ‖v‖`` per output filter (Salimans
& Kingma 2016; ``g`` starts at ``‖v‖``, so the function at initialisation is unchanged and
only the training dynamics differ). The cell is not a contraction: GroupNorm makes each
branch scale-invariant in its input, so the Jacobian ``J_f`` has spectral radius about 2 at a
random initialisation whatever the weight scale; the authors stop Broyden after a fixed
budget (``F_THRES`` 18–30 iterations) rather than at a tolerance.

The equilibrium is solved by any solver of :mod:`deqlab.solvers` (Picard, Anderson, Broyden)
through :class:`deqlab.DEQ` on the tuple state, with the exact implicit gradient of
:mod:`deqlab.implicit` (``u = g + J_fᵀu`` on the packed state). The head is ours (the
authors' bottleneck head is larger): GN → global average pool at every scale, concatenated,
→ BatchNorm → linear. The pooled GroupNorm features vary little between images (std ≈ 0.03
at initialisation), so without the BatchNorm (the authors' head ends in one too) Adam at lr
1e-3 barely moves the logits in a few hundred steps. That BatchNorm keeps no running
statistics: it normalises with the statistics of the batch it is given, in training and
evaluation alike (a loss surface over fixed batches is then a fixed function of θ).
GroupNorm everywhere else (the authors' stem has BatchNorm).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils import parametrizations, parametrize

from deqlab._checks import check_bool, check_int, check_positive, check_tensor
from deqlab.implicit import Backward
from deqlab.models.conv_deq import experiment_deq
from deqlab.solvers import Anderson, Solver

#: Forward solver default: Anderson per sample (GroupNorm acts on each image alone), tol 1e-2
#: as :data:`deqlab.models.conv_deq.DEFAULT_SOLVER` (the thesis's Section 4.1.2), at most 30
#: iterations (the authors' largest Broyden budget, ``F_THRES``), not raising.
DEFAULT_SOLVER = Anderson(tol=1e-2, max_iter=30, throw=False, per_sample=True)
#: The authors' initialisation: every convolution weight ``N(0, 0.01²)``.
INIT_STD = 0.01

State = list[torch.Tensor]


def _check_channels(channels: object, groups: int) -> tuple[int, ...]:
    """``channels``: a non-empty sequence of ints ≥ 1, each divisible by ``groups``."""
    if not isinstance(channels, Sequence) or isinstance(channels, str) or not channels:
        raise TypeError(f"`channels` must be a non-empty sequence of ints; got {channels!r}")
    out = tuple(check_int("channels", c, min_value=1) for c in channels)
    for c in out:
        if c % groups:
            raise ValueError(f"`channels` {list(out)} must all be divisible by `groups` = {groups}")
    return out


class ResidualBlock(nn.Module):
    """``b(z, x) = GN(ReLU(z + GN(W₂ * ReLU(GN(W₁ * z)) + x)))`` on one scale."""

    def __init__(self, channels: int, expansion: int, groups: int) -> None:
        super().__init__()
        inner = channels * expansion
        self.conv1 = nn.Conv2d(channels, inner, 3, padding=1, bias=False)
        self.conv2 = nn.Conv2d(inner, channels, 3, padding=1, bias=False)
        self.norm1 = nn.GroupNorm(groups, inner)
        self.norm2 = nn.GroupNorm(groups, channels)
        self.norm3 = nn.GroupNorm(groups, channels)

    def forward(self, z: torch.Tensor, x: torch.Tensor | None = None) -> torch.Tensor:
        y = self.conv2(F.relu(self.norm1(self.conv1(z))))
        y = self.norm2(y if x is None else y + x)
        return self.norm3(F.relu(z + y))


def _upsample(c_in: int, c_out: int, levels: int, groups: int) -> nn.Module:
    """``F_ij`` for ``j > i``: 1 × 1 conv, GN, nearest up-sampling by ``2^levels``."""
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, 1, bias=False),
        nn.GroupNorm(groups, c_out),
        nn.Upsample(scale_factor=2**levels, mode="nearest"),
    )


def _downsample(c_in: int, c_out: int, levels: int, groups: int) -> nn.Module:
    """``F_ij`` for ``j < i``: ``levels`` stride-2 3 × 3 convs with GN, ReLU between."""
    layers: list[nn.Module] = []
    for k in range(levels):
        last = k == levels - 1
        width = c_out if last else c_in
        layers += [nn.Conv2d(c_in, width, 3, stride=2, padding=1, bias=False)]
        layers += [nn.GroupNorm(groups, width)] + ([] if last else [nn.ReLU()])
    return nn.Sequential(*layers)


class MDEQCell(nn.Module):
    """``f(z, x)`` of the module docstring; ``z`` a list of ``S`` tensors, ``x`` the finest-
    scale injection ``(B, channels[0], H, W)`` with ``H, W`` divisible by ``2^{S−1}``.

    ``init_std``: the standard deviation of every convolution weight (default the authors'
    0.01; None keeps PyTorch's default). ``weight_norm``: weight-normalise ``W₁, W₂, V_i``.
    """

    def __init__(
        self,
        channels: Sequence[int] = (24, 24),
        *,
        expansion: int = 5,
        groups: int = 8,
        init_std: float | None = INIT_STD,
        weight_norm: bool = True,
    ) -> None:
        super().__init__()
        groups = check_int("groups", groups, min_value=1)
        self.channels = _check_channels(channels, groups)
        expansion = check_int("expansion", expansion, min_value=1)
        c, n = self.channels, len(self.channels)
        self.blocks = nn.ModuleList(ResidualBlock(ch, expansion, groups) for ch in c)
        self.fuse = nn.ModuleList(
            nn.ModuleList(
                nn.Identity() if i == j
                else _upsample(c[j], c[i], j - i, groups) if j > i
                else _downsample(c[j], c[i], i - j, groups)
                for j in range(n)
            )
            for i in range(n)
        )  # fmt: skip
        self.post = nn.ModuleList(
            nn.Sequential(
                nn.ReLU(), nn.Conv2d(ch, ch, 1, bias=False), nn.GroupNorm(max(groups // 2, 1), ch)
            )
            for ch in c
        )
        initialise(self, init_std)
        if check_bool("weight_norm", weight_norm):
            for conv in self.normalised_convs():
                parametrizations.weight_norm(conv, dim=0)

    def normalised_convs(self) -> list[nn.Conv2d]:
        """``W₁, W₂`` of every block and ``V_i`` of every post-fusion (the authors' set)."""
        convs = [conv for block in self.blocks for conv in (block.conv1, block.conv2)]
        return convs + [post[1] for post in self.post]

    def fold_weight_norm(self) -> None:
        """Replace each ``(g, v)`` by the weight ``W = g v / ‖v‖`` it gives (same function):
        the parameters are then the convolution weights themselves, as in a plain network."""
        for conv in self.normalised_convs():
            if parametrize.is_parametrized(conv, "weight"):
                parametrize.remove_parametrizations(conv, "weight", leave_parametrized=True)

    @property
    def scales(self) -> int:
        return len(self.channels)

    def state_shapes(self, x: torch.Tensor) -> list[tuple[int, ...]]:
        """The shape of each ``z_s`` for injection ``x``; one-line ValueError for a bad ``x``."""
        x = check_tensor("x", x, ndim=4)
        b, ch, h, w = x.shape
        step = 2 ** (self.scales - 1)
        if ch != self.channels[0] or h % step or w % step or h == 0 or w == 0:
            raise ValueError(
                f"`x` must have shape (B, {self.channels[0]}, H, W) with H, W positive multiples "
                f"of {step} (2^(scales−1), scales = {self.scales}); got {tuple(x.shape)}"
            )
        return [(b, c, h // 2**s, w // 2**s) for s, c in enumerate(self.channels)]

    def initial_state(self, x: torch.Tensor) -> State:
        """``z = 0`` at every scale (the DEQ's default starting point)."""
        return [x.new_zeros(shape) for shape in self.state_shapes(x)]

    def forward(self, z: Sequence[torch.Tensor], x: torch.Tensor) -> State:
        blocks = [block(zs, x if s == 0 else None) for s, (block, zs) in
                  enumerate(zip(self.blocks, z, strict=True))]  # fmt: skip
        return [
            post(sum(fuse_ij(b_j) for fuse_ij, b_j in zip(row, blocks, strict=True)))
            for post, row in zip(self.post, self.fuse, strict=True)
        ]


def initialise(module: nn.Module, std: float | None) -> None:
    """Every convolution of ``module``: weight (and bias) ``N(0, std²)``; None: unchanged."""
    if std is None:
        return
    std = check_positive("init_std", std)
    with torch.no_grad():
        for conv in module.modules():
            if isinstance(conv, nn.Conv2d):
                conv.weight.normal_(0.0, std)
                if conv.bias is not None:
                    conv.bias.normal_(0.0, std)


def _stem(in_channels: int, channels: int, groups: int, downsample: int) -> nn.Sequential:
    """3 × 3 conv–GN–ReLU layers, ``downsample`` of them of stride 2 (at least one layer)."""
    layers: list[nn.Module] = []
    for k in range(max(downsample, 1)):
        c_in, stride = (in_channels if k == 0 else channels), (2 if downsample else 1)
        layers += [nn.Conv2d(c_in, channels, 3, stride=stride, padding=1)]
        layers += [nn.GroupNorm(groups, channels), nn.ReLU()]
    return nn.Sequential(*layers)


class MDEQ(nn.Module):
    """Classifier: stem → the multiscale equilibrium ``z* = f(z*, x)`` → head (docstring).

    ``downsample``: stride-2 layers of the stem (Bai et al.'s ImageNet models use 2, their
    CIFAR-10 models 0), so the finest scale has ``H / 2^downsample`` rows.

    ``init_std`` and ``weight_norm`` as :class:`MDEQCell` (``init_std`` also sets the stem's
    convolutions, as the authors' ``init_weights``). ``solver`` defaults to
    :data:`DEFAULT_SOLVER`, ``backward`` to the exact implicit gradient; ``deq.last_forward``
    holds the latest solve's `Solution`.
    """

    def __init__(
        self,
        in_channels: int = 3,
        num_classes: int = 10,
        *,
        channels: Sequence[int] = (24, 24),
        expansion: int = 5,
        groups: int = 8,
        init_std: float | None = INIT_STD,
        weight_norm: bool = True,
        downsample: int = 0,
        solver: Solver | None = None,
        backward: Backward | None = None,
    ) -> None:
        super().__init__()
        downsample = check_int("downsample", downsample, min_value=0)
        cell = MDEQCell(
            channels, expansion=expansion, groups=groups, init_std=init_std, weight_norm=weight_norm
        )
        in_channels = check_int("in_channels", in_channels, min_value=1)
        num_classes = check_int("num_classes", num_classes, min_value=2)
        self.stem = _stem(in_channels, cell.channels[0], groups, downsample)
        initialise(self.stem, init_std)
        self.deq = experiment_deq(cell, DEFAULT_SOLVER if solver is None else solver, backward)
        self.head_norms = nn.ModuleList(nn.GroupNorm(groups, c) for c in cell.channels)
        self.head_batchnorm = nn.BatchNorm1d(sum(cell.channels), track_running_stats=False)
        self.classifier = nn.Linear(sum(cell.channels), num_classes)

    @property
    def cell(self) -> MDEQCell:
        """The cell ``f`` (registered once, as ``deq.cell``)."""
        return self.deq.cell

    def inject(self, images: torch.Tensor) -> torch.Tensor:
        """The injected input ``x = stem(images)``, shape ``(B, channels[0], H, W)``."""
        channels = self.stem[0].in_channels
        return self.stem(check_tensor("images", images, shape=(None, channels, None, None)))

    def features(self, images: torch.Tensor) -> State:
        """The equilibrium ``z*``: one tensor per scale."""
        x = self.inject(images)
        self.cell.state_shapes(x)  # the one-line error before the solver sees x
        return list(self.deq(x))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Class logits ``(B, num_classes)`` for images ``(B, in_channels, H, W)``."""
        z = self.features(images)
        pooled = [norm(zs).mean(dim=(2, 3)) for norm, zs in zip(self.head_norms, z, strict=True)]
        return self.classifier(self.head_batchnorm(torch.cat(pooled, dim=1)))

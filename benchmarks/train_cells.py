"""The five cells of bench_train_cells.py, as a DEQ researcher would write them, on 8 × 8 digits,
and what the training benchmarks share (the digits, minibatches, work counters).

Each kind is a stem (the input injection ``x``), a cell ``f(z, x)`` and a head; a state that is
not shaped like ``x`` comes from ``cell.initial_state(x)`` (zeros). Every cell counts the rows
it evaluates in :data:`COUNT` (full batches: rows / batch size), so that both libraries' work
is counted the same way.

* ``mlp``: ``z = tanh(W z + x)``, width 128, on the flattened image.
* ``conv``: ``z = GroupNorm(relu(conv₃ₓ₃(z) + x))``, 32 channels at 8 × 8 (the cell of
  bench_train_conv_deq.py).
* ``tuple``: a state ``(a, b)`` of widths 128 and 32: ``a = tanh(A a + B b + x)``,
  ``b = tanh(C a)``.
* ``multiscale``: ``(z₁, z₂)`` at 16 × 8 × 8 and 32 × 4 × 4, each a GroupNorm(relu(conv)) of
  its own resolution plus the other one resampled (strided conv down, nearest upsampling up)
  plus the input injected at that resolution.
* ``transformer``: the image's 8 rows as 8 tokens of width 32 (linear embedding + positions);
  ``h = LN(z + MHA(z) + x)``, ``z = LN(h + FF(h))`` with ``nn.MultiheadAttention`` (4 heads);
  the head reads the tokens flattened.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn


class Counter:
    """Cell evaluations and VJPs of the step being measured, both in full batches (rows / B)."""

    def __init__(self) -> None:
        self.reset(1)

    def reset(self, batch: int) -> None:
        self.rows, self.vjp_rows, self.batch = 0, 0, batch

    @property
    def evaluations(self) -> float:
        return self.rows / self.batch

    @property
    def vjps(self) -> float:
        return self.vjp_rows / self.batch


COUNT = Counter()
_GRAD = torch.autograd.grad


def _counted_grad(outputs, *args, **kwargs):
    """``torch.autograd.grad``, counting the rows of ``outputs`` it backpropagates (a VJP on
    the pending samples of a row-compacted solve counts as that fraction of a batch)."""
    first = outputs[0] if isinstance(outputs, tuple | list) else outputs
    COUNT.vjp_rows += first.shape[0] if first.ndim else COUNT.batch
    return _GRAD(outputs, *args, **kwargs)


@contextlib.contextmanager
def counting(batch: int):
    """Count the cell evaluations and VJPs of one training step of a batch of ``batch``."""
    COUNT.reset(batch)
    torch.autograd.grad = _counted_grad
    try:
        yield COUNT
    finally:
        torch.autograd.grad = _GRAD


@dataclass
class TrainingRun:
    """One library (or variant) being trained: its model, optimiser, and what each step
    measured: CPU time of the thread, wall time, cell evaluations, VJPs and the gradient's
    label (``label()`` after the step, e.g. ``"exact"`` / ``"approximate"``)."""

    name: str
    model: nn.Module
    opt: torch.optim.Optimizer
    label: Callable[[], str]
    cpu: list[float] = field(default_factory=list)
    wall: list[float] = field(default_factory=list)
    evaluations: list[float] = field(default_factory=list)
    vjps: list[float] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    reached: int | None = None

    def step(self, images: torch.Tensor, labels: torch.Tensor, sync) -> None:
        """One Adam step on the cross entropy, timed and counted (``sync``: the device's)."""
        with counting(images.shape[0]) as count:
            sync()
            cpu, wall = time.thread_time(), time.perf_counter()
            self.opt.zero_grad()
            nn.functional.cross_entropy(self.model(images), labels).backward()
            self.opt.step()
            sync()
            self.cpu.append(time.thread_time() - cpu)
            self.wall.append(time.perf_counter() - wall)
        self.evaluations.append(count.evaluations)
        self.vjps.append(count.vjps)
        self.labels.append(self.label())


def training_device(name: str, threads: int) -> torch.device:
    """``name`` as a device, with ``threads`` intra-op threads; exit 2 (one line) where CUDA
    is asked for and absent."""
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda but CUDA is not available", file=sys.stderr)
        raise SystemExit(2)
    torch.set_num_threads(threads)
    return device


def digits(device, n: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """sklearn's 8 × 8 digits (the first ``n``; all 1797 by default): images ``(n, 1, 8, 8)``
    scaled to [0, 1], and labels."""
    from sklearn.datasets import load_digits

    data = load_digits()
    images = torch.tensor(data.images, dtype=torch.float32)[:n, None] / 16.0
    return images.to(device), torch.tensor(data.target)[:n].to(device)


def batches(images, labels, size: int, seed: int):
    """Minibatches of ``size``, one seeded permutation per epoch, forever."""
    gen = torch.Generator().manual_seed(seed)
    while True:
        order = torch.randperm(images.shape[0], generator=gen).to(images.device)
        for i in range(0, images.shape[0] - size + 1, size):
            yield images[order[i : i + size]], labels[order[i : i + size]]


def _rows(z) -> int:
    return (z[0] if isinstance(z, tuple | list) else z).shape[0]


class MLPCell(nn.Module):
    def __init__(self, width: int = 128) -> None:
        super().__init__()
        self.W = nn.Linear(width, width)

    def forward(self, z, x):
        COUNT.rows += _rows(z)
        return torch.tanh(self.W(z) + x)


class ConvCell(nn.Module):
    def __init__(self, channels: int = 32) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)
        self.norm = nn.GroupNorm(8, channels)

    def forward(self, z, x):
        COUNT.rows += _rows(z)
        return self.norm(torch.relu(self.conv(z) + x))


class TupleCell(nn.Module):
    def __init__(self, width: int = 128, side: int = 32) -> None:
        super().__init__()
        self.A, self.B = nn.Linear(width, width), nn.Linear(side, width, bias=False)
        self.C = nn.Linear(width, side)
        self.side = side

    def initial_state(self, x):
        return (torch.zeros_like(x), x.new_zeros(x.shape[0], self.side))

    def forward(self, z, x):
        COUNT.rows += _rows(z)
        a, b = z
        return (torch.tanh(self.A(a) + self.B(b) + x), torch.tanh(self.C(a)))


class MultiScaleCell(nn.Module):
    def __init__(self, fine: int = 16, coarse: int = 32) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(fine, fine, 3, padding=1)
        self.conv2 = nn.Conv2d(coarse, coarse, 3, padding=1)
        self.down = nn.Conv2d(fine, coarse, 3, stride=2, padding=1)
        self.up = nn.Conv2d(coarse, fine, 1)
        self.inject = nn.Conv2d(fine, coarse, 3, stride=2, padding=1)
        self.norm1, self.norm2 = nn.GroupNorm(4, fine), nn.GroupNorm(8, coarse)
        self.coarse = coarse

    def initial_state(self, x):
        b, _, h, w = x.shape
        return (torch.zeros_like(x), x.new_zeros(b, self.coarse, h // 2, w // 2))

    def forward(self, z, x):
        COUNT.rows += _rows(z)
        z1, z2 = z
        up = nn.functional.interpolate(self.up(z2), scale_factor=2, mode="nearest")
        fine = self.norm1(torch.relu(self.conv1(z1) + up + x))
        coarse = self.norm2(torch.relu(self.conv2(z2) + self.down(z1) + self.inject(x)))
        return (fine, coarse)


class TransformerCell(nn.Module):
    def __init__(self, width: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.ff = nn.Sequential(nn.Linear(width, 2 * width), nn.GELU(), nn.Linear(2 * width, width))
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)

    def forward(self, z, x):
        COUNT.rows += _rows(z)
        h = self.ln1(z + self.attn(z, z, z, need_weights=False)[0] + x)
        return self.ln2(h + self.ff(h))


class Tokens(nn.Module):
    """The 8 rows of an image ``(B, 1, 8, 8)`` as 8 tokens of width ``width``, with positions."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.embed = nn.Linear(8, width)
        self.position = nn.Parameter(0.1 * torch.randn(8, width))

    def forward(self, images):
        return self.embed(images[:, 0]) + self.position


class First(nn.Module):
    """The first part of a tuple state (the head reads the main state)."""

    def forward(self, z):
        return z[0]


def build(kind: str) -> tuple[nn.Module, nn.Module, nn.Module]:
    """``(stem, cell, head)`` of one kind, with torch's default initialisation."""
    flat = nn.Flatten()
    if kind == "mlp":
        return nn.Sequential(flat, nn.Linear(64, 128)), MLPCell(), nn.Linear(128, 10)
    if kind == "tuple":
        head = nn.Sequential(First(), nn.Linear(128, 10))
        return nn.Sequential(flat, nn.Linear(64, 128)), TupleCell(), head
    if kind == "conv":
        stem = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.GroupNorm(8, 32))
        head = nn.Sequential(nn.GroupNorm(8, 32), flat, nn.Linear(32 * 64, 10))
        return stem, ConvCell(), head
    if kind == "multiscale":
        stem = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.GroupNorm(4, 16))
        head = nn.Sequential(First(), nn.GroupNorm(4, 16), flat, nn.Linear(16 * 64, 10))
        return stem, MultiScaleCell(), head
    if kind == "transformer":
        return Tokens(32), TransformerCell(), nn.Sequential(flat, nn.Linear(8 * 32, 10))
    raise ValueError(f"unknown cell kind {kind!r}; valid: {', '.join(KINDS)}")


KINDS = ("mlp", "conv", "tuple", "multiscale", "transformer")


class Net(nn.Module):
    """stem → ``layer(cell, x)`` (the DEQ of one library) → head."""

    def __init__(self, kind: str, layer, seed: int) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.stem, self.cell, self.head = build(kind)
        self.layer = layer(self.cell)

    def forward(self, images):
        return self.head(self.layer(self.stem(images)))


def with_weights(kind: str, layer, weights: Net) -> Net:
    """``kind``'s network with the DEQ ``layer`` (another library, another solver) carrying the
    stem, cell and head of ``weights``: two libraries' gradients at the same weights."""
    model = Net(kind, layer, 0).to(next(weights.parameters()).device)
    for part in ("stem", "cell", "head"):
        getattr(model, part).load_state_dict(getattr(weights, part).state_dict())
    return model

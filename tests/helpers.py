"""Problems shared by several test files (import as ``from helpers import ...``)."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from deqlab.experiments.base import TaskContext
from deqlab.landscape import DatasetLoss, dataset_loss
from deqlab.models.conv_deq import ConvDEQ
from deqlab.models.relu_deq import ReLUDEQ
from deqlab.solvers import Anderson
from deqlab.statements import OURS, Kind, Paper, Source, Statement, measure
from deqlab.train.sgd import FullBatchGD

#: The paper of the test experiments (their names start with "test-").
TEST_PAPER = Paper("test", "test", "(test experiment)")


def contraction(d: int, rate: float) -> torch.Tensor:
    """A random (d, d) float64 matrix with ``‖W‖₂ = rate``."""
    W = torch.randn(d, d, dtype=torch.float64)
    return rate * W / torch.linalg.matrix_norm(W, 2)


def with_spectrum(values: torch.Tensor, seed: int = 0) -> torch.Tensor:
    """Q diag(values) Qᵀ for a seeded random orthogonal Q: its eigenvalues are ``values``."""
    n = values.numel()
    generator = torch.Generator().manual_seed(seed)
    Q = torch.linalg.qr(torch.randn(n, n, dtype=torch.float64, generator=generator))[0]
    A = Q @ torch.diag(values) @ Q.T
    return (A + A.T) / 2


def relu_problem(m=12, d=5, n=6, *, seed=1, data_seed=None, dtype=torch.float64):
    """A seeded ReLU DEQ of width ``m`` and ``n`` inputs on the sphere of radius √d
    (Assumption 2 (i): ‖x_i‖ = √d) with N(0, 1) labels; data from ``data_seed``
    (default ``seed + 1``), drawn in float64 and cast to ``dtype``."""
    model = ReLUDEQ.init(d, m, seed=seed, dtype=dtype)
    gen = torch.Generator().manual_seed(seed + 1 if data_seed is None else data_seed)
    X = torch.randn(d, n, generator=gen, dtype=torch.float64)
    X = X / X.norm(dim=0) * d**0.5
    y = torch.randn(n, generator=gen, dtype=torch.float64)
    return model, X.to(dtype), y.to(dtype)


def row_path(order: int, steps: int, n=3, m=5, seed=0):
    """Rows x(τ) = A + τ B (+ τ² C if ``order == 2``) for τ < ``steps``, and a fixed M (the
    products x(τ) M a warm start extrapolates), in float64."""
    gen = torch.Generator().manual_seed(seed)
    shapes = ((n, m), (n, m), (n, m), (m, m))
    A, B, C, M = (torch.randn(*shape, generator=gen, dtype=torch.float64) for shape in shapes)
    xs = [A + t * B + (t * t * C if order == 2 else 0) for t in range(steps)]
    return xs, M


class MemoryCheckpoints:
    """A TaskContext whose checkpoints live in memory; ``stop_after`` interrupts a task."""

    def __init__(self, stop_after: int | None = None):
        self.saved, self.stop_after, self.count = None, stop_after, 0

    def context(self, checkpoint_every: int) -> TaskContext:
        return TaskContext("cpu", checkpoint_every, lambda: self.saved, self._save)

    def _save(self, state, rows):
        self.saved = (state, list(rows))
        self.count += 1
        if self.count == self.stop_after:
            raise KeyboardInterrupt


def run_all(experiment, config) -> list[dict]:
    """The rows of every task of ``experiment`` at ``config``, checkpointed in memory."""
    rows = []
    for task in experiment.tasks(config):
        rows += experiment.run_task(config, task, MemoryCheckpoints().context(100))
    return rows


def assert_settings_declared_and_captions_sentences(experiment) -> None:
    """Every preset of ``experiment`` declares its paper setting (``deviations`` raises on an
    undeclared field) and its figure captions are sentences."""
    for preset in experiment.presets:
        experiment.deviations(experiment.resolve(preset))
    assert experiment.figure_captions
    assert all(c[0].isupper() and c.endswith(".") for c in experiment.figure_captions.values())


def statement_at(value, kind=Kind.THEOREM, relation="<=", threshold=1.0, **kw) -> Statement:
    """A statement ``s`` measured at ``value`` against ``relation threshold``, citing Ling
    (2023) Theorem 1 (iii) (ours for :attr:`Kind.OURS`)."""
    return measure(
        "s",
        kind,
        Source("ling2023", "Theorem 1 (iii)") if kind is not Kind.OURS else OURS,
        value=value,
        relation=relation,
        threshold=threshold,
        measured=str(value),
        expected=f"{relation} {threshold}",
        **kw,
    )


def float64_conv_deq(tol: float) -> ConvDEQ:
    """A seeded float64 ConvDEQ (1 → 3 classes, 4 channels) solved by Anderson to ``tol``."""
    torch.manual_seed(0)
    solver = Anderson(tol=tol, max_iter=600, throw=True)
    net = ConvDEQ(1, 3, channels=4, inner_channels=4, groups=2, init_std=0.05, solver=solver)
    return net.double()


def two_batch_loss(n: int = 6) -> DatasetLoss:
    """The cross-entropy of ``n`` seeded 1 × 6 × 6 images over two batches (4 and n − 4)."""
    x = torch.rand(n, 1, 6, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    y = torch.arange(n) % 3
    return dataset_loss(nn.functional.cross_entropy, [(x[:4], y[:4]), (x[4:], y[4:])])


def least_squares_gd(lr=0.1, seed=0):
    """GD on L(w) = ‖Xw − y‖², X (8, 3): w(k) = M^k w(0) + Σ_j<k M^j 2ηXᵀy, M = I − 2ηXᵀX."""
    gen = torch.Generator().manual_seed(seed)
    X, y = torch.randn(8, 3, generator=gen), torch.randn(8, generator=gen)
    model = torch.nn.Linear(3, 1, bias=False)
    with torch.no_grad():
        model.weight.zero_()
    trainer = FullBatchGD(model, lambda: ((model(X)[:, 0] - y) ** 2).sum(), lr=lr)
    return trainer, X, y


def fake_imagenet(root, classes=3, per_class=4) -> None:
    """``per_class`` 40 × 60 PNG images of grey level 60·c (+ noise below 5) for each class
    c < ``classes`` in ``root``/imagenet/{train,val}/n0000000c/."""
    from PIL import Image

    rng = np.random.default_rng(0)
    for split in ("train", "val"):
        for c in range(classes):
            folder = root / "imagenet" / split / f"n{c:08d}"
            folder.mkdir(parents=True)
            for k in range(per_class):
                pixels = np.full((40, 60, 3), 60 * c, dtype=np.uint8) + rng.integers(
                    0, 5, (40, 60, 3), dtype=np.uint8
                )
                Image.fromarray(pixels).save(folder / f"img{k}.png")


def near_singular_tanh(d: int, sigmas: list[float], *, seed: int = 0):
    """``f(z) = tanh(z Wᵢᵀ + xᵢ)`` per sample i (float64) with a fixed point ``z*`` built in,
    where ``σ_min(I − J_f) = sigmas[i]``: pick z*, then W = D⁻¹(I − M) with D = 1 − z*²
    (so J_f = D W = I − M at z*) for M random with its least singular value set, and
    x = atanh(z*) − W z*. Returns f on (B, d) states, z* (B, d) and J_f(z*) (B, d, d)."""
    gen = torch.Generator().manual_seed(seed)
    B = len(sigmas)
    z = 0.8 * torch.rand(B, d, generator=gen, dtype=torch.float64) - 0.4
    G = torch.randn(B, d, d, generator=gen, dtype=torch.float64) / d**0.5
    U, S, Vh = torch.linalg.svd(torch.eye(d, dtype=torch.float64) - 0.9 * G)
    S[:, -1] = torch.tensor(sigmas, dtype=torch.float64)
    M = U @ torch.diag_embed(S) @ Vh
    W = (torch.eye(d, dtype=torch.float64) - M) / (1 - z.square())[:, :, None]  # D⁻¹(I − M)
    x = torch.atanh(z) - (W @ z[:, :, None])[:, :, 0]

    def f(v: torch.Tensor) -> torch.Tensor:
        return torch.tanh((W @ v[:, :, None])[:, :, 0] + x)

    return f, z, torch.eye(d, dtype=torch.float64) - M


class TransformerCell(nn.Module):
    """A pre-norm transformer block on token states (B, T, d): attention (default backend,
    fused on CPU) and an MLP, with input injection: f(z, x) = ½(h + MLP(LN(h))),
    h = z + x + MHA(LN(z + x))."""

    def __init__(self, d: int = 8, heads: int = 2) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(self, z: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        h = self.ln1(z + x)
        h = z + x + self.attn(h, h, h, need_weights=False)[0]
        return 0.5 * (h + self.mlp(self.ln2(h)))


class TwoScaleCell(nn.Module):
    """An MDEQ-style cell on a tuple state (z₁ (B, c, 4, 4), z₂ (B, c, 2, 2)): a conv per scale,
    down- and up-sampling fusion, GroupNorm; x is injected at the finest scale."""

    def __init__(self, c: int = 2) -> None:
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(c, c, 3, padding=1), nn.Conv2d(c, c, 3, padding=1)
        self.down, self.up = nn.Conv2d(c, c, 3, stride=2, padding=1), nn.Conv2d(c, c, 1)
        self.norm1, self.norm2 = nn.GroupNorm(1, c), nn.GroupNorm(1, c)

    def forward(self, z: tuple, x: torch.Tensor) -> tuple:
        b1 = torch.relu(self.conv1(z[0]) + x)
        b2 = torch.relu(self.conv2(z[1]))
        fine = self.norm1(b1 + nn.functional.interpolate(self.up(b2), scale_factor=2))
        coarse = self.norm2(b2 + self.down(b1))
        return 0.6 * fine, 0.6 * coarse

    def initial_state(self, x: torch.Tensor) -> tuple:
        b, c, h, w = x.shape
        return x.new_zeros(b, c, h, w), x.new_zeros(b, c, h // 2, w // 2)


def dense_ntk(cell, head, X):
    """Θ from the per-(sample, output) gradients of an unrolled solve (Picard to 1e-14 with
    backpropagation through its iterations), one backward each: the reference NTK."""
    from deqlab import DEQ, Picard, Unrolled

    deq = DEQ(cell, solver=Picard(tol=1e-14, max_iter=600), backward=Unrolled())
    params = [*cell.parameters(), *head.parameters()]
    rows = []
    for i in range(X.shape[0]):
        out = head(deq(X[i : i + 1])).reshape(-1)
        for c in range(out.numel()):
            grads = torch.autograd.grad(out[c], params, retain_graph=True, allow_unused=True)
            rows.append(torch.cat([
                torch.zeros(p.numel(), dtype=p.dtype) if g is None else g.reshape(-1)
                for g, p in zip(grads, params, strict=True)
            ]))  # fmt: skip
    J = torch.stack(rows)
    return J @ J.T


def run_benchmark(name: str, args: list[str], out, *extra: str):
    """``benchmarks/<name>`` run in a fresh interpreter with ``args``, ``--json out`` and
    ``extra``: the finished process (its exit code and output are the caller's to check)."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).parents[1] / "benchmarks" / name
    return subprocess.run(
        [sys.executable, str(script), *args, "--json", str(out), *extra],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip

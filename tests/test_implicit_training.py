"""Issue 23's acceptance: three cells of one's own (a tanh MLP cell, a conv + GroupNorm cell,
a tuple-state cell) train 200 float32 steps on digits with DEQ's default settings, without an
exception; the unconverged solves are counted, reported, and warned about at the 1st, 2nd, 4th,
… failure of each kind of solve (issue 31)."""

import warnings

import pytest
import torch
from sklearn.datasets import load_digits
from torch import nn

from deqlab import DEQ, ConvergenceWarning

STEPS, BATCH = 200, 32


class MLPCell(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.linear = nn.Linear(width, width)

    def forward(self, z: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.linear(z) + x)


class ConvCell(nn.Module):
    """``GroupNorm(relu(conv(z) + x))``: not a contraction (GroupNorm rescales)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)
        self.norm = nn.GroupNorm(2, channels)

    def forward(self, z: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return self.norm(torch.relu(self.conv(z) + x))


class TupleCell(nn.Module):
    """``(h, c) ↦ (tanh(B c' + h / 2), c')`` with ``c' = tanh(A h + x)``."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(width, width), nn.Linear(width, width)

    def forward(self, z, x):
        h, _ = z
        c = torch.tanh(self.a(h) + x)
        return torch.tanh(self.b(c) + 0.5 * h), c

    def initial_state(self, x):
        return torch.zeros_like(x), torch.zeros_like(x)


class Classifier(nn.Module):
    def __init__(self, kind: str) -> None:
        super().__init__()
        if kind == "conv":
            self.inject = nn.Conv2d(1, 4, 3, padding=1)
            self.deq, self.head = DEQ(ConvCell(4)), nn.Sequential(nn.Flatten(), nn.Linear(256, 10))
        else:
            width = 16
            self.inject = nn.Sequential(nn.Flatten(), nn.Linear(64, width))
            cell = MLPCell(width) if kind == "mlp" else TupleCell(width)
            self.deq, self.head = DEQ(cell), nn.Linear(width, 10)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        z = self.deq(self.inject(images))
        return self.head(z[0] if isinstance(z, tuple) else z)


def digits() -> tuple[torch.Tensor, torch.Tensor]:
    bunch = load_digits()
    images = torch.tensor(bunch.images / 16.0, dtype=torch.float32)[:, None]  # (1797, 1, 8, 8)
    return images, torch.tensor(bunch.target)


def warnings_due(failures: int) -> int:
    """Warnings at the 1st, 2nd, 4th, ... failure: the powers of two up to ``failures``."""
    return failures.bit_length()


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["mlp", "conv", "tuple"])
def test_default_deq_trains_200_float32_steps_and_counts_unconverged_solves(kind):
    images, labels = digits()
    model = Classifier(kind).float()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    losses, unconverged = [], 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(STEPS):
            batch = torch.randint(0, len(labels), (BATCH,))
            loss = nn.functional.cross_entropy(model(images[batch]), labels[batch])
            unconverged += not model.deq.last_forward.converged
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(float(loss))
    stats = model.deq.stats
    print(kind, stats.counts(), f"loss {losses[0]:.3f} -> {sum(losses[-20:]) / 20:.3f}")
    assert stats.forward_solves == stats.backward_passes == STEPS
    assert stats.unconverged_forward == unconverged  # every unconverged solve is counted
    assert model.deq.last_forward.z.dtype == torch.float32
    convergence = [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    expected = sum(warnings_due(n) for n in (stats.unconverged_forward, stats.unconverged_backward))
    assert len(convergence) == expected
    assert sum(losses[-20:]) / 20 < 0.8 * losses[0]  # it trains

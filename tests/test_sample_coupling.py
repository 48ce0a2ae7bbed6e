"""One function decides whether a cell treats the samples of a batch apart (DEQ and diagnose)."""

import torch
from torch import nn

from deqlab.sample_coupling import samples_coupled


class Tanh(nn.Module):
    def __init__(self, d: int = 4) -> None:
        super().__init__()
        self.lin = nn.Linear(d, d)

    def forward(self, z, x):
        return torch.tanh(self.lin(z) + x)


class BatchMean(Tanh):  # mixes samples through the batch mean, without any BatchNorm
    def forward(self, z, x):
        return torch.tanh(self.lin(z - z.mean(0)) + x)


def test_batchnorm_in_training_couples_and_in_eval_does_not():
    cell = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    assert "BatchNorm in training mode" in samples_coupled(cell)
    assert samples_coupled(cell.eval()) is None


def test_probe_finds_mixing_that_the_module_tree_hides():
    x, z = torch.randn(5, 4), torch.randn(5, 4)
    cell = BatchMean()
    assert samples_coupled(cell) is None  # nothing to see without evaluating
    reason = samples_coupled(cell, (lambda s: cell(s, x), z))
    assert "changed f at other samples" in reason


def test_probe_passes_a_per_sample_cell_and_a_single_sample():
    x, z = torch.randn(5, 4), torch.randn(5, 4)
    cell = Tanh()
    assert samples_coupled(cell, (lambda s: cell(s, x), z)) is None
    assert samples_coupled(BatchMean(), (lambda s: s.mean(0, keepdim=True), z[:1])) is None

"""Test defaults: float64 everywhere (docs/architecture.md) and deterministic seeds."""

import pytest
import torch

torch.set_default_dtype(torch.float64)


@pytest.fixture(autouse=True)
def _seed_everything():
    torch.manual_seed(0)
    yield

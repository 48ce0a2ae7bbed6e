"""Synthetic data (deqlab/data/synthetic.py): uniform points on the sphere, and Zou et al.'s
targets −x plus noise."""

import math

import pytest
import torch

from deqlab.data import (
    synthetic_sphere,
    zou_synthetic,
)


def test_sphere_points_lie_on_the_sphere_and_are_uniform():
    data = synthetic_sphere(4000, 3, seed=5)
    assert data.X.shape == (3, 4000) and data.y.shape == (4000,)
    torch.testing.assert_close(data.X.norm(dim=0), torch.full((4000,), math.sqrt(3)))
    # uniform on the sphere of radius √3: E[x] = 0, E[x xᵀ] = I (Monte Carlo, 5σ bands)
    assert data.X.mean(dim=1).abs().max() < 5 / math.sqrt(4000)
    torch.testing.assert_close(data.X @ data.X.T / 4000, torch.eye(3), atol=0.12, rtol=0)
    assert abs(float(data.y.mean())) < 5 / math.sqrt(4000)
    assert float(data.y.var()) == pytest.approx(1.0, abs=0.12)
    torch.testing.assert_close(synthetic_sphere(4000, 3, seed=5).X, data.X, rtol=0, atol=0)
    assert not torch.equal(synthetic_sphere(4000, 3, seed=6).X, data.X)
    uniform = synthetic_sphere(50, 3, seed=5, labels="uniform", dtype=torch.float32).y
    assert uniform.dtype == torch.float32 and 0 <= float(uniform.min()) < float(uniform.max()) < 1


def test_zou_synthetic_targets_are_minus_x_plus_noise():
    data = zou_synthetic(2000, 10, seed=3)
    residual = data.y + data.X  # = 0.1 ς
    assert data.X.shape == data.y.shape == (10, 2000)
    assert float(residual.std()) == pytest.approx(0.1, rel=0.05)
    assert float(data.X.std()) == pytest.approx(1.0, rel=0.05)
    exact = zou_synthetic(2000, 10, seed=3, noise=0.0)
    torch.testing.assert_close(exact.y, -exact.X, rtol=0, atol=0)
    torch.testing.assert_close(exact.X, data.X, rtol=0, atol=0)  # noise drawn after inputs
    box = zou_synthetic(2000, 10, inputs="uniform", seed=3).X
    assert -1 <= float(box.min()) < -0.99 and 0.99 < float(box.max()) <= 1
    with pytest.raises(ValueError, match="`inputs` must be one of 'gaussian', 'uniform'"):
        zou_synthetic(inputs="normal", seed=0)
    with pytest.raises(TypeError, match="`n` must be an int"):
        zou_synthetic(10.0, seed=0)

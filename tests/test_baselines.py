"""Baselines of Kawaguchi (2021): linear model, ReLU MLPs, linear ResNet with identity init."""

import pytest
import torch

from deqlab.models.baselines import LinearModel, LinearResNet, ReLUMLP
from deqlab.models.delm import DELM


def test_linear_model_from_delm_is_the_same_function():
    """W₀ = B₀ U₀⁻¹ (Appendix D.1): f(x) agrees with the DELM on fresh inputs."""
    R = torch.randn(5, 3)
    delm = DELM(5, 2, gamma=0.8, feature_map=lambda X: torch.sin(R @ X))
    linear = LinearModel.from_delm(delm)
    X = torch.randn(3, 10)
    with torch.no_grad():
        torch.testing.assert_close(linear(X), delm(X))
    assert [name for name, _ in linear.named_parameters()] == ["W"]
    with pytest.raises(TypeError, match="`delm` must be a DELM"):
        LinearModel.from_delm(torch.nn.Linear(2, 2))


def _mlp_by_hand(model, X):
    H = X
    for layer, W in enumerate(model.weights):
        H = W @ H + (model.biases[layer] if len(model.biases) else 0)
        H = H.clamp_min(0) if layer < len(model.weights) - 1 else H
    return H


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("depth", [1, 2, 4])
def test_relu_mlp_structure_and_forward(depth, bias):
    model = ReLUMLP(6, 2, depth=depth, width=7, bias=bias)
    shapes = [tuple(W.shape) for W in model.weights]
    assert shapes == ([(2, 6)] if depth == 1 else [(7, 6)] + [(7, 7)] * (depth - 2) + [(2, 7)])
    assert len(model.biases) == (depth if bias else 0)
    with torch.no_grad():
        for b in model.biases:
            b.normal_()  # non-zero biases, so the check sees them
    X = torch.randn(6, 9)
    torch.testing.assert_close(model(X), _mlp_by_hand(model, X))


def test_relu_mlp_initialization_scale():
    """Entries N(0, 1/width) (Appendix D.1)."""
    model = ReLUMLP(300, 1, depth=3, width=400, generator=torch.Generator().manual_seed(0))
    for W in model.weights:
        assert abs(W.detach().std().item() * 20 - 1) < 0.05


def test_linear_resnet_identity_initialization():
    """W_l = 0: f₀(x) = x; the product form B(I + W_L)⋯(I + W_1)A x after perturbing W_l."""
    model = LinearResNet(4, 4, depth=3)
    X = torch.randn(4, 8)
    with torch.no_grad():
        torch.testing.assert_close(model(X), X)
        for W in model.blocks:
            W.normal_()
        product = torch.eye(4)
        for W in model.blocks:
            product = (torch.eye(4) + W) @ product
        torch.testing.assert_close(model(X), product @ X)
    assert [name for name, _ in model.named_parameters()] == ["blocks.0", "blocks.1", "blocks.2"]


def test_linear_resnet_rectangular_identity_layers():
    model = LinearResNet(3, 2, depth=2, width=5)
    X = torch.randn(3, 4)
    with torch.no_grad():
        torch.testing.assert_close(model(X), X[:2])


def test_bad_input_gives_clear_errors():
    with pytest.raises(ValueError, match=r"`X` must have shape \(6, 'any'\)"):
        ReLUMLP(6, 1, depth=2)(torch.randn(5, 3))
    with pytest.raises(ValueError, match=r"`X` must have shape \(4, 'any'\)"):
        LinearResNet(4, 4, depth=2)(torch.randn(3, 3))
    with pytest.raises(ValueError, match="`depth` must be >= 1"):
        ReLUMLP(6, 1, depth=0)
    with pytest.raises(TypeError, match="`bias` must be a bool"):
        ReLUMLP(6, 1, depth=2, bias=1)
    with pytest.raises(ValueError, match=r"`X` must have shape \(3, 'any'\)"):
        LinearModel(torch.randn(2, 3))(torch.randn(4, 5))

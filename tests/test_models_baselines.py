"""Baselines of Kawaguchi (2021): linear model, ReLU MLPs, Zou et al.'s linear ResNet."""

import numpy as np
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


def _resnet_by_hand(model, X):
    product = torch.eye(model.input_layer.shape[0], dtype=X.dtype)
    for W in model.blocks:
        product = (torch.eye(product.shape[0], dtype=X.dtype) + W) @ product
    return model.output_layer @ product @ model.input_layer @ X


@pytest.mark.parametrize("io", ["modified_identity", "gaussian", "identity"])
def test_linear_resnet_is_the_product_form_with_only_the_blocks_trained(io):
    """f(x) = B(I + W_L)⋯(I + W_1)Ax after perturbing the W_l; W_l = 0 at the start."""
    model = LinearResNet(4, 4, depth=3, io=io, generator=torch.Generator().manual_seed(0))
    assert all(not W.detach().any() for W in model.blocks)
    assert [name for name, _ in model.named_parameters()] == ["blocks.0", "blocks.1", "blocks.2"]
    X = torch.randn(4, 8)
    with torch.no_grad():
        torch.testing.assert_close(model(X), model.output_layer @ model.input_layer @ X)
        for W in model.blocks:
            W.normal_()
        torch.testing.assert_close(model(X), _resnet_by_hand(model, X))


def test_modified_identity_has_width_d_plus_k_and_starts_at_zero():
    """A = [I_d; 0], B = [0, I_k]: BA = 0 (f₀ = 0), all singular values of A and B are 1."""
    model = LinearResNet(3, 2, depth=2)
    A, B = model.input_layer, model.output_layer
    assert A.shape == (5, 3) and B.shape == (2, 5)
    torch.testing.assert_close(A[:3], torch.eye(3))
    torch.testing.assert_close(B[:, 3:], torch.eye(2))
    assert float((B @ A).abs().max()) == 0.0
    torch.testing.assert_close(torch.linalg.svdvals(A), torch.ones(3))
    assert LinearResNet(3, 2, depth=2, width=9).input_layer.shape == (9, 3)
    with pytest.raises(ValueError, match=r"`width` must be >= m_x \+ m_y = 5"):
        LinearResNet(3, 2, depth=2, width=4)


def test_gaussian_transformations_scale():
    """Entries of A are N(0, 1/width), of B N(0, 1/k); the generator makes them repeatable."""
    draw = lambda: LinearResNet(  # noqa: E731
        30, 4, depth=1, io="gaussian", width=600, generator=torch.Generator().manual_seed(0)
    )
    model = draw()
    assert abs(model.input_layer.std().item() * 600**0.5 - 1) < 0.05
    assert abs(model.output_layer.std().item() * 4**0.5 - 1) < 0.05
    torch.testing.assert_close(draw().output_layer, model.output_layer)


def test_identity_layers_are_rectangular_identities():
    model = LinearResNet(3, 2, depth=2, io="identity", width=5)
    X = torch.randn(3, 4)
    with torch.no_grad():
        torch.testing.assert_close(model(X), X[:2])
    assert LinearResNet(3, 3, depth=1, io="identity").input_layer.shape == (3, 3)


def test_bad_input_gives_clear_errors():
    with pytest.raises(ValueError, match=r"`X` must have shape \(6, 'any'\)"):
        ReLUMLP(6, 1, depth=2)(torch.randn(5, 3))
    with pytest.raises(ValueError, match=r"`X` must have shape \(4, 'any'\)"):
        LinearResNet(4, 4, depth=2)(torch.randn(3, 3))
    with pytest.raises(ValueError, match="`io` must be one of 'modified_identity'"):
        LinearResNet(4, 4, depth=2, io="zou")
    with pytest.raises(ValueError, match="`depth` must be >= 1"):
        ReLUMLP(6, 1, depth=0)
    with pytest.raises(TypeError, match="`bias` must be a bool"):
        ReLUMLP(6, 1, depth=2, bias=1)
    with pytest.raises(ValueError, match=r"`X` must have shape \(3, 'any'\)"):
        LinearModel(torch.randn(2, 3))(torch.randn(4, 5))


def _gd_relative_gap(io: str, X: torch.Tensor, Y: torch.Tensor, steps: int) -> tuple:
    """(L − L*)/L* after ``steps`` of full-batch GD (η = 2e-3) on L = Σ‖f(x_i) − y_i‖², L* by
    numpy least squares; det of the end-to-end matrix B(I + W_L)⋯(I + W_1)A at each step, and
    det(W*) of the least-squares solution."""
    W_star, *_ = np.linalg.lstsq(X.numpy().T, Y.numpy().T, rcond=None)
    loss_star = float(((W_star.T @ X.numpy() - Y.numpy()) ** 2).sum())
    model = LinearResNet(3, 3, depth=3, io=io)
    params, dets = list(model.parameters()), []
    for _ in range(steps):
        loss = ((model(X) - Y) ** 2).sum()
        grads = torch.autograd.grad(loss, params)
        with torch.no_grad():
            dets.append(float(torch.linalg.det(model(torch.eye(3)))))
            for p, g in zip(params, grads, strict=True):
                p.sub_(2e-3 * g)
    return (float(loss) - loss_star) / loss_star, dets, float(np.linalg.det(W_star))


def test_zou_layers_fit_the_target_minus_identity_and_identity_layers_stall():
    """Kawaguchi's data y = −x + 0.1ς in R³: from W_l = 0, the modified identity (BA = 0) reaches
    the least-squares minimum; identity layers start at det = 1 and cannot reach det(W*) < 0
    without the end-to-end matrix turning singular, so GD stalls (Bartlett et al. 2018)."""
    g = torch.Generator().manual_seed(0)
    X = torch.randn(3, 60, generator=g)
    Y = -X + 0.1 * torch.randn(3, 60, generator=g)
    gap, _, det_star = _gd_relative_gap("modified_identity", X, Y, 800)
    assert abs(gap) < 1e-10 and det_star < 0
    gap, dets, _ = _gd_relative_gap("identity", X, Y, 800)
    assert gap > 1.0 and min(dets) > 0

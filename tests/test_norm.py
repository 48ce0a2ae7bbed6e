"""Weight and spectral normalisation of a cell's layers (issue 31) against torch's own
parametrizations in float64: the same weights, the same gradients; recomputed once per step,
by reset_norm, and at every DEQ forward."""

import pytest
import torch
from torch import nn
from torch.nn.utils import parametrizations

from deqlab import DEQ, Anderson, Implicit, apply_norm, remove_norm, reset_norm


def layer(seed: int = 0) -> nn.Linear:
    torch.manual_seed(seed)
    return nn.Linear(5, 4).double()


def test_weight_norm_matches_torchs_parametrization_in_value_and_gradient():
    ours, reference = layer(), layer()
    parametrizations.weight_norm(reference, dim=0)  # w = g v / ‖v‖ per output row
    assert apply_norm(ours, "weight_norm") == [""]
    x = torch.randn(3, 5, dtype=torch.float64)
    torch.testing.assert_close(ours(x), reference(x), rtol=1e-14, atol=1e-14)
    ours(x).square().sum().backward()
    reference(x).square().sum().backward()
    original = reference.parametrizations.weight
    torch.testing.assert_close(ours.weight_g.grad, original.original0.grad, rtol=1e-12, atol=0)
    torch.testing.assert_close(ours.weight_v.grad, original.original1.grad, rtol=1e-12, atol=0)
    g = torch.linalg.vector_norm(ours.weight_v, dim=1, keepdim=True)
    torch.testing.assert_close(ours.weight, ours.weight_g * ours.weight_v / g)  # by hand


def test_spectral_norm_matches_torchs_and_the_exact_norm():
    ours, reference = layer(), layer()
    parametrizations.spectral_norm(reference, n_power_iterations=1)
    apply_norm(ours, "spectral_norm", learn_scale=False, power_iterations=1)
    original = reference.parametrizations.weight
    ours.weight_u.copy_(original[0]._u)  # the same singular-vector estimates
    ours.weight_v.copy_(original[0]._v)
    reset_norm(ours)  # one power step in training mode, as torch's at its next call
    x = torch.randn(3, 5, dtype=torch.float64)
    out, expected = ours(x), reference(x)  # torch's: one power step at each training call
    torch.testing.assert_close(out, expected, rtol=1e-12, atol=1e-14)
    out.square().sum().backward()
    expected.square().sum().backward()
    torch.testing.assert_close(ours.weight_orig.grad, original.original.grad, rtol=1e-10, atol=0)
    exact = layer()
    apply_norm(exact, "spectral_norm", learn_scale=False, power_iterations=200)
    assert float(torch.linalg.matrix_norm(exact.weight.detach(), 2)) == pytest.approx(1, abs=1e-12)


def test_the_weight_changes_only_at_reset_norm():
    linear = layer()
    apply_norm(linear)
    before = linear.weight.detach().clone()
    with torch.no_grad():
        linear.weight_v.mul_(2.0).add_(0.1)
    torch.testing.assert_close(linear.weight, before)  # stale until the step's reset
    reset_norm(linear)
    assert not torch.allclose(linear.weight, before)


def test_a_deq_recomputes_its_cells_norms_at_every_forward():
    class Cell(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.W = nn.Linear(4, 4, bias=False).double()

        def forward(self, z, x):
            return torch.tanh(self.W(z) + x)

    cell = Cell()
    apply_norm(cell, "spectral_norm", learn_scale=False, power_iterations=30)
    deq = DEQ(cell, solver=Anderson(tol=1e-12), backward=Implicit())
    optimizer = torch.optim.SGD(cell.parameters(), lr=0.5)
    for _ in range(3):  # each step's weight is the normalised one of the updated parameters
        optimizer.zero_grad()
        deq(torch.randn(2, 4, dtype=torch.float64)).sum().backward()
        optimizer.step()
        deq(torch.randn(2, 4, dtype=torch.float64))
        w0, u, v = cell.W.weight_orig.detach(), cell.W.weight_u, cell.W.weight_v
        sigma = u @ w0 @ v  # the power method's estimate after this forward's steps
        torch.testing.assert_close(cell.W.weight, w0 / sigma, rtol=1e-13, atol=0)
        assert float(sigma) == pytest.approx(float(torch.linalg.matrix_norm(w0, 2)), rel=1e-2)


def test_remove_norm_folds_the_weight_back_and_errors_are_clear():
    linear = layer()
    apply_norm(linear)
    weight = linear.weight.detach().clone()
    remove_norm(linear)
    assert isinstance(linear.weight, nn.Parameter) and not hasattr(linear, "weight_v")
    torch.testing.assert_close(linear.weight.detach(), weight)
    with pytest.raises(ValueError, match=r"`kind` must be one of 'weight_norm', 'spectral_norm'"):
        apply_norm(linear, "batch_norm")
    apply_norm(linear)
    with pytest.raises(ValueError, match=r"layer 'Linear' is already normalised"):
        apply_norm(linear)
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    assert apply_norm(model, exclude=("1",)) == ["0"]

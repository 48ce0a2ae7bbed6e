"""J_f v and J_fᵀ u by each route against a dense reverse-mode Jacobian (float64), the route
chosen where an op lacks the others, and one clear error where none runs."""

import pytest
import torch
from torch import nn
from torch.autograd.function import once_differentiable

from deqlab.linearization import ROUTES, Linearization
from helpers import TransformerCell


class Cube(torch.autograd.Function):
    """x ↦ x³ with a forward derivative (jvp) but a backward that cannot be differentiated."""

    @staticmethod
    def forward(x):
        return x**3

    @staticmethod
    def setup_context(ctx, inputs, output):
        (ctx.x,) = inputs
        ctx.save_for_forward(*inputs)

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        return 3 * ctx.x**2 * g

    @staticmethod
    def jvp(ctx, t):
        (x,) = ctx.saved_tensors
        return 3 * x**2 * t


class CubeNoJvp(torch.autograd.Function):
    """x ↦ x³ with neither a forward derivative nor a differentiable backward."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x**2 * g


def dense(f, z: torch.Tensor) -> torch.Tensor:
    return torch.autograd.functional.jacobian(f, z).reshape(z.numel(), z.numel())


def check_products(lin: Linearization, f, z: torch.Tensor) -> None:
    J = dense(f, z)
    gen = torch.Generator().manual_seed(0)
    v, u = (torch.randn(z.shape, generator=gen, dtype=z.dtype) for _ in range(2))
    Jv, Jtu = lin.jvp(v), lin.vjp(u)
    torch.testing.assert_close(Jv.reshape(-1), J @ v.reshape(-1), atol=1e-12, rtol=1e-10)
    torch.testing.assert_close(Jtu.reshape(-1), J.T @ u.reshape(-1), atol=1e-12, rtol=1e-10)


def tanh_map():
    torch.manual_seed(0)
    W, x = torch.randn(5, 5, dtype=torch.float64), torch.randn(3, 5, dtype=torch.float64)
    return (lambda z: torch.tanh(z @ W.T + x)), torch.randn(3, 5, dtype=torch.float64)


def test_double_backward_first_where_every_op_allows_it():
    f, z = tanh_map()
    lin = Linearization(f, z)
    check_products(lin, f, z)
    assert lin.route == "double backward" and lin.count == 2


@pytest.mark.parametrize("route", ROUTES)
def test_every_route_is_the_same_linear_map(route):
    f, z = tanh_map()
    check_products(Linearization(f, z, route), f, z)


def test_forward_mode_where_a_backward_cannot_be_differentiated():
    f, z = tanh_map()
    g = lambda v: Cube.apply(f(v))  # noqa: E731
    lin = Linearization(g, z)
    check_products(lin, g, z)
    assert lin.route == "forward-mode"


def test_fused_attention_goes_by_double_backward():
    torch.manual_seed(0)
    cell = TransformerCell(d=4).double()
    x = torch.randn(2, 3, 4, dtype=torch.float64)
    f, z = (lambda v: cell(v, x)), torch.randn(2, 3, 4, dtype=torch.float64)
    with pytest.raises(NotImplementedError, match="forward AD"):
        torch.func.jvp(f, (z,), (z,))
    lin = Linearization(f, z)
    check_products(lin, f, z)
    assert lin.route == "double backward"


def test_row_jacobians_are_the_blocks_of_the_dense_jacobian():
    """A transformer block on (2, 3, 4) states: the (2, 12, 12) per-sample blocks from 12 VJPs,
    against the diagonal blocks of the reverse-mode Jacobian of the whole batch."""
    torch.manual_seed(0)
    cell = TransformerCell(d=4).double()
    x = torch.randn(2, 3, 4, dtype=torch.float64)
    f, z = (lambda v: cell(v, x)), torch.randn(2, 3, 4, dtype=torch.float64)
    lin = Linearization(f, z)
    blocks = lin.row_jacobians(2)
    J = dense(f, z).reshape(2, 12, 2, 12)
    torch.testing.assert_close(blocks, torch.stack([J[0, :, 0], J[1, :, 1]]), atol=1e-12, rtol=0)
    assert lin.count == 12


def test_math_attention_where_neither_plain_route_runs():
    """Fused attention (no forward derivative) followed by an op whose backward cannot be
    differentiated: only forward mode with attention by its formula runs."""
    torch.manual_seed(0)
    cell = TransformerCell(d=4).double()
    x = torch.randn(2, 3, 4, dtype=torch.float64)
    f, z = (lambda v: Cube.apply(cell(v, x))), torch.randn(2, 3, 4, dtype=torch.float64)
    lin = Linearization(f, z)
    check_products(lin, f, z)
    assert lin.route == "forward-mode, math attention"


def test_no_route_is_one_error_naming_each_route():
    f, z = tanh_map()
    g = lambda v: CubeNoJvp.apply(f(v))  # noqa: E731
    lin = Linearization(g, z)
    with pytest.raises(RuntimeError, match="no route computes the Jacobian-vector product") as err:
        lin.jvp(z)
    assert all(f"{route}: " in str(err.value) for route in ROUTES)


def test_a_map_that_ignores_z_has_zero_products():
    z = torch.randn(2, 3, dtype=torch.float64)
    lin = Linearization(lambda v: torch.ones_like(v), z)
    assert not lin.jvp(z).any() and not lin.vjp(z).any()


def test_unknown_route_is_refused():
    f, z = tanh_map()
    with pytest.raises(ValueError, match=r"`route` must be one of \('double backward'"):
        Linearization(f, z, "finite differences")


def test_modules_in_eval_mode_take_no_fast_path_that_breaks_a_route():
    """nn.MultiheadAttention in eval mode under no_grad takes a fused fast path without any
    derivative; the products record the graph with grad enabled, so they still run."""
    torch.manual_seed(0)
    cell = TransformerCell(d=4).double().eval()
    x = torch.randn(2, 3, 4, dtype=torch.float64)
    f, z = (lambda v: cell(v, x)), torch.randn(2, 3, 4, dtype=torch.float64)
    with torch.no_grad():
        check_products(Linearization(f, z), f, z)
    assert isinstance(cell.attn, nn.MultiheadAttention)

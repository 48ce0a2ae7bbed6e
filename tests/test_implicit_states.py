"""Tuple/list states: the solution of the concatenated problem, exact implicit gradients."""

import pytest
import torch
from torch import nn

from deqlab import DEQ, Anderson, Broyden, Implicit, Picard, Unrolled, fixed_point
from helpers import contraction

EXACT = {"tol": 1e-13, "stop": "abs", "max_iter": 2000}


def vec(parts):
    """The test's own concatenation (row-major, part after part), independent of deqlab's."""
    return torch.cat([p.reshape(-1) for p in parts])


def unvec(v, shapes):
    sizes = [torch.Size(s).numel() for s in shapes]
    return tuple(p.reshape(s) for p, s in zip(v.split(sizes), shapes, strict=True))


@pytest.mark.parametrize(
    "shapes", [[(4, 3), (4, 2)], [(3,), (2, 2), ()]], ids=["common-batch", "flat"]
)
@pytest.mark.parametrize(
    "solver", [Picard(**EXACT), Anderson(**EXACT), Broyden(**EXACT)], ids=lambda s: s.name
)
def test_affine_tuple_state_equals_concatenated_closed_form(shapes, solver):
    # vec z = M vec z + b  ⇒  z* = (I - M)⁻¹ b;  L = cᵀ vec z*  ⇒  ∂L/∂b = (I - M)⁻ᵀ c
    n = sum(torch.Size(s).numel() for s in shapes)
    M, b, c = contraction(n, 0.8), torch.randn(n, requires_grad=True), torch.randn(n)
    z0 = tuple(torch.zeros(s) for s in shapes)
    z = fixed_point(lambda z: unvec(M @ vec(z) + b, shapes), z0, solver=solver)
    assert isinstance(z, tuple) and [p.shape for p in z] == [torch.Size(s) for s in shapes]
    (c @ vec(z)).backward()
    z_exact = torch.linalg.solve(torch.eye(n) - M, b.detach())
    u = torch.linalg.solve((torch.eye(n) - M).T, c)
    torch.testing.assert_close(vec(z).detach(), z_exact, atol=1e-10, rtol=0)
    torch.testing.assert_close(b.grad, u, atol=1e-10, rtol=0)


@pytest.mark.parametrize("per_sample", [False, True])
def test_gradcheck_two_part_tanh_state(per_sample):
    # h = tanh(h Wᵀ + c Vᵀ + x), c = 0.5 tanh(h Pᵀ) + 0.3 c: a batch of 3, widths 4 and 2
    W, V, P = contraction(4, 0.5), 0.3 * torch.randn(4, 2), 0.3 * torch.randn(2, 4)
    x = torch.randn(3, 4)
    solver = Anderson(tol=1e-13, stop="abs", per_sample=per_sample)

    def cell(state, W, V, P, x):
        h, c = state
        return torch.tanh(h @ W.T + c @ V.T + x), 0.5 * torch.tanh(h @ P.T) + 0.3 * c

    def equilibrium(W, V, P, x):
        z0 = (torch.zeros(3, 4), torch.zeros(3, 2))
        return fixed_point(lambda z: cell(z, W, V, P, x), z0, solver=solver)

    inputs = tuple(t.requires_grad_() for t in (W, V, P, x))
    assert torch.autograd.gradcheck(equilibrium, inputs)


class TwoPartCell(nn.Module):
    """(h, c) ↦ (tanh(W h + U x + c), 0.5 c + 0.1 h[:2]) on column batches; x (3, n)."""

    def __init__(self) -> None:
        super().__init__()
        self.W = nn.Parameter(contraction(4, 0.6))
        self.U = nn.Parameter(torch.randn(4, 3))

    def initial_state(self, x):
        return [x.new_zeros(4, x.shape[1]), x.new_zeros(4, x.shape[1])]

    def forward(self, z, x):
        h, c = z
        return [torch.tanh(self.W @ h + self.U @ x + c), 0.5 * c + 0.1 * h]


def test_deq_list_state_matches_unrolled_autograd():
    x = torch.randn(3, 5)
    deq = DEQ(TwoPartCell(), solver=Anderson(**EXACT), backward=Implicit())
    h, c = z = deq(x)
    assert isinstance(z, list) and h.shape == c.shape == (4, 5)
    forward = deq.last_forward
    assert forward.converged and forward.z.shape == (4, 10)  # packed along the common dim 0
    (h.square().sum() + c.sum()).backward()
    implicit = [p.grad for p in deq.parameters()]
    deq.zero_grad()
    deq.backward, deq.solver = Unrolled(), Picard(**EXACT)
    h, c = deq(x)
    (h.square().sum() + c.sum()).backward()
    for g_implicit, p in zip(implicit, deq.parameters(), strict=True):
        torch.testing.assert_close(g_implicit, p.grad, atol=1e-9, rtol=0)


def test_bad_tuple_states():
    def f(z):
        return z

    with pytest.raises(ValueError, match=r"`z0` must hold at least one tensor; got an empty"):
        fixed_point(f, ())
    with pytest.raises(
        TypeError, match=r"`z0` must be a flat tuple/list of tensors; got tuple of Tensor, tuple"
    ):
        fixed_point(f, (torch.zeros(2), (torch.zeros(2),)))
    with pytest.raises(TypeError, match=r"`z0\[1\]` must be a floating-point tensor"):
        fixed_point(f, (torch.zeros(2), torch.zeros(2, dtype=torch.long)))
    with pytest.raises(TypeError, match=r"tensors of `z0` must share one dtype and device"):
        fixed_point(f, (torch.zeros(2), torch.zeros(2, dtype=torch.float32)))
    with pytest.raises(
        TypeError, match=r"`f\(z\)` must be a flat tuple/list of tensors; got Tensor"
    ):
        fixed_point(lambda z: z[0], (torch.zeros(2), torch.zeros(3)))
    with pytest.raises(
        ValueError, match=r"`f\(z\)` must hold tensors shaped \[\(2,\), \(3,\)\] \(like `z0`\); got"
    ):
        fixed_point(lambda z: z[:1], (torch.zeros(2), torch.zeros(3)))
    with pytest.raises(ValueError, match=r"per_sample=True needs every tensor of `z0` to have"):
        fixed_point(f, (torch.zeros(2, 3), torch.zeros(3)), solver=Picard(per_sample=True))


def test_row_compaction_on_a_tuple_state_keeps_each_sample_within_tol():
    # per-sample Picard on (h, c); samples of different difficulty (input scale) stop apart
    W, V, P = contraction(4, 0.9), 0.3 * torch.randn(4, 2), 0.3 * torch.randn(2, 4)

    def cell(state, x):
        h, c = state
        return torch.tanh(h @ W.T + c @ V.T + x), 0.5 * torch.tanh(h @ P.T) + 0.3 * c

    x = torch.randn(5, 4) * torch.tensor([0.01, 0.1, 1.0, 3.0, 10.0])[:, None]
    z0 = (torch.zeros(5, 4), torch.zeros(5, 2))
    solver = Picard(tol=1e-10, max_iter=500, per_sample=True)
    compact = DEQ(cell, solver=solver)
    full = DEQ(cell, solver=solver, row_compaction=False)
    h, c = compact(x, z0=z0)
    h_full, c_full = full(x, z0=z0)
    steps = compact.last_forward.sample_steps
    assert len(set(steps.tolist())) > 1  # the samples did stop apart
    assert compact.stats.forward_evaluations < full.stats.forward_evaluations
    assert bool((compact.last_forward.sample_residuals <= 1e-10).all())
    torch.testing.assert_close(h, h_full, atol=1e-8, rtol=0)
    torch.testing.assert_close(c, c_full, atol=1e-8, rtol=0)

"""The fixed-point correction loss over a solve's segments (issue 31), against Picard by hand
in float64: DEQ.states returns the iterates where the segments end, each with the layer's
gradient at that point, and the weighted loss and its gradient are the hand-written ones."""

import pytest
import torch

from deqlab import DEQ, JacobianFree, Picard, fixed_point_correction

D = 5


def linear_cell():
    torch.manual_seed(3)
    W = torch.nn.Parameter(0.5 * torch.randn(D, D, dtype=torch.float64) / D**0.5)
    return W, lambda z, x: z @ W.T + x


def test_states_are_the_segment_ends_of_picard_and_the_last_is_the_output():
    W, cell = linear_cell()
    deq = DEQ(cell, solver=Picard(tol=1e-30, max_iter=9), on_failure="record")
    x = torch.randn(2, D, dtype=torch.float64)
    states = deq.states(x, 3)
    z, expected = torch.zeros_like(x), []
    for _ in range(3):  # a segment of 3 evaluations sees z_k, z_k+1, z_k+2: returns z_k+2
        z = z @ W.T + x
        z = z @ W.T + x
        expected.append(z.detach())
    for state, reference in zip(states, expected, strict=True):
        torch.testing.assert_close(state, reference, rtol=0, atol=1e-14)
    assert deq.stats.forward_solves == 3
    with pytest.raises(ValueError, match=r"`n` must be <= the solver's max_iter 9; got 10"):
        deq.states(x, 10)


def test_the_correction_loss_and_its_gradient_are_the_weighted_sum_by_hand():
    W, cell = linear_cell()
    deq = DEQ(cell, solver=Picard(tol=1e-30, max_iter=8), backward=JacobianFree(),
              on_failure="record")  # fmt: skip
    x, y = torch.randn(3, D, dtype=torch.float64), torch.randn(3, D, dtype=torch.float64)

    def loss(z, target):
        return (z - target).square().mean()

    states = deq.states(x, 4)
    total = fixed_point_correction(loss, states, y, gamma=0.5)
    total.backward()
    weights = [0.125, 0.25, 0.5, 1.0]  # γ^(n−k)
    by_hand = sum(w * loss(s.detach(), y) for w, s in zip(weights, states, strict=True))
    assert float(total.detach()) == pytest.approx(float(by_hand), rel=1e-14)
    expected = torch.zeros_like(W)  # Jacobian-free at each state s: gᵀ ∂f(s)/∂W, g = ∂ℓ/∂s
    for w, s in zip(weights, states, strict=True):
        s = s.detach().requires_grad_()
        (g,) = torch.autograd.grad(w * loss(s, y), s)
        expected += torch.autograd.grad(cell(s.detach(), x), W, g)[0]
    torch.testing.assert_close(W.grad, expected, rtol=1e-12, atol=1e-15)


def test_bad_correction_arguments():
    with pytest.raises(ValueError, match=r"`states` must hold at least one state"):
        fixed_point_correction(torch.nn.functional.mse_loss, [])
    with pytest.raises(ValueError, match=r"`gamma` must be in \(0, 1\]; got 0"):
        fixed_point_correction(torch.nn.functional.mse_loss, [torch.zeros(1)], gamma=0.0)

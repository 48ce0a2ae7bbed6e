"""Batched loss surfaces (deqlab/landscape_batch.py): one vmapped cell per row of points,
equal to the point-by-point surface, and solve_points repeating each point's own solve."""

import math

import pytest
import torch

from deqlab.landscape import loss_surface
from deqlab.landscape_batch import solve_points
from deqlab.models.conv_deq import WeightTiedConvNet
from deqlab.solvers import Anderson, Broyden
from helpers import float64_conv_deq, two_batch_loss


def test_batched_surface_equals_point_by_point_solves_within_the_tolerance():
    """Rows of 3 and 1 points, one vmapped cell each; every solve stops on its own."""
    net = float64_conv_deq(tol=1e-12)
    loss = two_batch_loss()
    kwargs = {"steps": 4, "span": 0.1, "generator": torch.Generator().manual_seed(2),
              "progress": False}  # fmt: skip
    cold = loss_surface(net, loss, warm_start=False, **kwargs)
    batched = loss_surface(net, loss, directions=cold.directions, batch=3, **kwargs)
    assert torch.allclose(batched.losses, cold.losses, rtol=1e-9, atol=0)
    assert torch.equal(batched.solver_steps[0], cold.solver_steps[0])  # row 0: cold, alike
    assert int(batched.solver_steps[1:].sum()) < int(cold.solver_steps[1:].sum())  # warm


def test_batched_surface_of_the_weight_tied_net_is_the_point_by_point_one():
    torch.manual_seed(0)
    net = WeightTiedConvNet(4, 1, 3, channels=4, inner_channels=4, groups=2).double()
    loss = two_batch_loss()
    kwargs = {"steps": 4, "generator": torch.Generator().manual_seed(3), "progress": False}
    pointwise = loss_surface(net, loss, **kwargs)
    batched = loss_surface(net, loss, directions=pointwise.directions, batch=3, **kwargs)
    assert torch.allclose(batched.losses, pointwise.losses, rtol=1e-12, atol=0)
    assert int(batched.solver_steps.sum()) == 0


@pytest.mark.parametrize("solver", [Anderson(tol=1e-11, per_sample=True), Broyden(tol=1e-11)])
def test_solve_points_repeats_each_points_own_solve(solver):
    """z_p = tanh(W_p z_p + b_p) for 3 points of 2 samples: each point's iterates, stopping
    step and answer are those of `solver` run on that point alone."""
    gen = torch.Generator().manual_seed(0)
    W = 0.6 * torch.randn(3, 5, 5, dtype=torch.float64, generator=gen) / math.sqrt(5)
    W[0] *= 0.1  # a fast point: stops first and is frozen while the others go on
    b = torch.randn(3, 2, 5, dtype=torch.float64, generator=gen)
    evaluated = torch.zeros(3, dtype=torch.int64)

    def f(z, index):
        evaluated[index] += 1
        return torch.tanh(z @ W[index].transpose(1, 2) + b[index])

    z, steps = solve_points(solver, f, torch.zeros(3, 2, 5, dtype=torch.float64))
    assert torch.equal(steps, evaluated)
    for p in range(3):
        alone = solver(lambda zp, p=p: torch.tanh(zp @ W[p].T + b[p]), torch.zeros(2, 5).double())
        assert int(steps[p]) == alone.n_steps
        assert torch.allclose(z[p], alone.z, rtol=0, atol=1e-13)
    assert len(set(steps.tolist())) > 1

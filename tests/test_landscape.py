"""Filter-normalised loss surfaces (Li et al. 2018; thesis Section 4.2), deqlab/landscape.py:
directions, surfaces point by point and warm-started, the dataset loss, bad input (the
batched evaluation: tests/test_landscape_batch.py)."""

import itertools
import math
from dataclasses import replace

import pytest
import torch
from torch import nn

from deqlab.landscape import (
    WarmStarts,
    dataset_loss,
    filter_normalized_direction,
    loss_surface,
    snake_order,
)
from deqlab.models import MDEQ
from helpers import float64_conv_deq, two_batch_loss


def small_net():
    return nn.Sequential(
        nn.Conv2d(2, 4, 3, padding=1),
        nn.GroupNorm(2, 4),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(4 * 5 * 5, 3),
    )


def test_direction_is_filter_normalised_and_zero_on_biases_and_norms():
    net = small_net()
    d = filter_normalized_direction(net, generator=torch.Generator().manual_seed(0))
    params = dict(net.named_parameters())
    assert set(d) == set(params)
    for name in ("0.weight", "4.weight"):  # conv filters (4, 2, 3, 3) and linear rows (3, 100)
        theta = params[name].detach()
        rows_d = d[name].reshape(theta.shape[0], -1).norm(dim=1)
        rows_theta = theta.reshape(theta.shape[0], -1).norm(dim=1)
        assert torch.allclose(rows_d, rows_theta, rtol=1e-13, atol=0)
        assert not torch.allclose(d[name], theta)  # random, not a copy of θ
    for name in ("0.bias", "1.weight", "1.bias", "4.bias"):
        assert torch.count_nonzero(d[name]) == 0


def test_directions_are_reproducible_and_independent():
    net = small_net()
    a = filter_normalized_direction(net, generator=torch.Generator().manual_seed(3))
    b = filter_normalized_direction(net, generator=torch.Generator().manual_seed(3))
    c = filter_normalized_direction(net, generator=torch.Generator().manual_seed(4))
    assert torch.equal(a["0.weight"], b["0.weight"])
    assert not torch.equal(a["0.weight"], c["0.weight"])


def test_surface_of_a_quadratic_matches_closed_form_and_restores_parameters():
    """For L(θ) = ‖θ − t‖², Φ(α, β) = ‖θ* − t + α d₁ + β d₂‖² exactly."""
    net = nn.Linear(3, 2, bias=False)
    target = torch.randn(2, 3)
    before = net.weight.detach().clone()
    surface = loss_surface(
        net,
        lambda m: ((m.weight - target) ** 2).sum(),
        steps=7,
        span=0.5,
        generator=torch.Generator().manual_seed(1),
        progress=False,
    )
    d1, d2 = (d["weight"] for d in surface.directions)
    for i, a in enumerate(surface.alphas.tolist()):
        for j, b in enumerate(surface.betas.tolist()):
            expected = float(((before - target + a * d1 + b * d2) ** 2).sum())
            assert float(surface.losses[i, j]) == pytest.approx(expected, rel=1e-12)
    assert torch.equal(net.weight.detach(), before)
    assert surface.losses.shape == (7, 7) and float(surface.alphas[0]) == -0.5


def test_parameters_restored_when_the_loss_raises():
    net = small_net()
    before = [p.detach().clone() for p in net.parameters()]
    calls = []

    def failing(module):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("boom")
        return 0.0

    with pytest.raises(RuntimeError, match="boom"):
        loss_surface(net, failing, steps=3, progress=False)
    assert all(torch.equal(p, q) for p, q in zip(net.parameters(), before, strict=True))


def test_flat_area_of_a_paraboloid_is_a_disc():
    """With orthonormal user directions, Φ = α² + β² and {Φ ≤ r²} is a disc of area πr²."""
    net = nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        net.weight.zero_()
    e1 = {"weight": torch.tensor([[1.0, 0.0]])}
    e2 = {"weight": torch.tensor([[0.0, 1.0]])}
    surface = loss_surface(
        net, lambda m: (m.weight**2).sum(), directions=(e1, e2), steps=81, progress=False
    )
    assert surface.flat_area(0.25) == pytest.approx(math.pi * 0.25, rel=0.03)
    assert surface.flat_area(10.0) == pytest.approx((81 * 0.025) ** 2, rel=1e-9)  # whole grid
    assert surface.flat_area(-1.0) == 0.0
    for lost in (math.nan, math.inf):  # a point that may or may not be in the set
        losses = surface.losses.clone()
        losses[0, 0] = lost
        assert math.isnan(replace(surface, losses=losses).flat_area(0.25))


def test_dataset_loss_weights_batches_by_size():
    net = nn.Linear(2, 1)
    x, y = torch.randn(5, 2), torch.randn(5, 1)
    mse = nn.functional.mse_loss
    loss_fn = dataset_loss(mse, iter([(x[:2], y[:2]), (x[2:], y[2:])]))
    assert loss_fn(net) == pytest.approx(float(mse(net(x), y).detach()))


def test_snake_order_visits_every_point_once_through_neighbours():
    order = snake_order(4)
    assert sorted(order) == [(i, j) for i in range(4) for j in range(4)]
    assert all(abs(a - c) + abs(b - d) == 1 for (a, b), (c, d) in itertools.pairwise(order))


def test_warm_started_surface_equals_cold_solves_within_the_tolerance_in_fewer_steps():
    """Each DEQ solve started from the neighbour's z* reaches the same loss as from z = 0."""
    net = float64_conv_deq(tol=1e-10)
    x = torch.rand(6, 1, 6, 6, dtype=torch.float64)
    y = torch.arange(6) % 3
    batches = [(x[:4], y[:4]), (x[4:], y[4:])]  # two DEQ calls per point, each warm-started
    loss = dataset_loss(nn.functional.cross_entropy, batches)
    kwargs = {"steps": 5, "span": 0.3, "generator": torch.Generator().manual_seed(2),
              "progress": False}  # fmt: skip
    cold = loss_surface(net, loss, warm_start=False, **kwargs)
    warm = loss_surface(net, loss, directions=cold.directions, warm_start=True, **kwargs)
    with torch.no_grad():  # the centre, θ*, by the solver called directly on all six images
        injected = net.inject(x)
        z_star = net.deq.solver(lambda z: net.cell(z, injected), torch.zeros_like(injected)).z
        reference = float(nn.functional.cross_entropy(net.head(z_star), y))
    assert float(cold.losses[2, 2]) == pytest.approx(reference, rel=1e-9)
    assert torch.allclose(warm.losses, cold.losses, rtol=1e-9, atol=0)
    assert int(warm.solver_steps.sum()) < int(cold.solver_steps.sum())
    assert int(warm.solver_steps[0, 0]) == int(cold.solver_steps[0, 0])  # the first is cold


def test_warm_starts_restore_the_deq_and_skip_other_shapes():
    net = float64_conv_deq(tol=1e-10)
    x = torch.rand(3, 1, 6, 6, dtype=torch.float64)
    with torch.no_grad(), WarmStarts(net) as starts:
        net(x)
        cold = starts.steps
        starts.next_point()
        net(x)  # same input: starts at z*, one evaluation of f confirms it
        assert starts.steps == 1 < cold
        starts.next_point()
        net(x[:2])  # other shapes: cold start
        assert starts.steps > 1
    assert "forward" not in vars(net.deq)


def test_bad_input():
    net = small_net()
    with pytest.raises(TypeError, match=r"`module` must be a torch\.nn\.Module"):
        filter_normalized_direction(lambda x: x)
    with pytest.raises(TypeError, match="`loss_fn` must be callable"):
        loss_surface(net, 3.0)
    with pytest.raises(ValueError, match="`steps` must be >= 2"):
        loss_surface(net, lambda m: 0.0, steps=1)
    with pytest.raises(ValueError, match="`span` must be in"):
        loss_surface(net, lambda m: 0.0, span=0.0)
    d = filter_normalized_direction(net)
    bad = dict(d, **{"0.weight": torch.zeros(3)})
    with pytest.raises(
        ValueError, match=r"`directions\[1\]\['0.weight'\]` must be a tensor of shape"
    ):
        loss_surface(net, lambda m: 0.0, directions=(d, bad))
    with pytest.raises(ValueError, match=r"missing \['4.bias'\]"):
        loss_surface(
            net, lambda m: 0.0, directions=(d, {k: v for k, v in d.items() if k != "4.bias"})
        )
    with pytest.raises(ValueError, match="`batches` must hold at least one"):
        dataset_loss(nn.functional.mse_loss, [])


def test_batched_surface_bad_input():
    net = small_net()
    with pytest.raises(ValueError, match="`batch` must be >= 1"):
        loss_surface(net, lambda m: 0.0, batch=0)
    with pytest.raises(TypeError, match=r"`loss_fn` must come from dataset_loss"):
        loss_surface(net, lambda m: 0.0, batch=2)
    mdeq = MDEQ(1, 3, channels=(4, 4), groups=2)
    with pytest.raises(ValueError, match="`batch` needs a module without a DEQ or a"):
        loss_surface(mdeq, two_batch_loss(), batch=2)

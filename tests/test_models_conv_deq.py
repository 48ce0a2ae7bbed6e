"""The convolutional DEQ cell of Eq. (4.1), its equilibrium model and the weight-tied twin."""

import pytest
import torch
from torch.nn import functional as F

from deqlab.implicit import Implicit
from deqlab.models.conv_deq import ConvDEQ, ConvDEQCell, WeightTiedConvNet, relative_residual
from deqlab.solvers import Anderson

SMALL = {"channels": 4, "inner_channels": 4, "groups": 2}


def test_cell_matches_equation_4_1():
    cell = ConvDEQCell(**SMALL, init_std=0.3)
    z, x = torch.randn(2, 4, 5, 5), torch.randn(2, 4, 5, 5)

    def norm(t, gn):
        return F.group_norm(t, 2, gn.weight, gn.bias, gn.eps)

    inner = norm(F.relu(F.conv2d(z, cell.conv1.weight, padding=1)), cell.norm1)
    expected = norm(
        F.relu(z + norm(x + F.conv2d(inner, cell.conv2.weight, padding=1), cell.norm2)),
        cell.norm3,
    )
    assert torch.allclose(cell(z, x), expected, atol=1e-12)
    assert float(cell.conv1.weight.detach().std()) == pytest.approx(0.3, rel=0.3)


def test_relative_residual_equation_4_2():
    fz, z = torch.randn(3, 2, 4, 4), torch.randn(3, 2, 4, 4)
    r = relative_residual(fz, z)
    expected = torch.stack([(fz[i] - z[i]).norm() / fz[i].norm() for i in range(3)])
    assert torch.allclose(r, expected)
    assert torch.equal(relative_residual(fz, torch.zeros_like(fz)), torch.ones(3))


def tight_pair(repeats=150):
    """A contractive DEQ (small init) solved tightly, and the repeat-k net with its weights."""
    torch.manual_seed(0)
    solver = Anderson(tol=1e-11, max_iter=200)
    deq = ConvDEQ(1, 3, **SMALL, init_std=0.01, solver=solver, backward=Implicit())
    tied = WeightTiedConvNet(repeats, 1, 3, **SMALL)
    state = {k.replace("deq.cell.", "cell."): v for k, v in deq.state_dict().items()}
    tied.load_state_dict(state)
    return deq, tied


def test_deq_is_the_limit_of_the_weight_tied_network_values_and_gradients():
    deq, tied = tight_pair()
    images, labels = torch.randn(2, 1, 6, 6), torch.tensor([0, 2])
    grads = []
    for net in (deq, tied):
        net.zero_grad()
        loss = F.cross_entropy(net(images), labels)
        loss.backward()
        grads.append({k: p.grad.clone() for k, p in net.named_parameters()})
    assert torch.allclose(deq(images), tied(images), atol=1e-9)
    for key, g in grads[0].items():
        assert torch.allclose(g, grads[1][key.replace("deq.cell.", "cell.")], atol=1e-8), key
    assert deq.deq.last_forward.converged and deq.deq.last_backward.converged


def test_trajectory_records_the_solver_iterates():
    deq, _ = tight_pair()
    images = torch.randn(3, 1, 6, 6)
    iterates, residuals = deq.trajectory(images)
    steps = deq.deq.solver(lambda z: deq.cell(z, deq.inject(images)), iterates[0]).n_steps
    assert iterates.shape == (steps, 3, 4, 6, 6) and residuals.shape == (steps, 3)
    assert torch.equal(iterates[0], torch.zeros_like(iterates[0]))
    assert torch.allclose(residuals[0], torch.ones(3))  # z = 0: ‖f(0) − 0‖ / ‖f(0)‖ = 1
    assert float(residuals[-1].max()) < 1e-9
    with torch.no_grad():
        assert torch.allclose(iterates[-1], deq.deq(deq.inject(images)), atol=1e-12)


def test_default_solver_is_the_thesis_anderson_and_does_not_raise():
    net = ConvDEQ(1, 10, init_std=1.0)  # N(0, 1): the chaotic regime of Fig. 4.1
    with torch.no_grad():
        logits = net(torch.randn(2, 1, 8, 8))
    assert logits.shape == (2, 10) and bool(torch.isfinite(logits).all())
    assert net.deq.solver.tol == 1e-2 and net.deq.solver.max_iter == 50


def test_bad_input():
    with pytest.raises(ValueError, match="`channels` = 6 must be divisible by `groups` = 4"):
        ConvDEQCell(6, 8, groups=4)
    with pytest.raises(ValueError, match="`kernel_size` must be odd"):
        ConvDEQCell(4, 4, groups=2, kernel_size=2)
    with pytest.raises(ValueError, match="`init_std` must be in"):
        ConvDEQCell(4, 4, groups=2, init_std=0.0)
    with pytest.raises(TypeError, match=r"`solver` must be a Solver .*; got 'anderson'"):
        ConvDEQ(1, 10, solver="anderson")  # was an AttributeError on .throw
    with pytest.raises(ValueError, match="`repeats` must be >= 1"):
        WeightTiedConvNet(0, **SMALL)
    net = WeightTiedConvNet(2, 1, 3, **SMALL)
    with pytest.raises(ValueError, match=r"`images` must have shape \(B, 1, H, W\)"):
        net(torch.randn(2, 3, 6, 6))
    with pytest.raises(ValueError, match="`images` must be a 4-D tensor"):
        net(torch.randn(6, 6))

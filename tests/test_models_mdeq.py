"""The multiscale DEQ (Bai et al. 2020; thesis Figures 3.1, 4.5): cell, equilibrium, gradient.

GroupNorm makes the cell nearly scale-invariant in ``z``, so plain Picard iteration does not
contract at a random initialisation. ``contractive`` builds an instance where it does
(post-fusion GroupNorm gains 0.05; the blocks' second GroupNorm with gain 0.1 and biases
spread over [0.5, 2], one group): the oracle
of unrolled autograd through Picard needs it.
"""

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from deqlab.implicit import DEQ, Implicit, JacobianFree, Unrolled
from deqlab.models import MDEQ, MDEQCell
from deqlab.solvers import Anderson, Broyden, Picard

TINY = {"expansion": 2, "groups": 2}


def contractive(channels=(4, 4), seed=0, cell=None):
    """A cell on which Picard contracts: the injection dominates every GroupNorm's input."""
    torch.manual_seed(seed)
    cell = (
        MDEQCell(channels, init_std=0.01, expansion=2, groups=1).double() if cell is None else cell
    )
    with torch.no_grad():
        for post in cell.post:
            post[2].weight.fill_(0.05)
        for block in cell.blocks:
            block.norm2.weight.fill_(0.1)
            block.norm2.bias.copy_(torch.linspace(0.5, 2.0, len(block.norm2.bias)))
    return cell


def residual(cell, z, x):
    """‖f(z) − z‖ / ‖f(z)‖ over all scales (computed here, not by the solver)."""
    with torch.no_grad():
        fz = cell(z, x)
    num = sum(float((a - b).pow(2).sum()) for a, b in zip(fz, z, strict=True))
    return (num / sum(float(a.pow(2).sum()) for a in fz)) ** 0.5


def test_cell_matches_the_multiscale_equations_written_out():
    torch.manual_seed(1)
    cell = MDEQCell((4, 8), **TINY).double()
    z = [torch.randn(2, 4, 8, 8, dtype=torch.float64), torch.randn(2, 8, 4, 4, dtype=torch.float64)]
    x = torch.randn(2, 4, 8, 8, dtype=torch.float64)

    def gn(t, norm):
        return F.group_norm(t, 2, norm.weight, norm.bias, norm.eps)

    def block(b, zs, inj):
        y = F.conv2d(
            F.relu(gn(F.conv2d(zs, b.conv1.weight, padding=1), b.norm1)), b.conv2.weight, padding=1
        )
        return gn(F.relu(zs + gn(y + inj, b.norm2)), b.norm3)

    b1, b2 = block(cell.blocks[0], z[0], x), block(cell.blocks[1], z[1], 0.0)
    up, down = cell.fuse[0][1], cell.fuse[1][0]
    u1 = b1 + gn(F.conv2d(b2, up[0].weight), up[1]).repeat_interleave(2, 2).repeat_interleave(2, 3)
    u2 = b2 + gn(F.conv2d(b1, down[0].weight, stride=2, padding=1), down[1])
    expected = [  # post-fusion GroupNorm with half the groups (the authors' NUM_GROUPS // 2)
        F.group_norm(F.conv2d(F.relu(u), p[1].weight), 1, p[2].weight, p[2].bias, p[2].eps)
        for u, p in zip((u1, u2), cell.post, strict=True)
    ]
    for got, want in zip(cell(z, x), expected, strict=True):
        assert torch.allclose(got, want, atol=1e-12)


def test_state_shapes_per_scale_and_fusion_paths():
    cell = MDEQCell((4, 6, 8), groups=2, expansion=1)
    x = torch.randn(3, 4, 16, 12)
    assert cell.state_shapes(x) == [(3, 4, 16, 12), (3, 6, 8, 6), (3, 8, 4, 3)]
    out = cell(cell.initial_state(x), x)
    assert [tuple(z.shape) for z in out] == cell.state_shapes(x)
    # down-sampling by 4 is two stride-2 convolutions, ReLU between; up-sampling one 1×1 conv
    assert [type(m).__name__ for m in cell.fuse[2][0]] == [
        "Conv2d",
        "GroupNorm",
        "ReLU",
        "Conv2d",
        "GroupNorm",
    ]
    assert cell.fuse[0][2][2].scale_factor == 4 and cell.fuse[0][2][0].kernel_size == (1, 1)


def test_fixed_point_satisfies_f_of_z_equals_z_at_every_scale():
    torch.manual_seed(2)
    model = MDEQ(
        3,
        5,
        channels=(4, 8),
        groups=1,
        expansion=2,
        init_std=0.01,
        solver=Anderson(tol=1e-11, max_iter=400),
    ).double()
    contractive(cell=model.cell)
    images = torch.randn(2, 3, 8, 8, dtype=torch.float64)
    with torch.no_grad():
        z = model.features(images)
        x = model.inject(images)
        assert residual(model.cell, z, x) < 1e-9
        assert residual(model.cell, [t + 1e-3 for t in z], x) > 1e-5  # the check can fail
    assert [tuple(t.shape) for t in z] == [(2, 4, 8, 8), (2, 8, 4, 4)]
    assert model(images).shape == (2, 5)


def test_implicit_gradient_equals_unrolled_autograd_through_picard():
    cell = contractive()
    x = torch.randn(2, 4, 8, 8, dtype=torch.float64)
    weights = (
        torch.randn(2, 4, 8, 8, dtype=torch.float64),
        torch.randn(2, 4, 4, 4, dtype=torch.float64),
    )
    grads = []
    for backward in (Implicit(), Unrolled(steps=400), JacobianFree()):
        deq = DEQ(cell, solver=Picard(tol=1e-13, max_iter=400, throw=False), backward=backward)
        cell.zero_grad()
        z = deq(x)
        loss = sum((w * t.sin()).sum() for w, t in zip(weights, z, strict=True))
        loss.backward()
        assert residual(cell, [t.detach() for t in z], x) < 1e-11
        grads.append({k: p.grad.clone() for k, p in cell.named_parameters()})
    for key, g in grads[0].items():
        assert torch.allclose(g, grads[1][key], rtol=1e-7, atol=1e-10), key
    # the comparison can fail: the one-step (Jacobian-free) gradient is told apart
    assert not all(torch.allclose(g, grads[2][k], rtol=1e-4) for k, g in grads[0].items())
    assert max(float(g.abs().max()) for g in grads[0].values()) > 1e-3  # not vacuous


def test_implicit_gradient_passes_gradcheck_on_a_tiny_instance():
    cell = contractive((2, 2))
    deq = DEQ(cell, solver=Anderson(tol=1e-13, max_iter=300))
    x = torch.randn(1, 2, 4, 4, dtype=torch.float64, requires_grad=True)
    torch.autograd.gradcheck(
        lambda x: torch.cat([t.flatten() for t in deq(x)]), (x,), fast_mode=True
    )


@pytest.mark.parametrize(
    "solver",
    [
        Picard(tol=1e-10, max_iter=300),
        Anderson(tol=1e-10, max_iter=300),
        Broyden(tol=1e-10, max_iter=300),
    ],
)
def test_every_solver_reaches_the_same_equilibrium(solver):
    cell = contractive()
    x = torch.randn(2, 4, 8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    reference = DEQ(cell, solver=Anderson(tol=1e-13, max_iter=400))
    with torch.no_grad():
        z, want = DEQ(cell, solver=solver)(x), reference(x)
    for a, b in zip(z, want, strict=True):
        assert torch.allclose(a, b, atol=1e-8)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda: MDEQCell((4, 6), groups=4),
            r"`channels` \[4, 6\] must all be divisible by `groups` = 4",
        ),
        (lambda: MDEQCell((), groups=2), "`channels` must be a non-empty sequence"),
        (lambda: MDEQCell((4, 0), groups=2), "`channels` must be >= 1"),
        (lambda: MDEQCell((4,), groups=2, expansion=0), "`expansion` must be >= 1"),
        (lambda: MDEQ(3, 1), "`num_classes` must be >= 2"),
        (lambda: MDEQ(3, 10, solver="anderson"), "`solver` must be a Solver"),
        (lambda: MDEQCell((4, 4), groups=2, init_std=-1.0), "`init_std` must be in"),
        (lambda: MDEQCell((4, 4), groups=2, weight_norm="yes"), "`weight_norm` must be a bool"),
    ],
)
def test_bad_construction_one_clear_line(build, message):
    with pytest.raises((ValueError, TypeError), match=message) as err:
        build()
    assert "\n" not in str(err.value)


def test_bad_input_one_clear_line():
    model = MDEQ(3, 10, channels=(4, 4, 4), **TINY)
    with pytest.raises(
        ValueError, match=r"`images` must have shape \('any', 3, 'any', 'any'\); got \(2, 1, 8, 8\)"
    ):
        model(torch.randn(2, 1, 8, 8))
    with pytest.raises(
        ValueError, match=r"H, W positive multiples of 4 .* got \(2, 4, 6, 8\)"
    ) as err:
        model(torch.randn(2, 3, 6, 8))
    assert "\n" not in str(err.value)


def test_stem_downsample_halves_the_finest_scale_per_stride_2_layer():
    model = MDEQ(3, 4, channels=(4, 4), downsample=2, **TINY)
    with torch.no_grad():
        z = model.features(torch.randn(1, 3, 16, 16))
    assert [tuple(t.shape) for t in z] == [(1, 4, 4, 4), (1, 4, 2, 2)]
    assert [m.stride for m in model.stem if isinstance(m, torch.nn.Conv2d)] == [(2, 2), (2, 2)]


def test_weight_norm_parametrises_the_authors_convolutions_as_g_v_over_norm_v():
    torch.manual_seed(4)
    cell = MDEQCell((4, 8), **TINY).double()
    conv = cell.blocks[0].conv1
    g, v = conv.parametrizations.weight.original0, conv.parametrizations.weight.original1
    norms = v.flatten(1).norm(dim=1).view(-1, 1, 1, 1)
    assert torch.allclose(conv.weight, g * v / norms, atol=1e-15)
    assert torch.allclose(g, norms)  # g starts at ‖v‖: the same function as the plain weights
    names = {n for n, _ in cell.named_parameters() if "original" in n}
    assert len(names) == 2 * (2 * 2 + 2)  # W₁, W₂ per block and V_i per post-fusion: (g, v)
    assert not any("fuse" in n for n in names)  # fusion convolutions stay plain (authors)
    with torch.no_grad():
        g.mul_(3.0)  # rescaling g rescales W, whatever v is
    assert torch.allclose(conv.weight, 3 * norms * v / norms, atol=1e-14)


def test_fold_weight_norm_keeps_the_function_and_leaves_plain_weights():
    torch.manual_seed(5)
    cell = MDEQCell((4, 8), **TINY).double()
    with torch.no_grad():
        for p in cell.parameters():
            p.add_(0.1 * torch.randn_like(p))  # away from g = ‖v‖
    z = [torch.randn(2, 4, 8, 8, dtype=torch.float64), torch.randn(2, 8, 4, 4, dtype=torch.float64)]
    x = torch.randn(2, 4, 8, 8, dtype=torch.float64)
    before = cell(z, x)
    cell.fold_weight_norm()
    assert not any("original" in n for n, _ in cell.named_parameters())
    for a, b in zip(before, cell(z, x), strict=True):
        assert torch.allclose(a, b, atol=1e-12)
    plain = MDEQCell((4, 8), **TINY, weight_norm=False)
    assert {n for n, _ in plain.named_parameters()} == {n for n, _ in cell.named_parameters()}


def test_the_authors_initialisation_draws_convolutions_from_n_0_0_01():
    torch.manual_seed(6)
    model = MDEQ(3, 10, channels=(16, 16), expansion=5, groups=4)
    weights = [m.weight.detach().flatten() for m in model.modules() if isinstance(m, nn.Conv2d)]
    drawn = torch.cat(weights)  # every convolution, stem and fusion included
    # Monte Carlo: n ≈ 3·10⁴ draws, the sample std within 3 % of 0.01 (its s.e. is 0.4 %)
    assert drawn.numel() > 20_000 and abs(float(drawn.std()) - 0.01) < 3e-4
    assert abs(float(drawn.mean())) < 3e-4
    default = MDEQ(3, 10, channels=(16, 16), expansion=5, groups=4, init_std=None)
    conv2 = default.cell.blocks[0].conv2.weight.detach()
    assert float(conv2.std()) > 0.02  # PyTorch's default (fan-in 720): ≈ 0.0215

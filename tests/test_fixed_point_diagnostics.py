"""Fixed-point diagnostics against dense Jacobians (torch.autograd.functional.jacobian), float64."""

import math

import pytest
import torch
from torch import nn

from deqlab import DEQ, Anderson, fixed_point_diagnostics


def symmetric(d: int, rate: float) -> torch.Tensor:
    A = torch.randn(d, d, dtype=torch.float64)
    S = A + A.T
    return rate * S / torch.linalg.matrix_norm(S, 2)


def dense_blocks(f, z: torch.Tensor) -> torch.Tensor:
    """Per-sample Jacobians ``(B, n, n)`` of a map acting on each sample alone."""
    B = z.shape[0]
    J = torch.autograd.functional.jacobian(f, z).reshape(B, -1, B, z[0].numel())
    return torch.stack([J[i, :, i] for i in range(B)])


def references(J: torch.Tensor):
    eye = torch.eye(J.shape[1], dtype=J.dtype)
    rho = torch.linalg.eigvals(J).abs().amax(dim=1)
    return rho, torch.linalg.matrix_norm(J, 2), torch.linalg.svdvals(eye - J).amin(dim=1)


def sigma_max(J: torch.Tensor) -> torch.Tensor:
    return torch.linalg.matrix_norm(torch.eye(J.shape[1], dtype=J.dtype) - J, 2)


def tanh_problem(d=6, batch=3, rate=1.2):
    """``f(z) = tanh(z Wᵀ + x)`` with W symmetric: J = D W has real eigenvalues."""
    W, x = symmetric(d, rate), torch.randn(batch, d, dtype=torch.float64)
    return (lambda z: torch.tanh(z @ W.T + x)), torch.randn(batch, d, dtype=torch.float64)


def test_exact_once_lanczos_spans_the_row_and_power_iteration_converges():
    f, z = tanh_problem()
    J = dense_blocks(f, z)
    rho, norm, sigma = references(J)
    got = fixed_point_diagnostics(
        f, z, rows=3, iters=200, generator=torch.Generator().manual_seed(0)
    )
    torch.testing.assert_close(got.jacobian_norm, norm, atol=1e-10, rtol=0)
    torch.testing.assert_close(got.sigma_min, sigma, atol=1e-8, rtol=0)
    torch.testing.assert_close(got.sigma_max, sigma_max(J), atol=1e-10, rtol=0)
    torch.testing.assert_close(got.spectral_radius, rho, rtol=1e-6, atol=0)
    assert got.products == 200 + 2 * 6 * 2  # power JVPs + two Lanczos runs of 6 (JVP + VJP)


def test_few_iterations_bound_from_the_right_side():
    f, z = tanh_problem(d=40, batch=2, rate=0.9)
    J = dense_blocks(f, z)
    _, norm, sigma = references(J)
    got = fixed_point_diagnostics(f, z, rows=2, iters=5, generator=torch.Generator().manual_seed(1))
    assert bool((got.jacobian_norm <= norm + 1e-12).all())  # Ritz values inside the spectrum
    assert bool((got.sigma_min >= sigma - 1e-12).all())
    assert bool((got.sigma_max <= sigma_max(J) + 1e-12).all())
    assert bool((got.jacobian_norm > 0.5 * norm).all())  # and not far off after 5 steps


def test_complex_dominant_pair():
    # J = 0.9 × rotation by 1 rad in every 2-plane: eigenvalues 0.9 e^{±i}, never real
    c, s = math.cos(1.0), math.sin(1.0)
    R = 0.9 * torch.tensor([[c, -s], [s, c]], dtype=torch.float64)
    f, z = (lambda z: z @ R.T), torch.randn(4, 2, dtype=torch.float64)
    got = fixed_point_diagnostics(f, z, rows=4, iters=30)
    torch.testing.assert_close(got.spectral_radius, torch.full((4,), 0.9, dtype=torch.float64))
    torch.testing.assert_close(
        got.sigma_min,
        torch.full(
            (4,),
            float(torch.linalg.svdvals(torch.eye(2, dtype=torch.float64) - R).min()),
            dtype=torch.float64,
        ),
    )


def test_whole_tensor_is_the_worst_block():
    f, z = tanh_problem(d=3, batch=2)
    rho, norm, sigma = references(dense_blocks(f, z))
    got = fixed_point_diagnostics(
        f, z, rows=1, iters=200, generator=torch.Generator().manual_seed(2)
    )
    torch.testing.assert_close(got.jacobian_norm, norm.max()[None], atol=1e-10, rtol=0)
    torch.testing.assert_close(got.sigma_min, sigma.min()[None], atol=1e-8, rtol=0)
    torch.testing.assert_close(got.spectral_radius, rho.max()[None], rtol=1e-6, atol=0)


class ConvGroupNormCell(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 2, 3, padding=1, dtype=torch.float64)
        self.norm = nn.GroupNorm(1, 2, dtype=torch.float64)

    def forward(self, z: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return self.norm(torch.relu(self.conv(z) + x))


def test_deq_diagnostics_on_a_conv_groupnorm_cell():
    torch.manual_seed(0)
    deq = DEQ(
        ConvGroupNormCell(),
        solver=Anderson(tol=1e-3, max_iter=40, per_sample=True),
        on_failure="record",
    )
    with pytest.raises(RuntimeError, match=r"call deq\(x\) first"):
        deq.diagnostics()
    x = torch.randn(2, 2, 3, 3, dtype=torch.float64)
    z = deq(x).detach()
    got = deq.diagnostics(iters=18, generator=torch.Generator().manual_seed(0))  # 18 = C·H·W
    _, norm, sigma = references(dense_blocks(lambda z: deq.cell(z, x), z))
    torch.testing.assert_close(got.jacobian_norm, norm, atol=1e-9, rtol=0)
    torch.testing.assert_close(got.sigma_min, sigma, atol=1e-7, rtol=0)
    assert got.sample_steps.tolist() == deq.last_forward.sample_steps.tolist()
    assert got.sample_residuals is deq.last_forward.sample_residuals
    assert "σ_min(I − J_f) min" in got.summary() and "solver steps max" in got.summary()


def test_bad_arguments():
    f, z = tanh_problem()
    with pytest.raises(ValueError, match=r"`rows` must be 1 or z.shape\[0\] = 3; got 2"):
        fixed_point_diagnostics(f, z, rows=2)
    with pytest.raises(ValueError, match=r"`iters` must be >= 2"):
        fixed_point_diagnostics(f, z, iters=1)

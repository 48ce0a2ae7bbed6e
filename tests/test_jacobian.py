"""Jacobian regularisation: the Hutchinson estimate of ‖J_f‖_F²/d is unbiased (Monte Carlo
against the dense Jacobian), its variance falls as 1/k, and it is differentiable (gradcheck)."""

import pytest
import torch

from deqlab import DEQ, Anderson, jacobian_penalty


def tanh_map(W: torch.Tensor, x: torch.Tensor):
    return lambda z: torch.tanh(z @ W.T + x)


def exact_penalty(f, z: torch.Tensor) -> float:
    J = torch.autograd.functional.jacobian(f, z).reshape(z.numel(), z.numel())
    return float(J.square().sum()) / z.numel()


def draws(f, z, k: int, n: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():  # values only (no create_graph)
        return torch.stack([jacobian_penalty(f, z, k, generator=generator) for _ in range(n)])


def test_hutchinson_estimate_is_unbiased_against_the_dense_jacobian():
    W = torch.randn(4, 4, dtype=torch.float64)
    x, z = torch.randn(2, 4, dtype=torch.float64), torch.randn(2, 4, dtype=torch.float64)
    f = tanh_map(W, x)
    exact = exact_penalty(f, z)
    samples = draws(f, z, k=1, n=4000)
    standard_error = float(samples.std()) / 4000**0.5
    assert standard_error < 0.05 * exact  # enough draws to tell a biased estimator
    assert abs(float(samples.mean()) - exact) <= 4 * standard_error
    assert abs(2 * float(samples.mean()) - exact) > 4 * standard_error  # e.g. a factor 2 shows


def test_variance_falls_as_one_over_k():
    W, x = torch.randn(3, 3, dtype=torch.float64), torch.randn(2, 3, dtype=torch.float64)
    f, z = tanh_map(W, x), torch.randn(2, 3, dtype=torch.float64)
    ratio = float(draws(f, z, k=1, n=2000).var() / draws(f, z, k=8, n=2000, seed=1).var())
    assert 8 / 1.5 < ratio < 8 * 1.5  # the variance of a mean of k i.i.d. draws is 1/k


def test_gradcheck_through_parameters_and_input():
    z = torch.randn(2, 3, dtype=torch.float64)

    def penalty(W, x):  # the same probes at every call
        generator = torch.Generator().manual_seed(3)
        return jacobian_penalty(tanh_map(W, x), z, 2, generator=generator)

    W = torch.randn(3, 3, dtype=torch.float64, requires_grad=True)
    x = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(penalty, (W, x))
    assert torch.autograd.gradgradcheck(penalty, (W, x))


def test_deq_penalty_reads_the_last_equilibrium():
    W = 0.5 * torch.randn(4, 4, dtype=torch.float64) / 2
    W.requires_grad_()
    deq = DEQ(lambda z, x: torch.tanh(z @ W.T + x), solver=Anderson(tol=1e-12, max_iter=200))
    with pytest.raises(RuntimeError, match=r"call deq\(x\) first"):
        deq.jacobian_penalty()
    x = torch.randn(3, 4, dtype=torch.float64)
    z = deq(x)
    got = deq.jacobian_penalty(4, generator=torch.Generator().manual_seed(0))
    want = jacobian_penalty(
        tanh_map(W, x), z.detach(), 4, generator=torch.Generator().manual_seed(0)
    )
    torch.testing.assert_close(got, want, atol=0, rtol=0)
    got.backward()
    assert W.grad is not None and bool(W.grad.abs().sum() > 0)


def test_bad_arguments():
    f, z = torch.tanh, torch.zeros(2, 3)
    with pytest.raises(ValueError, match=r"`k` must be >= 1"):
        jacobian_penalty(f, z, 0)
    with pytest.raises(ValueError, match=r"`f\(z\)` must have the shape of `z`"):
        jacobian_penalty(lambda z: z[:, :2], z)

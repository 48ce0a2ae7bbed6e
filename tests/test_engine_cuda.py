"""The engine on a CUDA device computes what it computes on the CPU.

On a GPU the cell, the histories, Anderson's mix and the row selects run on the device while
the per-row bookkeeping (best residuals, stall projection) and Anderson's ``G Gᵀ`` with its
safeguard live on the host (:data:`deqlab.solvers.trace.HOST_DTYPES`,
:data:`deqlab.solvers.anderson.HOST_DEVICES`), the residual norms and each new Gram row copied
over. These tests run the same float64 solves, gradients and diagnostics on both devices and
compare them; they skip without CUDA.
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from deqlab import DEQ, Anderson, ConvergenceWarning, Implicit, Phantom, diagnose
from test_implicit_training import MLPCell, TupleCell

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

GPU = "cuda"


def _pair(cell: nn.Module, **options) -> tuple[DEQ, DEQ]:
    """The same DEQ in float64 on the CPU and on the GPU."""
    cpu = DEQ(cell.double(), **options)
    gpu = DEQ(copy.deepcopy(cell).to(GPU), **options)
    return cpu, gpu


def _grads(deq: DEQ, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    x = x.clone().requires_grad_(True)
    z = deq(x)
    out = z[0] if isinstance(z, tuple) else z
    (out**2).sum().backward()
    return out.detach(), [x.grad, *(p.grad for p in deq.parameters())]


@pytest.mark.parametrize("backward", [Implicit(), Phantom(3, 0.8)], ids=["implicit", "phantom"])
def test_a_training_solve_and_its_gradient_agree_with_the_cpu(backward):
    torch.manual_seed(0)
    solver = Anderson(tol=1e-10, max_iter=100, per_sample=True, stall_window=8)
    cpu, gpu = _pair(MLPCell(16), solver=solver, backward=backward)
    x = torch.randn(32, 16, dtype=torch.float64)
    z_cpu, g_cpu = _grads(cpu, x)
    z_gpu, g_gpu = _grads(gpu, x.to(GPU))
    assert cpu.last_forward.status.name == gpu.last_forward.status.name == "CONVERGED"
    assert torch.allclose(z_gpu.cpu(), z_cpu, atol=1e-9)
    for a, b in zip(g_cpu, g_gpu, strict=True):
        assert torch.allclose(b.cpu(), a, rtol=1e-7, atol=1e-9)


def test_a_stalled_solve_stops_on_the_gpu_where_it_stops_on_the_cpu():
    """A cell that is not a contraction: rows stall at the same step on both devices."""
    torch.manual_seed(1)
    cell = MLPCell(16)
    with torch.no_grad():
        cell.linear.weight.mul_(8.0)
    solver = Anderson(tol=1e-12, max_iter=60, per_sample=True, stall_window=8)
    cpu, gpu = _pair(cell, solver=solver)
    x = torch.randn(32, 16, dtype=torch.float64)
    with torch.no_grad(), pytest.warns(ConvergenceWarning, match="stalled"):
        cpu(x), gpu(x.to(GPU))
    a, b = cpu.last_forward, gpu.last_forward
    assert a.status == b.status and a.n_steps == b.n_steps
    assert torch.equal(a.sample_steps, b.sample_steps.cpu())
    assert torch.allclose(a.sample_residuals, b.sample_residuals.cpu(), rtol=1e-6)


def test_a_tuple_state_and_its_diagnosis_agree_with_the_cpu():
    torch.manual_seed(2)
    solver = Anderson(tol=1e-10, max_iter=100, per_sample=True)
    cpu, gpu = _pair(TupleCell(16), solver=solver, backward=Implicit())
    x = torch.randn(16, 16, dtype=torch.float64)
    z_cpu, g_cpu = _grads(cpu, x)
    z_gpu, g_gpu = _grads(gpu, x.to(GPU))
    assert torch.allclose(z_gpu.cpu(), z_cpu, atol=1e-9)
    for a, b in zip(g_cpu, g_gpu, strict=True):
        assert torch.allclose(b.cpu(), a, rtol=1e-7, atol=1e-9)
    y = torch.randn(16, 32, dtype=torch.float64)  # the state (h, c) read as one vector
    # Arnoldi's random starts differ between the devices: converged to 1e-8 they agree
    here, there = diagnose(cpu, x, y, rtol=1e-8), diagnose(gpu, x.to(GPU), y.to(GPU), rtol=1e-8)
    assert there.ntk.lambda_min == pytest.approx(here.ntk.lambda_min, rel=1e-6)
    rho = (here.wellposed.spectral_radius, there.wellposed.spectral_radius)
    assert bool(rho[0].converged.all()) and bool(rho[1].converged.all())
    assert torch.allclose(rho[1].value.cpu(), rho[0].value, rtol=1e-6)

"""Anderson's batched step against its plain specification, one sample at a time
(deqlab.solvers.anderson_reference): the Gram matrix updated by rows in place, the views and
buffers reused, the safeguard taken in numpy on the host (issue 31)."""

import subprocess
import sys

import numpy as np
import pytest
import torch

from deqlab.solvers import Anderson, anderson
from deqlab.solvers.anderson_fused import fused_weights
from deqlab.solvers.anderson_reference import reference_step

B, N = 5, 7


def cell(x: torch.Tensor, A: torch.Tensor):
    """Per sample ``tanh(A z + x)``, except sample 3: ``z + 0.5`` (the same residual at every
    step: a singular Gram matrix) and sample 4: the zero map (at its fixed point from step 2:
    ``G = 0``)."""

    def f(z):
        out = torch.tanh(z @ A.T + x)
        out[3] = z[3] + 0.5
        out[4] = 0.0
        return out

    return f


def run_both(history: int, damping: float, tikhonov: float, steps: int = 12, fused=False):
    """The batched stepper's iterates and the reference's from the same histories."""
    gen = torch.Generator().manual_seed(history)
    A = 0.9 * torch.linalg.qr(torch.randn(N, N, generator=gen, dtype=torch.float64))[0]
    f = cell(torch.randn(B, N, generator=gen, dtype=torch.float64), A)
    stepper = Anderson(history=history, damping=damping, tikhonov=tikhonov, fused=fused).stepper()
    images, residuals = [[] for _ in range(B)], [[] for _ in range(B)]
    z = torch.zeros(B, N, dtype=torch.float64)
    pairs = []
    for _ in range(steps):
        fz = f(z)
        g = fz - z
        for b in range(B):
            images[b] = (images[b] + [z[b] + damping * g[b]])[-history:]
            residuals[b] = (residuals[b] + [g[b]])[-history:]
        expected = torch.stack(
            [
                reference_step(images[b], residuals[b], len(images[b]) - 1, tikhonov)
                for b in range(B)
            ]
        )
        z = stepper(z, fz)
        pairs.append((z, expected))
    return pairs


@pytest.mark.parametrize("history", [1, 3, 5])
@pytest.mark.parametrize("damping", [1.0, 0.6])
@pytest.mark.parametrize("tikhonov", [0.0, 1e-8])
@pytest.mark.parametrize("fused", [False, True], ids=["torch", "fused"])
def test_batched_step_is_the_reference_step_of_each_sample(history, damping, tikhonov, fused):
    for z, expected in run_both(history, damping, tikhonov, fused=fused):
        well = [0, 1, 2, 4]  # sample 3's system has condition ~ n / tikhonov: looser there
        torch.testing.assert_close(z[well], expected[well], rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(z[3], expected[3], rtol=1e-6, atol=0)


@pytest.mark.parametrize("fused", [False, True], ids=["torch", "fused"])
def test_the_safeguard_takes_the_plain_step_exactly_where_the_system_fails(fused):
    # tikhonov 0: sample 3 repeats one residual (H = c 11ᵀ, a zero pivot), sample 4 has G = 0
    for z, expected in run_both(history=3, damping=0.6, tikhonov=0.0, fused=fused)[2:]:
        assert torch.equal(z[3:], expected[3:])  # the plain step, bit for bit
        assert torch.isfinite(z).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_host_safeguard_and_device_select_agree_to_the_bit(dtype, monkeypatch):
    gen = torch.Generator().manual_seed(1)
    A = 0.9 * torch.linalg.qr(torch.randn(N, N, generator=gen, dtype=torch.float64))[0]
    f = cell(torch.randn(B, N, generator=gen, dtype=torch.float64), A)
    solver = Anderson(tikhonov=0.0, per_sample=True, tol=1e-30, max_iter=15, throw=False)
    with torch.no_grad():
        host = solver(lambda z: f(z.double()).to(dtype), torch.zeros(B, N, dtype=dtype))
        monkeypatch.setattr(anderson, "HOST_DEVICES", set())  # H apart, its row copied: as on a GPU
        device = solver(lambda z: f(z.double()).to(dtype), torch.zeros(B, N, dtype=dtype))
    assert host.residuals == device.residuals and torch.equal(host.z, device.z)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_fused_solve_reaches_the_torch_paths_fixed_point(dtype):
    gen = torch.Generator().manual_seed(2)
    A = 0.8 * torch.linalg.qr(torch.randn(N, N, generator=gen, dtype=torch.float64))[0]
    x = torch.randn(64, N, generator=gen, dtype=torch.float64)
    A, x = A.to(dtype), x.to(dtype)
    tol = 1e-10 if dtype == torch.float64 else 1e-5
    with torch.no_grad():
        torch_path, fused = (
            Anderson(per_sample=True, tol=tol, fused=f)(lambda z: torch.tanh(z @ A.T + x), 0 * x)
            for f in (False, True)
        )
    assert torch_path.converged and fused.converged
    torch.testing.assert_close(fused.z, torch_path.z, rtol=0, atol=10 * tol)


def test_an_unrolled_solve_takes_the_torch_path_and_its_gradient():
    A = 0.5 * torch.eye(N, dtype=torch.float64)
    x = torch.randn(B, N, dtype=torch.float64, requires_grad=True)
    grads = []
    for fused in (True, False):
        solver = Anderson(per_sample=True, tol=1e-12, max_iter=30, fused=fused)
        z = solver(lambda z: torch.tanh(z @ A.T + x), torch.zeros(B, N, dtype=torch.float64)).z
        grads.append(torch.autograd.grad(z.sum(), x)[0])  # through the recorded steps
    torch.testing.assert_close(grads[0], grads[1], rtol=0, atol=0)  # the same (torch) path


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_fused_loop_solves_each_system_or_takes_the_newest_slot(dtype):
    gen = np.random.default_rng(3)
    G = gen.standard_normal((4, 3, 6))
    H = np.zeros((4, 5, 5), dtype=dtype)
    H[:, :3, :3] = G @ G.transpose(0, 2, 1)  # a history of 3 of 5: the top-left block
    H[1, :3, :3] = np.diag([1.0, -1.0, 1.0])  # indefinite but regular: α = y = (1, −1, 1)
    H[2, :3, :3] = np.diag([1.0, -1.0, 0.0])  # a zero pivot
    H[3, 0, 1] = np.nan  # not finite
    alpha = np.full((4, 5), 7.0, dtype=dtype)
    fused_weights(H, 3, 1, 0.0, alpha)
    y = np.linalg.solve(H[0, :3, :3].astype(np.float64), np.ones(3))
    np.testing.assert_allclose(
        alpha[0, :3], y / y.sum(), rtol=1e-5 if dtype == np.float32 else 1e-12
    )
    np.testing.assert_array_equal(alpha[1, :3], [1.0, -1.0, 1.0])
    for b in (2, 3):
        np.testing.assert_array_equal(alpha[b, :3], [0.0, 1.0, 0.0])  # e_slot, slot 1
    assert (alpha[:, 3:] == 7.0).all()  # beyond the stored history: untouched


def test_a_zero_sum_of_weights_takes_the_newest_slot_not_an_exception():
    H = np.zeros((1, 2, 2))
    H[0] = np.diag([1.0, -1.0])  # y = (1, −1): 1ᵀy = 0, α = ±inf
    alpha = np.zeros((1, 2))
    fused_weights(H, 2, 0, 0.0, alpha)
    np.testing.assert_array_equal(alpha[0], [1.0, 0.0])


def test_the_fused_loop_compiles_without_a_writable_cache(tmp_path):
    code = (
        "import numba, numpy as np\n"
        "real = numba.njit\n"
        "def njit(*args, **options):\n"
        "    if options.get('cache'):\n"
        "        raise RuntimeError('cannot cache function: no locator available for file')\n"
        "    return real(*args, **options)\n"
        "numba.njit = njit\n"
        "from deqlab.solvers.anderson_fused import fused_weights\n"
        "alpha = np.zeros((1, 2))\n"
        "fused_weights(np.eye(2)[None], 2, 0, 0.0, alpha)\n"
        "print(alpha.tolist())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[[0.5, 0.5]]"

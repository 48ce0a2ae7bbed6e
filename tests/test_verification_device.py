"""verify --device cuda: K, the NTK and their least eigenvalues on the GPU give the CPU's
numbers (float64 on both); skipped without CUDA."""

from __future__ import annotations

import pytest
import torch

from deqlab.verification import ReLUDEQCheck, load_dataset, verify

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.parametrize("n", [60, 3200])  # dense, and above DENSE_LIMIT (Cholesky + Lanczos)
def test_the_gpu_gives_the_cpu_numbers(n):
    X, y, name = load_dataset("sphere", n=n, d=20, seed=0)
    check = ReLUDEQCheck(width=200)
    cpu = verify(X, y, check, name=name)
    gpu = verify(X, y, check, name=name, device="cuda")
    for key in ("lambda_star", "lambda_max_K", "ntk_lambda_min"):
        assert gpu.numbers[key] == pytest.approx(cpu.numbers[key], rel=1e-8), key
    assert gpu.numbers["lambda0"] == cpu.numbers["lambda0"]  # the network stays on the CPU
    assert gpu.settings["device"] == "cuda"

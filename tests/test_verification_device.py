"""verify --device cuda: K, the NTK and their least eigenvalues on the GPU give the CPU's
numbers (float64 on both) within the CPU's certified brackets, and the GPU's own brackets
(dense eigvalsh, then the proofs on the GPU) hold them; skipped without CUDA."""

from __future__ import annotations

import pytest
import torch

from deqlab.verification import ReLUDEQCheck, load_dataset, verify

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.parametrize("n", [60, 3200])  # dense, and above DENSE_LIMIT (LOBPCG on the CPU)
def test_the_gpu_gives_the_cpu_numbers(n):
    X, y, name = load_dataset("sphere", n=n, d=20, seed=0)
    check = ReLUDEQCheck(width=200)
    cpu = verify(X, y, check, name=name)
    gpu = verify(X, y, check, name=name, device="cuda")
    assert gpu.numbers["lambda_max_K"] == pytest.approx(cpu.numbers["lambda_max_K"], rel=1e-8)
    for key in ("lambda_star", "ntk_lambda_min"):
        lower, upper = cpu.numbers[f"{key}_bounds"]
        assert lower <= gpu.numbers[key] <= upper, key  # the GPU's eigvalsh, in the CPU's bracket
        low, high = gpu.numbers[f"{key}_bounds"]
        assert low <= gpu.numbers[key] <= high and (high - low) / high < 1e-6, key
    assert gpu.numbers["lambda0"] == cpu.numbers["lambda0"]  # the network stays on the CPU
    assert gpu.settings["device"] == "cuda"

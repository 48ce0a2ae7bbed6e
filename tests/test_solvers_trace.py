"""The per-row bookkeeping of a solve runs in numpy for float32/float64 iterates on the CPU and
in torch otherwise (on a GPU): both give the same solve to the last bit (issue 31)."""

import pytest
import torch

from deqlab.solvers import Anderson, Broyden, Picard, trace
from deqlab.solvers.rows import RowMap

CPU = torch.device("cpu")

#: per-sample rates of a tanh map (fast, slow, slower); the last sample z ↦ z + 0.1 has no
#: fixed point, so every solver stalls on it
RATES = torch.tensor([0.3, 0.7, 0.95, 1.0])
SHIFTED = torch.tensor([False, False, False, True])[:, None]


def problem(dtype):
    x = torch.randn(4, 6, generator=torch.Generator().manual_seed(0)).to(dtype)
    rates = RATES.to(dtype)[:, None]

    def rows(z, i):
        return torch.where(SHIFTED[i], z + 0.1, rates[i] * torch.tanh(z) + x[i])

    return RowMap(lambda z: rows(z, torch.arange(4)), rows)


@pytest.mark.parametrize("solver_cls", [Picard, Anderson, Broyden])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("compact", [True, False])
def test_numpy_and_torch_bookkeeping_agree_to_the_bit(solver_cls, dtype, compact, monkeypatch):
    solver = solver_cls(tol=1e-5, stop="abs", max_iter=60, per_sample=True, throw=False,
                        stall_window=4)  # fmt: skip
    f = problem(dtype)
    with torch.no_grad():
        host = solver(f if compact else f.f, torch.zeros(4, 6, dtype=dtype))
        monkeypatch.setattr(trace, "HOST_DTYPES", {})  # the device path (float16, bfloat16)
        device = solver(f if compact else f.f, torch.zeros(4, 6, dtype=dtype))
    assert host.status is device.status and host.residuals == device.residuals
    assert host.evaluations == device.evaluations and host.residual == device.residual
    for name in ("z", "sample_residuals", "sample_steps", "sample_stalled"):
        assert torch.equal(getattr(host, name), getattr(device, name)), name
    if solver_cls is not Broyden:  # (Broyden's steps grow until z + 0.1 == z in the dtype)
        assert bool(host.sample_stalled[3])  # the case could fail: a stall on both paths


@pytest.mark.parametrize("rows", [3, 16, 64])
def test_compacted_evaluations_take_a_few_batch_sizes(rows):
    import numpy as np

    from deqlab.solvers.rows import bucketed, evaluation_rows

    gen = torch.Generator().manual_seed(rows)
    for _ in range(20):
        active = torch.rand(rows, generator=gen) < torch.rand(1, generator=gen)
        evaluated, positions = evaluation_rows(active, CPU)
        on_host = evaluation_rows(active.numpy(), CPU)
        assert torch.equal(evaluated, on_host[0]) and torch.equal(positions, on_host[1])
        assert len(evaluated) == bucketed(int(active.sum()), rows)  # a multiple of the bucket
        assert torch.equal(evaluated[positions], active.nonzero()[:, 0])  # the active rows
        assert len(set(evaluated.tolist())) == len(evaluated)  # each row once
    assert bucketed(5, 3) == 3 and bucketed(5, 64) == 8 and bucketed(9, 16) == 12
    assert np.array_equal(evaluation_rows(np.ones(4, dtype=bool), CPU)[0].numpy(), np.arange(4))

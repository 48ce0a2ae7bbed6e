"""The cost of the default σ_min(I − J_f) of deqlab.fixed_point_diagnostics, exact on near-
singular cells of at most 512 per sample, against the Krylov-only estimate at the same cap,
Golub–Kahan continued to the state's size, and the dense SVD above 512 (issue 32).

Cells, a batch of ``--batch`` samples on one thread (CPU):

* ``tanh d`` (float64, d = 128, 256, 512): ``f(z) = tanh(z Wᵀ + x)`` with one W for the batch
  and the same J_f = I − M at every sample's z*, M with its least singular value set to 0.0016
  (the construction of tests/helpers.py's near_singular_tanh with one W): pick z₀,
  W = D⁻¹(I − M) with D = diag(1 − z₀²), z*ᵢ = sᵢ ⊙ z₀ for random signs sᵢ (the same D, so
  J_f = D W = I − M), and x_i = atanh(z*ᵢ) − W z*ᵢ;
* ``conv c×8×8`` (float32): the cell of docs/own_deq.md, GroupNorm(relu(conv₃ₓ₃(z) + x)) with
  c = 8 (512 per sample) and the page's c = 16 (1024: above the dense SVD's size);
* ``transformer 16×32`` (float32): a pre-norm block with nn.MultiheadAttention (4 heads) on
  16 tokens of width 32 (512 per sample).

The conv and transformer cells are evaluated at z after 60 Picard steps from 0. Each way is
timed by the thread's CPU time (``time.thread_time``: other processes' load does not count),
interleaved over ``--repeats`` rounds (median). The error is the worst relative difference over
the batch from the reference σ_min: for the tanh cells σ_min(M) by a dense float64 SVD of the M
they are built from, for the others the dense float64 SVD of each sample's Jacobian of the
cell in float64 (formed from VJPs).

    OMP_NUM_THREADS=1 python benchmarks/bench_sigma_min.py --batch 32 --repeats 1
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn

from deqlab import fixed_point_diagnostics
from deqlab.fixed_point_diagnostics import DENSE_UP_TO
from deqlab.linearization import Linearization

sys.path.insert(0, str(Path(__file__).parent))  # the cells of the JVP routes' benchmark
from bench_jvp_routes import Block, Conv

SIGMA = 0.0016


class Tanh(nn.Module):
    def __init__(self, W: torch.Tensor) -> None:
        super().__init__()
        self.W = nn.Parameter(W)

    def forward(self, z, x):
        return torch.tanh(z @ self.W.T + x)


def near_singular(d: int, batch: int) -> tuple:
    """The tanh cell, its inputs x, fixed points z* and σ_min(I − J_f) = σ_min(M) per sample
    (module docstring)."""
    gen = torch.Generator().manual_seed(d)
    z0 = 0.8 * torch.rand(d, generator=gen, dtype=torch.float64) - 0.4
    G = torch.randn(d, d, generator=gen, dtype=torch.float64) / d**0.5
    U, S, Vh = torch.linalg.svd(torch.eye(d, dtype=torch.float64) - 0.9 * G)
    S[-1] = SIGMA
    M = U @ torch.diag(S) @ Vh
    W = (torch.eye(d, dtype=torch.float64) - M) / (1 - z0.square())[:, None]
    signs = torch.randint(0, 2, (batch, d), generator=gen).to(torch.float64) * 2 - 1
    z = signs * z0
    truth = torch.linalg.svdvals(M)[-1].expand(batch)
    return Tanh(W), torch.atanh(z) - z @ W.T, z, truth


def at_picard_point(cell: nn.Module, shape: tuple[int, ...]):
    """The cell, a seeded input of ``shape``, z after 60 Picard steps from 0 and σ_min of
    ``I − J_f`` there per sample (:func:`reference`)."""
    x = torch.randn(shape)
    z = torch.zeros(shape)
    with torch.no_grad():
        for _ in range(60):
            z = cell(z, x)
    return cell, x, z, reference(cell, x, z)


def cells(batch: int) -> dict:
    torch.manual_seed(0)
    found = {f"tanh {d}": near_singular(d, batch) for d in (128, 256, 512)}
    for c in (8, 16):
        found[f"conv {c}×8×8"] = at_picard_point(Conv(c), (batch, c, 8, 8))
    found["transformer 16×32"] = at_picard_point(Block(32), (batch, 16, 32))
    return found


def reference(cell: nn.Module, x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """σ_min(I − J_f) per sample by the dense float64 SVD (module docstring)."""
    cell64, x64 = copy.deepcopy(cell).double(), x.double()
    blocks = Linearization(lambda v: cell64(v, x64), z.double()).row_jacobians(z.shape[0])
    eye = torch.eye(blocks.shape[1], dtype=torch.float64)
    return torch.linalg.svdvals(eye - blocks)[:, -1]


def ways(size: int) -> dict[str, dict]:
    """The settings compared: the Krylov-only estimate at the default cap, the default, and
    the alternatives: Golub–Kahan to the state's size (where that is more than the cap), the
    dense SVD above the default's size (what the limit saves)."""
    found = {"Krylov, cap 100": {"dense_up_to": 0}, "default": {}}
    if 100 < size <= DENSE_UP_TO:
        found["Krylov to N"] = {"dense_up_to": 0, "max_iter": size}
    if size > DENSE_UP_TO:
        found["dense SVD at N"] = {"dense_up_to": size}
    return found


def measure(cell: nn.Module, x, z, truth: torch.Tensor, repeats: int) -> dict:
    size = z[0].numel()
    settings = ways(size)
    seconds: dict[str, list[float]] = {way: [] for way in settings}
    results = {}
    for _ in range(repeats):
        for way, options in settings.items():
            start = time.thread_time()
            results[way] = fixed_point_diagnostics(
                lambda v: cell(v, x), z, z.shape[0],
                generator=torch.Generator().manual_seed(0), **options,
            )  # fmt: skip
            seconds[way].append(time.thread_time() - start)
    rows = {}
    for way, found in results.items():
        sigma = found.sigma_min
        error = ((sigma.value - truth).abs() / truth).max()
        status = "exact" if bool(sigma.exact.all()) else (
            "converged" if bool(sigma.converged.all()) else "not converged"
        )  # fmt: skip
        rows[way] = {
            "seconds": statistics.median(seconds[way]), "error": float(error), "status": status,
            "dense": found.dense, "products": found.products,
        }  # fmt: skip
    return {"size": size, "ways": rows}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=32, help="samples per cell")
    parser.add_argument("--repeats", type=int, default=1, help="interleaved rounds")
    args = parser.parse_args(argv)
    for option in ("batch", "repeats"):
        if getattr(args, option) < 1:
            parser.error(f"--{option} must be >= 1; got {getattr(args, option)}")
    torch.set_num_threads(1)
    print(f"{'cell':<20}{'N':>6}  {'way':<17}{'s':>9}{'× default':>11}{'error':>10}  status")
    results = {}
    for name, (cell, x, z, truth) in cells(args.batch).items():
        found = measure(cell, x, z, truth, args.repeats)
        results[name] = found
        default = found["ways"]["default"]["seconds"]
        for way, row in found["ways"].items():
            how = row["status"] + (", dense SVD" if row["dense"] else "")
            print(
                f"{name:<20}{found['size']:>6}  {way:<17}{row['seconds']:>9.2f}"
                f"{row['seconds'] / default:>10.2f}×{row['error']:>10.1e}  {how}"
            )
    return results


if __name__ == "__main__":
    main()

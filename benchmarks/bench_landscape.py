"""Loss surface of the conv DEQ: cold and warm-started point by point, and batched + warm.

The same model, data, directions and grid, in the same process: ``loss_surface`` with
``warm_start=False`` (every solve from ``z = 0``), ``warm_start=True`` (snake order, each
Anderson solve from the adjacent point's equilibrium) and ``batch=--batch`` (that many
points of a grid row per vmapped cell evaluation, each solve from the equilibrium of the
point above). Reports the wall time, the forward-solver evaluations of ``f`` over the grid,
the speed-ups over the cold grid, and the largest difference of each surface from the cold
one relative to the loss (bounded by the solver tolerance where the equilibrium is unique).

The model is :class:`deqlab.models.ConvDEQ` at the ``hieu2022-landscape`` quick sizes
(channels 8, Anderson tol 1e-3, max_iter 30), trained for ``--train-steps`` Adam steps on
random images so that its equilibria are not trivial.

Run: ``python benchmarks/bench_landscape.py [--grid 11] [--images 100] [--batch 11]
[--device cuda]``.
"""

from __future__ import annotations

import argparse
import os
import time

import torch
from torch.nn import functional as F

from deqlab.landscape import dataset_loss, loss_surface
from deqlab.models.conv_deq import ConvDEQ
from deqlab.solvers import Anderson


def trained_model(args: argparse.Namespace, x: torch.Tensor, y: torch.Tensor) -> ConvDEQ:
    torch.manual_seed(0)
    solver = Anderson(tol=args.tol, max_iter=args.max_iter, throw=False)
    model = ConvDEQ(1, 10, channels=8, inner_channels=8, groups=4, solver=solver).to(x.device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(args.train_steps):
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
    return model.eval()


def surface(model: ConvDEQ, x, y, args: argparse.Namespace, **method):
    start = time.perf_counter()
    found = loss_surface(
        model, dataset_loss(F.cross_entropy, [(x, y)]), steps=args.grid,
        generator=torch.Generator().manual_seed(1), progress=False, **method,
    )  # fmt: skip
    if x.device.type == "cuda":
        torch.cuda.synchronize()
    return found, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", type=int, default=11)
    parser.add_argument("--images", type=int, default=100)
    parser.add_argument("--batch", type=int, default=11)
    parser.add_argument("--train-steps", type=int, default=20)
    parser.add_argument("--tol", type=float, default=1e-3)
    parser.add_argument("--max-iter", type=int, default=30)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(args.images, 1, 28, 28, generator=gen).to(args.device)
    y = torch.randint(0, 10, (args.images,), generator=gen).to(args.device)
    model = trained_model(args, x, y)
    methods = {
        "cold (z = 0)": {"warm_start": False},
        "warm (snake)": {"warm_start": True},
        f"batch {args.batch} + warm": {"batch": args.batch},
    }
    found = {name: surface(model, x, y, args, **kw) for name, kw in methods.items()}
    (cold, cold_s), load = found["cold (z = 0)"], os.getloadavg()[0]
    print(f"conv DEQ, {args.grid}×{args.grid} grid, {args.images} images, tol {args.tol:g}, "
          f"load average {load:.1f}")  # fmt: skip
    print(f"{'grid evaluation':<20}{'f evals':>9}{'per point':>11}{'time (s)':>10}"
          f"{'speed-up':>10}{'max rel. diff':>15}")  # fmt: skip
    for name, (s, seconds) in found.items():
        count = int(s.solver_steps.sum())
        gap = float(((s.losses - cold.losses).abs() / cold.losses.abs()).max())
        print(f"{name:<20}{count:>9}{count / args.grid**2:>11.1f}{seconds:>10.2f}"
              f"{cold_s / seconds:>9.2f}x{gap:>15.1e}")  # fmt: skip


if __name__ == "__main__":
    main()

"""Loss surface of the conv DEQ: warm-started snake-order grid vs cold point-by-point solves.

The same model, data, directions and grid, in the same process: ``loss_surface`` with
``warm_start=True`` (each Anderson solve starts from the adjacent grid point's equilibrium)
against ``warm_start=False`` (every solve from ``z = 0``, as before). Reports the wall time,
the forward-solver evaluations of ``f`` over the grid, their ratios, and the largest
difference of the two surfaces relative to the loss (bounded by the solver tolerance).

The model is :class:`deqlab.models.ConvDEQ` at the ``hieu2022-landscape`` quick sizes
(channels 8, Anderson tol 1e-3, max_iter 30), trained for ``--train-steps`` Adam steps on
random images so that its equilibria are not trivial.

Run: ``python benchmarks/bench_landscape.py [--grid 11] [--images 100] [--device cuda]``.
"""

from __future__ import annotations

import argparse
import time

import torch
from torch.nn import functional as F

from deqlab.landscape import loss_surface
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


def surface(model: ConvDEQ, x, y, args: argparse.Namespace, warm: bool):
    start = time.perf_counter()
    found = loss_surface(
        model, lambda net: F.cross_entropy(net(x), y), steps=args.grid,
        generator=torch.Generator().manual_seed(1), warm_start=warm, progress=False,
    )  # fmt: skip
    if x.device.type == "cuda":
        torch.cuda.synchronize()
    return found, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", type=int, default=11)
    parser.add_argument("--images", type=int, default=100)
    parser.add_argument("--train-steps", type=int, default=20)
    parser.add_argument("--tol", type=float, default=1e-3)
    parser.add_argument("--max-iter", type=int, default=30)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(args.images, 1, 28, 28, generator=gen).to(args.device)
    y = torch.randint(0, 10, (args.images,), generator=gen).to(args.device)
    model = trained_model(args, x, y)
    cold, cold_s = surface(model, x, y, args, warm=False)
    warm, warm_s = surface(model, x, y, args, warm=True)
    steps = {
        "cold (z = 0)": int(cold.solver_steps.sum()),
        "warm (snake)": int(warm.solver_steps.sum()),
    }
    print(f"conv DEQ, {args.grid}×{args.grid} grid, {args.images} images, tol {args.tol:g}")
    print(
        f"{'grid evaluation':<16}{'f evals':>10}{'per point':>11}{'time (s)':>10}{'speed-up':>10}"
    )
    for (name, count), seconds in zip(steps.items(), (cold_s, warm_s), strict=True):
        print(f"{name:<16}{count:>10}{count / args.grid**2:>11.1f}{seconds:>10.2f}"
              f"{cold_s / seconds:>9.2f}x")  # fmt: skip
    saved = 1 - steps["warm (snake)"] / steps["cold (z = 0)"]
    gap = float(((warm.losses - cold.losses).abs() / cold.losses.abs()).max())
    print(f"solver evaluations saved: {saved:.0%}; max relative loss difference {gap:.1e}")


if __name__ == "__main__":
    main()

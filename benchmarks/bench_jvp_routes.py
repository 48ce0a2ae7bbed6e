"""The cost of a Jacobian-vector product J_f v by each route of deqlab.linearization, in
evaluations of f, on the cells researchers build (issue 32).

Cells (float32, CPU): a tanh layer (64 × 256), a conv + GroupNorm cell (32 × 16 × 8 × 8), a
wider one (32 × 64 × 16 × 16) and a transformer block (32 × 16 tokens × 64, nn.MultiheadAttention
with 4 heads). Each route is timed in turn, interleaved over ``--repeats`` rounds, by the
thread's CPU time (``time.thread_time``: the load of other processes does not count), and
reported as the median time per product over the median time of one evaluation of f without
gradients, with the largest difference between the routes' products (they compute the same
linear map). Routes that an op of the cell lacks are reported as "—".

    OMP_NUM_THREADS=1 python benchmarks/bench_jvp_routes.py --repeats 5
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch import nn

from deqlab.linearization import ROUTES, Linearization


class Conv(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv, self.norm = (
            nn.Conv2d(channels, channels, 3, padding=1),
            nn.GroupNorm(4, channels),
        )

    def forward(self, z, x):
        return self.norm(torch.relu(self.conv(z) + x))


class Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(d, 4, batch_first=True)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(self, z, x):
        h = self.ln1(z + x)
        h = z + x + self.attn(h, h, h, need_weights=False)[0]
        return 0.5 * (h + self.mlp(self.ln2(h)))


class Tanh(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.lin = nn.Linear(d, d)

    def forward(self, z, x):
        return torch.tanh(self.lin(z) + x)


def cells() -> dict[str, tuple[nn.Module, tuple[int, ...]]]:
    return {
        "tanh 64×256": (Tanh(256), (64, 256)),
        "conv 32×16×8×8": (Conv(16), (32, 16, 8, 8)),
        "conv 32×64×16×16": (Conv(64), (32, 64, 16, 16)),
        "transformer 32×16×64": (Block(64), (32, 16, 64)),
    }


def _seconds(call, repeats: int) -> float:
    start = time.thread_time()
    for _ in range(repeats):
        call()
    return (time.thread_time() - start) / repeats


def measure(cell: nn.Module, shape: tuple[int, ...], repeats: int, inner: int) -> dict:
    """Median seconds per product of each route over one evaluation, and the routes' agreement."""
    torch.manual_seed(0)
    x, z, v = (torch.randn(shape) for _ in range(3))

    def f(state):
        return cell(state, x)

    routes = {}
    for route in ROUTES:
        lin = Linearization(f, z, route)
        try:
            routes[route] = (lin, lin.jvp(v))
        except (NotImplementedError, RuntimeError):
            continue
    times: dict[str, list[float]] = {name: [] for name in [*routes, "f"]}
    for _ in range(repeats):
        for name, (lin, _) in routes.items():
            times[name].append(_seconds(lambda lin=lin: lin.jvp(v), inner))
        with torch.no_grad():
            times["f"].append(_seconds(lambda: f(z), inner))
    evaluation = statistics.median(times["f"])
    products = [out for _, out in routes.values()]
    scale = float(products[0].abs().max())
    spread = max(float((p - products[0]).abs().max()) for p in products) / scale
    ratios = {name: statistics.median(times[name]) / evaluation for name in routes}
    return {"evaluations": ratios, "agreement": spread, "f_ms": 1e3 * evaluation}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--inner", type=int, default=10, help="products per timing")
    args = parser.parse_args(argv)
    for option in ("repeats", "inner"):
        if getattr(args, option) < 1:
            parser.error(f"--{option} must be >= 1; got {getattr(args, option)}")
    torch.set_num_threads(1)
    results = {}
    print(f"{'cell':<22}{'f (ms)':>8}" + "".join(f"{r:>32}" for r in ROUTES) + f"{'agree':>10}")
    for name, (cell, shape) in cells().items():
        found = measure(cell, shape, args.repeats, args.inner)
        results[name] = found
        cols = "".join(
            f"{found['evaluations'][r]:>31.2f}×" if r in found["evaluations"] else f"{'—':>32}"
            for r in ROUTES
        )
        print(f"{name:<22}{found['f_ms']:>8.2f}{cols}{found['agreement']:>10.1e}")
    return results


if __name__ == "__main__":
    main()

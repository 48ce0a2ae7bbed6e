"""The solvers' own work per iteration, against another version of ``deqlab.solvers`` in the
same process (issues 23, 31): what a solve costs besides the evaluations of ``f``.

Per-sample Anderson (history 5) on ``B × N`` iterates with maps that cost almost nothing, so
the time is the solver's: its history, Gram matrix, small solves, mixing, residuals, best
iterate and stopping test. Three sizes, each priced in evaluations of a real cell of that
size (the cells of bench_train_cells.py), so that the overhead reads as "this many extra
cell evaluations per iteration":

* ``mlp``: B = 64, N = 128, the cell ``tanh(W z + x)`` of width 128;
* ``conv``: B = 64, N = 2048, ``GroupNorm(relu(conv₃ₓ₃(z) + x))`` with 32 channels at 8 × 8;
* ``large``: B = 64, N = 16384, the same conv cell with 64 channels at 16 × 16.

Two problems each:

* ``busy``: ``f(z) = 0.9 sin(3z) + x``, tolerance unreachable, 40 iterations: every row
  iterates every step (the shared loop without row compaction);
* ``settling``: ``f(z) = a ⊙ tanh(z) + x`` with per-sample rates ``a`` from 0.3 to 0.95,
  relative tolerance 1e-3 and row compaction (a ``RowMap``): rows stop at different steps.

The baseline is a copy of another commit's ``src/deqlab/solvers`` whose imports name
``oldsolvers`` instead of ``deqlab.solvers`` (``--baseline DIR``, the folder holding
``oldsolvers/``); both are timed in turn (A/B interleaved, order alternating) by the CPU time
of the thread (``time.thread_time``: other processes do not add to it; run with one intra-op
thread), the medians reported, with the time of the map's evaluations alone subtracted.
Both must take the same steps to iterates that differ by rounding only; the script prints both,
and the evaluations (rows evaluated / B) of each, baseline / new. ``--fused``: the new one as
``Anderson(fused=True)`` (the DEQ layer's default: the small systems in one compiled loop).

    git show REF:src/deqlab/solvers/FILE.py | sed 's/deqlab\\.solvers/oldsolvers/g'  # each FILE
    OMP_NUM_THREADS=1 python benchmarks/bench_solver_overhead.py --baseline /tmp/old --repeats 30
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import time

import torch
from torch import nn

from deqlab.solvers import Anderson
from deqlab.solvers.rows import RowMap

#: name: (batch, cell maker) — the cell maps a state (B, ...) to one of that shape.
SIZES = {
    "mlp": (64, (128,)),
    "conv": (64, (32, 8, 8)),
    "large": (64, (64, 16, 16)),
}


def cell_seconds(batch: int, shape: tuple[int, ...], calls: int = 20) -> float:
    """CPU seconds of one evaluation of the real cell of this size (no autograd)."""
    torch.manual_seed(0)
    if len(shape) == 1:
        linear = nn.Linear(shape[0], shape[0])
        cell = lambda z, x: torch.tanh(linear(z) + x)  # noqa: E731
    else:
        conv, norm = nn.Conv2d(shape[0], shape[0], 3, padding=1), nn.GroupNorm(8, shape[0])
        cell = lambda z, x: norm(torch.relu(conv(z) + x))  # noqa: E731
    z = torch.randn(batch, *shape)
    with torch.no_grad():
        cell(z, z)
        start = time.thread_time()
        for _ in range(calls):
            cell(z, z)
    return (time.thread_time() - start) / calls


def problems(batch: int, width: int) -> dict:
    """name: (map maker taking the RowMap class, solver options)."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(batch, width, generator=gen)
    rate = torch.linspace(0.3, 0.95, batch)[:, None]

    def busy(_row_map):
        return lambda z: 0.9 * torch.sin(3 * z) + x

    def settling(row_map):
        def rows(z_sub, index):
            return rate[index] * torch.tanh(z_sub) + x[index]

        return row_map(lambda z: rate * torch.tanh(z) + x, rows)

    return {
        "busy": (busy, {"tol": 1e-30, "max_iter": 40, "throw": False}),
        "settling": (settling, {"tol": 1e-3, "max_iter": 40}),
    }


def timed(solve, f, z0) -> tuple[float, object]:
    start = time.thread_time()
    with torch.no_grad():
        solution = solve(f, z0)
    return time.thread_time() - start, solution


def map_seconds(f, solution, z0) -> float:
    """Seconds of the map's evaluations alone: as many full-batch calls as the solve made."""
    calls = max(1, round(solution.evaluations or solution.n_steps))
    call = f.f if isinstance(f, RowMap) else f
    start = time.thread_time()
    for _ in range(calls):
        call(z0)
    return time.thread_time() - start


def compare(name: str, make, options: dict, z0, old, args) -> str:
    """One problem, baseline and new in turn: the row of the table."""
    impls = {"baseline": (old.Anderson, old.RowMap), "new": (Anderson, RowMap)}
    per_iter: dict[str, list[float]] = {k: [] for k in impls}
    results = {}
    for repeat in range(args.repeats):
        for key in list(impls) if repeat % 2 == 0 else list(impls)[::-1]:
            cls, row_map = impls[key]
            fused = {"fused": True} if key == "new" and args.fused else {}
            solve = cls(history=args.history, per_sample=True, **options, **fused)
            f = make(row_map)
            seconds, solution = timed(solve, f, z0)
            per_iter[key].append((seconds - map_seconds(f, solution, z0)) / solution.n_steps)
            results[key] = solution
    a, b = results["baseline"], results["new"]
    same = a.n_steps == b.n_steps
    gap = float((a.z - b.z).abs().max() / a.z.abs().max())
    old_ms, new_ms = (1e3 * statistics.median(per_iter[k]) for k in impls)
    return (
        (
            f"{name:<9} steps {b.n_steps:>3}  evaluations {a.evaluations:>6.2f} / "
            f"{b.evaluations:>6.2f}  "
            f"solver ms/iteration: baseline {old_ms:.3f}  new {new_ms:.3f}  "
            f"ratio {old_ms / new_ms:.2f}  same steps: {same}, max |Δz|/max|z| {gap:.1e}"
        ),
        new_ms,
        old_ms,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="folder holding oldsolvers/")
    parser.add_argument("--sizes", nargs="+", default=list(SIZES), choices=list(SIZES))
    parser.add_argument("--batch", type=int, default=None, help="override every size's B")
    parser.add_argument("--width", type=int, default=None, help="override every size's N")
    parser.add_argument("--history", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--fused", action="store_true", help="new: Anderson(fused=True)")
    args = parser.parse_args(argv)
    sys.path.insert(0, args.baseline)
    old = importlib.import_module("oldsolvers")
    old.RowMap = importlib.import_module("oldsolvers.rows").RowMap
    print(
        f"torch {torch.__version__}, threads {torch.get_num_threads()}, history "
        f"{args.history}, {args.repeats} repeats, A/B in turn, thread CPU time"
        + (", new with fused=True (iterates differ by rounding)" if args.fused else "")
    )
    for size in args.sizes:
        batch, shape = SIZES[size]
        batch = args.batch or batch
        width = args.width or int(torch.tensor(shape).prod())
        cell_ms = 1e3 * cell_seconds(batch, shape)
        print(f"\n{size}: B = {batch}, N = {width}, one cell evaluation {cell_ms:.3f} ms")
        z0 = torch.zeros(batch, width)
        for name, (make, options) in problems(batch, width).items():
            row, new_ms, old_ms = compare(name, make, options, z0, old, args)
            print(f"{row}  (cell evaluations: baseline {old_ms / cell_ms:.2f}, new "
                  f"{new_ms / cell_ms:.2f})")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The solvers' own work per iteration, against another version of ``deqlab.solvers`` in the
same process (issue 23): what a solve costs besides the evaluations of ``f``.

Per-sample Anderson (history 5) on ``B × N`` iterates (default 64 × 2048, the conv DEQ of
bench_train_conv_deq.py: 32 channels × 8 × 8), with maps that cost almost nothing, so the
time is the solver's: its history, Gram matrix, small solves, mixing, residuals, best
iterate and stopping test. Two problems:

* ``busy``: ``f(z) = 0.9 sin(3z) + x``, tolerance unreachable, 40 iterations: every row
  iterates every step (the shared loop without row compaction);
* ``settling``: ``f(z) = a ⊙ tanh(z) + x`` with per-sample rates ``a`` from 0.3 to 0.95,
  relative tolerance 1e-3 and row compaction (a ``RowMap``): rows stop at different steps.

The baseline is a copy of another commit's ``src/deqlab/solvers`` whose imports name
``oldsolvers`` instead of ``deqlab.solvers`` (``--baseline DIR``, the folder holding
``oldsolvers/``); both are timed in turn (A/B interleaved, order alternating) and the
medians reported, with the time of the map's evaluations alone subtracted. Both must take
the same steps to iterates that differ by rounding only; the script prints both.

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

from deqlab.solvers import Anderson
from deqlab.solvers.rows import RowMap


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
    start = time.perf_counter()
    with torch.no_grad():
        solution = solve(f, z0)
    return time.perf_counter() - start, solution


def map_seconds(f, solution, z0) -> float:
    """Seconds of the map's evaluations alone: as many full-batch calls as the solve made."""
    calls = max(1, round(solution.evaluations or solution.n_steps))
    call = f.f if isinstance(f, RowMap) else f
    start = time.perf_counter()
    for _ in range(calls):
        call(z0)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="folder holding oldsolvers/")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--width", type=int, default=2048)
    parser.add_argument("--history", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    sys.path.insert(0, args.baseline)
    old = importlib.import_module("oldsolvers")
    old_rows = importlib.import_module("oldsolvers.rows")
    z0 = torch.zeros(args.batch, args.width)
    print(
        f"torch {torch.__version__}, threads {torch.get_num_threads()}, B = {args.batch}, "
        f"N = {args.width}, history {args.history}, {args.repeats} repeats, A/B in turn"
    )
    for name, (make, options) in problems(args.batch, args.width).items():
        impls = {
            "baseline": (old.Anderson, old_rows.RowMap),
            "new": (Anderson, RowMap),
        }
        per_iter: dict[str, list[float]] = {k: [] for k in impls}
        results = {}
        for repeat in range(args.repeats):
            order = list(impls) if repeat % 2 == 0 else list(impls)[::-1]
            for key in order:
                cls, row_map = impls[key]
                solve = cls(history=args.history, per_sample=True, **options)
                f = make(row_map)
                seconds, solution = timed(solve, f, z0)
                overhead = seconds - map_seconds(f, solution, z0)
                per_iter[key].append(overhead / solution.n_steps)
                results[key] = solution
        a, b = results["baseline"], results["new"]
        same = a.n_steps == b.n_steps and a.evaluations == b.evaluations
        gap = float((a.z - b.z).abs().max() / a.z.abs().max())
        old_ms, new_ms = (1e3 * statistics.median(per_iter[k]) for k in impls)
        print(
            f"{name:<9} steps {b.n_steps:>3}  evaluations {b.evaluations:>6.2f}  "
            f"solver ms/iteration: baseline {old_ms:.3f}  new {new_ms:.3f}  "
            f"ratio {old_ms / new_ms:.2f}  same steps: {same}, max |Δz|/max|z| {gap:.1e}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How fast the float32-preconditioned LOBPCG of ``deqlab verify`` converges on K (issue 26).

K = population_gram (Ling et al. 2023, Eq. (14)) of n points on the sphere in d dimensions,
its float32 Cholesky factor as preconditioner (deqlab.theory.lobpcg), and LOBPCG run to a
far tighter tolerance than verify's (``--rtol``, default 1e-13), recording the least Ritz
value θ_k and its residual at every step. The reference λ is the final Ritz value; the
table gives the relative error (θ_k − λ)/λ every ``--every`` steps, and the first step at
which it falls below 1e-6 … 1e-9: the steps an accuracy costs, with the measured seconds
per step (one product with K in float64 and two float32 triangular solves, each reading an
n×n array). Ritz values decrease to λ_min, so the error is positive.

    python benchmarks/bench_lobpcg_convergence.py --n 8000            # about a minute
    python benchmarks/bench_lobpcg_convergence.py --n 30000 --every 10  # 15 GB, minutes
    python benchmarks/bench_lobpcg_convergence.py --n 8000 --block 32   # another block size
"""

from __future__ import annotations

import argparse
import time

import torch

from deqlab.data import get_dataset
from deqlab.theory import lobpcg
from deqlab.theory.kernels import population_gram

ACCURACIES = (1e-6, 1e-7, 1e-8, 1e-9)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=8000)
    parser.add_argument("--d", type=int, default=100)
    parser.add_argument("--sigma-w2", type=float, default=0.08)
    parser.add_argument("--rtol", type=float, default=1e-13)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--block", type=int, default=lobpcg.BLOCK, help="Ritz vectors per step (sets BLOCK)"
    )
    args = parser.parse_args(argv)
    for name in ("n", "d", "block", "every", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1; got {getattr(args, name)}")
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    lobpcg.BLOCK = args.block
    X = get_dataset("sphere", n=args.n, d=args.d, seed=args.seed).X
    start = time.perf_counter()
    K = population_gram(X, args.sigma_w2)
    formed = time.perf_counter()
    precondition = lobpcg.float32_cholesky(K, torch.empty_like(K))
    factored = time.perf_counter()
    if precondition is None:
        raise SystemExit("K is not positive definite in float32: no preconditioner")
    trace: list[tuple[float, float]] = []
    found = lobpcg.least_eigenvalue_lobpcg(
        K, precondition, rtol=args.rtol, stall=8, on_step=lambda k, t, r: trace.append((t, r))
    )
    seconds = time.perf_counter() - factored
    if not found.converged:
        raise SystemExit(f"LOBPCG did not reach rtol {args.rtol:g} in {lobpcg.MAX_STEPS} steps")
    lam = found.value
    errors = [(theta - lam) / lam for theta, _ in trace]
    print(f"n = {args.n}, d = {args.d}, threads {args.threads}, block {lobpcg.BLOCK}: "
          f"K {formed - start:.1f} s, float32 Cholesky {factored - formed:.1f} s, "
          f"{len(trace)} LOBPCG steps in {seconds:.1f} s ({seconds / len(trace):.3f} s/step), "
          f"λ_min = {lam:.12g}")  # fmt: skip
    print("step  (θ − λ)/λ  ‖r‖/θ")
    for k, (error, (theta, residual)) in enumerate(zip(errors, trace, strict=True), start=1):
        if k == 1 or k % args.every == 0:
            print(f"{k:4d}  {error:9.2e}  {residual / theta:8.2e}")
    reached = {a: next((k for k, e in enumerate(errors, 1) if e <= a), None) for a in ACCURACIES}
    print("steps to a relative error of " + ", ".join(f"{a:g}: {k}" for a, k in reached.items()))
    return {"steps": len(trace), "seconds_per_step": seconds / len(trace), "value": lam,
            "errors": errors, "reached": reached}  # fmt: skip


if __name__ == "__main__":
    main()

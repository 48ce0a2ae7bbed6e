"""population_gram (K of Ling et al. 2023, Eq. (14)) for n = 1 000, 3 000, 10 000, d = 100,
float64: time and peak memory, ours against a plain full-matrix Picard iteration.

* ours  — deqlab.theory.population_gram: row blocks of the upper triangle, entrywise
          Newton on k = Q(σ_w² k + (1 - σ_w²) c) to 1e-14, mirrored into one n×n output.
* plain — the textbook vectorized solve written here: the whole n×n cosine matrix, then
          Picard k ← Q(σ_w² k + (1 - σ_w²) c) on full matrices (out-of-place) until the
          largest change is ≤ 1e-14 (rate σ_w² per step, Theorem 3).

Each (method, n) runs in its own subprocess, so ``ru_maxrss`` is that run's peak; the
memory above the process's baseline (taken after X is built) is also given in units of
one n×n float64 buffer. CPU s (user + system, all threads) next to the wall time shows how
much of the machine the run got on a shared host. The two results are compared entrywise
(max |difference|).

Usage: python benchmarks/bench_population_gram.py [--sizes 1000 3000 10000] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import time

D, SIGMA_W2, TOL = 100, 0.08, 1e-14


def _plain_population_gram(X, sigma_w2: float, tol: float):
    import torch

    unit = X / X.norm(dim=0)
    cos = (unit.T @ unit).clamp(-1.0, 1.0)
    k = torch.zeros_like(cos)
    for _ in range(10_000):
        u = (sigma_w2 * k + (1.0 - sigma_w2) * cos).clamp(-1.0, 1.0)
        k_new = (torch.sqrt((1 - u) * (1 + u)) + (math.pi - torch.acos(u)) * u) / math.pi
        change = float((k_new - k).abs().max())
        k = k_new
        if change <= tol:
            break
    norms2 = (X * X).sum(0) / X.shape[0]
    return k * torch.sqrt(norms2[:, None] * norms2[None, :]) / (1.0 - sigma_w2)


def child(method: str, n: int, threads: int) -> None:
    import torch

    from deqlab.theory import population_gram

    torch.set_num_threads(threads)
    gen = torch.Generator().manual_seed(0)
    X = torch.randn(D, n, generator=gen, dtype=torch.float64)
    X = X / X.norm(dim=0) * math.sqrt(D)  # the sphere of Assumption 2
    base_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    cpu0, start = time.process_time(), time.perf_counter()
    if method == "ours":
        K = population_gram(X, SIGMA_W2, tol=TOL)
    else:
        K = _plain_population_gram(X, SIGMA_W2, TOL)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu0
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    probe = K[:: max(1, n // 97), :: max(1, n // 89)].flatten().tolist()  # a sample of entries
    print(
        json.dumps(
            {"seconds": seconds, "cpu": cpu, "peak_kb": peak_kb, "base_kb": base_kb, "probe": probe}
        )
    )


def run(method: str, n: int, threads: int) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", method, str(n), "--threads", str(threads)],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{method} n={n} failed (exit {out.returncode}):\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 3000, 10_000])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--child", nargs=2, metavar=("METHOD", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), args.threads)
        return
    print(
        f"population_gram, d = {D}, σ_w² = {SIGMA_W2}, tol = {TOL:g}, float64, "
        f"{args.threads} threads"
    )
    header = (
        f"{'n':>6} {'method':>6} {'time s':>8} {'CPU s':>7} {'peak RSS MiB':>13} "
        f"{'above base MiB':>15} {'n×n buffers':>12} {'speed-up':>9} {'max |ΔK|':>9}"
    )
    print(header)
    for n in args.sizes:
        results = {method: run(method, n, args.threads) for method in ("plain", "ours")}
        diff = max(
            abs(a - b)
            for a, b in zip(results["plain"]["probe"], results["ours"]["probe"], strict=True)
        )
        buffer_mib = n * n * 8 / 2**20
        for method, r in results.items():
            above = (r["peak_kb"] - r["base_kb"]) / 1024
            speedup = results["plain"]["seconds"] / r["seconds"]
            print(
                f"{n:>6} {method:>6} {r['seconds']:>8.2f} {r['cpu']:>7.1f} "
                f"{r['peak_kb'] / 1024:>13.0f} {above:>15.0f} {above / buffer_mib:>12.2f} "
                f"{speedup:>9.2f} {diff:>9.1e}",
                flush=True,
            )


if __name__ == "__main__":
    main()

"""population_gram (K of Ling et al. 2023, Eq. (14)) and the kernel stage of ``deqlab verify``
for n = 1 000, 3 000, 10 000 (30 000 with enough memory), d = 100, float64: time and peak memory,
ours against the plain computation, in one run.

``--stage gram`` (K alone):

* ours  — deqlab.theory.population_gram: row blocks of the upper triangle, entrywise
          Newton on k = Q(σ_w² k + (1 - σ_w²) c) to 1e-14, mirrored into one n×n output.
* plain — the textbook vectorized solve written here: the whole n×n cosine matrix, then
          Picard k ← Q(σ_w² k + (1 - σ_w²) c) on full matrices (out-of-place) until the
          largest change is ≤ 1e-14 (rate σ_w² per step, Theorem 3).

``--stage verify`` (what verify computes before any width: K, λ* = λ_min(K), the DEQ NTK and
its λ_min):

* ours  — the lean order of 2 n×n arrays, as verify runs it: population_gram;
          least_eigenvalue_large(K, work, reuse) (LOBPCG preconditioned by K's float32
          Cholesky factor, then the certified bracket: a float64 factorization of K − ℓI,
          theory/spectra.py, theory/lobpcg.py, theory/brackets.py); deq_ntk(gram=K, out=K)
          writes the NTK over K; least_eigenvalue_large(NTK, work, reuse), preconditioned
          by the factor that certified K, and its own proof, in the same work array.
* plain — population_gram and deq_ntk(gram=K) side by side, and the exact dense
          torch.linalg.eigvalsh of each (3 n×n arrays and eigvalsh's copy); above
          ``--plain-max`` rows (default 10⁴) it is not run: its O(n³) memory-bound
          tridiagonal reduction takes far longer than the target.

Each (method, n) runs in its own subprocess, so ``ru_maxrss`` is that run's peak; the
memory above the process's baseline (taken after X is built) is also given in units of
one n×n float64 buffer. CPU s (user + system, all threads) next to the wall time shows how
much of the machine the run got on a shared host. The two results are compared entrywise
(max |difference|).

Usage: python benchmarks/bench_population_gram.py [--stage gram|verify] [--sizes 1000 3000 10000]
           [--threads 2] [--plain-max 10000]
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


def _verify_stage(method: str, X) -> tuple[list[float], dict]:
    """(λ_min(K), λ_min(NTK)) and the seconds of each step, by ``method`` (module docstring)."""
    import torch

    from deqlab.theory import population_gram
    from deqlab.theory.ntk import deq_ntk
    from deqlab.theory.spectra import Reuse, least_eigenvalue_large

    times, clock = {}, time.perf_counter()

    def lap(what: str) -> None:
        nonlocal clock
        times[what], clock = time.perf_counter() - clock, time.perf_counter()

    K = population_gram(X, SIGMA_W2, tol=TOL)
    lap("K")
    if method == "ours":
        work, reuse = torch.empty_like(K), Reuse()
        lam_k = least_eigenvalue_large(K, work=work, reuse=reuse).value
        lap("λ_min(K)")
        ntk = deq_ntk(X, SIGMA_W2, gram=K, out=K)
        lap("NTK")
        lam_ntk = least_eigenvalue_large(ntk, work=work, reuse=reuse).value
    else:
        ntk = deq_ntk(X, SIGMA_W2, gram=K)
        lap("NTK")
        lam_k = float(torch.linalg.eigvalsh(K)[0])
        lap("λ_min(K)")
        lam_ntk = float(torch.linalg.eigvalsh(ntk)[0])
    lap("λ_min(NTK)")
    return [lam_k, lam_ntk], times


def child(stage: str, method: str, n: int, threads: int) -> None:
    import torch

    from deqlab.theory import population_gram

    torch.set_num_threads(threads)
    gen = torch.Generator().manual_seed(0)
    X = torch.randn(D, n, generator=gen, dtype=torch.float64)
    X = X / X.norm(dim=0) * math.sqrt(D)  # the sphere of Assumption 2
    base_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    cpu0, start = time.process_time(), time.perf_counter()
    steps: dict = {}
    if stage == "verify":
        probe, steps = _verify_stage(method, X)
    elif method == "ours":
        K = population_gram(X, SIGMA_W2, tol=TOL)
    else:
        K = _plain_population_gram(X, SIGMA_W2, TOL)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu0
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if stage == "gram":
        probe = K[:: max(1, n // 97), :: max(1, n // 89)].flatten().tolist()  # sampled entries
    result = {"seconds": seconds, "cpu": cpu, "peak_kb": peak_kb, "base_kb": base_kb}
    print(json.dumps({**result, "probe": probe, "steps": steps}))


def run(stage: str, method: str, n: int, threads: int) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", stage, method, str(n), "--threads", str(threads)],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{method} n={n} failed (exit {out.returncode}):\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stage", choices=("gram", "verify"), default="gram")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 3000, 10_000])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--plain-max", type=int, default=10_000)
    parser.add_argument(
        "--child", nargs=3, metavar=("STAGE", "METHOD", "N"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], int(args.child[2]), args.threads)
        return
    what = "population_gram" if args.stage == "gram" else "verify's kernel stage"
    print(f"{what}, d = {D}, σ_w² = {SIGMA_W2}, tol = {TOL:g}, float64, {args.threads} threads")
    compared = "max |ΔK|" if args.stage == "gram" else "max rel Δλ"
    print(
        f"{'n':>6} {'method':>6} {'time s':>8} {'CPU s':>7} {'peak RSS MiB':>13} "
        f"{'above base MiB':>15} {'n×n buffers':>12} {'speed-up':>9} {compared:>10}  steps s"
    )
    for n in args.sizes:
        plain = args.stage == "gram" or n <= args.plain_max
        methods = ("plain", "ours") if plain else ("ours",)
        results = {method: run(args.stage, method, n, args.threads) for method in methods}
        for method, r in results.items():
            print(_row(n, method, r, results.get("plain"), args.stage), flush=True)


def _row(n: int, method: str, r: dict, plain: dict | None, stage: str) -> str:
    """One line of the table; the ratio and the difference are against ``plain`` when run."""
    above = (r["peak_kb"] - r["base_kb"]) / 1024
    speedup, diff = math.nan, math.nan
    if plain is not None:
        speedup = plain["seconds"] / r["seconds"]
        pairs = zip(plain["probe"], r["probe"], strict=True)
        if stage == "gram":
            diff = max(abs(a - b) for a, b in pairs)
        else:
            diff = max(abs(a - b) / abs(a) for a, b in pairs)
    steps = ", ".join(f"{k} {v:.1f}" for k, v in r["steps"].items())
    return (
        f"{n:>6} {method:>6} {r['seconds']:>8.2f} {r['cpu']:>7.1f} {r['peak_kb'] / 1024:>13.0f} "
        f"{above:>15.0f} {above / (n * n * 8 / 2**20):>12.2f} {speedup:>9.2f} {diff:>10.1e}  "
        f"{steps}"
    )


if __name__ == "__main__":
    main()

"""Forward solvers and gradient modes: step counts and time, as ratios to Picard / Unrolled.

1. The rate-0.95 affine contraction of tests/test_solvers.py (d = 20, tol 1e-12 abs).
2. A tanh DEQ on a full batch matrix, ``Z = tanh(W Z + X)``, W symmetric with spectrum
   spread in [-0.95, 0.95], small X (so J_f ≈ W: a slow contraction), Z (256, 512), solved
   as one problem and per sample (columns → rows).
3. Gradient of ``sum(Z*²)`` w.r.t. W: exact Implicit vs backprop through Picard (Unrolled).

Run: ``python benchmarks/bench_solvers.py [--device cuda]``. Times are the median of 3.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from deqlab import Anderson, Broyden, Implicit, Picard, Unrolled, fixed_point
from deqlab.solvers import Solver


def timed(run: Callable[[], object], device: torch.device, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        run()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def symmetric_contraction(d: int, rate: float, device: torch.device) -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    Q, _ = torch.linalg.qr(torch.randn(d, d, generator=gen, dtype=torch.float64))
    M = Q @ torch.diag(torch.linspace(-rate, rate, d, dtype=torch.float64)) @ Q.T
    return M.to(device)


def solver_table(title: str, f, z0: torch.Tensor, solvers: dict[str, Solver], device) -> None:
    print(f"\n{title}")
    print(f"{'solver':<22}{'steps':>7}{'residual':>11}{'time (s)':>10}{'vs Picard':>11}")
    base = None
    for name, solver in solvers.items():
        solution = solver(f, z0)
        seconds = timed(lambda s=solver: s(f, z0), device)
        base = seconds if base is None else base
        print(
            f"{name:<22}{solution.n_steps:>7}{solution.residual:>11.1e}"
            f"{seconds:>10.4f}{base / seconds:>10.1f}x"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    device = torch.device(parser.parse_args().device)
    torch.manual_seed(0)

    exact = {"tol": 1e-12, "stop": "abs", "max_iter": 2000}
    M = symmetric_contraction(20, 0.95, device)
    b = torch.randn(20, dtype=torch.float64, device=device)
    solvers = {
        "Picard": Picard(**exact),
        "Anderson": Anderson(**exact),
        "Broyden": Broyden(**exact),
    }
    solver_table(
        "1. affine contraction, rate 0.95, d = 20 (float64)",
        lambda z: M @ z + b,
        torch.zeros(20, dtype=torch.float64, device=device),
        solvers,
        device,
    )

    m, n = 256, 512
    W = symmetric_contraction(m, 0.95, device).requires_grad_()  # slow: J ≈ W near 0
    X = 0.1 * torch.randn(m, n, dtype=torch.float64, device=device)
    rows = X.T.contiguous()  # per-sample layout: (n, m)
    loose = {"tol": 1e-8, "max_iter": 2000}
    with torch.no_grad():
        solver_table(
            f"2a. tanh DEQ, Z ({m}, {n}) as one problem, rel tol 1e-8 (float64)",
            lambda Z: torch.tanh(W @ Z + X),
            torch.zeros(m, n, dtype=torch.float64, device=device),
            {name: type(s)(**loose) for name, s in solvers.items()},
            device,
        )
        solver_table(
            f"2b. same, per sample: {n} rows of width {m}",
            lambda Z: torch.tanh(Z @ W.T + rows),
            torch.zeros(n, m, dtype=torch.float64, device=device),
            {name: type(s)(per_sample=True, **loose) for name, s in solvers.items()},
            device,
        )

    print("\n3. gradient of sum(Z*²) w.r.t. W (forward + backward), tol 1e-10 rel")
    picard, anderson = Picard(tol=1e-10, max_iter=2000), Anderson(tol=1e-10, max_iter=2000)

    def gradient(solver, backward) -> torch.Tensor:
        Z = fixed_point(
            lambda Z: torch.tanh(W @ Z + X), torch.zeros_like(X), solver=solver, backward=backward
        )
        return torch.autograd.grad(Z.square().sum(), W)[0]

    oracle = gradient(picard, Unrolled())
    base = timed(lambda: gradient(picard, Unrolled()), device)
    print(f"   {'mode':<34}{'time (s)':>9}{'vs Unrolled':>13}{'rel. gap':>10}")
    print(f"   {'Unrolled through Picard':<34}{base:>9.3f}{1.0:>12.1f}x{0.0:>10.1e}")
    for name, solver in (("Implicit, Picard adjoint", picard), ("Implicit, Anderson", anderson)):
        gap = ((gradient(solver, Implicit()) - oracle).norm() / oracle.norm()).item()
        seconds = timed(lambda s=solver: gradient(s, Implicit()), device)
        print(f"   {name:<34}{seconds:>9.3f}{base / seconds:>12.1f}x{gap:>10.1e}")


if __name__ == "__main__":
    main()

"""Full-batch GD on the ReLU DEQ of Ling et al. (2023): ms per step and m×m by m×n products
per step, ours against the plain reference step and torchdeq 0.1.0, in one process.

Problem (issue 3): n = 200 points uniform on the sphere of radius √d, d = 200, m = 1024,
σ_w² = 0.08, y ~ N(0, 1), per-sample relative tolerance 1e-6 in both solves, float32.
Methods (round robin, one step each in turn, so that load hits all alike): ours
(deqlab.train.GDTrainer), its ablations, the plain reference step
(deqlab.train.relu_deq.reference_step), torchdeq warm-started from the previous z*, and
with ``--baseline-src DIR`` the trainer of another source tree loaded in this process.
``--memory-probe KIND K`` measures the peak RSS of a solve forced to K iterations.
Rationale, method details and the history of the numbers: benchmarks/README.md.

Usage: python benchmarks/bench_relu_deq.py [--steps 200] [--methods ours,plain]
       [--baseline-src /tmp/old/src] [--problem N D M] [--threads 2] [--no-memory]
"""

from __future__ import annotations

import argparse
import math
import statistics
import subprocess
import sys
import time
from types import SimpleNamespace

import torch

import deqlab
from beside import load_deqlab
from deqlab.models.relu_deq_solve import solve_adjoint, solve_forward
from deqlab.train.relu_deq import reference_step

SIGMA_W2, TOL = 0.08, 1e-6
PROBLEM = (200, 200, 1024)  # n, d, m
METHODS = ("ours", "ablations", "plain", "torchdeq")


def load_baseline(src: str) -> SimpleNamespace:
    """ReLUDEQ, GDConfig, GDTrainer of the deqlab package under ``src`` (a folder holding
    deqlab/), imported in this process beside ours (:func:`beside.load_deqlab`)."""
    before = load_deqlab(src)
    return SimpleNamespace(ReLUDEQ=before.ReLUDEQ, GDConfig=before.GDConfig,
                           GDTrainer=before.GDTrainer)  # fmt: skip


def problem(size, dtype: torch.dtype, relu_deq=deqlab.ReLUDEQ, seed: int = 0):
    """The issue's synthetic problem: ‖x_i‖ = √d uniform on the sphere, Gaussian labels."""
    n, d, m = size
    gen = torch.Generator().manual_seed(seed)
    X = torch.randn(d, n, generator=gen, dtype=torch.float64)
    X = X / X.norm(dim=0) * d**0.5
    y = torch.randn(n, generator=gen, dtype=torch.float64)
    model = relu_deq.init(d, m, sigma_w2=SIGMA_W2, seed=seed, dtype=dtype)
    return model, X.to(dtype), y.to(dtype)


def run_ours(package, size, lr, dtype, **overrides):
    """Per-step (loss, ms, products, product equivalents) of a GDTrainer of ``package``."""
    model, X, y = problem(size, dtype, package.ReLUDEQ)
    config = package.GDConfig(lr=lr, tol=TOL, metrics_every=0, spectral_every=0, **overrides)
    trainer = package.GDTrainer(model, X, y, config)
    while True:
        r = trainer.step()
        yield r["loss"], 1e3 * r["wall_time_s"], r["products"], r["product_equivalents"]


def run_plain(size, lr, dtype):
    """The plain reference step, warm-started from the previous Z and V."""
    model, X, y = problem(size, dtype)
    W, U, a = (p.detach() for p in (model.W, model.U, model.a))
    Z = V = None
    while True:
        start = time.perf_counter()
        step = reference_step(W, U, a, X, y, lr, tol=TOL, Z0=Z, V0=V)
        W, U, a, Z, V = step.W, step.U, step.a, step.Z, step.V
        yield step.loss, 1e3 * (time.perf_counter() - start), step.products, math.nan


def run_torchdeq(size, lr, dtype, residuals):
    """torchdeq 0.1.0 with the issue's settings, warm-started; None if not installed."""
    try:
        from torchdeq import get_deq
    except ImportError:
        return None
    return _torchdeq_steps(get_deq, size, lr, dtype, residuals)


def _torchdeq_steps(get_deq, size, lr, dtype, residuals):
    model, X, y = problem(size, dtype)
    deq = get_deq(ift=True, f_solver="anderson", b_solver="anderson", f_tol=TOL, b_tol=TOL,
                  f_stop_mode="rel", b_stop_mode="rel")  # fmt: skip
    W, U, a = model.W, model.U, model.a
    z = torch.zeros(size[0], size[2], dtype=dtype)
    while True:
        start = time.perf_counter()
        inj = X.T @ U.T  # (n, m)
        backward_info: list[dict] = []
        z_out, info = deq(
            lambda z, inj=inj: torch.relu(z @ W.T + inj), z, backward_writer=backward_info.append
        )
        z_star = z_out[-1]
        loss = 0.5 * (z_star @ a - y).square().sum()
        W.grad = U.grad = a.grad = None
        loss.backward()
        with torch.no_grad():
            for p in (W, U, a):
                p.add_(p.grad, alpha=-lr)
        z = z_star.detach()
        residuals.append(float(info["rel_lowest"].max()))
        # forward f-evaluations + backward VJPs + f(z*) with its two VJPs (W and z)
        b_steps = sum(int(b["nstep"].max()) for b in backward_info)
        products = int(info["nstep"].max()) + b_steps + 3
        yield float(loss.detach()), 1e3 * (time.perf_counter() - start), products, math.nan


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        line = next(ln for ln in status if ln.startswith(field + ":"))
    return int(line.split()[1])


def memory_probe(kind: str, iterations: int, size, dtype: torch.dtype) -> int:
    """Peak RSS growth (KiB) during a solve forced to ``iterations`` steps (Linux)."""
    model, X, y = problem(size, dtype)
    W, U, a = (p.detach() for p in (model.W, model.U, model.a))
    zeros = torch.zeros(size[2], size[0], dtype=dtype)
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")  # reset the peak RSS (VmHWM) to the current RSS
    before = _status_kib("VmRSS")
    if kind == "ours":
        fwd = solve_forward(W, U @ X, zeros, zeros, tol=1e-30, max_iter=iterations)
        solve_adjoint(W, fwd.mask, a[:, None], zeros, zeros, tol=1e-30, max_iter=iterations)
    else:  # unrolled autograd through the same Picard iteration
        Z = zeros
        for _ in range(iterations):
            Z = torch.relu(model.W @ Z + U @ X)
        (0.5 * (a @ Z - y).square().sum()).backward()
    return _status_kib("VmHWM") - before


def product_ms(size, dtype: torch.dtype, reps: int = 20) -> list[float]:
    """Times (ms) of one m×m by m×n product, ``Z Wᵀ`` with Z (n, m): the unit of the
    products column."""
    n, _, m = size
    gen = torch.Generator().manual_seed(1)
    W = torch.randn(m, m, generator=gen, dtype=dtype)
    Z, out = torch.randn(n, m, generator=gen, dtype=dtype), torch.empty(n, m, dtype=dtype)
    times = []
    for _ in range(reps + 1):
        start = time.perf_counter()
        torch.mm(Z, W.T, out=out)
        times.append(1e3 * (time.perf_counter() - start))
    return times[1:]  # the first one warms up


def summarize(name, res, base_loss, ref_ms):
    """Timing and product means over steps 1.. (step 0 is the cold start, and ours also
    measures ‖W(0)‖₂, ‖U(0)‖₂ and λ_0 there); Δloss over all steps."""
    ms, products, eq = res["ms"][1:], res["products"][1:], res["equivalents"][1:]
    ms_mean = statistics.fmean(ms)
    loss_dev = max(abs(p - q) / abs(q) for p, q in zip(res["loss"], base_loss, strict=True))
    print(f"{name:<26} {ms_mean:9.1f} {statistics.median(ms):9.1f} "
          f"{statistics.fmean(products):9.2f} {statistics.fmean(eq):9.2f} "
          f"{ref_ms / ms_mean:8.1f}x {loss_dev:10.2e}")  # fmt: skip


def compare_with_baseline(runs: dict) -> None:
    """Same-process A/B of ours against the baseline tree, step by step."""
    ours, before = runs["ours"], runs["before"]
    paired = [a / b for a, b in zip(ours["ms"][1:], before["ms"][1:], strict=True)]
    means = statistics.fmean(ours["ms"][1:]) / statistics.fmean(before["ms"][1:])
    print(f"\nA/B ours / before: ms/step {means:.3f} (ratio of means), "
          f"{statistics.median(paired):.3f} (median of per-step ratios); "
          f"products {statistics.fmean(ours['products'][1:]):.3f} vs "
          f"{statistics.fmean(before['products'][1:]):.3f}")  # fmt: skip


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--lr", type=float, default=1e-5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    parser.add_argument("--problem", type=int, nargs=3, default=PROBLEM, metavar=("N", "D", "M"))
    parser.add_argument("--methods", default=",".join(METHODS),
                        help=f"comma-separated subset of {', '.join(METHODS)}")  # fmt: skip
    parser.add_argument("--baseline-src", metavar="DIR",
                        help="also time the GDTrainer of deqlab/ in DIR (A/B)")  # fmt: skip
    parser.add_argument("--memory-probe", nargs=2, metavar=("KIND", "ITERATIONS"))
    parser.add_argument("--no-memory", action="store_true", help="skip the RSS table")
    args = parser.parse_args()
    args.methods = args.methods.split(",")
    if args.steps < 2 or min(args.problem) < 1 or not set(args.methods) <= set(METHODS):
        parser.error(f"--steps must be >= 2, --problem sizes >= 1, --methods among {METHODS}")
    return args


def build_methods(args, dtype: torch.dtype, tdeq_residuals: list[float]) -> dict:
    """The step generators to time, by name (ours first: the Δloss reference)."""
    size, lr, ours = args.problem, args.lr, SimpleNamespace(
        ReLUDEQ=deqlab.ReLUDEQ, GDConfig=deqlab.GDConfig, GDTrainer=deqlab.GDTrainer)  # fmt: skip
    methods = {"ours": run_ours(ours, size, lr, dtype)}
    if args.baseline_src:
        methods["before"] = run_ours(load_baseline(args.baseline_src), size, lr, dtype)
    if "ablations" in args.methods:
        methods["ours, no extrapolation"] = run_ours(ours, size, lr, dtype, extrapolate=False)
        methods["ours, no rank-n update"] = run_ours(ours, size, lr, dtype, rank_n_updates=False)
        methods["ours, V adjoint"] = run_ours(ours, size, lr, dtype, adjoint="V")
    if "plain" in args.methods:
        methods["plain reference step"] = run_plain(size, lr, dtype)
    tdeq = run_torchdeq(size, lr, dtype, tdeq_residuals) if "torchdeq" in args.methods else None
    if tdeq is not None:
        methods["torchdeq 0.1.0"] = tdeq
    elif "torchdeq" in args.methods:
        print("torchdeq is not installed (pip install 'deqlab[bench]'): comparison skipped")
    return methods


def round_robin(methods: dict, args, dtype: torch.dtype) -> tuple[dict, list[float]]:
    """One step of each method in turn, so that load changes hit all of them alike; the
    bare product's time is sampled along the run."""
    runs = {name: {"loss": [], "ms": [], "products": [], "equivalents": []} for name in methods}
    one_product: list[float] = []
    for step in range(args.steps):
        for name, steps in methods.items():
            for key, value in zip(runs[name], next(steps), strict=True):
                runs[name][key].append(value)
        if step % 20 == 0:
            one_product += product_ms(args.problem, dtype, reps=5)
        if step % 20 == 19:
            print(f"  step {step + 1}/{args.steps}", file=sys.stderr, flush=True)
    return runs, one_product


def report(runs: dict, one_product: list[float], steps: int) -> None:
    ref_name = next((k for k in ("torchdeq 0.1.0", "plain reference step") if k in runs), "ours")
    ref_ms = statistics.fmean(runs[ref_name]["ms"][1:])
    print(f"\n{'method':<26} {'ms/step':>9} {'median':>9} {'products':>9} {'equiv':>9} "
          f"{'speed-up':>9} {'max Δloss':>10}")  # fmt: skip
    for name, res in runs.items():
        summarize(name, res, runs["ours"]["loss"], ref_ms)
    print(f"(means over steps 1..{steps - 1}; speed-up: ms/step of {ref_name} over the "
          "method's; max Δloss: largest relative loss gap to ours over all steps)")  # fmt: skip
    print(f"loss: {runs['ours']['loss'][0]:.4f} -> {runs['ours']['loss'][-1]:.4f}")
    # The ceiling of ours' design: its product equivalents at the bare product's speed.
    t_product = statistics.median(one_product)
    floor = statistics.fmean(runs["ours"]["equivalents"][1:]) * t_product
    print(f"one m×m by m×n product alone: {t_product:.2f} ms (median of "
          f"{len(one_product)} along the run); ours' product equivalents alone: "
          f"{floor:.1f} ms/step, {ref_ms / floor:.1f}x {ref_name}")  # fmt: skip
    if "before" in runs:
        compare_with_baseline(runs)


def memory_table(args) -> None:
    print("\npeak RSS growth (MiB) during a forward+adjoint solve forced to k iterations:")
    for kind in ("ours", "unrolled"):
        rss = []
        for k in (10, 100, 300):
            cmd = [sys.executable, __file__, "--memory-probe", kind, str(k), "--threads",
                   str(args.threads), "--dtype", args.dtype, "--problem",
                   *map(str, args.problem)]  # fmt: skip
            rss.append(int(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout))
        print(f"  {kind:<9} k=10: {rss[0] / 1024:7.1f}  k=100: {rss[1] / 1024:7.1f}  "
              f"k=300: {rss[2] / 1024:7.1f}")  # fmt: skip


def main() -> int:
    args = parse_args()
    torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype)
    if args.memory_probe:
        kind, iterations = args.memory_probe
        print(memory_probe(kind, int(iterations), args.problem, dtype))
        return 0
    n, d, m = args.problem
    print(f"n={n} d={d} m={m} σ_w²={SIGMA_W2} tol={TOL} lr={args.lr} {args.dtype} "
          f"threads={args.threads} steps={args.steps}")  # fmt: skip
    tdeq_residuals: list[float] = []
    runs, one_product = round_robin(build_methods(args, dtype, tdeq_residuals), args, dtype)
    if tdeq_residuals:
        print(f"torchdeq: worst forward rel residual reached {max(tdeq_residuals):.2e}")
    report(runs, one_product, args.steps)
    if not args.no_memory:
        memory_table(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())

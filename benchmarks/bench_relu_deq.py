"""Full-batch GD on the ReLU DEQ of Ling et al. (2023): ms per step and m×m by m×n products
per step, ours against torchdeq 0.1.0 and a plain warm-started Picard, in one run.

Problem (issue 3): n = 200 points uniform on the sphere of radius √d, d = 200, m = 1024,
σ_w² = 0.08, y ~ N(0, 1), exact gradients at relative tolerance 1e-6, float32, 2 threads.

* ours      — deqlab.train.GDTrainer (cached products with rank-n corrections, adjoint in
              C form with mask-flip corrections), metrics off except at step 0.
* ablations — the same trainer without the rank-n corrections, and with the V adjoint.
* plain     — a textbook structured GD step written here: Picard from the previous Z
              (one product per iteration, none cached), the mask D from one more product
              at Z*, the adjoint V = a rᵀ + Wᵀ(D⊙V) by Picard from the previous V.
* torchdeq  — get_deq(ift=True, anderson/anderson, tol 1e-6 'rel' both ways) on
              f(z) = relu(z Wᵀ + Xᵀ Uᵀ) (batch first), warm-started from the previous z*,
              gradients by autograd; skipped (with a message) if torchdeq is not installed.

Every method starts from the same seed; the loss trajectories are compared step by step.
Ceiling: one bare m×m by m×n product is timed along the run; ours' product equivalents
per step at that speed are what ours would cost with nothing else (no elementwise work,
no Python), so torchdeq's time over that bounds the speed-up of ours' design here.
Memory: ``--memory-probe`` subprocesses run a forward+adjoint solve forced to k
iterations and report the peak RSS; ours stays flat in k, an unrolled autograd solve
(the contrast) grows linearly.

Usage: python benchmarks/bench_relu_deq.py [--steps 200] [--lr 1e-5] [--threads 2] [--block 1]
"""

from __future__ import annotations

import argparse
import math
import statistics
import subprocess
import sys
import time

import torch

from deqlab.models import ReLUDEQ
from deqlab.models.relu_deq_solve import solve_adjoint, solve_forward
from deqlab.train import GDConfig, GDTrainer

N, D, M, SIGMA_W2, TOL = 200, 200, 1024, 0.08, 1e-6


def problem(dtype: torch.dtype, seed: int = 0):
    """The issue's synthetic problem: ‖x_i‖ = √d uniform on the sphere, Gaussian labels."""
    gen = torch.Generator().manual_seed(seed)
    X = torch.randn(D, N, generator=gen, dtype=torch.float64)
    X = X / X.norm(dim=0) * D**0.5
    y = torch.randn(N, generator=gen, dtype=torch.float64)
    model = ReLUDEQ.init(D, M, sigma_w2=SIGMA_W2, seed=seed, dtype=dtype)
    return model, X.to(dtype), y.to(dtype)


def run_ours(lr, dtype, **overrides):
    """Per-step (loss, ms, products, product equivalents) of deqlab's GDTrainer."""
    model, X, y = problem(dtype)
    config = GDConfig(lr=lr, tol=TOL, metrics_every=0, spectral_every=0, **overrides)
    trainer = GDTrainer(model, X, y, config)
    while True:
        r = trainer.step()
        yield r["loss"], 1e3 * r["wall_time_s"], r["products"], r["product_equivalents"]


def run_plain(lr, dtype):
    """Textbook structured GD step; every m×m by m×n product is counted."""
    model, X, y = problem(dtype)
    W, U, a = (p.detach() for p in (model.W, model.U, model.a))
    Z, V = torch.zeros(M, N, dtype=dtype), torch.zeros(M, N, dtype=dtype)
    while True:
        start, products = time.perf_counter(), 0
        B = U @ X
        while True:  # forward Picard from the previous equilibrium
            Z_new = torch.relu(W @ Z + B)
            products += 1
            done = (Z_new - Z).norm() <= TOL * Z_new.norm()
            Z = Z_new
            if done:
                break
        mask = (W @ Z + B) > 0  # D at Z*: one more product
        products += 1
        r = a @ Z - y
        source = a[:, None] * r
        while True:  # adjoint Picard from the previous V
            V_new = source + W.T @ (V * mask)
            products += 1
            done = (V_new - V).norm() <= TOL * V_new.norm()
            V = V_new
            if done:
                break
        G = V * mask
        grad_a = Z @ r
        W.addmm_(G, Z.T, alpha=-lr)
        U.addmm_(G, X.T, alpha=-lr)
        a.add_(grad_a, alpha=-lr)
        products += 1
        yield 0.5 * float(r @ r), 1e3 * (time.perf_counter() - start), products, math.nan


def run_torchdeq(lr, dtype, residuals):
    """torchdeq 0.1.0 with the issue's settings, warm-started; None if not installed."""
    try:
        from torchdeq import get_deq
    except ImportError:
        return None
    return _torchdeq_steps(get_deq, lr, dtype, residuals)


def _torchdeq_steps(get_deq, lr, dtype, residuals):
    model, X, y = problem(dtype)
    deq = get_deq(ift=True, f_solver="anderson", b_solver="anderson", f_tol=TOL, b_tol=TOL,
                  f_stop_mode="rel", b_stop_mode="rel")  # fmt: skip
    W, U, a = model.W, model.U, model.a
    z = torch.zeros(N, M, dtype=dtype)
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


def memory_probe(kind: str, iterations: int, dtype: torch.dtype) -> int:
    """Peak RSS growth (KiB) during a solve forced to ``iterations`` steps (Linux)."""
    model, X, y = problem(dtype)
    W, U, a = (p.detach() for p in (model.W, model.U, model.a))
    zeros = torch.zeros(M, N, dtype=dtype)
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")  # reset the peak RSS (VmHWM) to the current RSS
    before = _status_kib("VmRSS")
    if kind == "ours":
        fwd = solve_forward(W, U @ X, zeros, zeros, tol=1e-30, max_iter=iterations)
        solve_adjoint(W, fwd.mask, a[:, None], zeros, zeros, tol=1e-30, max_iter=iterations)
    else:  # unrolled autograd through the same Picard iteration
        Wg = model.W
        Z = zeros
        for _ in range(iterations):
            Z = torch.relu(Wg @ Z + U @ X)
        (0.5 * (a @ Z - y).square().sum()).backward()
    return _status_kib("VmHWM") - before


def product_ms(dtype: torch.dtype, reps: int = 20) -> list[float]:
    """Times (ms) of one m×m by m×n product, ``Z Wᵀ`` with Z (n, m): the unit of the
    products column."""
    gen = torch.Generator().manual_seed(1)
    W = torch.randn(M, M, generator=gen, dtype=dtype)
    Z, out = torch.randn(N, M, generator=gen, dtype=dtype), torch.empty(N, M, dtype=dtype)
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--lr", type=float, default=1e-5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    parser.add_argument(
        "--block", type=int, default=1,
        help="consecutive steps a method takes before the next one (1: strict round robin)",
    )  # fmt: skip
    parser.add_argument("--memory-probe", nargs=2, metavar=("KIND", "ITERATIONS"))
    args = parser.parse_args()
    if args.steps < 2 or args.block < 1:
        parser.error("--steps must be >= 2 and --block >= 1")
    torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype)
    if args.memory_probe:
        print(memory_probe(args.memory_probe[0], int(args.memory_probe[1]), dtype))
        return 0

    print(f"n={N} d={D} m={M} σ_w²={SIGMA_W2} tol={TOL} lr={args.lr} {args.dtype} "
          f"threads={args.threads} steps={args.steps} block={args.block}")  # fmt: skip
    methods = {
        "ours": run_ours(args.lr, dtype),
        "ours, no extrapolation": run_ours(args.lr, dtype, extrapolate=False),
        "ours, no rank-n update": run_ours(args.lr, dtype, rank_n_updates=False),
        "ours, V adjoint": run_ours(args.lr, dtype, adjoint="V"),
        "plain warm Picard": run_plain(args.lr, dtype),
    }
    tdeq_residuals: list[float] = []
    tdeq = run_torchdeq(args.lr, dtype, tdeq_residuals)
    if tdeq is None:
        print("torchdeq is not installed (pip install 'deqlab[bench]'): comparison skipped")
        ref_name = "plain warm Picard"
    else:
        methods["torchdeq 0.1.0"] = tdeq
        ref_name = "torchdeq 0.1.0"
    # Round robin (in blocks of `block` consecutive steps per method, 1 by default): every
    # method takes block k before any takes block k+1, so load changes on a shared machine
    # hit all of them alike. (Blocks of 10 steps measured the same ratios here.)
    runs = {name: {"loss": [], "ms": [], "products": [], "equivalents": []} for name in methods}
    one_product: list[float] = []
    for first in range(0, args.steps, args.block):
        for name, steps in methods.items():
            for _ in range(min(args.block, args.steps - first)):
                for key, value in zip(runs[name], next(steps), strict=True):
                    runs[name][key].append(value)
        if first % 20 == 0:  # the product's own time, sampled along the run
            one_product += product_ms(dtype, reps=5)
    if tdeq_residuals:
        print(f"torchdeq: worst forward rel residual reached {max(tdeq_residuals):.2e}")
    ref_ms = statistics.fmean(runs[ref_name]["ms"][1:])
    print(f"\n{'method':<26} {'ms/step':>9} {'median':>9} {'products':>9} {'equiv':>9} "
          f"{'speed-up':>9} {'max Δloss':>10}")  # fmt: skip
    for name, res in runs.items():
        summarize(name, res, runs["ours"]["loss"], ref_ms)
    print(f"(means over steps 1..{args.steps - 1}; speed-up: ms/step of {ref_name} over the "
          "method's; max Δloss: largest relative loss gap to ours over all steps)")  # fmt: skip
    print(f"loss: {runs['ours']['loss'][0]:.4f} -> {runs['ours']['loss'][-1]:.4f}")
    # The ceiling of ours' design: its product equivalents at the bare product's speed,
    # with no other work at all (no elementwise work, no Python).
    t_product = statistics.median(one_product)
    floor = statistics.fmean(runs["ours"]["equivalents"][1:]) * t_product
    print(f"one m×m by m×n product alone: {t_product:.2f} ms (median of "
          f"{len(one_product)} along the run); ours' product equivalents alone: "
          f"{floor:.1f} ms/step, {ref_ms / floor:.1f}x {ref_name}")  # fmt: skip

    print("\npeak RSS growth (MiB) during a forward+adjoint solve forced to k iterations:")
    for kind in ("ours", "unrolled"):
        rss = []
        for k in (10, 100, 300):
            cmd = [sys.executable, __file__, "--memory-probe", kind, str(k), "--threads",
                   str(args.threads), "--dtype", args.dtype]  # fmt: skip
            rss.append(int(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout))
        print(f"  {kind:<9} k=10: {rss[0] / 1024:7.1f}  k=100: {rss[1] / 1024:7.1f}  "
              f"k=300: {rss[2] / 1024:7.1f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

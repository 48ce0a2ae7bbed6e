"""Where ``deqlab verify``'s time goes with certified brackets (issue 35), stage by stage.

``deqlab.verify`` on the sphere (n points, d features, a ReLU DEQ of ``--width``) with a
progress callback that records the wall and CPU clock at each new stage: forming K, λ_max,
K's float32 factor, LOBPCG on K, the float64 factorization that proves K's lower side, the
NTK, its LOBPCG (preconditioned by that factor), its proof, the width-``--width``
equilibrium, and the statements settled at the brackets. Then the brackets of λ* and
λ_min(NTK), their relative widths, and whether they hold ``--reference`` (a dense
eigvalsh's λ*, e.g. the H100's 0.025528129719 at n = 3·10⁴, d = 100).

    python benchmarks/bench_verify_brackets.py --n 6000                  # a minute
    python benchmarks/bench_verify_brackets.py --n 30000 --reference 0.025528129719  # 15 GB
"""

from __future__ import annotations

import argparse
import itertools
import resource
import time

import torch

from deqlab import ReLUDEQCheck
from deqlab.verification import load_dataset, verify


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=6000)
    parser.add_argument("--d", type=int, default=100)
    parser.add_argument("--width", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--reference", type=float, default=None, help="a dense λ* to check")
    args = parser.parse_args(argv)
    for name in ("n", "d", "width", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1; got {getattr(args, name)}")
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    X, y, name = load_dataset("sphere", n=args.n, d=args.d)
    stages: list[tuple[str, float, float]] = []
    start, cpu = time.perf_counter(), time.process_time()

    def progress(what: str, done: int, total: int) -> None:
        if not stages or stages[-1][0] != what:
            stages.append((what, time.perf_counter() - start, time.process_time() - cpu))

    found = verify(X, y, ReLUDEQCheck(width=args.width), name=name, progress=progress)
    total = time.perf_counter() - start
    stages.append(("end", total, time.process_time() - cpu))
    print(f"n = {args.n}, d = {args.d}, m = {args.width}, {args.threads} threads")
    print(f"{'wall s':>9} {'CPU s':>9}  stage (seconds spent in it)")
    for (what, wall, used), (_, after, after_cpu) in itertools.pairwise(stages):
        print(f"{after - wall:9.2f} {after_cpu - used:9.2f}  {what}")
    numbers = found.numbers
    print(f"total {total:.1f} s wall, peak RSS {_peak_gib():.2f} GiB")
    for key in ("lambda_star", "ntk_lambda_min"):
        bracket = numbers["brackets"][key]
        print(
            f"{key}: [{bracket['lower']:.12g}, {bracket['upper']:.12g}], relative width "
            f"{bracket['relative_width']:.2g}"
        )
    if args.reference is not None:
        lower, upper = numbers["lambda_star_bounds"]
        inside = lower <= args.reference <= upper
        print(f"reference λ* = {args.reference}: inside the bracket: {inside}")
    print(f"undecided: {numbers['undecided'] or 'none'}")
    return {"total": total, "numbers": numbers}


def _peak_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


if __name__ == "__main__":
    main()

"""Wall time and CPU time of the test suite, alone and beside CPU-bound jobs (issue 25).

The suite runs many small problems; with several intra-op threads per process they wait on
each other, and beside other jobs the suite takes several times its CPU time. This script
runs ``python -m pytest`` on the given tests (the whole suite by default), optionally
beside ``--load N`` busy processes, and prints its wall time and the CPU time (user +
system) of pytest and every process it started::

    python benchmarks/suite_cpu.py                          # idle machine: the whole suite
    python benchmarks/suite_cpu.py --load 1                 # beside one busy process
    python benchmarks/suite_cpu.py --load 1 tests/test_format.py   # a tiny check of the script

Take the numbers on an otherwise idle machine (the ``--load`` jobs are the only load).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
import time


def _burn() -> None:
    """Keep one core busy until killed."""
    x = 0
    while True:
        x = (x * 1103515245 + 12345) % 2**31


def measure(tests: list[str], load: int) -> dict[str, float]:
    """Run pytest on ``tests`` beside ``load`` busy processes; wall and CPU seconds."""
    burners = [multiprocessing.Process(target=_burn, daemon=True) for _ in range(load)]
    for p in burners:
        p.start()
    before = os.times()
    start = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests], check=False
        )
        wall = time.perf_counter() - start
        after = os.times()  # before the busy processes are reaped: pytest's CPU time only
    finally:
        for p in burners:
            p.terminate()
            p.join()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    return {"wall_s": wall, "cpu_s": cpu, "exit_code": float(done.returncode)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tests", nargs="*", help="test paths (default: the whole suite)")
    parser.add_argument("--load", type=int, default=0, help="busy processes beside the suite")
    args = parser.parse_args()
    result = measure(args.tests, args.load)
    print(
        f"beside {args.load} busy process(es): wall {result['wall_s']:.1f} s, "
        f"CPU {result['cpu_s']:.1f} s, pytest exit code {int(result['exit_code'])}"
    )


if __name__ == "__main__":
    main()

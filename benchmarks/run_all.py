"""Run every benchmark in this folder (``make bench``), one subprocess each.

Each ``bench_*.py`` prints its own table of ratios against a baseline measured in the
same run; absolute timings on a shared 2-core machine are noisy, ratios are not.
Pass names to run a subset: ``python benchmarks/run_all.py relu_deq population_gram``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def main(selected: list[str]) -> int:
    here = Path(__file__).parent
    scripts = sorted(here.glob("bench_*.py"))
    if selected:
        wanted = {
            f"bench_{name.removeprefix('bench_').removesuffix('.py')}.py" for name in selected
        }
        unknown = wanted - {s.name for s in scripts}
        if unknown:
            valid = ", ".join(s.stem.removeprefix("bench_") for s in scripts)
            print(f"unknown benchmark(s) {sorted(unknown)}; valid: {valid}", file=sys.stderr)
            return 2
        scripts = [s for s in scripts if s.name in wanted]
    failed = []
    for script in scripts:
        print(f"\n=== {script.name} ===", flush=True)
        if subprocess.run([sys.executable, str(script)], check=False).returncode != 0:
            failed.append(script.name)
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

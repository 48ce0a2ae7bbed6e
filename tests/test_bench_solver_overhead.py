"""The solver-overhead benchmark runs end to end at a tiny size against a baseline copy of the
solvers (here the current ones, renamed): the same steps and bit-identical iterates."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]
SCRIPT = ROOT / "benchmarks" / "bench_solver_overhead.py"


def renamed_copy(target: Path) -> None:
    """``src/deqlab/solvers`` as the package ``oldsolvers`` (the script's baseline layout)."""
    package = target / "oldsolvers"
    package.mkdir()
    for source in (ROOT / "src" / "deqlab" / "solvers").glob("*.py"):
        text = source.read_text().replace("deqlab.solvers", "oldsolvers")
        (package / source.name).write_text(text)


def test_tiny_run_against_itself_is_identical(tmp_path):
    renamed_copy(tmp_path)
    args = [sys.executable, str(SCRIPT), "--baseline", str(tmp_path), "--sizes", "mlp",
            "--batch", "4", "--width", "16", "--repeats", "2"]  # fmt: skip
    done = subprocess.run(args, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line for line in done.stdout.splitlines() if "ms/iteration" in line]
    assert [row.split()[0] for row in rows] == ["busy", "settling"]
    for row in rows:
        assert "same steps: True" in row and "max |Δz|/max|z| 0.0e+00" in row
        assert float(re.search(r"new (\S+)", row).group(1)) > 0
        assert re.search(r"cell evaluations: baseline \S+, new \S+\)$", row)
    assert " 40  " in rows[0]  # busy: the tolerance is unreachable, all 40 iterations run


def test_tiny_fused_run_differs_from_the_torch_path_by_rounding(tmp_path):
    renamed_copy(tmp_path)
    args = [sys.executable, str(SCRIPT), "--baseline", str(tmp_path), "--sizes", "mlp",
            "--batch", "4", "--width", "16", "--repeats", "2", "--fused"]  # fmt: skip
    done = subprocess.run(args, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "new with fused=True" in done.stdout
    rows = [line for line in done.stdout.splitlines() if "ms/iteration" in line]
    for row in rows:  # float32 iterates, the small systems in float64 on one side: rounding
        assert "same steps: True" in row  # (busy's chaotic map amplifies it over 40 steps)
        assert float(re.search(r"max \|Δz\|/max\|z\| (\S+)", row).group(1)) < 1e-2

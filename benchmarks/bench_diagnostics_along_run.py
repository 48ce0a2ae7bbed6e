"""What recording the diagnostics along a run costs, as a fraction of the training time
(issue 32): DiagnosticsRecorder on the conv DEQ of docs/own_deq.md (16 channels, 8 × 8,
batch 32, Anderson per sample, Adam), on random images (the cost does not depend on them).

For each ``every`` and for ``max_fraction`` None (record every ``every`` steps whatever the
cost) and 0.1 (the default bound), the same seeded run is trained with the recorder, and once
without it, in one process; reported: the recordings made, the recorder's wall time over the
training time between its calls (``overhead()``), the whole run's wall time over the run
without a recorder, and the median seconds of one recording (``max_iter`` Krylov steps).

    OMP_NUM_THREADS=1 python benchmarks/bench_diagnostics_along_run.py --steps 200
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch import nn

from deqlab import DEQ, Anderson, DiagnosticsRecorder


class Cell(nn.Module):
    def __init__(self, channels: int = 16) -> None:
        super().__init__()
        self.conv, self.norm = (
            nn.Conv2d(channels, channels, 3, padding=1),
            nn.GroupNorm(4, channels),
        )

    def forward(self, z, x):
        return self.norm(torch.relu(self.conv(z) + x))


def train(steps: int, recorder_options: dict | None, seed: int = 0):
    """The run; returns (wall seconds, recorder or None)."""
    torch.manual_seed(seed)
    stem = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.GroupNorm(4, 16))
    deq = DEQ(Cell(), solver=Anderson(tol=1e-3, max_iter=40, per_sample=True))
    head = nn.Sequential(nn.Flatten(), nn.Linear(16 * 64, 10))
    params = [*stem.parameters(), *deq.parameters(), *head.parameters()]
    opt = torch.optim.Adam(params, lr=1e-3)
    images, labels = torch.randn(512, 1, 8, 8), torch.randint(0, 10, (512,))
    gen = torch.Generator().manual_seed(seed)
    recorder = None if recorder_options is None else DiagnosticsRecorder(deq, **recorder_options)
    start = time.perf_counter()
    for _ in range(steps):
        batch = torch.randint(0, 512, (32,), generator=gen)
        loss = nn.functional.cross_entropy(head(deq(stem(images[batch]))), labels[batch])
        opt.zero_grad()
        loss.backward()
        if recorder is not None:
            recorder.observe(loss)
        opt.step()
    return time.perf_counter() - start, recorder


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--every", type=int, nargs="+", default=[10, 50])
    parser.add_argument("--max-iter", type=int, default=30)
    args = parser.parse_args(argv)
    if args.steps < 1 or min(args.every) < 1 or args.max_iter < 2:
        parser.error("--steps and --every must be >= 1, --max-iter >= 2")
    torch.set_num_threads(1)
    train(2, {"every": 1, "max_iter": args.max_iter})  # warm-up: first graph, first Krylov run
    bare, _ = train(args.steps, None)
    rows = []
    heads = ("every", "max_fraction", "recordings", "overhead", "run / bare", "s/recording")
    print("".join(f"{h:>{w}}" for h, w in zip(heads, (6, 14, 12, 10, 12, 13), strict=True)))
    for every in args.every:
        for fraction in (None, 0.1):  # unbounded, then the default bound
            seconds, rec = train(
                args.steps, {"every": every, "max_fraction": fraction, "max_iter": args.max_iter}
            )
            recorded = rec.table()["diagnostics_seconds"].dropna()
            row = {
                "every": every, "max_fraction": fraction, "recordings": len(recorded),
                "overhead": rec.overhead(), "ratio": seconds / bare,
                "per_recording": statistics.median(recorded) if len(recorded) else float("nan"),
            }  # fmt: skip
            rows.append(row)
            print(f"{every:>6}{fraction!s:>14}{row['recordings']:>12}{row['overhead']:>10.1%}"
                  f"{row['ratio']:>12.2f}{row['per_recording']:>13.3f}")  # fmt: skip
    print(f"bare run: {args.steps} steps in {bare:.2f} s ({1e3 * bare / args.steps:.1f} ms/step)")
    return rows


if __name__ == "__main__":
    main()

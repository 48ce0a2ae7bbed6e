"""What each backward lever saves, counted in cell evaluations and VJPs (issue 23, item 7).

A conv DEQ (stem → ``f(z, x) = GroupNorm(relu(conv₃ₓ₃(z) + x))`` → linear head) trains on
sklearn's 8 × 8 digits with Adam 1e-3, minibatches of 64, float32, the same seed and batches
for every configuration; only the DEQ's solver and backward change. Per step we count the
forward solver's cell evaluations, the backward's VJPs and evaluations (``deq.stats``, in
full batches: rows / batch size; counters are honest on a loaded machine, unlike seconds),
and how many gradients were exact (``last_backward.exact``). A VJP of this cell costs about
two evaluations.

Levers (each against its own baseline, same forward solver):

* row compaction (``DEQ(row_compaction=True)``, the default): the per-sample forward and
  adjoint solves evaluate only the samples still to converge (against "all rows"), exact;
* ``Implicit(init="grad")``: the adjoint starts at ``g`` = the adjoint map at 0 (one VJP
  fewer per backward than ``init="zero"``), exact;
* ``Implicit(warm_start=True)``: starts at the previous step's adjoint, exact;
* ``Implicit(init="shine")`` with a Broyden forward: starts at SHINE's ``−Bᵀg`` (Ramzi et
  al. 2022), exact;
* the adjoint's solver (exact, same tolerance and cap): Anderson with history 10, 20, 40
  (on the linear adjoint, Anderson with a history as long as the solve is GMRES: Walker &
  Ni 2011) or Broyden, against the forward's Anderson (history 5);
* approximate backwards, for scale: ``Shine()`` (0 VJPs), ``Phantom(5, 0.5)`` (4 VJPs),
  ``JacobianFree()`` (0 VJPs). ``Phantom(5, 0.5)`` was the DEQ layer's default gradient (issue 23);
  ``Implicit(init="grad")`` is the exact one the other exact levers are measured against.

    python benchmarks/bench_backward_levers.py [--steps 100] [--channels 16] [--json out.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import warnings

import torch
from torch import nn

from deqlab import DEQ, Anderson, Broyden, Implicit, JacobianFree, Phantom, Shine

#: Anderson per sample, tol 1e-3, 40 evaluations, no stall detection (the DEQ layer's default
#: when this table was measured, issue 23; the same cap as Broyden's below)
ANDERSON = Anderson(tol=1e-3, max_iter=40, per_sample=True)
BROYDEN = Broyden(tol=1e-3, max_iter=40, per_sample=True)


def adjoint_anderson(history: int) -> Implicit:
    """``Implicit(init="grad")`` with an adjoint Anderson of another history (same tol, cap)."""
    return Implicit(solver=dataclasses.replace(ANDERSON, history=history), init="grad")


CONFIGS = {  # name: (forward solver, backward, row compaction)
    "anderson + Implicit(init=zero), all rows": (ANDERSON, Implicit(), False),
    "anderson + Implicit(init=zero)": (ANDERSON, Implicit(), True),
    "anderson + Implicit(init=grad) [exact baseline]": (ANDERSON, Implicit(init="grad"), True),
    "anderson + Implicit(init=grad, warm_start)": (
        ANDERSON,
        Implicit(init="grad", warm_start=True),
        True,
    ),
    "anderson + Implicit(init=grad), adjoint m=10": (ANDERSON, adjoint_anderson(10), True),
    "anderson + Implicit(init=grad), adjoint m=20": (ANDERSON, adjoint_anderson(20), True),
    "anderson + Implicit(init=grad), adjoint m=40": (ANDERSON, adjoint_anderson(40), True),
    "anderson + Implicit(init=grad), adjoint Broyden": (
        ANDERSON,
        Implicit(solver=BROYDEN, init="grad"),
        True,
    ),
    "broyden + Implicit(init=zero)": (BROYDEN, Implicit(), True),
    "broyden + Implicit(init=shine)": (BROYDEN, Implicit(init="shine"), True),
    "broyden + Shine() [approximate]": (BROYDEN, Shine(), True),
    "anderson + Phantom(5, 0.5) [approximate]": (ANDERSON, Phantom(5, 0.5), True),
    "anderson + JacobianFree() [approximate]": (ANDERSON, JacobianFree(), True),
}


class Cell(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)
        self.norm = nn.GroupNorm(channels // 4, channels)

    def forward(self, z: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return self.norm(torch.relu(self.conv(z) + x))


def train(config: str, steps: int, channels: int, seed: int) -> dict:
    """Train one configuration; its mean counts per step and the mean loss of the last 10."""
    solver, backward, compaction = CONFIGS[config]
    torch.manual_seed(seed)
    stem = nn.Sequential(
        nn.Conv2d(1, channels, 3, padding=1), nn.GroupNorm(channels // 4, channels)
    )
    deq = DEQ(
        Cell(channels),
        solver=solver,
        backward=backward,
        on_failure="record",
        row_compaction=compaction,
    )
    head = nn.Sequential(nn.Flatten(), nn.Linear(channels * 64, 10))
    params = [*stem.parameters(), *deq.parameters(), *head.parameters()]
    opt = torch.optim.Adam(params, lr=1e-3)
    images, labels = digits()
    batches = torch.Generator().manual_seed(seed)
    losses, exact = [], 0
    for _ in range(steps):
        idx = torch.randint(0, len(labels), (64,), generator=batches)
        loss = nn.functional.cross_entropy(head(deq(stem(images[idx]))), labels[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
        exact += deq.last_backward.exact
    stats = deq.stats
    return {
        "config": config,
        "forward_evaluations_per_step": stats.forward_evaluations / steps,
        "vjps_per_step": stats.backward_vjps / steps,
        "backward_evaluations_per_step": stats.backward_evaluations / steps,
        "unconverged_forward": stats.unconverged_forward,
        "exact_gradients": exact,
        "steps": steps,
        "final_loss": statistics.fmean(losses[-10:]),
    }


def digits() -> tuple[torch.Tensor, torch.Tensor]:
    from sklearn.datasets import load_digits

    data = load_digits()
    return torch.tensor(data.images, dtype=torch.float32)[:, None] / 16.0, torch.tensor(data.target)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--channels", type=int, default=16, help="a multiple of 4")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.channels < 4 or args.channels % 4:
        parser.error("--steps must be >= 1 and --channels a multiple of 4 (>= 4)")
    torch.set_num_threads(args.threads)
    warnings.simplefilter("ignore")
    rows = [train(name, args.steps, args.channels, args.seed) for name in CONFIGS]
    head = f"{'configuration':<48} {'fwd evals':>9} {'VJPs':>6} {'bwd evals':>9}"
    print(f"{head} {'exact':>7} {'loss':>6}   (per step, in full batches)")
    for row in rows:
        print(
            f"{row['config']:<48} {row['forward_evaluations_per_step']:>9.2f} "
            f"{row['vjps_per_step']:>6.2f} {row['backward_evaluations_per_step']:>9.2f} "
            f"{row['exact_gradients']:>3}/{row['steps']:<3} {row['final_loss']:>6.3f}"
        )
    if args.json:
        with open(args.json, "w") as out:
            json.dump(rows, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

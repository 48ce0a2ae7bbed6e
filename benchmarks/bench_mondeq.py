"""Monotone DEQ: forward + backward by splitting vs the generic implicit path (Anderson).

``MonDEQ`` (thesis Eq. 3.3), width n = 200, d = 20, N = 100 samples as columns, m = 0.5,
float64, tol 1e-8 (relative residual of the DEQ map) for every solve, at most 2000 steps.
One forward solve and one backward pass of ``½‖ŷ − y‖²``; Peaceman–Rachford and
forward-backward solve the adjoint by the same splitting on one factorisation, Anderson by
VJPs (``Implicit``). Two scales of A, B (``σ``): at σ = 1 the map ``relu(W z + Ux)`` is far
from contractive and the generic path may not converge. Reports status, steps, time and
the speed-up over the generic path measured in the same run.

Run: ``python benchmarks/bench_mondeq.py [--device cuda]``. Times are the median of 3.
"""

from __future__ import annotations

import argparse

import torch

from bench_solvers import timed
from deqlab import Anderson, ForwardBackward, MonDEQ, PeacemanRachford

SOLVERS = {
    "Anderson + Implicit": Anderson,
    "Peaceman-Rachford": PeacemanRachford,
    "forward-backward": ForwardBackward,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    device = torch.device(parser.parse_args().device)
    torch.manual_seed(0)
    X = torch.randn(20, 100, dtype=torch.float64, device=device)
    y = torch.randn(100, dtype=torch.float64, device=device)
    for sigma in (0.5, 1.0):
        print(f"\nσ_A = σ_B = {sigma}")
        print(f"{'solver':<22}{'status':>10}{'fwd':>7}{'adj':>7}{'time (s)':>10}{'speed-up':>10}")
        base = None
        for name, cls in SOLVERS.items():
            generator = torch.Generator().manual_seed(1)
            model = MonDEQ(20, 200, m=0.5, solver=cls(tol=1e-8, max_iter=2000, throw=False),
                           sigma_A=sigma, sigma_B=sigma, generator=generator,
                           dtype=torch.float64).to(device)  # fmt: skip

            def step(model=model) -> None:
                model.zero_grad()
                (0.5 * ((model(X) - y) ** 2).sum()).backward()

            step()
            seconds = timed(step, device)
            base = seconds if base is None else base
            forward, backward = model.last_forward, model.last_backward
            print(
                f"{name:<22}{forward.status.value:>10}{forward.n_steps:>7}{backward.n_steps:>7}"
                f"{seconds:>10.4f}{base / seconds:>9.1f}x"
            )


if __name__ == "__main__":
    main()

"""Training a conv DEQ on digits: deqlab against torchdeq 0.1.0, in one process (issue 23, item 7).

Model: stem (3 × 3 conv 1 → C + GroupNorm), cell ``f(z, x) = GroupNorm(relu(conv₃ₓ₃(z) + x))``
(input injection, C = 32 channels), head GroupNorm → linear; sklearn's 8 × 8 digits (1797
images), minibatches of 64, Adam 1e-3, float32. Both libraries solve the same cell with the
same initial weights; only the DEQ layer differs.

Three measurements, the two libraries stepped in turn (round robin, the order reversed every
other step) so that load hits both alike, after one untimed warm-up step of each on a
throwaway model (:func:`warm_up`):

1. **defaults**: each library as a new user gets it (deqlab ``DEQ(cell)``; torchdeq
   ``get_deq()``), trained until the training accuracy (all 1797 images, measured every
   ``--eval-every`` steps outside the timed region) reaches ``--target``: steps and seconds.
2. **matched**: Anderson (history 6, regularisation 1e-4), relative tolerance 1e-3, 30
   iterations, per-sample stopping, exact implicit backward (adjoint by the same Anderson)
   in both: ms per step (median).
3. **peak memory** of three steps of each library alone: CUDA ``max_memory_allocated``, or on
   the CPU the growth of the peak RSS of a fresh process (VmHWM, reset through
   /proc/self/clear_refs, after the data are loaded).

Every step also counts its work: cell evaluations (rows evaluated / batch size, counted by a
wrapper around the cell) and VJPs (rows backpropagated by ``torch.autograd.grad``, which both
libraries use for their backward solves, / batch size), so a speed-up can be traced to fewer
evaluations. Each gradient
is labelled: deqlab from ``last_backward.exact``; torchdeq "approximate" for its default
1-step gradient, "exact" for IFT when its adjoint met the tolerance.

``--deqlab-backward NAME`` gives deqlab another backward in the defaults setting (the solver
stays the default; deqlab's own default is the phantom gradient ``Phantom(3, 0.8)``): ``implicit``
(exact), ``jacobian-free`` or ``phantom:STEPS,DAMPING`` (approximate, labelled so), to count
the steps to the target and the work per step of each; ``--settings defaults`` skips the
matched setting, ``--libraries deqlab`` torchdeq.

    python benchmarks/bench_train_conv_deq.py [--device cuda] [--threads 2] [--json out.json]
    python benchmarks/bench_train_conv_deq.py --libraries deqlab --settings defaults \
        --deqlab-backward phantom:5,0.5
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import statistics
import subprocess
import sys
import warnings

import torch
from torch import nn

import deqlab
from deqlab import DEQ, Anderson, Implicit, JacobianFree, Phantom
from train_cells import COUNT, TrainingRun, batches, digits, training_device

MATCHED = {"history": 6, "tikhonov": 1e-4, "tol": 1e-3, "max_iter": 30}


class Cell(nn.Module):
    """``f(z, x) = GroupNorm(relu(conv(z) + x))``; counts the rows it evaluates."""

    def __init__(self, channels: int, groups: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)
        self.norm = nn.GroupNorm(groups, channels)

    def forward(self, z: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        COUNT.rows += z.shape[0]
        return self.norm(torch.relu(self.conv(z) + x))


class Net(nn.Module):
    """stem → DEQ layer (``solve(cell, x)``) → head."""

    def __init__(self, channels: int, solve, seed: int) -> None:
        super().__init__()
        torch.manual_seed(seed)
        groups = 8 if channels % 8 == 0 else 1
        self.stem = nn.Sequential(
            nn.Conv2d(1, channels, 3, padding=1), nn.GroupNorm(groups, channels)
        )
        self.cell = Cell(channels, groups)
        self.head = nn.Sequential(
            nn.GroupNorm(groups, channels), nn.Flatten(), nn.Linear(channels * 64, 10)
        )
        self.solve = solve(self.cell)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.stem(images)
        return self.head(self.solve(x))


def backward_option(text: str):
    """``--deqlab-backward``: ``default`` (DEQ's default, the phantom gradient ``Phantom(3, 0.8)``:
    None), ``implicit`` (exact, the adjoint started at g), ``jacobian-free``, or
    ``phantom:STEPS,DAMPING`` (approximate)."""
    if text == "default":
        return None
    if text == "implicit":
        return Implicit(init="grad")
    if text == "jacobian-free":
        return JacobianFree()
    name, _, values = text.partition(":")
    if name != "phantom":
        raise argparse.ArgumentTypeError(
            f"unknown backward {text!r}; expected default, implicit, jacobian-free or "
            "phantom:STEPS,DAMPING"
        )
    try:
        steps, damping = values.split(",")
        return Phantom(int(steps), float(damping))
    except ValueError as err:  # not two numbers, or out of range (Phantom's own message)
        raise argparse.ArgumentTypeError(f"bad phantom settings {values!r}: {err}") from err


class DeqlabLayer(nn.Module):
    def __init__(self, cell: Cell, matched: bool, backward=None) -> None:
        super().__init__()
        if matched:
            solver = Anderson(**MATCHED, stop="rel", per_sample=True)
            self.deq = DEQ(cell, solver=solver, backward=Implicit(solver=solver))
        else:  # the defaults, or the defaults with another backward (--deqlab-backward)
            self.deq = DEQ(cell, backward=backward)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.deq(x)

    def label(self) -> str:
        record = self.deq.last_backward
        return "exact" if getattr(record, "exact", False) else "approximate"


class TorchdeqLayer(nn.Module):
    def __init__(self, cell: Cell, matched: bool, backward=None) -> None:
        super().__init__()
        from torchdeq import get_deq

        self.cell, self.matched, self.info = cell, matched, None
        if matched:
            tol, cap = MATCHED["tol"], MATCHED["max_iter"]  # its Anderson: m = 6, lam = 1e-4
            solver = dict(f_solver="anderson", f_max_iter=cap, f_tol=tol, f_stop_mode="rel",
                          b_solver="anderson", b_max_iter=cap, b_tol=tol, b_stop_mode="rel",
                          ift=True)  # fmt: skip
            self.deq = get_deq(**solver)
        else:
            self.deq = get_deq()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z0 = torch.zeros_like(x)
        z_out, _ = self.deq(lambda z: self.cell(z, x), z0, backward_writer=self._write)
        return z_out[-1]

    def _write(self, info: dict) -> None:
        self.info = info

    def label(self) -> str:
        if not self.matched:
            return "approximate"  # torchdeq's default: 1-step gradient (no adjoint solve)
        met = self.info is not None and float(self.info["rel_lowest"].max()) <= MATCHED["tol"]
        return "exact" if met else "approximate"


LAYERS = {"deqlab": DeqlabLayer, "torchdeq": TorchdeqLayer}


@torch.no_grad()
def accuracy(model: Net, images: torch.Tensor, labels: torch.Tensor) -> float:
    model.eval()
    correct = sum(int((model(images[i : i + 512]).argmax(1) == labels[i : i + 512]).sum())
                  for i in range(0, images.shape[0], 512))  # fmt: skip
    model.train()
    return correct / images.shape[0]


def make_runs(names, matched: bool, args, device) -> list[TrainingRun]:
    runs = []
    for name in names:
        backward = backward_option(args.deqlab_backward) if name == "deqlab" else None
        layer = lambda cell, n=name, b=backward: LAYERS[n](cell, matched, b)  # noqa: E731
        model = Net(args.channels, layer, args.seed).to(device)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        runs.append(TrainingRun(name, model, opt, model.solve.label))
    return runs


def turn(runs: list[TrainingRun], step: int) -> list[TrainingRun]:
    """The runs in this step's order: reversed every other step, so neither always goes first."""
    return runs if step % 2 == 0 else runs[::-1]


def warm_up(names, matched: bool, data, args, device, sync) -> None:
    """One untimed step of each library on a throwaway model and the first ``--batch`` images
    of ``data``: lazy initialisation (the CUDA context, kernels, allocator) is then not charged
    to whichever library happens to step first."""
    images, labels = data[0][: args.batch], data[1][: args.batch]
    for run in make_runs(names, matched, args, device):
        run.step(images, labels, sync)


def time_to_target(runs: list[TrainingRun], data, args, sync) -> None:
    """Round robin over the runs still below the target, one minibatch each per turn."""
    stream = batches(*data, args.batch, args.seed)
    for step in range(1, args.max_steps + 1):
        images, labels = next(stream)
        for run in turn(runs, step):
            if run.reached is None:
                run.step(images, labels, sync)
                if step % args.eval_every == 0 and accuracy(run.model, *data) >= args.target:
                    run.reached = step
        if all(run.reached is not None for run in runs):
            return


def per_step(runs: list[TrainingRun], data, args, sync) -> None:
    stream = batches(*data, args.batch, args.seed)
    for step in range(args.matched_steps):
        images, labels = next(stream)
        for run in turn(runs, step):
            run.step(images, labels, sync)


def peak_memory(name: str, matched: bool, data, args, device, sync) -> float:
    """Peak memory growth (MiB) of three steps of one library alone: on CUDA in this process
    (``max_memory_allocated``); on the CPU in a fresh process (:func:`memory_probe`), since
    this one's heap already holds what the earlier phases freed."""
    if device.type != "cuda":
        options = ["--channels", str(args.channels), "--batch", str(args.batch), "--seed",
                   str(args.seed), "--threads", str(args.threads),
                   "--deqlab-backward", args.deqlab_backward]  # fmt: skip
        if args.n_train is not None:
            options += ["--n-train", str(args.n_train)]
        probe = [sys.executable, __file__, *options, "--memory-probe", name, str(int(matched))]
        return float(subprocess.run(probe, capture_output=True, text=True, check=True).stdout)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    _three_steps(name, matched, data, args, device, sync)
    return (torch.cuda.max_memory_allocated(device) - before) / 2**20


def _three_steps(name: str, matched: bool, data, args, device, sync) -> None:
    (run,) = make_runs([name], matched, args, device)
    stream = batches(*data, args.batch, args.seed)
    for _ in range(3):
        run.step(*next(stream), sync)


def memory_probe(name: str, matched: bool, args) -> float:
    """Peak RSS growth (MiB) of three CPU steps after the data are loaded and one step on two
    images has initialised torch's kernels (Linux: VmHWM, reset to the current RSS through
    /proc/self/clear_refs)."""
    data = digits(torch.device("cpu"), args.n_train)
    warm_up([name], matched, (data[0][:2], data[1][:2]), args, torch.device("cpu"), lambda: None)
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")
    before = _status_kib("VmRSS")
    _three_steps(name, matched, data, args, torch.device("cpu"), lambda: None)
    return (_status_kib("VmHWM") - before) / 1024


def _status_kib(key: str) -> int:
    with open("/proc/self/status") as status:
        line = next(row for row in status if row.startswith(key + ":"))
    return int(line.split()[1])


def summary(run: TrainingRun, memory: float | None) -> dict:
    steady = run.wall[1:] or run.wall
    return {
        "library": run.name,
        "steps": len(run.wall),
        "reached_at_step": run.reached,
        "seconds": sum(run.wall),
        "ms_per_step_median": 1e3 * statistics.median(steady),
        "cell_evaluations_per_step": statistics.mean(run.evaluations),
        "vjps_per_step": statistics.mean(run.vjps),
        "gradient": {label: run.labels.count(label) for label in sorted(set(run.labels))},
        "peak_memory_mib": memory,
    }


def print_table(title: str, rows: list[dict]) -> None:
    print(f"\n{title}")
    print(f"  {'library':<9} {'steps':>5} {'reached':>7} {'time s':>8} {'ms/step':>8} "
          f"{'evals':>6} {'VJPs':>6} {'peak MiB':>8}  gradient")  # fmt: skip
    for r in rows:
        memory = "—" if r["peak_memory_mib"] is None else f"{r['peak_memory_mib']:.1f}"
        print(f"  {r['library']:<9} {r['steps']:>5} {r['reached_at_step'] or '—':>7} "
              f"{r['seconds']:>8.2f} {r['ms_per_step_median']:>8.1f} "
              f"{r['cell_evaluations_per_step']:>6.1f} {r['vjps_per_step']:>6.1f} {memory:>8}  "
              f"{r['gradient']}")  # fmt: skip
    if len(rows) == 2:
        a, b = rows
        print(f"  torchdeq/deqlab: time {b['seconds'] / a['seconds']:.2f}, ms/step "
              f"{b['ms_per_step_median'] / a['ms_per_step_median']:.2f}, evals "
              f"{b['cell_evaluations_per_step'] / a['cell_evaluations_per_step']:.2f}")  # fmt: skip


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--channels", type=int, default=32)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--n-train", type=int, default=None, help="first N digits (all: 1797)")
    parser.add_argument("--target", type=float, default=0.97)
    parser.add_argument("--max-steps", type=int, default=300)
    parser.add_argument("--eval-every", type=int, default=5)
    parser.add_argument("--matched-steps", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--libraries", nargs="+", default=["deqlab", "torchdeq"], choices=list(LAYERS)
    )
    parser.add_argument(
        "--deqlab-backward",
        default="default",
        metavar="NAME",
        help="deqlab's backward in the defaults setting: default (DEQ's own, Phantom(3, 0.8)), "
        "implicit (exact), jacobian-free or phantom:STEPS,DAMPING (e.g. phantom:3,0.8)",
    )
    parser.add_argument(
        "--settings", nargs="+", default=["defaults", "matched"], choices=["defaults", "matched"]
    )
    parser.add_argument("--no-memory", action="store_true")
    parser.add_argument("--json", default=None, help="also write the results here")
    parser.add_argument("--memory-probe", nargs=2, metavar=("LIBRARY", "MATCHED"),
                        help="(internal) print the peak RSS growth of 3 CPU steps")  # fmt: skip
    args = parser.parse_args(argv)
    try:
        backward_option(args.deqlab_backward)
    except argparse.ArgumentTypeError as err:
        parser.error(f"--deqlab-backward: {err}")
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    device = training_device(args.device, args.threads)
    if args.memory_probe:
        name, matched = args.memory_probe
        print(memory_probe(name, matched == "1", args))
        return {}
    if "torchdeq" in args.libraries and importlib.util.find_spec("torchdeq") is None:
        print("torchdeq is not installed (pip install torchdeq==0.1.0, the `bench` extra): "
              "deqlab alone", file=sys.stderr)  # fmt: skip
        args.libraries = [name for name in args.libraries if name != "torchdeq"]
    # an unconverged solve is counted in the gradient labels; the warning would repeat it
    warnings.simplefilter("ignore", deqlab.ConvergenceWarning)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    data = digits(device, args.n_train)
    print(f"deqlab {deqlab.__version__}, torch {torch.__version__}, device {device}, "
          f"threads {args.threads}, {data[0].shape[0]} digits, batch {args.batch}")  # fmt: skip
    results = {}
    if args.deqlab_backward != "default":
        print(f"deqlab backward in the defaults setting: {args.deqlab_backward}")
    for setting in args.settings:
        matched = setting == "matched"
        warm_up(args.libraries, matched, data, args, device, sync)
        runs = make_runs(args.libraries, matched, args, device)
        (time_to_target if not matched else per_step)(runs, data, args, sync)
        memory = {name: None for name in args.libraries}
        if not args.no_memory:
            memory = {
                name: peak_memory(name, matched, data, args, device, sync)
                for name in args.libraries
            }
        results[setting] = [summary(run, memory[run.name]) for run in runs]
        print_table(setting, results[setting])
    if args.json:
        with open(args.json, "w") as out:
            json.dump(results, out, indent=2)
    return results


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()

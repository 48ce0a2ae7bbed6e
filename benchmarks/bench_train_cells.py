"""Training five kinds of DEQ cell on digits: deqlab's defaults against torchdeq 0.1.0's (issue 31).

A torchdeq user's own cells (:mod:`train_cells`: tanh MLP, conv + GroupNorm, a tuple state, a
two-resolution multi-scale cell, a transformer block with ``nn.MultiheadAttention``) on
sklearn's 8 × 8 digits, minibatches of 64, Adam 1e-3, float32, each library on its defaults
(deqlab ``DEQ(cell)``; torchdeq ``get_deq()``), the same initial weights and minibatches,
stepped in turn in one process (the order reversed every other step) so that load hits both
alike, for each of ``--seeds``.

Per library, kind and seed:

* **time to target**: training steps until the accuracy on ``--eval-images`` fixed training
  images (measured every ``--eval-every`` steps, outside the timed region) reaches
  ``--target``, at most ``--max-steps``; the CPU time of the thread (``time.thread_time``,
  with ``--threads`` = 1 intra-op thread all torch work runs in it) and the wall time of
  those steps. CPU time is the measure on a shared machine: other processes do not add to it.
* **work per step**: cell evaluations (rows the cell evaluated / batch size) and VJPs (rows
  backpropagated by ``torch.autograd.grad``, through which both libraries take their
  adjoint steps, / batch size); the final backward through the one tracked evaluation is
  the same in both and not counted.
* **gradient accuracy**: the cosine between the library's gradient and the exact implicit
  gradient (float64, per-sample Anderson: forward to a relative residual 1e-10, adjoint to
  1e-8), over the parameters upstream of the fixed point (stem and cell: the head's gradient
  does not go through the backward), at initialisation and at the end of training, on those
  of ``--grad-images`` fixed training images whose float64 forward solve converges (where the
  implicit gradient exists; the count is in the JSON rows); and the ``exact`` labels. Where
  each run ends depends on its trajectory (at its own trained weights a cosine varies with
  the seed far more than between the libraries), so the end is also compared at the same
  weights: ``cos same`` is the library's cosine averaged over every run's trained weights of
  that kind and seed (its own and the others'; weights without an exact gradient left out).
  The set of weights is that invocation's runs: compare ``cos same`` within one table.

``--baseline-src DIR`` adds ``before``: the deqlab package under DIR (another commit's
``src``), imported in the same process (its defaults), for an A/B of two versions.
``--variant BACKWARD@SOLVER`` runs deqlab variants beside its defaults (the labels say which),
to choose a default by time to target and accuracy.

    OMP_NUM_THREADS=1 python benchmarks/bench_train_cells.py --json cells.json
    python benchmarks/bench_train_cells.py --kinds conv --seeds 0 \
        --variant phantom:2,1 "phantom:2,1@anderson:tol=1e-2,max_iter=40,per_sample=True"
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import json
import math
import statistics
import sys
import warnings

import torch
from torch import nn

import deqlab
from beside import load_deqlab
from deqlab import Anderson, Implicit, JacobianFree, Phantom, fixed_point, get_solver
from train_cells import (
    KINDS,
    Net,
    TrainingRun,
    batches,
    digits,
    training_device,
    with_weights,
)


def backward_spec(text: str):
    """``implicit`` (exact, adjoint started at g), ``jacobian-free``, ``phantom:STEPS,DAMPING``."""
    if text == "implicit":
        return Implicit(init="grad")
    if text == "jacobian-free":
        return JacobianFree()
    name, _, values = text.partition(":")
    if name == "phantom":
        try:
            steps, damping = values.split(",")
            return Phantom(int(steps), float(damping))
        except ValueError as err:
            raise argparse.ArgumentTypeError(f"bad phantom settings {values!r}: {err}") from err
    raise argparse.ArgumentTypeError(
        f"unknown backward {text!r}; expected implicit, jacobian-free or phantom:STEPS,DAMPING"
    )


def solver_spec(text: str):
    """``NAME:KEY=VALUE,...``, e.g. ``anderson:tol=1e-3,max_iter=40,per_sample=True``."""
    name, _, options = text.partition(":")
    try:
        pairs = [item.split("=", 1) for item in options.split(",") if item]
        return get_solver(name, **{k: ast.literal_eval(v) for k, v in pairs})
    except (ValueError, TypeError, SyntaxError) as err:
        raise argparse.ArgumentTypeError(f"bad solver {text!r}: {err}") from err


def variant_spec(text: str):
    """``BACKWARD@SOLVER[@KEY=VALUE,...]`` (an empty part keeps the default; the last part:
    other ``DEQ`` options, e.g. ``row_compaction=False``): a deqlab variant."""
    backward, _, rest = text.partition("@")
    solver, _, options = rest.partition("@")
    try:
        pairs = [item.split("=", 1) for item in options.split(",") if item]
        extra = {k: ast.literal_eval(v) for k, v in pairs}
    except (ValueError, SyntaxError) as err:
        raise argparse.ArgumentTypeError(f"bad DEQ options {options!r}: {err}") from err
    return {
        "solver": solver_spec(solver) if solver else None,
        "backward": backward_spec(backward) if backward else None,
        **extra,
    }


def _call(cell, x, z):
    return tuple(cell(tuple(z), x)) if isinstance(z, tuple | list) else cell(z, x)


class DeqlabLayer(nn.Module):
    def __init__(self, cell, package=deqlab, **options) -> None:
        super().__init__()
        self.deq = package.DEQ(cell, **options)

    def forward(self, x):
        return self.deq(x)

    def label(self) -> str:
        return "exact" if getattr(self.deq.last_backward, "exact", False) else "approximate"


class TorchdeqLayer(nn.Module):
    def __init__(self, cell) -> None:
        super().__init__()
        from torchdeq import get_deq

        self.cell, self.deq = cell, get_deq()

    def forward(self, x):
        init = getattr(self.cell, "initial_state", None)
        z0 = init(x) if init is not None else torch.zeros_like(x)
        if isinstance(z0, tuple):
            z_out, _ = self.deq(lambda *z: _call(self.cell, x, z), list(z0))
            return tuple(z_out[-1])
        z_out, _ = self.deq(lambda z: self.cell(z, x), z0)
        return z_out[-1]

    def label(self) -> str:
        return "approximate"  # its default 1-step gradient is never the implicit gradient


class ExactLayer(nn.Module):
    """The exact implicit gradient's reference: float64, per-sample Anderson solves of the
    forward to a relative residual 1e-10 (at most 300 steps) and of the adjoint to 1e-8 (at
    most 1000: its rate is the forward's, and 1e-8 is far below the cosines' resolution)."""

    SOLVER = Anderson(tol=1e-10, max_iter=300, per_sample=True, throw=False)
    ADJOINT = Anderson(tol=1e-8, max_iter=1000, per_sample=True, throw=False)

    def __init__(self, cell) -> None:
        super().__init__()
        self.cell = cell
        self.stats = deqlab.FixedPointStats()

    def forward(self, x):
        init = getattr(self.cell, "initial_state", None)
        z0 = init(x) if init is not None else torch.zeros_like(x)
        backward = Implicit(solver=self.ADJOINT, init="grad")
        self.stats = deqlab.FixedPointStats()
        return fixed_point(lambda z: _call(self.cell, x, z), z0, solver=self.SOLVER,
                           backward=backward, stats=self.stats, on_failure="record")  # fmt: skip


@torch.no_grad()
def accuracy(model: Net, images, labels) -> float:
    model.eval()
    correct = int((model(images).argmax(1) == labels).sum())
    model.train()
    return correct / images.shape[0]


def upstream_grad(model: Net) -> torch.Tensor:
    """The gradient of the stem's and the cell's parameters, flattened (float64)."""
    params = [*model.stem.parameters(), *model.cell.parameters()]
    return torch.cat([p.grad.reshape(-1).double() for p in params])


def exact_gradient(model: Net, kind: str, images, labels):
    """The exact implicit gradient at ``model``'s weights (stem and cell parameters, float64),
    with the images it is taken on: those whose float64 forward solve converges (where the
    implicit gradient exists). None where no image qualifies or an adjoint does not converge."""
    reference = with_weights(kind, ExactLayer, model).double()
    with torch.no_grad():
        reference(images.double())
    keep = reference.layer.stats.forward.sample_residuals <= ExactLayer.SOLVER.tol
    images, labels = images[keep], labels[keep]
    if not len(images):
        return None, images, labels
    reference.zero_grad()
    nn.functional.cross_entropy(reference(images.double()), labels).backward()
    if reference.layer.stats.unconverged_backward or reference.layer.stats.unconverged_forward:
        return None, images, labels
    return upstream_grad(reference), images, labels


def gradient_cosine(model: Net, kind: str, images, labels) -> tuple[float, int]:
    """Cosine of ``model``'s gradient (its own layer, training mode) with the exact gradient at
    the same weights, and the number of images it is taken on (:func:`exact_gradient`); NaN
    where there is no exact gradient."""
    exact, images, labels = exact_gradient(model, kind, images, labels)
    return _cosine(model, exact, images, labels), len(images)


def _cosine(model: Net, exact, images, labels) -> float:
    if exact is None:
        return math.nan
    model.zero_grad()
    nn.functional.cross_entropy(model(images), labels).backward()
    ours = upstream_grad(model)
    return float(ours @ exact / (ours.norm() * exact.norm()))


def end_cosines(runs: list[TrainingRun], layers: dict, kind: str, images, labels) -> dict:
    """``{(weights, library): (cosine, images)}``: each library's cosine with the exact gradient
    at *every* run's trained weights, its own and the others' (a comparison at the same
    weights, free of where each training run happened to end)."""
    cosines = {}
    for trained in runs:
        exact, kept, kept_labels = exact_gradient(trained.model, kind, images, labels)
        for name, layer in layers.items():
            model = with_weights(kind, layer, trained.model)
            cosines[trained.name, name] = (_cosine(model, exact, kept, kept_labels), len(kept))
    return cosines


def library_layers(args) -> dict:
    """The layer of each library (or variant) being compared, by name."""
    layers = {}
    if "deqlab" in args.libraries:
        layers["deqlab"] = DeqlabLayer
    if "torchdeq" in args.libraries:
        layers["torchdeq"] = TorchdeqLayer
    if args.baseline is not None:
        layers["before"] = lambda cell: DeqlabLayer(cell, package=args.baseline)
    for text in args.variant:
        options = variant_spec(text)
        layers[f"deqlab[{text}]"] = lambda cell, o=options: DeqlabLayer(cell, **o)
    return layers


def make_runs(kind: str, seed: int, args, device) -> list[TrainingRun]:
    runs = []
    for name, layer in library_layers(args).items():
        model = Net(kind, layer, seed).to(device)
        opt = torch.optim.Adam(model.parameters(), lr=args.lr)
        runs.append(TrainingRun(name, model, opt, model.layer.label))
    return runs


def train(runs: list[TrainingRun], data, probe, args, sync) -> None:
    """Round robin until every run reached the target or ``--max-steps``."""
    stream = batches(*data, args.batch, args.seed_offset)
    for step in range(1, args.max_steps + 1):
        images, labels = next(stream)
        for run in runs if step % 2 else runs[::-1]:
            if run.reached is None:
                run.step(images, labels, sync)
                if step % args.eval_every == 0 and accuracy(run.model, *probe) >= args.target:
                    run.reached = step
        if all(run.reached is not None for run in runs):
            return


def measure(kind: str, seed: int, data, args, device, sync) -> list[dict]:
    gen = torch.Generator().manual_seed(1000 + seed)
    order = torch.randperm(data[0].shape[0], generator=gen).to(device)
    probe = tuple(t[order[: args.eval_images]] for t in data)
    grad_batch = tuple(t[order[: args.grad_images]] for t in data)
    for run in make_runs(kind, seed, args, device):  # warm-up: lazy initialisation untimed
        run.step(*(t[: args.batch] for t in data), sync)
    runs = make_runs(kind, seed, args, device)
    cosine = (lambda *_: (math.nan, 0)) if args.no_cosine else gradient_cosine
    at_init = [cosine(run.model, kind, *grad_batch) for run in runs]
    train(runs, data, probe, args, sync)
    layers = library_layers(args)
    at_end = {} if args.no_cosine else end_cosines(runs, layers, kind, *grad_batch)
    rows = []
    for run, (cosine_init, images_init) in zip(runs, at_init, strict=True):
        cosine_end, images_end = at_end.get((run.name, run.name), (math.nan, 0))
        paired = [at_end[weights.name, run.name][0] for weights in runs if at_end]
        paired = [c for c in paired if not math.isnan(c)]  # weights without an exact gradient
        n = run.reached or len(run.cpu)
        rows.append({
            "kind": kind, "seed": seed, "library": run.name, "reached_at_step": run.reached,
            "steps": len(run.cpu), "cpu_seconds": sum(run.cpu[:n]),
            "wall_seconds": sum(run.wall[:n]),
            "cpu_ms_per_step": 1e3 * statistics.median(run.cpu),
            "cell_evaluations_per_step": statistics.mean(run.evaluations),
            "vjps_per_step": statistics.mean(run.vjps),
            "exact_gradients": run.labels.count("exact"),
            "cosine_init": cosine_init, "cosine_end": cosine_end,
            "cosine_end_paired": statistics.mean(paired) if paired else math.nan,
            "cosine_images": [images_init, images_end],
        })  # fmt: skip
    return rows


def progress(row: dict) -> str:
    """One library's result on one kind and seed, for the progress lines."""
    return (
        f"{row['library']} {row['reached_at_step'] or '—'} steps {row['cpu_seconds']:.2f} s "
        f"cos {row['cosine_init']:.3f}/{row['cosine_end']:.3f}/{row['cosine_end_paired']:.3f}"
    )


def summarise(rows: list[dict]) -> list[dict]:
    """Mean over seeds per kind and library; time to target is None unless every seed got there."""
    out = []
    for kind in dict.fromkeys(r["kind"] for r in rows):
        for library in dict.fromkeys(r["library"] for r in rows):
            group = [r for r in rows if r["kind"] == kind and r["library"] == library]
            reached = all(r["reached_at_step"] is not None for r in group)
            mean = lambda key, group=group: statistics.mean(r[key] for r in group)  # noqa: E731
            out.append({
                "kind": kind, "library": library, "seeds": len(group), "all_reached": reached,
                "steps_to_target": mean("steps") if reached else None,
                "cpu_seconds": mean("cpu_seconds") if reached else None,
                "wall_seconds": mean("wall_seconds") if reached else None,
                "cpu_seconds_all_steps": mean("cpu_seconds"),
                **{k: mean(k) for k in ("cpu_ms_per_step", "cell_evaluations_per_step",
                                         "vjps_per_step", "cosine_init", "cosine_end",
                                         "cosine_end_paired")},
            })  # fmt: skip
    return out


def _fmt(value, spec: str) -> str:
    """``value`` formatted, or a dash of the same width where there is none."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—".rjust(int(spec.split(".")[0]))
    return format(value, spec)


def print_table(summary: list[dict]) -> None:
    print(f"\n{'kind':<12} {'library':<28} {'steps':>6} {'CPU s':>7} {'wall s':>7} "
          f"{'ms/step':>8} {'evals':>6} {'VJPs':>5} {'cos init':>8} {'cos end':>8} "
          f"{'cos same':>8} {'td/this':>7}")  # fmt: skip
    for row in summary:
        torchdeq = next((r for r in summary if r["kind"] == row["kind"]
                         and r["library"] == "torchdeq"), None)  # fmt: skip
        ratio = None
        if torchdeq is not None and row["cpu_seconds"] is not None:
            reference = torchdeq["cpu_seconds"] or torchdeq["cpu_seconds_all_steps"]
            ratio = reference / row["cpu_seconds"]
        mark = "" if torchdeq is None or torchdeq["all_reached"] else ">"
        print(f"{row['kind']:<12} {row['library']:<28} {_fmt(row['steps_to_target'], '6.1f')} "
              f"{_fmt(row['cpu_seconds'], '7.2f')} {_fmt(row['wall_seconds'], '7.2f')} "
              f"{row['cpu_ms_per_step']:>8.1f} {row['cell_evaluations_per_step']:>6.1f} "
              f"{row['vjps_per_step']:>5.1f} {_fmt(row['cosine_init'], '8.3f')} "
              f"{_fmt(row['cosine_end'], '8.3f')} {_fmt(row['cosine_end_paired'], '8.3f')} "
              f"{mark}{_fmt(ratio, '6.2f'):>6}")  # fmt: skip


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--target", type=float, default=0.9)
    parser.add_argument("--max-steps", type=int, default=200)
    parser.add_argument("--eval-every", type=int, default=5)
    parser.add_argument("--eval-images", type=int, default=512)
    parser.add_argument("--grad-images", type=int, default=128)
    parser.add_argument("--libraries", nargs="+", default=["deqlab", "torchdeq"],
                        choices=["deqlab", "torchdeq"])  # fmt: skip
    parser.add_argument("--baseline-src", default=None, help="another tree's src/ as 'before'")
    parser.add_argument(
        "--variant",
        nargs="*",
        default=[],
        metavar="BACKWARD@SOLVER",
        help="deqlab variants: BACKWARD is implicit, jacobian-free or phantom:STEPS,DAMPING; "
        "SOLVER e.g. anderson:tol=1e-3,max_iter=40; an empty part keeps the default",
    )
    parser.add_argument("--no-cosine", action="store_true", help="skip the gradient cosines")
    parser.add_argument("--json", default=None, help="also write every row here")
    args = parser.parse_args(argv)
    for name in ("threads", "batch", "max_steps", "eval_every", "eval_images", "grad_images"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1; got {getattr(args, name)}")
    try:
        for text in args.variant:
            variant_spec(text)
    except argparse.ArgumentTypeError as err:
        parser.error(str(err))
    args.seed_offset = 0
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    device = training_device(args.device, args.threads)
    if "torchdeq" in args.libraries and importlib.util.find_spec("torchdeq") is None:
        print("torchdeq is not installed (pip install torchdeq==0.1.0): deqlab alone",
              file=sys.stderr)  # fmt: skip
        args.libraries = [name for name in args.libraries if name != "torchdeq"]
    args.baseline = None if args.baseline_src is None else load_deqlab(args.baseline_src)
    warnings.simplefilter("ignore", deqlab.ConvergenceWarning)  # counted in the labels
    if args.baseline is not None:
        warnings.simplefilter("ignore", args.baseline.ConvergenceWarning)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    data = digits(device)
    print(f"deqlab {deqlab.__version__}, torch {torch.__version__}, device {device}, threads "
          f"{args.threads}, target {args.target} on {args.eval_images} training images, at "
          f"most {args.max_steps} steps, seeds {args.seeds}")  # fmt: skip
    rows = []
    for kind in args.kinds:
        for seed in args.seeds:
            rows += measure(kind, seed, data, args, device, sync)
            done = [r for r in rows if r["kind"] == kind and r["seed"] == seed]
            print(f"  {kind} seed {seed}: " + "; ".join(progress(r) for r in done), flush=True)
    summary = summarise(rows)
    print_table(summary)
    results = {"rows": rows, "summary": summary, "device": str(device)}
    if args.json:
        with open(args.json, "w") as out:
            json.dump(results, out, indent=2)
    return results


if __name__ == "__main__":
    sys.exit(0 if main() else 1)

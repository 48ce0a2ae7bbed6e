"""What sets a gradient's accuracy at trained weights: forward solve or backward (issue 31).

Trains one cell of :mod:`train_cells` with one deqlab configuration (``--train``, default
deqlab's defaults) for ``--steps`` steps on digits (minibatches of 64, Adam 1e-3, float32),
then, at those weights (``--seed`` sets the initial weights; the minibatches are those of
bench_train_cells.py, the same for every seed), takes the cosine of each configuration's
gradient (``--variant``, as in bench_train_cells.py: ``BACKWARD@SOLVER``; an empty part
keeps the default) and of torchdeq 0.1.0's default with the exact implicit gradient
(bench_train_cells.py's ``exact_gradient``: float64, on the fixed images whose float64 solve
converges).

    OMP_NUM_THREADS=1 python benchmarks/bench_gradient_at_weights.py --kind tuple --seed 1 \\
        --steps 80 --train "@anderson:tol=1e-3,max_iter=20,per_sample=True,stall_window=8" \\
        --variant "@anderson:tol=1e-3,max_iter=20,per_sample=True,stall_window=8" \\
        "@anderson:tol=1e-3,max_iter=30,per_sample=True,stall_window=8" \\
        "@anderson:tol=1e-5,max_iter=100,per_sample=True"
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import warnings

import torch

import deqlab
from bench_train_cells import DeqlabLayer, TorchdeqLayer, _cosine, exact_gradient, variant_spec
from train_cells import KINDS, Net, batches, digits, with_weights


def trained(kind: str, seed: int, steps: int, options: dict) -> Net:
    """``kind``'s network trained ``steps`` steps with ``DEQ(cell, **options)``."""
    model = Net(kind, lambda cell: DeqlabLayer(cell, **options), seed)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    stream = batches(*digits(torch.device("cpu")), 64, 0)  # bench_train_cells' minibatches
    for _ in range(steps):
        images, labels = next(stream)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(images), labels).backward()
        opt.step()
    return model


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", default="mlp", choices=KINDS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=70, help="training steps (>= 0)")
    parser.add_argument("--train", default="@", metavar="BACKWARD@SOLVER")
    parser.add_argument("--variant", nargs="*", default=[""], metavar="BACKWARD@SOLVER")
    parser.add_argument("--grad-images", type=int, default=128)
    parser.add_argument("--json", default=None, help="also write the cosines here")
    args = parser.parse_args(argv)
    if args.steps < 0 or args.grad_images < 1:
        parser.error("--steps must be >= 0 and --grad-images >= 1")
    try:
        train, variants = variant_spec(args.train), {t: variant_spec(t) for t in args.variant}
    except argparse.ArgumentTypeError as err:
        parser.error(str(err))
    torch.set_num_threads(1)
    warnings.simplefilter("ignore", deqlab.ConvergenceWarning)
    weights = trained(args.kind, args.seed, args.steps, train)
    images, labels = digits(torch.device("cpu"))
    generator = torch.Generator().manual_seed(1000 + args.seed)  # bench_train_cells' images
    order = torch.randperm(images.shape[0], generator=generator)
    chosen = order[: args.grad_images]
    exact, kept, kept_labels = exact_gradient(weights, args.kind, images[chosen], labels[chosen])
    print(f"{args.kind} seed {args.seed}, {args.steps} steps with {args.train!r}: "
          f"{len(kept)} of {args.grad_images} images")  # fmt: skip
    layers = {
        text or "defaults": lambda cell, o=options: DeqlabLayer(cell, **o)
        for text, options in variants.items()
    }
    if importlib.util.find_spec("torchdeq") is not None:
        layers["torchdeq"] = TorchdeqLayer
    cosines = {}
    for name, layer in layers.items():
        model = with_weights(args.kind, layer, weights)
        cosines[name] = _cosine(model, exact, kept, kept_labels)
        print(f"  {name:<60} cos {cosines[name]:.3f}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"images": len(kept), "cosines": cosines}, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

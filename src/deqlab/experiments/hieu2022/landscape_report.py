"""Claims and figures of ``hieu2022-landscape``, computed from its tidy rows.

Claims (thesis, Section 4.2.1, Figure 4.4): the flat area ``{L ≤ L(θ*) + flat_delta}``
grows with the number of repetitions of the weight-tied networks, and the DEQ's is at
least that of the deepest one. Figure ``landscapes``: one contour plot per model.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import torch

from deqlab.experiments.base import Claim, Row
from deqlab.landscape import LossSurface


def surfaces(rows: list[Row]) -> dict[str, LossSurface]:
    """The surface of each model, rebuilt from its (alpha, beta, loss) rows."""
    out: dict[str, LossSurface] = {}
    models = dict.fromkeys(str(r["model"]) for r in rows if r.get("alpha") is not None)
    for model in models:
        points = [r for r in rows if r["model"] == model and r.get("alpha") is not None]
        alphas = sorted({float(r["alpha"]) for r in points})
        losses = torch.empty(len(alphas), len(alphas), dtype=torch.float64)
        index = {a: i for i, a in enumerate(alphas)}
        for r in points:
            losses[index[float(r["alpha"])], index[float(r["beta"])]] = float(r["loss"])
        grid = torch.tensor(alphas, dtype=torch.float64)
        out[model] = LossSurface(grid, grid.clone(), losses, ({}, {}))
    return out


def flat_areas(rows: list[Row], delta: float) -> dict[str, float]:
    """Area of ``{L ≤ L(θ*) + delta}`` per model (θ* is the grid centre)."""
    areas = {}
    for model, surface in surfaces(rows).items():
        centre = len(surface.alphas) // 2
        areas[model] = surface.flat_area(float(surface.losses[centre, centre]) + delta)
    return areas


def landscape_claims(config, rows: list[Row]) -> list[Claim]:
    """The named checks of the module docstring."""
    areas = flat_areas(rows, config.flat_delta)
    tied = [f"repeat{k}" for k in config.repeats]
    measured = ", ".join(f"{m}: {a:.3g}" for m, a in areas.items())
    return [
        Claim(
            "the flat area grows with the number of repetitions (weight-tied nets)",
            all(areas[b] > areas[a] for a, b in itertools.pairwise(tied)),
            measured,
            f"strictly increasing over {', '.join(tied)}",
            f"area of {{L ≤ L(θ*) + {config.flat_delta:g}}} on the [−1, 1]² grid",
        ),
        Claim(
            "the DEQ's flat area is at least that of the deepest weight-tied net",
            areas["deq"] >= areas[tied[-1]],
            measured,
            f"deq >= {tied[-1]}",
        ),
    ]


def plot_landscapes(rows: list[Row], directory: Path) -> list[Path]:
    """Contour plots of every model's surface, side by side."""
    import matplotlib.pyplot as plt

    from deqlab.report import figure_style, save_figure

    found = surfaces(rows)
    with figure_style():
        fig, axes = plt.subplots(1, len(found), figsize=(3.8 * len(found), 3.5), squeeze=False)
        for ax, (model, surface) in zip(axes[0], found.items(), strict=True):
            a, b = surface.alphas.numpy(), surface.betas.numpy()
            contour = ax.contour(a, b, surface.losses.T.numpy(), levels=15)
            ax.clabel(contour, fontsize=6)
            ax.plot([0], [0], marker="*", color="k")
            ax.set(title=model, xlabel=r"$\alpha$ (direction 1)", ylabel=r"$\beta$ (direction 2)")
        return save_figure(fig, directory, "landscapes")

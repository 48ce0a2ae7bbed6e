"""``hieu2022-landscape``: the surfaces of the tidy rows as the claims take them
(:func:`surfaces`), the reasons the areas cannot be compared, the statements
(:func:`deqlab.papers.hieu2022.landscapes.neighbourhood_grows` and
:func:`~deqlab.papers.hieu2022.landscapes.deq_largest`) and the figure.

Both observations are NOT MEASURED when a model's area is saturated (the whole grid, or
only its centre: the grid or ``flat_delta`` cannot tell the models apart) or when the models
are not trained (:func:`deqlab.papers.hieu2022.claims.untrained`): the thesis plots
surfaces around minimisers. The second is also NOT MEASURED when the DEQ's forward solves
stop at ``max_iter`` on the grid (ours: the loss is then that of the ``max_iter``-th
iterate, not of the equilibrium). Figure ``landscapes``: one contour plot per model.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import torch

from deqlab.experiments.base import Row
from deqlab.landscape import LossSurface
from deqlab.papers.hieu2022.claims import untrained
from deqlab.papers.hieu2022.landscapes import (
    deq_largest,
    flat_areas,
    level,
    neighbourhood_grows,
    saturated,
)
from deqlab.statements import Statement

if TYPE_CHECKING:
    from deqlab.experiments.hieu2022.landscape import LandscapeConfig


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


def unconverged(rows: list[Row], max_iter: int) -> str:
    """Why the DEQ's surface is not the equilibrium's: the share of grid points whose forward
    solve used all ``max_iter`` evaluations of ``f`` (``""`` when none or not recorded)."""
    surface = [r for r in rows if r["model"] == "deq" and r.get("alpha") is not None]
    steps = [int(r["solver_steps"]) for r in surface if r.get("solver_steps") is not None]
    capped = sum(s >= max_iter for s in steps)
    if not capped:
        return ""
    return (
        f"deq: the forward solve used all max_iter = {max_iter} evaluations at {capped} of "
        f"{len(steps)} grid points (the surface of an unconverged iterate, not of z*)"
    )


def final_accuracy(rows: list[Row], model: str) -> float | None:
    """The training accuracy of ``model``'s last epoch (None without training rows)."""
    found = [r for r in rows if r["model"] == model and r.get("train_acc") is not None]
    return float(max(found, key=lambda r: int(r["epoch"]))["train_acc"]) if found else None


def statements(config: LandscapeConfig, rows: list[Row]) -> list[Statement]:
    """The two observations of the module docstring."""
    tied = [f"repeat{k}" for k in config.repeats]
    found = surfaces(rows)
    areas = flat_areas(found, config.flat_delta)
    missing = [m for m in ("deq", *tied) if m not in areas]
    reasons = (
        f"no surface for {', '.join(missing)}" if missing else "",
        untrained({m: final_accuracy(rows, m) for m in ("deq", *tied)}),
        saturated(found, config.flat_delta),
    )
    deq_only = unconverged(rows, config.max_iter)  # the repeat-k comparison does not use it
    setting = f"area of {{L ≤ L(θ*) + {config.flat_delta:g}}} on the {config.grid}² grid"
    return [
        neighbourhood_grows(areas, tied, "; ".join(r for r in reasons if r), setting=setting),
        deq_largest(areas, tied, "; ".join(r for r in (*reasons, deq_only) if r), setting=setting),
    ]


def plot(config: LandscapeConfig, rows: list[Row], directory: Path) -> list[Path]:
    """Contour plots of every model's surface, side by side."""
    import matplotlib.pyplot as plt

    from deqlab.report import figure_style, save_figure

    found = surfaces(rows)
    with figure_style():
        fig, axes = plt.subplots(1, len(found), figsize=(3.8 * len(found), 4.0), squeeze=False)
        for ax, (model, surface) in zip(axes[0], found.items(), strict=True):
            a, b, z = surface.alphas.numpy(), surface.betas.numpy(), surface.losses.T.numpy()
            contour = ax.contour(a, b, z, levels=15, linewidths=0.8)
            ax.clabel(contour, fontsize=6)
            flat = level(surface, config.flat_delta)
            if z.min() < flat < z.max():  # else the set is the whole grid or just θ*
                ax.contour(a, b, z, levels=[flat], colors="k", linewidths=2.0)
            ax.plot([0], [0], marker="*", color="k", linestyle="")
            area = surface.flat_area(flat)
            ax.set(
                title=f"{model} (area {area:.3g})",
                xlabel=r"$\alpha$ (direction 1)",
                ylabel=r"$\beta$ (direction 2)",
            )
        fig.suptitle(
            f"{config.dataset}, {config.n_train} training images, {config.epochs} epoch(s) "
            f"(Adam lr {config.lr:g}); loss on {config.n_eval} of them, {config.grid}×"
            f"{config.grid} grid; thick: L(θ*) + {config.flat_delta:g}",
            fontsize=10,
        )
        return save_figure(fig, directory, "landscapes")

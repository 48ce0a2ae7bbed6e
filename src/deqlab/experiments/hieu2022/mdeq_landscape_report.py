"""``hieu2022-landscape-mdeq``: the surface of its tidy rows and the statements
(:func:`deqlab.papers.hieu2022.landscapes.one_minimum`,
:func:`~deqlab.papers.hieu2022.landscapes.flat_minimum`, ours on the solve), and the figure.

The thesis's observation on Figure 3.1 (Section 3.1; the same plot is Figure 4.5), quoted
with its location, measured on the grid surface ``Φ(α, β)``:

- "only one minima": the number of local minima of the grid (points no higher than any of
  their 8 neighbours) is at most 1;
- "this minima is flat": the small-loss set ``{Φ ≤ Φ(0, 0) + flat_delta}`` covers at least
  ``flat_fraction`` of the grid (both numbers are ours: the thesis reads a plot).

Both are NOT MEASURED without a surface, when the model is not trained
(:func:`deqlab.papers.hieu2022.claims.untrained`: the thesis plots the surface of
a trained MDEQ), when the equilibrium at θ* is not solved to the solver's tolerance, or
when a solve on the grid used all ``max_iter`` iterations (then the surface is that of a
truncated solver, not of the DEQ; as for the conv-DEQ's landscape). Ours: the equilibrium
at θ* is solved on the evaluation images; its measured value is the residual after the
last epoch, shown beside the one at initialisation (the residual rows trace it over
training, and the figure plots it).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from deqlab.experiments.base import Row
from deqlab.experiments.hieu2022.landscape_report import final_accuracy, surfaces
from deqlab.papers.hieu2022.claims import untrained
from deqlab.papers.hieu2022.landscapes import (
    equilibrium_solved,
    flat_minimum,
    level,
    local_minima,
    one_minimum,
)
from deqlab.statements import Run, Statement, Verdict

if TYPE_CHECKING:
    from deqlab.experiments.hieu2022.mdeq_landscape import MDEQLandscapeConfig

MODEL = "mdeq"


def residuals(rows: list[Row]) -> dict[int, float]:
    """The relative residual on the evaluation images after each epoch (0: at init)."""
    return {int(r["epoch"]): float(r["residual"]) for r in rows if r.get("residual") is not None}


def statements(config: MDEQLandscapeConfig, rows: list[Row]) -> list[Statement]:
    """The observations of the module docstring, and ours on the solve."""
    surface = surfaces(rows).get(MODEL)
    trace = residuals(rows)
    solved = equilibrium_solved(
        Run("solve", tuple(trace), {"residual": tuple(trace.values())}),
        epoch=max(trace, default=config.epochs),
        tol=config.tol,
        solver=f"{config.solver}, per image, at most {config.max_iter} iterations",
    )
    why = ""
    if surface is not None:
        reasons = (
            untrained({MODEL: final_accuracy(rows, MODEL)}),
            _unsolved(solved, config),
            _capped(rows, config),
        )
        why = "; ".join(r for r in reasons if r)
    grid = f"{config.grid}² grid over [−1, 1]², {config.n_eval} held-out {config.dataset} images"
    return [
        one_minimum(surface, why, setting=grid),
        flat_minimum(
            surface, why, delta=config.flat_delta, share=config.flat_fraction, setting=grid
        ),
        solved,
    ]


def _unsolved(solved: Statement, config: MDEQLandscapeConfig) -> str:
    """Why the surface is not the equilibrium's, from the statement on the solve at θ*."""
    if solved.verdict is Verdict.PASS:
        return ""
    if solved.verdict is Verdict.NOT_MEASURED:
        return (
            f"the solve at θ* is not measured ({solved.detail}): the surface may be a "
            "truncated solver's"
        )
    return (
        f"the equilibrium at θ* is not solved (relative residual {solved.measured}, above "
        f"tol = {config.tol:g}): the surface would be the truncated solver's"
    )


def _capped(rows: list[Row], config: MDEQLandscapeConfig) -> str:
    """Why the grid is not the equilibrium's: evaluations where a solve hit ``max_iter``."""
    found = [int(r["capped_points"]) for r in rows if r.get("capped_points") is not None]
    if not found or not max(found):
        return ""
    return (
        f"a forward solve used all max_iter = {config.max_iter} iterations at {max(found)} of "
        f"the {config.grid}² grid evaluations (the surface of an unconverged iterate)"
    )


def plot(config: MDEQLandscapeConfig, rows: list[Row], directory: Path) -> list[Path]:
    """Contours (thick: the small-loss level; ×: local minima), the 3-D surface, and the
    solver's residual over training against tol."""
    import matplotlib.pyplot as plt

    from deqlab.report import figure_style, save_figure

    surface = surfaces(rows).get(MODEL)
    if surface is None:
        return []
    a, b, z = surface.alphas.numpy(), surface.betas.numpy(), surface.losses.T.numpy()
    with figure_style():
        fig = plt.figure(figsize=(13.0, 4.2))
        ax = fig.add_subplot(1, 3, 1)
        ax.clabel(ax.contour(a, b, z, levels=15, linewidths=0.8), fontsize=6)
        flat = level(surface, config.flat_delta)
        if z.min() < flat < z.max():
            ax.contour(a, b, z, levels=[flat], colors="k", linewidths=2.0)
        i, j = torch.nonzero(local_minima(surface), as_tuple=True)
        ax.plot(a[i.numpy()], b[j.numpy()], "x", color="tab:red", label="local minima")
        ax.plot([0], [0], marker="*", color="k", linestyle="", label="θ*")
        ax.set(xlabel=r"$\alpha$ (direction 1)", ylabel=r"$\beta$ (direction 2)")
        ax.legend(fontsize=7)
        ax3 = fig.add_subplot(1, 3, 2, projection="3d")
        ax3.plot_surface(*np.meshgrid(a, b), z, cmap="viridis", linewidth=0)
        ax3.set(xlabel=r"$\alpha$", ylabel=r"$\beta$", zlabel="loss")
        _residual_panel(fig.add_subplot(1, 3, 3), config, rows)
        fig.suptitle(
            f"MDEQ, {config.dataset}: {config.n_train} training images, {config.epochs} "
            f"epoch(s); loss on {config.n_eval} held-out images, {config.grid}×{config.grid} "
            f"grid; thick: L(θ*) + {config.flat_delta:g}",
            fontsize=9,
        )
        return save_figure(fig, directory, "mdeq-landscape")


def _residual_panel(ax, config: MDEQLandscapeConfig, rows: list[Row]) -> None:
    """The relative residual on the evaluation images per epoch (0: init), tol dashed."""
    trace = residuals(rows)
    ax.semilogy(
        list(trace),
        list(trace.values()),
        "o-",
        label=f"{config.solver}, ≤ {config.max_iter} iterations",
    )
    ax.axhline(config.tol, color="k", linestyle="--", linewidth=1, label=f"tol {config.tol:g}")
    ax.set(xlabel="epoch", ylabel="‖f(z) − z‖ / ‖f(z)‖ (max over images)")
    ax.legend(fontsize=7)

"""Statements and figure of ``hieu2022-landscape-mdeq``, computed from its tidy rows.

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
from torch.nn import functional as F

from deqlab.experiments.base import Row
from deqlab.experiments.hieu2022.landscape_report import final_accuracy, level, surfaces
from deqlab.landscape import LossSurface
from deqlab.papers import HIEU
from deqlab.papers.hieu2022.claims import untrained
from deqlab.statements import (
    DEQLAB,
    Kind,
    Statement,
    Verdict,
    ours,
)

if TYPE_CHECKING:
    from deqlab.experiments.hieu2022.mdeq_landscape import MDEQLandscapeConfig

_WORDS = (
    "As in Fig 3.1 which is the visualization of loss landscape of MDEQ model, we observe "
    "that the loss landscape has only one minima and this minima is flat."
)
ONE_MINIMUM = HIEU.source("Section 3.1, Figure 3.1 (= Figure 4.5)", _WORDS)
FLAT = HIEU.source("Section 3.1, Figure 3.1 (= Figure 4.5)", _WORDS)
MODEL = "mdeq"


def local_minima(surface: LossSurface) -> torch.Tensor:
    """Mask of the grid points no higher than any of their (up to 8) neighbours."""
    padded = F.pad(surface.losses[None, None], (1, 1, 1, 1), value=float("inf"))[0, 0]
    s = surface.losses.shape[0]
    mask = torch.ones_like(surface.losses, dtype=torch.bool)
    for di in (0, 1, 2):
        for dj in (0, 1, 2):
            if (di, dj) != (1, 1):
                mask &= surface.losses <= padded[di : di + s, dj : dj + s]
    return mask


def flat_fraction(surface: LossSurface, delta: float) -> float:
    """The fraction of grid points with ``Φ ≤ Φ(0, 0) + delta``."""
    return float((surface.losses <= level(surface, delta)).double().mean())


def residuals(rows: list[Row]) -> dict[int, float]:
    """The relative residual on the evaluation images after each epoch (0: at init)."""
    return {int(r["epoch"]): float(r["residual"]) for r in rows if r.get("residual") is not None}


def _solved(config: MDEQLandscapeConfig, rows: list[Row]) -> Statement:
    name = "the equilibrium at θ* is solved on the evaluation images"
    expected = f"relative residual ≤ tol = {config.tol:g} (max over images)"
    trace = residuals(rows)
    if not trace:
        return DEQLAB.not_measured(
            Kind.OURS, "", name=name, expected=expected, why="no residual row"
        )
    value = trace[max(trace)]
    return ours(
        name,
        value=value,
        relation="<=",
        threshold=config.tol,
        measured=f"{value:.3g} after epoch {max(trace)} ({trace[min(trace)]:.3g} at init)",
        expected=expected,
        detail=f"{config.solver}, per image, at most {config.max_iter} iterations (Bai et al. "
        "stop Broyden after F_THRES = 18–30 steps without a tolerance); above tol the surface "
        "is the truncated solver's, not the equilibrium's",
    )


def statements(config: MDEQLandscapeConfig, rows: list[Row]) -> list[Statement]:
    """The observations of the module docstring, and ours on the solve."""
    one = (
        "the loss landscape has only one minimum",
        ONE_MINIMUM,
        "at most 1 local minimum on the grid",
    )
    flat = (
        "the minimum is flat",
        FLAT,
        f"{{Φ ≤ Φ(θ*) + {config.flat_delta:g}}} covers ≥ {config.flat_fraction:g} of "
        "the grid (ours)",
    )
    surface = surfaces(rows).get(MODEL)
    solved = _solved(config, rows)
    if surface is None:
        why = "no surface rows"
    else:
        reasons = (
            untrained({MODEL: final_accuracy(rows, MODEL)}),
            _unsolved(solved, config),
            _capped(rows, config),
        )
        why = "; ".join(r for r in reasons if r)
    if why:
        found = [
            HIEU.not_measured(
                Kind.OBSERVATION, s.location, quote=s.quote, name=n, expected=e, why=why
            )
            for n, s, e in (one, flat)
        ]
        return [*found, solved]
    minima = int(local_minima(surface).sum())
    fraction = flat_fraction(surface, config.flat_delta)
    grid = f"{config.grid}² grid over [−1, 1]², {config.n_eval} held-out {config.dataset} images"
    return [
        HIEU.observation(
            one[1].location,
            quote=one[1].quote,
            name=one[0],
            value=minima,
            relation="<=",
            threshold=1,
            measured=f"{minima} local minima",
            expected=one[2],
            detail=grid,
        ),
        HIEU.observation(
            flat[1].location,
            quote=flat[1].quote,
            name=flat[0],
            value=fraction,
            relation=">=",
            threshold=config.flat_fraction,
            measured=f"{fraction:.3g} of the grid",
            expected=flat[2],
            detail=grid,
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

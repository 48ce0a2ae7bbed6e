"""Figure helpers of the Kawaguchi figures: legends off the curves, the setting subtitle,
and the trajectory-under-bounds panel (Figure 2 (c), Figure 3).  (Log-axis labels are made
plain numbers by :func:`deqlab.report.save_figure`.)"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from deqlab.experiments.base import Row

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


def legend_below(ax: Axes, ncol: int = 2) -> None:
    """The legend under the axes, where it covers no curve and no reference line."""
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=ncol, fontsize=8)


def setting_subtitle(fig: Figure, title: str, setting: str) -> None:
    """The figure's title with its setting (n, d, γ, η, data set…) on a second line."""
    fig.suptitle(f"{title}\n{setting}", fontsize=10)


def plot_bounds(ax: Axes, rows: Sequence[Row]) -> None:
    """Log-log training trajectory under Theorem 1's two bounds, with L* (steps ≥ 1)."""
    from deqlab.report import add_reference_line

    rows = [r for r in rows if int(r["step"]) >= 1]  # the log axis starts at iteration 1
    if not rows:
        return
    steps = [r["step"] for r in rows]
    ax.loglog(steps, [r["loss"] for r in rows], label="training trajectory")
    ax.loglog(steps, [r["bound_independent"] for r in rows], "--", label="bound: init-ind λ_T")
    ax.loglog(steps, [r["bound_dependent"] for r in rows], "-.", label="bound: init-dep λ_T")
    add_reference_line(ax, rows[0]["loss_star"], "global optimum L*")
    ax.set(xlabel="# of iterations", ylabel="train loss")
    legend_below(ax)

"""Figure 1 / Theorem 1 of Ling et al. (2023): the tidy table of :mod:`.fig1` as the claims
take it (:func:`by_dataset`: one :class:`~deqlab.papers.ling2023.claims.Width` per width),
the statements (:func:`deqlab.papers.ling2023.figure1.figure1_statements`) and the figures.

Per data set, over the widths m of the sweep, in this order:

- the paper's observations of Figure 1 (Section 5): the convergence speed grows with m
  (speed = −slope of the least-squares line through (τ, ln Φ(τ)), τ <= T, the last step
  every width reached), the final training loss Φ(T) falls with m, and ‖W(τ)‖₂ < 1
  throughout training — each needs a step τ >= 1 and is NOT MEASURED without one;
- ours: GD ran every configured step at every width (a stop, e.g. ‖W‖₂ >= 1, is shown);
- the hypotheses of Theorem 1 (Condition 1's Eqs. (7)–(9) and Eq. (10)), ours: Eq. (9)
  holds at no width unless ‖a(0)‖₂ < 1/(2√n) (docs/findings.md#ling-eq9), and Theorem 1's
  statements guarded by the hypotheses (:mod:`deqlab.papers.ling2023.theorem1`);
- the PL inequalities of Section 2.3 (Eqs. (4)–(5)), which hold at every width, guarded
  only by Lemma 2's hypothesis (identities once it holds: a consistency check of two
  computations, not evidence for Theorem 1).

Figures, one panel per data set, one line per width: ``loss`` (Φ(τ), log scale, with the
Theorem 1 (iii) bound (1 − ηλ_0/2)^τ Φ(0) dashed where Condition 1 holds), ``w_norm``
(1 − ‖W(τ)‖₂ where Lanczos measured it, on a log axis: the widths' norms differ by a few
thousandths) and ``lambda_ratio`` (λ_τ/λ_0 with the line at 1/2, Theorem 1 (ii)). Each
panel's title gives the data set, n, d and η, the figure's title σ_w²; the legend sits
outside the panels, so no reference line is covered.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from deqlab.experiments.base import Row
from deqlab.papers.ling2023.claims import Width
from deqlab.papers.ling2023.figure1 import figure1_statements, finite_losses
from deqlab.papers.ling2023.theory import Condition1
from deqlab.statements import Run, Statement

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from deqlab.experiments.ling2023.fig1 import Fig1Config


def _condition1(row: Row) -> Condition1 | None:
    initial = {k[6:]: v for k, v in row.items() if str(k).startswith("cond1_")}
    try:
        return Condition1.from_dict(initial)
    except (KeyError, TypeError, ValueError):
        return None


def width(key: str, rows: Sequence[Row]) -> Width:
    """The rows of one (data set, width) task as a :class:`Width` (``ok``: 1 at a step
    without a stop; the label ``status``: that of the last step)."""
    mine = sorted(rows, key=lambda r: int(r["step"]))
    marked = [{**r, "ok": float(r["status"] == "ok")} for r in mine]
    run = Run.from_rows(key, marked, constants=("n", "d"), labels=("dataset",))
    run = replace(run, labels={**run.labels, "status": str(mine[-1]["status"])})
    first = mine[0]
    return Width(int(first["m"]), float(first["eta"]), _condition1(first), run)


def by_dataset(rows: list[Row]) -> dict[str, list[Width]]:
    """The widths of each data set (in order of appearance), by increasing m."""
    groups: dict[tuple[str, int], list[Row]] = {}
    for row in rows:
        groups.setdefault((str(row["dataset"]), int(row["m"])), []).append(row)
    out: dict[str, list[Width]] = {}
    for (name, m), mine in groups.items():
        out.setdefault(name, []).append(width(f"{name}-m{m}", mine))
    return {name: sorted(runs, key=lambda r: r.m) for name, runs in out.items()}


def statements(config: Fig1Config, rows: list[Row]) -> list[Statement]:
    """The statements of every data set of ``config`` (:func:`figure1_statements`)."""
    runs = by_dataset(rows)
    found = []
    for name in config.datasets:
        mine = runs.get(name, [])
        n = int(mine[0].run.constant("n")) if mine else 0
        found += figure1_statements(f"{name}: ", mine, config.steps, config.widths, n=n)
    return found


# --- figures -------------------------------------------------------------------------------

Panel = Callable[["Axes", Width, str], None]


def _lambda_0(run: Width) -> float:
    return run.run.at("lambda_min", 0)


def _loss(ax: Axes, run: Width, color: str) -> None:
    steps, loss = zip(*finite_losses(run), strict=True) if finite_losses(run) else ((), ())
    ax.semilogy(steps, loss, color=color, label=f"m = {run.m}")
    lambda_0 = _lambda_0(run)
    if run.condition1 is not None and run.condition1.holds and lambda_0 > 0:
        rate = 1.0 - run.eta * lambda_0 / 2.0
        ax.semilogy(
            steps,
            [rate**t * loss[0] for t in steps],
            color=color,
            linestyle="--",
            linewidth=1.0,
            label=f"Thm 1 (iii) bound, m = {run.m}",
        )


def _w_gap(ax: Axes, run: Width, color: str) -> None:
    below = [(s, 1.0 - v) for s, v in run.run.points("W_norm") if v < 1]
    steps, gaps = zip(*below, strict=True) if below else ((), ())
    ax.semilogy(steps, gaps, "o-", markersize=2.5, color=color, label=f"m = {run.m}")


def _lambda_ratio(ax: Axes, run: Width, color: str) -> None:
    lambda_0 = _lambda_0(run)
    measured = [(s, v) for s, v in run.run.points("lambda_min") if math.isfinite(v)]
    if lambda_0 > 0 and measured:
        steps, values = zip(*measured, strict=True)
        ax.plot(steps, [v / lambda_0 for v in values], color=color, label=f"m = {run.m}")


def _setting(runs: list[Width]) -> str:
    run = runs[0]
    n, d = int(run.run.constant("n")), int(run.run.constant("d"))
    return f"{run.run.label('dataset')}: n = {n}, d = {d}, η = {run.eta:.3g}"


def _figure(
    datasets: dict[str, list[Width]],
    panel: Panel,
    title: str,
    ylabel: str,
    reference: tuple[float, str] | None,
    directory: Path,
    name: str,
) -> list[Path]:
    import matplotlib.pyplot as plt  # imported here: spawned workers never plot

    from deqlab.report import add_reference_line, figure_style, save_figure, sequential_colors

    with figure_style():
        fig, axes = plt.subplots(
            1, len(datasets), figsize=(4.2 * len(datasets) + 1.6, 3.6), squeeze=False
        )
        for ax, runs in zip(axes[0], datasets.values(), strict=True):
            for run, color in zip(runs, sequential_colors(len(runs)), strict=True):
                panel(ax, run, color)
            if reference is not None:
                add_reference_line(ax, *reference)
            ax.set_title(_setting(runs), fontsize=9.5)
            ax.set_xlabel(r"GD step $\tau$")
            ax.set_ylabel(ylabel)
        handles, labels = axes[0, -1].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside right center")
        fig.suptitle(title)
        return save_figure(fig, directory, name)


def plot(config: Fig1Config, rows: list[Row], directory: Path) -> list[Path]:
    """Write the three figures (module docstring); return their PNG and PDF paths."""
    datasets = by_dataset(rows)
    sigma_w2 = config.sigma_w2
    setting = rf"full-batch GD, $\sigma_w^2$ = {sigma_w2:g}"
    fits = [
        r.m
        for runs in datasets.values()
        for r in runs
        if r.condition1 is not None and r.condition1.holds
    ]
    note = "" if fits else "\n(Condition 1 holds for no width: no Theorem 1 (iii) bound drawn)"
    return [
        *_figure(
            datasets,
            _loss,
            f"Training loss, {setting}{note}",
            r"loss $\Phi(\tau)$",
            None,
            directory,
            "loss",
        ),
        *_figure(
            datasets,
            _w_gap,
            rf"Distance of $\|W(\tau)\|_2$ from 1, {setting}",
            r"$1 - \|W(\tau)\|_2$",
            None,
            directory,
            "w_norm",
        ),
        *_figure(
            datasets,
            _lambda_ratio,
            rf"Least Gram eigenvalue, {setting}",
            r"$\lambda_\tau/\lambda_0$",
            (0.5, "1/2 (Theorem 1 (ii))"),
            directory,
            "lambda_ratio",
        ),
    ]

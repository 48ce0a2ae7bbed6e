"""Figure 2: the runs as the claims take them, and the figures.

:func:`runs` turns the tidy rows of :mod:`.fig2` into one :class:`~deqlab.statements.Run`
per task; the claims are :mod:`deqlab.papers.kawaguchi2021.figure2`'s observations of
panels (a)–(c) and :mod:`~deqlab.papers.kawaguchi2021.corollaries`' Corollary 1 with both
λ_T, Theorem 1's bound on λ_T and Eq. (10)'s time to reach ε on every DELM trajectory,
guarded by Corollary 1's hypotheses. The ResNet observations are measured on the ResNet
``resnet_io`` names (see :mod:`.fig2`).

The sweep (ours, :data:`.fig2.SWEEP`): the four observations of panels (a)–(b) again at
each η (the ResNet's) and (η, γ) (the DELMs'), and per (η, γ) whether all four hold — the
verdict per step size.  See docs/findings.md#kawaguchi-fig2.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from deqlab.experiments.base import Row
from deqlab.experiments.kawaguchi2021.plots import (
    legend_below,
    plot_bounds,
    setting_subtitle,
)
from deqlab.models.baselines import resnet_io_width
from deqlab.papers.kawaguchi2021.corollaries import (
    accuracy_equation,
    corollary_checks,
    faster_rate_observation,
)
from deqlab.papers.kawaguchi2021.figure2 import (
    FASTER,
    PANELS,
    Reach,
    delm_reach,
    final_gap,
    reproduces,
    resnet,
    sweep_reach,
)
from deqlab.papers.kawaguchi2021.hypotheses import COROLLARY_1, hypotheses
from deqlab.statements import Run, Statement, is_measured, runs_from_rows

if TYPE_CHECKING:
    from deqlab.experiments.kawaguchi2021.fig2 import Fig2Config

#: What each ``resnet_io`` is, for the statements and the subtitle.
CONSTRUCTION = {
    "modified_identity": "Zou et al.'s modified identity input/output transformations",
    "gaussian": "Zou et al.'s Gaussian random input/output transformations",
    "identity": "identity input/output layers (our stand-in, not Zou et al.'s: it starts at "
    "f₀(x) = x against the target −x)",
}

Runs = Mapping[str, Run]


def sweep_key(lr: float, gamma: float | None = None) -> str:
    """The task-key prefix of the sweep point η (ResNet) or (η, γ) (DELMs)."""
    return f"sweep-lr{lr:g}" + ("" if gamma is None else f"-g{gamma:g}")


def is_sweep(row: Row) -> bool:
    """A row of the step-size × γ sweep (its task key starts with ``sweep-``)."""
    return str(row["task"]).startswith("sweep-")


def runs(rows: Sequence[Row]) -> dict[str, Run]:
    """One run per task, with its ``model``, ``init`` and ``panel``."""
    return runs_from_rows(rows, labels=("model", "init", "panel"))


def _with_prefix(runs: Runs, prefix: str) -> dict[str, Run]:
    return {k: v for k, v in runs.items() if k.startswith(prefix)}


def _of_panel(runs: Runs, panel: str) -> dict[str, Run]:
    return {k: v for k, v in runs.items() if f"-{panel}-delm-" in k}


def statements(config: Fig2Config, rows: list[Row]) -> list[Statement]:
    """Observations of panels (a)–(c), Corollary 1's hypotheses, the theorems, the sweep."""
    return [
        *_figure_statements(config, [r for r in rows if not is_sweep(r)]),
        *sweep_statements(config, [r for r in rows if is_sweep(r)]),
    ]


def _figure_statements(config: Fig2Config, rows: list[Row]) -> list[Statement]:
    everything = runs(rows)
    delm = {k: v for k, v in everything.items() if v.label("model") == "DELM"}
    reach = Reach(config.steps, config.optimum_rtol)
    guards = hypotheses(COROLLARY_1, delm, lr=config.lr, gamma=config.gamma)
    m, gamma = config.d, config.gamma
    setting = _resnet_setting(config)
    reached = [
        delm_reach(p, _with_prefix(delm, f"{p}-delm"), reach, n_random=config.n_random)
        for p in PANELS
    ]
    return [
        *reached,
        *(resnet(p, everything.get(f"{p}-resnet"), reach, setting=setting) for p in PANELS),
        faster_rate_observation(delm.get("c-delm-random1"), FASTER, m=m, gamma=gamma),
        *guards,
        *corollary_checks(
            COROLLARY_1,
            delm,
            guards,
            m=m,
            gamma=gamma,
            lr=config.lr,
            equation=accuracy_equation("square", 0.0, math.inf),
            eps_rel=config.epsilon,
        ),
    ]


def resnet_setting(config: Fig2Config) -> str:
    """The ResNet's construction, depth and width, e.g. for a subtitle."""
    width = config.resnet_width or resnet_io_width(config.resnet_io, config.d, config.d)
    return f"{CONSTRUCTION[config.resnet_io]}, depth {config.resnet_depth}, width {width}"


def _resnet_setting(config: Fig2Config) -> str:
    return f"{resnet_setting(config)}, zero-initialized blocks, GD with η = {config.lr:g}"


def sweep_statements(config: Fig2Config, rows: list[Row]) -> list[Statement]:
    """Per η of the sweep: the ResNet's two observations; per (η, γ): the DELMs' two and
    whether all four hold (:func:`reproduces`)."""
    everything = runs(rows)
    reach = Reach(config.steps, config.optimum_rtol)
    found = []
    for lr in config.sweep_lrs:
        at = dataclasses.replace(config, lr=lr)
        setting = {"setting": _resnet_setting(at), "suffix": f" at η = {lr:g} (sweep)"}
        observed = [
            resnet(p, everything.get(f"{sweep_key(lr)}-{p}-resnet"), reach, **setting)
            for p in PANELS
        ]
        found += observed
        for gamma in config.sweep_gammas:
            mine = _with_prefix(everything, sweep_key(lr, gamma) + "-")
            point = {"lr": lr, "gamma": gamma, "expected": 1 + config.n_random}
            delm = [sweep_reach(p, _of_panel(mine, p), reach, **point) for p in PANELS]
            found += [*delm, reproduces(lr, gamma, [*delm, *observed])]
    return found


def plot(config: Fig2Config, rows: list[Row], directory: Path) -> list[Path]:
    """Panels (a)–(b): loss of every run with L*; panel (c): the trajectory under the bounds;
    with a sweep, its final gaps against η (:func:`plot_sweep`)."""
    import matplotlib.pyplot as plt  # imported here: spawned workers never plot

    from deqlab.report import add_reference_line, figure_style, save_figure

    sweep = [r for r in rows if is_sweep(r)]
    rows = [r for r in rows if not is_sweep(r)]
    with figure_style():
        fig, axes = plt.subplots(1, 3, figsize=(14.0, 5.0))
        for ax, (panel, data) in zip(axes, PANELS.items(), strict=False):
            mine = [r for r in runs(rows).values() if r.label("panel") == panel]
            for run in mine:
                label = f"{run.label('model')}: {run.label('init')}"
                ax.semilogy(run.steps, run["loss"], label=label)
            if mine:
                add_reference_line(ax, mine[0]["loss_star"][0], "global optimum L*")
            ax.set(xlabel="# of iterations", ylabel="train loss", title=f"({panel}) {data} data")
            legend_below(ax)
        plot_bounds(axes[2], [r for r in rows if r["panel"] == "c"])
        axes[2].set_title("(c) theoretical bounds (Corollary 1)")
        setting_subtitle(
            fig,
            "Figure 2: DELMs vs a linear ResNet, and Corollary 1's bounds",
            f"Zou et al.'s data, n = {config.n}, d = m = {config.d}, noise {config.noise:g}; "
            f"DELM γ = {config.gamma:g}; full-batch GD, η = {config.lr:g}; linear ResNet: "
            f"{resnet_setting(config)}",
        )
        paths = save_figure(fig, directory, "fig2")
    return paths + (plot_sweep(config, sweep, directory) if config.sweep_lrs else [])


#: A diverged run is drawn this factor above the largest finite gap of its panel (≥ 10).
DIVERGED_ABOVE = 10.0


def plot_sweep(config: Fig2Config, rows: list[Row], directory: Path) -> list[Path]:
    """Final (L − L*)/L* against η per panel: the ResNet and, per γ, the worst DELM."""
    import matplotlib.pyplot as plt  # imported here: spawned workers never plot

    from deqlab.report import add_reference_line, figure_style, save_figure

    by_task = runs(rows)
    with figure_style():
        fig, axes = plt.subplots(1, 2, figsize=(11.0, 4.8))
        for ax, (panel, data) in zip(axes, PANELS.items(), strict=True):
            lines = {
                "linear ResNet": [
                    (lr, [f"{sweep_key(lr)}-{panel}-resnet"]) for lr in config.sweep_lrs
                ]
            }
            for gamma in config.sweep_gammas:
                lines[f"DELMs (worst), γ = {gamma:g}"] = [
                    (lr, [k for k in by_task if k.startswith(f"{sweep_key(lr, gamma)}-{panel}-")])
                    for lr in config.sweep_lrs
                ]
            gaps = {
                label: [(lr, _worst_gap(by_task, keys, config.steps)) for lr, keys in points]
                for label, points in lines.items()
            }
            finite = [g for p in gaps.values() for _, g in p if g is not None and g < math.inf]
            top = DIVERGED_ABOVE * max([1.0, *finite])
            for label, points in gaps.items():
                _sweep_line(ax, label, points, top)
            add_reference_line(ax, config.optimum_rtol, "tolerance optimum_rtol")
            ax.set(
                xscale="log",
                yscale="log",
                xlabel="step size η",
                ylabel="final (L − L*)/L*",
                title=f"({panel}) {data} data",
            )
            legend_below(ax)
        setting_subtitle(
            fig,
            "Figure 2 (a)–(b) across step sizes (our sweep)",
            f"n = {config.n}, d = {config.d}, {config.steps} GD steps; crosses at the top: "
            f"diverged; linear ResNet: {resnet_setting(config)}",
        )
        return save_figure(fig, directory, "fig2_sweep")


def _worst_gap(runs: Runs, keys: Sequence[str], steps: int) -> float | None:
    """The largest final gap of ``keys`` (inf if one diverged, None if one is missing)."""
    gaps = []
    for key in keys:
        mine = runs.get(key)
        if mine is not None and mine.steps and not is_measured(mine["loss"][-1]):
            gaps.append(math.inf)
        else:
            gaps.append(final_gap(mine, steps))
    return None if not gaps or None in gaps else max(max(gaps), 1e-16)


def _sweep_line(ax, label: str, points: Sequence[tuple[float, float | None]], top: float) -> None:
    finite = [(lr, g) for lr, g in points if g is not None and math.isfinite(g)]
    (line,) = ax.plot([p[0] for p in finite], [p[1] for p in finite], "o-", label=label)
    blown = [lr for lr, g in points if g == math.inf]
    if blown:
        ax.plot(blown, [top] * len(blown), "x", color=line.get_color(), markersize=9)

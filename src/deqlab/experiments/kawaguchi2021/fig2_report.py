"""Figure 2's statements and figure, read from the tidy rows of :mod:`.fig2`.

The paper's observations (Section 4): DELMs reach the global minimum value from every
initialization on both data sets; the linear ResNet with identity initialization stalls
on the Gaussian data and converges on the uniform data; the initialization-dependent
bound converges faster.  Theorems: Corollary 1 with both λ_T, Theorem 1's bound on λ_T and
Eq. (10)'s time to reach ε, on every DELM trajectory, guarded by Corollary 1's hypotheses.
The ResNet observations are measured on the ResNet ``resnet_io`` names (see :mod:`.fig2`);
their detail gives its construction and η·λ_max(∇²L(W₀)) (above 2: GD unstable at the
start).

The sweep (ours, :data:`.fig2.SWEEP`): the four observations of panels (a)–(b) again at
each η (the ResNet's) and (η, γ) (the DELMs'), the DELMs' decided on the number of runs
that do not reach L* (a diverged run counts: a measured failure), and per (η, γ) whether
all four hold — the verdict per step size.  See docs/findings.md#kawaguchi-fig2.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from deqlab.experiments.base import Row
from deqlab.experiments.kawaguchi2021.plots import (
    legend_below,
    plot_bounds,
    setting_subtitle,
)
from deqlab.models.baselines import resnet_io_width
from deqlab.papers import KAWAGUCHI
from deqlab.papers.kawaguchi2021.corollaries import (
    accuracy_equation,
    corollary_checks,
    faster_rate_observation,
    runs_by_task,
)
from deqlab.papers.kawaguchi2021.hypotheses import COROLLARY_1, Runs, hypotheses
from deqlab.statements import Statement, Verdict, is_measured, number, ours, worst

if TYPE_CHECKING:
    from deqlab.experiments.kawaguchi2021.fig2 import Fig2Config

PANELS = {"a": "Gaussian", "b": "uniform"}
#: panel -> (location, the paper's words) of "DELMs reach the global minimum value".
DELM_REACH = {
    "a": (
        "Section 4, Figure 2 (a)",
        "deep equilibrium linear models converges to the global minimum value with all "
        "initialization and random trials",
    ),
    "b": (
        "Section 4, Figure 2 (b)",
        "confirm the global convergence of deep equilibrium linear models again with all "
        "initialization and random trials",
    ),
}
#: panel -> (relation of the final gap to the tolerance, what the ResNet does, location,
#: the paper's words)
RESNET = {
    "a": (
        ">",
        "stays above",
        "Section 4, Figure 2 (a)",
        "linear ResNet converges to a suboptimal value with identity initialization",
    ),
    "b": (
        "<=",
        "reaches",
        "Section 4, Figure 2 (b)",
        "In this case, linear ResNet with identity initialization also converged to the "
        "global minimum value.",
    ),
}
FASTER = KAWAGUCHI.source(
    "Section 4, Figure 2 (c)",
    "the theoretical bound with initialization-dependent λT demonstrates a faster and more "
    "accurate convergence rate",
)
#: What each ``resnet_io`` is, for the statements and the subtitle.
CONSTRUCTION = {
    "modified_identity": "Zou et al.'s modified identity input/output transformations",
    "gaussian": "Zou et al.'s Gaussian random input/output transformations",
    "identity": "identity input/output layers (our stand-in, not Zou et al.'s: it starts at "
    "f₀(x) = x against the target −x)",
}
TOLERANCE = "the tolerance optimum_rtol is ours (the paper shows the curves meeting L*)"
FINDING = "docs/findings.md#kawaguchi-fig2"


def sweep_key(lr: float, gamma: float | None = None) -> str:
    """The task-key prefix of the sweep point η (ResNet) or (η, γ) (DELMs)."""
    return f"sweep-lr{lr:g}" + ("" if gamma is None else f"-g{gamma:g}")


def is_sweep(row: Row) -> bool:
    """A row of the step-size × γ sweep (its task key starts with ``sweep-``)."""
    return str(row["task"]).startswith("sweep-")


def statements(config: Fig2Config, rows: list[Row]) -> list[Statement]:
    """Observations of panels (a)–(c), Corollary 1's hypotheses, the theorems, the sweep."""
    return [
        *_figure_statements(config, [r for r in rows if not is_sweep(r)]),
        *sweep_statements(config, [r for r in rows if is_sweep(r)]),
    ]


def _figure_statements(config: Fig2Config, rows: list[Row]) -> list[Statement]:
    delm = runs_by_task([r for r in rows if r["model"] == "DELM"])
    resnet = runs_by_task([r for r in rows if r["model"] == "LinearResNet"])
    guards = hypotheses(COROLLARY_1, delm, lr=config.lr, gamma=config.gamma)
    m, gamma = config.d, config.gamma
    return [
        *(_delm_reach(config, delm, panel) for panel in PANELS),
        *(_resnet(config, resnet.get(f"{panel}-resnet", []), panel) for panel in PANELS),
        faster_rate_observation(delm.get("c-delm-random1", []), FASTER, m=m, gamma=gamma),
        *guards,
        *corollary_checks(
            COROLLARY_1,
            delm,
            guards,
            config,
            equation=accuracy_equation("square", 0.0, math.inf),
            eps_rel=config.epsilon,
        ),
    ]


def final_gap(rows: Sequence[Row], steps: int) -> float | None:
    """(L − L*)/L* at step ``steps``; None if the run did not record it or it is not finite."""
    if not rows or int(rows[-1]["step"]) != steps:
        return None
    loss, loss_star = float(rows[-1]["loss"]), float(rows[-1]["loss_star"])
    gap = (loss - loss_star) / abs(loss_star) if loss_star else math.nan
    return gap if is_measured(gap) else None


def _delm_reach(config: Fig2Config, delm: Runs, panel: str) -> Statement:
    gaps = {
        k: final_gap(rows, config.steps)
        for k, rows in delm.items()
        if k.startswith(f"{panel}-delm")
    }
    value = worst(list(gaps.values()), "<=", config.optimum_rtol)
    where = next((k for k, g in gaps.items() if g == value), "—")
    location, quote = DELM_REACH[panel]
    return KAWAGUCHI.observation(
        location,
        name=f"DELMs reach the global minimum value on {PANELS[panel]} data from every "
        "initialization",
        value=value,
        relation="<=",
        threshold=config.optimum_rtol,
        measured=f"worst final (L − L*)/L* = {number(value)} ({where}) over {len(gaps)} runs "
        f"after {config.steps} steps",
        expected=f"≤ {config.optimum_rtol:g} for the identity and {config.n_random} random "
        "initializations",
        detail=TOLERANCE,
        quote=quote,
    )


def resnet_setting(config: Fig2Config) -> str:
    """The ResNet's construction, depth and width, e.g. for a subtitle."""
    width = config.resnet_width or resnet_io_width(config.resnet_io, config.d, config.d)
    return f"{CONSTRUCTION[config.resnet_io]}, depth {config.resnet_depth}, width {width}"


def _resnet(config: Fig2Config, rows: Sequence[Row], panel: str, suffix: str = "") -> Statement:
    relation, does, location, quote = RESNET[panel]
    value = final_gap(rows, config.steps)
    ratio = rows[0].get("step_sharpness") if rows else None
    last = rows[-1] if rows else {}
    diverged = "loss" in last and not is_measured(last["loss"])
    ended = f"diverged: the loss is {last.get('loss')} at step {last.get('step')}"
    return KAWAGUCHI.observation(
        location,
        name=f"linear ResNet (identity init) {does} the global minimum value on "
        f"{PANELS[panel]} data{suffix}",
        value=value,
        relation=relation,
        threshold=config.optimum_rtol,
        measured=ended
        if diverged
        else f"final (L − L*)/L* = {number(value)} after {config.steps} steps",
        expected=f"{relation} {config.optimum_rtol:g}",
        detail=f"{resnet_setting(config)}, zero-initialized blocks, GD with η = {config.lr:g}; "
        f"η·λ_max(∇²L(W₀)) = {number(ratio)} (GD is unstable at the start where this "
        f"exceeds 2); {TOLERANCE}",
        quote=quote,
    )


def sweep_statements(config: Fig2Config, rows: list[Row]) -> list[Statement]:
    """Per η of the sweep: the ResNet's two observations; per (η, γ): the DELMs' two and
    whether all four hold (:func:`_reproduces`)."""
    runs = runs_by_task(rows)
    found = []
    for lr in config.sweep_lrs:
        at = dataclasses.replace(config, lr=lr)
        resnet = [
            _resnet(at, runs.get(f"{sweep_key(lr)}-{p}-resnet", []), p, f" at η = {lr:g} (sweep)")
            for p in PANELS
        ]
        found += resnet
        for gamma in config.sweep_gammas:
            prefix = sweep_key(lr, gamma)
            mine = {k: v for k, v in runs.items() if k.startswith(prefix + "-")}
            delm = [_sweep_reach(config, mine, p, lr, gamma) for p in PANELS]
            found += [*delm, _reproduces(lr, gamma, [*delm, *resnet])]
    return found


def _sweep_reach(config: Fig2Config, runs: Runs, panel: str, lr: float, gamma: float) -> Statement:
    """DELMs reach L* at (η, γ): the number of runs that end above ``optimum_rtol`` or
    diverge must be 0; NOT MEASURED when a run is missing or unfinished and none failed."""
    mine = {k: v for k, v in runs.items() if f"-{panel}-delm-" in k}
    expected = 1 + config.n_random
    gaps = {k: final_gap(v, config.steps) for k, v in mine.items()}
    diverged = {k: v[-1]["step"] for k, v in mine.items() if v and not is_measured(v[-1]["loss"])}
    failed = [k for k, g in gaps.items() if g is not None and g > config.optimum_rtol]
    failed += list(diverged)
    complete = len(mine) == expected and all(
        g is not None or k in diverged for k, g in gaps.items()
    )
    known = [g for g in gaps.values() if g is not None]
    said = "; ".join(f"{k} diverged at step {s}" for k, s in diverged.items())
    location, quote = DELM_REACH[panel]
    return KAWAGUCHI.observation(
        location,
        name=f"DELMs reach the global minimum value on {PANELS[panel]} data from every "
        f"initialization at η = {lr:g}, γ = {gamma:g} (sweep)",
        value=len(failed) if failed or complete else None,
        relation="<=",
        threshold=0.0,
        measured=f"{len(failed)} of {len(mine)} runs end above (L − L*)/L* = "
        f"{config.optimum_rtol:g} or diverge; worst finite final gap "
        f"{number(max(known, default=None))}" + (f"; {said}" if said else ""),
        expected=f"0 of {expected} runs (identity and {config.n_random} random "
        f"initializations) after {config.steps} steps",
        detail=f"{TOLERANCE}; a diverged run is a measured failure",
        quote=quote,
    )


def _reproduces(lr: float, gamma: float, observed: Sequence[Statement]) -> Statement:
    """Ours: all four observations of panels (a)–(b) hold at (η, γ) — the value is how many
    do; NOT MEASURED when none fails and one is not measured."""
    passed = sum(s.verdict is Verdict.PASS for s in observed)
    failed = [s for s in observed if s.verdict is Verdict.FAIL]
    unmeasured = any(s.verdict is Verdict.NOT_MEASURED for s in observed)
    return ours(
        f"Figure 2 (a)–(b) reproduces at η = {lr:g}, γ = {gamma:g} (sweep)",
        value=None if unmeasured and not failed else passed,
        relation=">=",
        threshold=float(len(observed)),
        measured=f"{passed} of {len(observed)} observations pass"
        + "".join(f"; fails: {s.name}" for s in failed),
        expected=f"all {len(observed)}: DELMs reach L* on both data sets, the ResNet stays "
        "above it on the Gaussian data and reaches it on the uniform data",
        detail=f"the step size is not given by Section 4; {FINDING}",
    )


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
            mine = runs_by_task([r for r in rows if r["panel"] == panel])
            for run in mine.values():
                label = f"{run[0]['model']}: {run[0]['init']}"
                ax.semilogy([r["step"] for r in run], [r["loss"] for r in run], label=label)
            if mine:
                add_reference_line(
                    ax, next(iter(mine.values()))[0]["loss_star"], "global optimum L*"
                )
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

    runs = runs_by_task(rows)
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
                    (lr, [k for k in runs if k.startswith(f"{sweep_key(lr, gamma)}-{panel}-")])
                    for lr in config.sweep_lrs
                ]
            gaps = {
                label: [(lr, _worst_gap(runs, keys, config.steps)) for lr, keys in points]
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
        mine = runs.get(key, [])
        if mine and not is_measured(mine[-1]["loss"]):
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

"""Figure 2's statements and figure, read from the tidy rows of :mod:`.fig2`.

The paper's observations (Section 4): DELMs reach the global minimum value from every
initialization on both data sets; the linear ResNet with identity initialization stalls
on the Gaussian data and converges on the uniform data; the initialization-dependent
bound converges faster.  Theorems: Corollary 1 with both λ_T, Theorem 1's bound on λ_T and
Eq. (10)'s time to reach ε, on every DELM trajectory, guarded by Corollary 1's hypotheses.
The ResNet observations are measured on the ResNet ``resnet_io`` names (see :mod:`.fig2`);
their detail gives its construction and η·λ_max(∇²L(W₀)) (above 2: GD unstable at the
start).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from deqlab.experiments.base import Row
from deqlab.experiments.kawaguchi2021.corollaries import (
    COROLLARY_1,
    Runs,
    accuracy_equation,
    accuracy_time_check,
    bound_checks,
    faster_rate_observation,
    gamma_hypothesis,
    hypotheses,
    lambda_bound_check,
    runs_by_task,
)
from deqlab.experiments.kawaguchi2021.plots import (
    legend_below,
    plot_bounds,
    setting_subtitle,
)
from deqlab.models.baselines import resnet_io_width
from deqlab.statements import Kind, Source, Statement, is_measured, measure

if TYPE_CHECKING:
    from deqlab.experiments.kawaguchi2021.fig2 import Fig2Config

PANELS = {"a": "Gaussian", "b": "uniform"}
DELM_REACH = {
    "a": Source("kawaguchi2021", "Section 4, Figure 2 (a)", "deep equilibrium linear models "
                "converges to the global minimum value with all initialization and random "
                "trials"),
    "b": Source("kawaguchi2021", "Section 4, Figure 2 (b)", "confirm the global convergence of "
                "deep equilibrium linear models again with all initialization and random trials"),
}  # fmt: skip
#: panel -> (relation of the final gap to the tolerance, what the ResNet does, source)
RESNET = {
    "a": (">", "stays above", Source("kawaguchi2021", "Section 4, Figure 2 (a)", "linear "
          "ResNet converges to a suboptimal value with identity initialization")),
    "b": ("<=", "reaches", Source("kawaguchi2021", "Section 4, Figure 2 (b)", "In this case, "
          "linear ResNet with identity initialization also converged to the global minimum "
          "value.")),
}  # fmt: skip
FASTER = Source(
    "kawaguchi2021", "Section 4, Figure 2 (c)",
    "the theoretical bound with initialization-dependent λT demonstrates a faster and more "
    "accurate convergence rate",
)  # fmt: skip
#: What each ``resnet_io`` is, for the statements and the subtitle.
CONSTRUCTION = {
    "modified_identity": "Zou et al.'s modified identity input/output transformations",
    "gaussian": "Zou et al.'s Gaussian random input/output transformations",
    "identity": "identity input/output layers (our stand-in, not Zou et al.'s: it starts at "
    "f₀(x) = x against the target −x)",
}
TOLERANCE = "the tolerance optimum_rtol is ours (the paper shows the curves meeting L*)"


def statements(config: Fig2Config, rows: list[Row]) -> list[Statement]:
    """Observations of panels (a)–(c), Corollary 1's hypotheses, and the theorems."""
    delm = runs_by_task([r for r in rows if r["model"] == "DELM"])
    resnet = runs_by_task([r for r in rows if r["model"] == "LinearResNet"])
    guards = hypotheses(COROLLARY_1, delm, lr=config.lr, gamma=config.gamma)
    return [
        *(_delm_reach(config, delm, panel) for panel in PANELS),
        *(_resnet(config, resnet.get(f"{panel}-resnet", []), panel) for panel in PANELS),
        faster_rate_observation(delm.get("c-delm-random1", []), FASTER, m=config.d,
                                gamma=config.gamma),
        *guards,
        lambda_bound_check(delm, [gamma_hypothesis(config.gamma)], m=config.d,
                           gamma=config.gamma),
        *bound_checks(COROLLARY_1, delm, guards, lr=config.lr),
        accuracy_time_check(delm, guards, equation=accuracy_equation("square", 0.0, math.inf),
                            lr=config.lr, m=config.d, gamma=config.gamma,
                            eps_rel=config.epsilon),
    ]  # fmt: skip


def final_gap(rows: Sequence[Row], steps: int) -> float | None:
    """(L − L*)/L* at step ``steps``; None if the run did not record it or it is not finite."""
    if not rows or int(rows[-1]["step"]) != steps:
        return None
    loss, loss_star = float(rows[-1]["loss"]), float(rows[-1]["loss_star"])
    gap = (loss - loss_star) / abs(loss_star) if loss_star else math.nan
    return gap if is_measured(gap) else None


def _delm_reach(config: Fig2Config, delm: Runs, panel: str) -> Statement:
    gaps = {k: final_gap(rows, config.steps) for k, rows in delm.items()
            if k.startswith(f"{panel}-delm")}  # fmt: skip
    known = [g for g in gaps.values() if g is not None]
    value = max(known) if gaps and len(known) == len(gaps) else None
    worst = next((k for k, g in gaps.items() if g == value), "—")
    return measure(
        f"DELMs reach the global minimum value on {PANELS[panel]} data from every "
        "initialization", Kind.OBSERVATION, DELM_REACH[panel], value=value, relation="<=",
        threshold=config.optimum_rtol,
        measured=f"worst final (L − L*)/L* = {_g(value)} ({worst}) over {len(gaps)} runs "
        f"after {config.steps} steps",
        expected=f"≤ {config.optimum_rtol:g} for the identity and {config.n_random} random "
        "initializations", detail=TOLERANCE,
    )  # fmt: skip


def resnet_setting(config: Fig2Config) -> str:
    """The ResNet's construction, depth and width, e.g. for a subtitle."""
    width = config.resnet_width or resnet_io_width(config.resnet_io, config.d, config.d)
    return f"{CONSTRUCTION[config.resnet_io]}, depth {config.resnet_depth}, width {width}"


def _resnet(config: Fig2Config, rows: Sequence[Row], panel: str) -> Statement:
    relation, does, source = RESNET[panel]
    value = final_gap(rows, config.steps)
    ratio = rows[0].get("step_sharpness") if rows else None
    last = rows[-1] if rows else {}
    diverged = "loss" in last and not is_measured(last["loss"])
    ended = f"diverged: the loss is {last.get('loss')} at step {last.get('step')}"
    return measure(
        f"linear ResNet (identity init) {does} the global minimum value on {PANELS[panel]} "
        "data", Kind.OBSERVATION, source, value=value, relation=relation,
        threshold=config.optimum_rtol,
        measured=ended if diverged else f"final (L − L*)/L* = {_g(value)} after {config.steps} "
        "steps",
        expected=f"{relation} {config.optimum_rtol:g}",
        detail=f"{resnet_setting(config)}, zero-initialized blocks, GD with η = {config.lr:g}; "
        f"η·λ_max(∇²L(W₀)) = {_g(ratio if is_measured(ratio) else None)} (GD is unstable at "
        f"the start where this exceeds 2); {TOLERANCE}",
    )  # fmt: skip


def _g(x: float | None) -> str:
    return "—" if x is None else f"{x:.3g}"


def plot(config: Fig2Config, rows: list[Row], directory: Path) -> list[Path]:
    """Panels (a)–(b): loss of every run with L*; panel (c): the trajectory under the bounds."""
    import matplotlib.pyplot as plt  # imported here: spawned workers never plot

    from deqlab.report import add_reference_line, figure_style, save_figure

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
            fig, "Figure 2: DELMs vs a linear ResNet, and Corollary 1's bounds",
            f"Zou et al.'s data, n = {config.n}, d = m = {config.d}, noise {config.noise:g}; "
            f"DELM γ = {config.gamma:g}; full-batch GD, η = {config.lr:g}; linear ResNet: "
            f"{resnet_setting(config)}",
        )  # fmt: skip
        return save_figure(fig, directory, "fig2")

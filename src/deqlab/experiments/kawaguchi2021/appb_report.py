"""Appendix B's statements and figure, read from the tidy rows of :mod:`.appb`.

Growth in 1/(1 − γ) is measured by the exponent between the two largest γ of the sweep,
s = log(‖x(γ₂)‖/‖x(γ₁)‖) / log((1 − γ₁)/(1 − γ₂)): s → 1 for a term growing like
1/(1 − γ), s → 0 for a bounded one.  "Grows" is s ≥ :data:`GROWS`, "bounded" s ≤
:data:`BOUNDED` (both thresholds ours), worst over every task and recorded step.
Statements: Eq. (37) (theorem, float64 tolerance ours); the component along 1 grows; the
rest (I − P₁)vec V stays bounded; Appendix B's remainder g_γ = vec V + P₁r/(1 − γ) stays
bounded; and ours: the leading term is (πᵀr)/(1 − γ)·1 with π the Perron vector of σ(A),
which is P₁r/(1 − γ) only when πᵀr = 1ᵀr/m (e.g. σ(A) doubly stochastic, as at A = 0).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from deqlab.experiments.base import Row
from deqlab.experiments.kawaguchi2021.plots import legend_below, setting_subtitle
from deqlab.papers import KAWAGUCHI
from deqlab.statements import OURS, Kind, Statement, is_measured, not_measured, ours

if TYPE_CHECKING:
    from deqlab.experiments.kawaguchi2021.appb import AppBConfig

#: Growth exponent at or above which a norm "grows like 1/(1 − γ)" (ours).
GROWS = 0.9
#: Growth exponent at or below which a norm "stays bounded" (ours).
BOUNDED = 0.1
#: Largest relative gap of the Perron leading term at the largest γ (ours).
PERRON_RTOL = 1e-3
APPENDIX_B = "Appendix B"
EQ37 = "Appendix B, Eq. (37)"
FINDING = "docs/findings.md#kawaguchi-appb"


def statements(config: AppBConfig, rows: list[Row]) -> list[Statement]:
    """Eq. (37), the three growth statements, and the Perron leading term (ours)."""
    states = _states(rows)
    return [
        _eq37(config, rows),
        _growth(states, "along", "the component of V_t along 1 grows like 1/(1 − γ)", ">=", GROWS),
        _growth(states, "rest", "the rest (I − P₁)vec(V_t) stays bounded as γ → 1", "<=", BOUNDED),
        _growth(
            states,
            "paper_rest",
            "vec(V_t) = P₁r_t/(1 − γ) + g_γ with g_γ bounded as γ → 1",
            "<=",
            BOUNDED,
        ),
        _perron(states),
    ]


def _states(rows: Sequence[Row]) -> dict[tuple[str, int], list[Row]]:
    """The sweep rows of each (task, step), sorted by γ."""
    found: dict[tuple[str, int], list[Row]] = {}
    for r in rows:
        found.setdefault((str(r["task"]), int(r["step"])), []).append(r)
    return {k: sorted(v, key=lambda r: float(r["sweep_gamma"])) for k, v in found.items()}


def growth_exponent(sweep: Sequence[Row], column: str) -> float | None:
    """s between the two largest γ of ``sweep`` (module docstring); None if not measurable."""
    if len(sweep) < 2:
        return None
    (g1, x1), (g2, x2) = ((float(r["sweep_gamma"]), r[column]) for r in sweep[-2:])
    if not (is_measured(x1) and is_measured(x2)) or min(x1, x2) <= 0:
        return None
    return math.log(x2 / x1) / math.log((1 - g1) / (1 - g2))


def _growth(
    states: dict[tuple[str, int], list[Row]],
    column: str,
    name: str,
    relation: str,
    threshold: float,
) -> Statement:
    expected = f"growth exponent {relation} {threshold:g} (1: like 1/(1 − γ); 0: bounded; the "
    expected += "threshold is ours), worst over every task and recorded step"
    exponents = {k: growth_exponent(v, column) for k, v in states.items()}
    if not exponents or any(s is None for s in exponents.values()):
        return KAWAGUCHI.not_measured(
            Kind.THEOREM,
            APPENDIX_B,
            name=name,
            expected=expected,
            why="no sweep, or a sweep with fewer than 2 γ or a zero or non-finite norm",
        )
    pick = min if relation == ">=" else max
    where, value = pick(exponents.items(), key=lambda kv: kv[1])
    by_task = {}
    for (task, _), s in exponents.items():
        by_task[task] = pick(by_task.get(task, s), s)
    return KAWAGUCHI.theorem(
        APPENDIX_B,
        name=name,
        value=value,
        relation=relation,
        threshold=threshold,
        measured=f"{'smallest' if pick is min else 'largest'} exponent = {value:.3g} ({where[0]}, "
        f"step {where[1]}); per task: " + ", ".join(f"{t} {s:.3g}" for t, s in by_task.items()),
        expected=expected,
        detail="A_t and r_t = δ_tS_tU_t⁻¹∇L₀ held fixed from the trajectory while γ → 1 in "
        "vec V = −(I − γσ(A_t))⁻ᵀr_t, as Appendix B's argument does"
        + (f"; where it fails: {FINDING}" if column == "paper_rest" else ""),
    )


def _eq37(config: AppBConfig, rows: Sequence[Row]) -> Statement:
    name = "Eq. (37): V_t = −r_tᵀ(I − γσ(A_t))⁻¹ for the square loss"
    expected = f"≤ {config.tolerance:g} (agreement in float64; the tolerance is ours)"
    values = [r.get("eq37_error") for r in rows]
    if not values or not all(is_measured(v) for v in values):
        return KAWAGUCHI.not_measured(
            Kind.THEOREM,
            EQ37,
            name=name,
            expected=expected,
            why="no recorded step, or a non-finite gap",
        )
    worst = max(rows, key=lambda r: float(r["eq37_error"]))
    return KAWAGUCHI.theorem(
        EQ37,
        name=name,
        value=float(worst["eq37_error"]),
        relation="<=",
        threshold=config.tolerance,
        measured=f"largest relative gap of −r_tᵀU_t⁻¹ and δ_t d/dt Z_t (autograd) = "
        f"{float(worst['eq37_error']):.3g} ({worst['task']}, step {worst['step']})",
        expected=expected,
        detail="r_t = δ_tS_tU_t⁻¹∇L₀(Z_t), δ_t = δ̄_t/2: the error vector "
        "the proof of Theorem 2 implies (Appendix B gives no formula for r_t)",
    )


def _perron(states: dict[tuple[str, int], list[Row]]) -> Statement:
    name = "the term growing like 1/(1 − γ) is (πᵀr_t)/(1 − γ)·1, π the Perron vector of σ(A_t)"
    expected = f"≤ {PERRON_RTOL:g} at the largest γ (ours)"
    last = [v[-1] for v in states.values() if v]
    values = [r.get("perron_gap") for r in last]
    if not last or not all(is_measured(v) for v in values):
        return not_measured(
            name, Kind.OURS, OURS, expected=expected, why="no sweep, or a non-finite gap"
        )
    worst = max(last, key=lambda r: float(r["perron_gap"]))
    return ours(
        name,
        value=float(worst["perron_gap"]),
        relation="<=",
        threshold=PERRON_RTOL,
        measured=f"largest |(1 − γ)·mean(vec V) + πᵀr_t|/|πᵀr_t| = "
        f"{float(worst['perron_gap']):.3g} at γ = {float(worst['sweep_gamma']):g} "
        f"({worst['task']}, step {worst['step']})",
        expected=expected,
        detail="(σᵀ)ᵏ → 1πᵀ, so (I − γσ)⁻ᵀr = (πᵀr)/(1 − γ)·1 + O(1): Appendix B's "
        f"P₁r/(1 − γ) is this term only when πᵀr = 1ᵀr/m; {FINDING}",
    )


def plot(config: AppBConfig, rows: list[Row], directory: Path) -> list[Path]:
    """One panel per initialization: the three norms against 1/(1 − γ), at each step."""
    import matplotlib.pyplot as plt  # imported here: spawned workers never plot

    from deqlab.report import figure_style, save_figure

    states = _states(rows)
    tasks = sorted({task for task, _ in states})
    with figure_style():
        fig, axes = plt.subplots(1, max(len(tasks), 1), figsize=(11.0, 5.0), squeeze=False)
        styles = {
            "along": ("‖P₁ vec V‖ (along 1)", "-"),
            "rest": ("‖(I − P₁) vec V‖", "--"),
            "paper_rest": ("‖vec V + P₁r/(1 − γ)‖ (App. B's g_γ)", ":"),
        }
        for ax, task in zip(axes[0], tasks, strict=False):
            steps = sorted(step for t, step in states if t == task)
            for column, (label, line) in styles.items():
                for i, step in enumerate(steps):
                    sweep = states[(task, step)]
                    x = [1 / (1 - float(r["sweep_gamma"])) for r in sweep]
                    ax.loglog(
                        x,
                        [float(r[column]) for r in sweep],
                        line,
                        color=f"C{i}",
                        label=f"{label}, step {step}",
                    )
            ax.set(xlabel="1/(1 − γ)", ylabel="norm", title=f"A₀: {task}")
            legend_below(ax, ncol=2)
        setting_subtitle(
            fig,
            "Appendix B: Theorem 2's step along 1 and the rest as γ → 1",
            f"square loss, Gaussian inputs, n = {config.n}, d = m = {config.d}, m_y = 1; "
            f"trajectories at γ = {config.gamma:g}, GD η = {config.lr:g}; A_t, r_t held fixed",
        )
        return save_figure(fig, directory, "appb")

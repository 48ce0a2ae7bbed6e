"""Theorem 2's statements and figure, read from the tidy rows of :mod:`.thm2`.

Three theorem statements, each decided on its largest relative gap over every recorded
step, δ_t and loss against the float64 ``tolerance`` (ours): Eq. (13)'s velocity
d/dt f_θt = (1/δ_t)V_tφ with V_t the solved trust-region step; the proof's KKT multiplier
μ = 1/(2δ_t) (Appendix A.2); and D_t = U⁻ᵀSU⁻¹ for m_y = 1 in Eq. (26) (Appendix A.2).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from deqlab.experiments.base import Row
from deqlab.experiments.kawaguchi2021.plots import legend_below, setting_subtitle
from deqlab.papers import KAWAGUCHI
from deqlab.statements import Kind, Statement, is_measured

if TYPE_CHECKING:
    from deqlab.experiments.kawaguchi2021.thm2 import Thm2Config

#: Where an exact 0 is drawn on the log axis.
FLOOR = 1e-18

#: column -> (statement name, source location, what the column compares)
CHECKS = {
    "velocity_error": (
        "Theorem 2: d/dt f_θt = (1/δ_t)V_tφ with vec(V_t) the minimiser of L₀ᵗ over the trust "
        "region of G_t-norm (Eq. 13)",
        "Theorem 2, Eq. (13)",
        "max_i |d/dt f_θt(x_i) − (1/δ_t)V_tφ(x_i)| / max_i |d/dt f_θt(x_i)|, V_t from an "
        "independent solve of the trust-region subproblem, d/dt f by autograd along −∇L",
    ),
    "multiplier_error": (
        "Theorem 2's proof: the trust-region constraint is active with KKT multiplier μ = 1/(2δ_t)",
        "Appendix A.2 (proof of Theorem 2)",
        "|2μδ_t − 1| for the multiplier μ of the solved subproblem",
    ),
    "closed_form_error": (
        "for m_y = 1, D_t = U_t⁻ᵀS_tU_t⁻¹: d vec(B_tU_t⁻¹)/dt = −U_t⁻ᵀS_tU_t⁻¹∇L₀",
        "Appendix A.2 (D_t for m_y = 1), Eq. (26)",
        "max_k |measured d vec(Z)/dt − (−U⁻ᵀSU⁻¹∇L₀)|_k / max_k |measured d vec(Z)/dt|_k",
    ),
}


def statements(config: Thm2Config, rows: list[Row]) -> list[Statement]:
    """The three theorem statements of :data:`CHECKS`."""
    return [_check(config, rows, column) for column in CHECKS]


def _check(config: Thm2Config, rows: Sequence[Row], column: str) -> Statement:
    name, location, what = CHECKS[column]
    expected = f"≤ {config.tolerance:g} (agreement in float64; the tolerance is ours)"
    if not rows:
        return KAWAGUCHI.not_measured(
            Kind.THEOREM, location, name=name, expected=expected, why="no recorded step"
        )
    bad = [r for r in rows if not is_measured(r.get(column))]
    if bad:
        return KAWAGUCHI.not_measured(
            Kind.THEOREM,
            location,
            name=name,
            expected=expected,
            why=f"non-finite {column} at step {bad[0].get('step')} of {bad[0].get('task')}",
        )
    worst = max(rows, key=lambda r: float(r[column]))
    fractions = sorted({float(r["delta_fraction"]) for r in rows})
    return KAWAGUCHI.theorem(
        location,
        name=name,
        value=float(worst[column]),
        relation="<=",
        threshold=config.tolerance,
        measured=f"largest {what} = {float(worst[column]):.3g} ({worst['task']}, step "
        f"{worst['step']}, δ_t = {float(worst['delta_fraction']):g}·δ̄_t)",
        expected=expected,
        detail=f"{len(rows)} checks: {len({(r['task'], r['step']) for r in rows})} recorded "
        f"steps of {len({r['task'] for r in rows})} runs × δ_t/δ̄_t ∈ "
        f"{{{', '.join(f'{c:g}' for c in fractions)}}}, δ̄_t = sup{{δ : G_t ≻ 0}}",
    )


def plot(config: Thm2Config, rows: list[Row], directory: Path) -> list[Path]:
    """Relative gaps of Eq. (13) and of the multiplier per step, one curve per loss and δ."""
    import matplotlib.pyplot as plt  # imported here: spawned workers never plot
    from matplotlib.ticker import FuncFormatter

    from deqlab.report import add_reference_line, figure_style, save_figure

    with figure_style():
        fig, axes = plt.subplots(1, 2, figsize=(11.0, 4.8))
        panels = {
            "velocity_error": "(a) Eq. (13): d/dt f vs (1/δ)Vφ",
            "multiplier_error": "(b) KKT multiplier: |2μδ − 1|",
        }
        curves = sorted({(str(r["loss"]), float(r["delta_fraction"])) for r in rows})
        for ax, (column, title) in zip(axes, panels.items(), strict=True):
            for loss, fraction in curves:
                mine = [r for r in rows if r["loss"] == loss and r["delta_fraction"] == fraction]
                steps = [int(r["step"]) for r in mine]
                values = [max(float(r[column]), FLOOR) for r in mine]
                ax.plot(steps, values, marker="o", label=f"{loss}, δ = {fraction:g}·δ̄")
            ax.set_xscale("symlog", linthresh=1.0)  # linear up to 1, so step 0 shows
            ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
            ax.set_yscale("log")
            add_reference_line(ax, config.tolerance, "tolerance (ours)")
            ax.set(
                xlabel="# of iterations",
                ylabel="relative gap (exact 0 drawn at 10⁻¹⁸)",
                title=title,
            )
            legend_below(ax)
        setting_subtitle(
            fig,
            "Theorem 2: the DELM's flow is a trust-region Newton step",
            f"Gaussian inputs, n = {config.n}, d = m = {config.d}, m_y = 1; γ = "
            f"{config.gamma:g}; square loss and logistic loss (τ = {config.tau:g}); GD, "
            f"η = {config.lr:g}",
        )
        return save_figure(fig, directory, "thm2")

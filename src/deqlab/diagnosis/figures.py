"""The pictures of a diagnosis: per-sample estimates with their brackets, the NTK's spectrum,
and the diagnostics along a training run. Each returns a matplotlib Figure (no pyplot: a
notebook's backend is left alone), drawn in the reports' shared style."""

from __future__ import annotations

import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from deqlab.diagnosis.wellposed import WellPosedness
from deqlab.krylov_bounds import Estimate
from deqlab.report.figures import (
    CATEGORICAL_COLORS,
    add_reference_line,
    figure_style,
    plain_log_ticks,
)

_PANELS = (
    ("spectral_radius", "ρ(J_f)", 1.0),
    ("jacobian_norm", "‖J_f‖₂", 1.0),
    ("sigma_min", "σ_min(I − J_f)", 0.0),
)


def _new(width: float, height: float, columns: int = 1) -> tuple[Figure, list[Axes]]:
    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(1, columns, squeeze=False)[0]
    return fig, list(axes)


def _bracketed(ax: Axes, e: Estimate, label: str, reference: float) -> None:
    """Samples sorted by their estimate (an empirical quantile plot): the estimate as a dot
    (hollow where not converged) and its bracket as a bar (clipped where unbounded)."""
    order = torch.argsort(e.value)
    value, lower, upper = (t[order].to(torch.float64) for t in (e.value, e.lower, e.upper))
    converged = e.converged[order]
    finite = torch.isfinite(upper)
    top = float(torch.cat([value, upper[finite]]).max()) if len(value) else 1.0
    upper = torch.where(finite, upper, torch.full_like(upper, 1.15 * top))
    x = torch.arange(1, len(value) + 1)
    ax.vlines(x, lower, upper, color=CATEGORICAL_COLORS[0], alpha=0.45, linewidth=2.5)
    ax.scatter(x[converged], value[converged], s=14, color=CATEGORICAL_COLORS[0], zorder=3,
               label="converged")  # fmt: skip
    if bool((~converged).any()):
        ax.scatter(x[~converged], value[~converged], s=18, facecolors="white", zorder=3,
                   edgecolors=CATEGORICAL_COLORS[1], label="not converged")  # fmt: skip
    add_reference_line(ax, reference)
    ax.set_title(label)
    ax.set_xlabel("sample (sorted)")


def per_sample_figure(w: WellPosedness) -> Figure:
    """ρ(J_f), ‖J_f‖₂ and σ_min(I − J_f) at z*, per sample, with their brackets."""
    with figure_style():
        fig, axes = _new(10.5, 3.2, 3)
        for ax, (name, label, reference) in zip(axes, _PANELS, strict=True):
            _bracketed(ax, getattr(w, name), label, reference)
        axes[0].legend(loc="best")
        fig.suptitle("At z*, per sample: estimate (dot) and bracket (bar)")
    return fig


def ntk_figure(eigenvalues: tuple[float, ...], over: str) -> Figure:
    """The NTK's eigenvalues at z*, largest first, on a log scale (non-positive ones marked)."""
    with figure_style():
        fig, (ax,) = _new(5.2, 3.4)
        values = sorted(eigenvalues, reverse=True)
        positive = [(i + 1, v) for i, v in enumerate(values) if v > 0]
        if positive:
            ax.semilogy(*zip(*positive, strict=True), marker=".", linestyle="-")
        bad = [i + 1 for i, v in enumerate(values) if v <= 0]
        if bad:
            ax.scatter(bad, [min(v for _, v in positive) if positive else 1.0] * len(bad),
                       marker="x", color=CATEGORICAL_COLORS[1], label="λ ≤ 0")  # fmt: skip
            ax.legend(loc="best")
        ax.set_xlabel("index")
        ax.set_ylabel("eigenvalue of Θ")
        ax.set_title(_wrap(f"NTK at z* over {over}"), fontsize=9)
        plain_log_ticks(fig)
    return fig


def run_figure(table) -> Figure:
    """Along a run (a :meth:`DiagnosticsRecorder.table`): ‖J_f‖₂ and ρ(J_f) (max over the batch)
    and σ_min(I − J_f) (min) with their brackets at the recorded steps, and the forward
    solver's steps at every step."""
    recorded = table.dropna(subset=["norm_max"])
    steps = recorded["step"]
    with figure_style():
        fig, (norm, sigma, solver) = _new(10.5, 3.2, 3)
        norm.fill_between(steps, recorded["norm_lower"], recorded["norm_upper"], alpha=0.25,
                          color=CATEGORICAL_COLORS[0], label="bracket of ‖J_f‖₂")  # fmt: skip
        norm.plot(steps, recorded["norm_max"], marker=".", label="‖J_f‖₂ max")
        norm.plot(steps, recorded["rho_max"], marker=".", label="ρ(J_f) max")
        add_reference_line(norm, 1.0)
        norm.set_title("‖J_f‖₂ and ρ(J_f) at z*")
        sigma.fill_between(steps, recorded["sigma_min_lower"], recorded["sigma_min_upper"],
                           alpha=0.25, color=CATEGORICAL_COLORS[0], label="bracket")  # fmt: skip
        sigma.plot(steps, recorded["sigma_min"], marker=".", label="min over the batch")
        add_reference_line(sigma, 0.0)
        sigma.set_title("σ_min(I − J_f) at z*")
        solver.plot(table["step"], table["solver_steps"], color=CATEGORICAL_COLORS[2])
        solver.set_title("forward solver steps")
        for ax in (norm, sigma, solver):
            ax.set_xlabel("training step")
        norm.legend(loc="best")
        sigma.legend(loc="best")
    return fig


def _wrap(text: str, width: int = 60) -> str:
    if len(text) <= width:
        return text
    cut = text.rfind(" ", 0, width)
    return text[:cut] + "\n" + _wrap(text[cut + 1 :], width) if cut > 0 else text

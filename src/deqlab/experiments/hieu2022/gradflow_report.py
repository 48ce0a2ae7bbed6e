"""Statements and figure of ``hieu2022-gradflow``, computed from its tidy rows.

At each width n (builders of :mod:`deqlab.papers.hieu2022.claims`):

- Condition 1, Eqs. (3.8)–(3.9), as HYPOTHESIS statements with their margins and the width
  that would satisfy them; Theorem 3.3.1 (``L(θ(t)) ≤ exp(−λ₀²t/2)L(θ(0))``, on the
  ``h/2`` run plus its estimated Euler error) and the two steps of its proof (the
  parameters stay in their balls, ``σ_min(Z(t)) ≥ λ₀/2``) as THEOREM statements, NOT
  APPLICABLE where Condition 1 is unmet;
- Proposition 4 (Eq. 3.7) on the step-h run and Eq. (3.14) ``λ_min(K) ≥ σ_min(Z)²`` on
  every probe, and Lemmas 3.3.2–3.3.4 on every probe of both runs: THEOREM statements
  that need no hypothesis;
- ours: Euler's error ``|L_h − L_{h/2}|/L_{h/2}`` stays below ``flow_rtol``.

Figure ``gradflow``: the losses against ``λ₀²t/2`` with the bound; Proposition 4's
residuals at the probes; the margins of Condition 1 and of the lemmas against the width.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

from deqlab.experiments.base import Row
from deqlab.experiments.hieu2022.setting import (
    CONDITION_1_KEYS,
    CONDITION_LABELS,
    condition,
    margin,
)
from deqlab.papers.hieu2022.claims import LEMMAS, lemma_statements
from deqlab.papers.hieu2022.flow import (
    FlowTrace,
    feature_learning_check,
    kernel_floor_check,
    proposition_4_check,
    step_error_check,
    theorem_3_3_1,
)
from deqlab.papers.hieu2022.mondeq import PARAMETERS
from deqlab.papers.hieu2022.width_fit import WidthFit
from deqlab.statements import Run, Statement

if TYPE_CHECKING:
    from deqlab.experiments.hieu2022.gradflow import GradFlowConfig

LABELS = {k: CONDITION_LABELS[k] for k in CONDITION_1_KEYS}


def runs(rows: list[Row]) -> dict[int, dict[int, list[Row]]]:
    """Rows by width (increasing), then by refine (0: step h, 1: h/2), in step order."""
    groups: dict[int, dict[int, list[Row]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        groups[int(row["width"])][int(row["refine"])].append(row)
    return {
        w: {j: sorted(g[j], key=lambda r: int(r["step"])) for j in sorted(g)}
        for w, g in sorted(groups.items())
    }


def flow_trace(config: GradFlowConfig, coarse: list[Row], fine: list[Row]) -> FlowTrace:
    """The two runs of one width at the times they share (every other step of ``fine``)."""
    fine_at = {int(r["step"]): r for r in fine}
    shared = [(r, fine_at[2 * int(r["step"])]) for r in coarse if 2 * int(r["step"]) in fine_at]
    probes = [r for r in fine if r.get("sigma_min") is not None]
    first = coarse[0]
    return FlowTrace(
        width=int(first["width"]),
        lambda0=float(first["lambda0"]),
        radii=config.radii,
        times=[float(a["t"]) for a, _ in shared],
        loss_h=[float(a["loss"]) for a, _ in shared],
        loss_h2=[float(b["loss"]) for _, b in shared],
        bound=[float(b["bound"]) for _, b in shared],
        sigmas=[float(r["sigma_min"]) for r in probes],
        distances={p: [float(r[f"dist_{p}"]) for r in probes] for p in PARAMETERS},
    )


def _probe_statements(config: GradFlowConfig, width: int, coarse: list[Row]) -> list[Statement]:
    probes = [r for r in coarse if r.get("prop4_err_h") is not None]
    column = {
        k: [float(r[k]) for r in probes]
        for k in (
            "prop4_err_extrap",
            "prop4_err_h",
            "prop4_err_h2",
            "kernel_lambda_min",
            "sigma_min",
        )
    }
    flips = [int(r["prop4_flips"]) for r in probes]
    return [
        proposition_4_check(
            column["prop4_err_extrap"],
            column["prop4_err_h"],
            column["prop4_err_h2"],
            flips,
            rtol=config.prop4_rtol,
            width=width,
            steps=[float(r["prop4_step"]) for r in probes],
        ),
        kernel_floor_check(column["kernel_lambda_min"], column["sigma_min"], width=width),
        feature_learning_check(column["kernel_lambda_min"], column["sigma_min"], width=width),
    ]


def statements(config: GradFlowConfig, rows: list[Row]) -> list[Statement]:
    """The statements of the module docstring (a width needs both runs)."""
    found = {w: g for w, g in runs(rows).items() if set(g) == {0, 1}}
    fits = {
        LABELS[k]: WidthFit.of(
            list(found), [margin(g[0][0], k) for g in found.values()], n_samples=config.n_samples
        )
        for k in CONDITION_1_KEYS
    }
    out: list[Statement] = []
    for width, group in found.items():
        trace = flow_trace(config, group[0], group[1])
        conditions = [condition(group[0][0], k) for k in CONDITION_1_KEYS]
        out += theorem_3_3_1(trace, conditions, fits=fits, m=config.m)
        out += _probe_statements(config, width, group[0])
        out.append(step_error_check(trace, rtol=config.flow_rtol))
    probes = {
        w: Run.from_rows(
            f"n{w}", [{**r, "probe": i} for i, r in enumerate(g[0] + g[1])], step="probe"
        )
        for w, g in found.items()
    }
    return out + lemma_statements(probes, run="flow")


def plot(config: GradFlowConfig, rows: list[Row], directory: Path) -> list[Path]:
    """Write the figure of the module docstring; return its files."""
    import matplotlib.pyplot as plt

    from deqlab.report import add_reference_line, figure_style, save_figure, sequential_colors

    groups = runs(rows)
    colors = sequential_colors(len(groups))
    with figure_style():
        fig, (ax_loss, ax_prop, ax_margin) = plt.subplots(1, 3, figsize=(13, 4.4))
        for (width, group), color in zip(groups.items(), colors, strict=True):
            _plot_losses(ax_loss, group, color, width)
            coarse = [r for r in group.get(0, []) if r.get("prop4_err_h") is not None]
            t = [float(r["t"]) for r in coarse]
            ax_prop.semilogy(
                t,
                [float(r["prop4_err_h"]) for r in coarse],
                color=color,
                marker="o",
                label=f"n = {width}, step h",
            )
            ax_prop.semilogy(
                t,
                [max(float(r["prop4_err_extrap"]), 1e-16) for r in coarse],
                color=color,
                marker="x",
                linestyle=":",
                label=f"n = {width}, O(h) removed",
            )
        add_reference_line(ax_prop, config.prop4_rtol, "prop4_rtol (ours)")
        _plot_margins(ax_margin, groups)
        ax_loss.plot([], [], color="0.35", linestyle="--", label="exp(−λ₀²t/2)L(0)")
        ax_loss.set(xlabel=r"$\lambda_0^2 t/2$", ylabel=r"loss $L(\theta(t))$")
        ax_prop.set(xlabel="flow time t", ylabel=r"$\|D + Kr\| / \|Kr\|$")
        for ax in (ax_loss, ax_prop, ax_margin):
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, fontsize=7)
        fig.suptitle(_setting(config, rows), fontsize=10)
        return save_figure(fig, directory, "gradflow")


def _plot_losses(ax, group: dict[int, list[Row]], color, width: int) -> None:
    for refine, style in ((1, "-"), (0, ":")):
        run = group.get(refine, [])
        x = [float(r["lambda0"]) ** 2 * float(r["t"]) / 2 for r in run]
        label = f"n = {width}" if refine == 1 else None
        ax.semilogy(x, [float(r["loss"]) for r in run], color=color, linestyle=style, label=label)
        if refine == 1:
            ax.semilogy(
                x, [float(r["bound"]) for r in run], color=color, linestyle="--", linewidth=1.0
            )


def _plot_margins(ax, groups: dict[int, dict[int, list[Row]]]) -> None:
    from deqlab.report import add_reference_line

    widths = list(groups)
    places = range(len(widths))
    for key, label in LABELS.items():
        ax.semilogy(
            places,
            [margin(groups[w][0][0], key) if 0 in groups[w] else math.nan for w in widths],
            marker="o",
            label=label,
        )
    for key, (label, _) in LEMMAS.items():
        worst = [_worst_lemma_margin(groups[w], key) for w in widths]
        ax.semilogy(places, worst, marker="s", linestyle=":", label=f"{label}: rhs/lhs")
    add_reference_line(ax, 1.0, "holds above")
    ax.set(xlabel="width n", ylabel="margin at init (conditions) / worst probe (lemmas)")
    ax.set_xticks(places, [str(w) for w in widths])


def _worst_lemma_margin(group: dict[int, list[Row]], key: str) -> float:
    """``min rhs/lhs`` over the probes of both runs (≥ 1 when the lemma held throughout)."""
    ratios = [
        float(r[f"{key}_rhs"]) / float(r[f"{key}_lhs"])
        for g in group.values()
        for r in g
        if r.get(f"{key}_lhs") is not None and float(r[f"{key}_lhs"]) > 0
    ]
    return min(ratios, default=math.nan)


def _setting(config: GradFlowConfig, rows: list[Row]) -> str:
    scales = "/".join(f"{getattr(config, f'sigma_{p}'):g}" for p in PARAMETERS)
    return (
        f"sphere data, N = {config.n_samples}, d = {config.d}, m = {config.m:g}, "
        f"{config.radii_text()}, σ_A/σ_B/σ_U/σ_u = {scales}, Euler h = "
        f"{config.h_fraction:g}/λ_max(K(0)) and h/2, {config.steps} steps of h"
    )

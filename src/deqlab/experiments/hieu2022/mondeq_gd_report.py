"""Statements and figure of ``hieu2022-mondeq-gd``, computed from its tidy rows.

Chapter 3 has no experiment, so no statement here is an observation of the thesis.

At each width n (:func:`deqlab.papers.hieu2022.claims.theorem_3_3_5`):
Condition 2, Eqs. (3.16)–(3.18), and ``η ≤ η_max`` are HYPOTHESIS statements with their
margins and what would satisfy them; Theorem 3.3.5 (``L(k+1) ≤ (1 − ηλ₀²/4) L(k)``),
Proposition 5 (the parameters stay in their balls) and Proposition 6 (``σ_min(Z(k)) ≥
λ₀/2``) are THEOREM statements, NOT APPLICABLE at a width where a hypothesis is unmet.
Ours: Eq. (3.17) as Proposition 6's proof needs it is one more hypothesis, and Theorem
3.3.5 is decided a second time under it (the printed Eq. 3.17 drops the proof's 1/m², 1/m⁴).

Ours, across the widths: GD reaches ``L(K) ≤ loss_rtol · L(0)`` at the widest width;
wider is faster (``L(K)/L(0)`` decreases with n); ``λ₀`` increases with n; the margin
``lhs/rhs`` of each equation of Condition 2 grows with n.

Figure ``mondeq_gd``: loss and the Theorem 3.3.5 curve per width (log scale);
``σ_min(Z(k))/λ₀`` with the line at 1/2; the margins of Conditions 1–2 against the width.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

from deqlab.experiments.base import Row
from deqlab.experiments.hieu2022.setting import (
    AS_PROVED_KEY,
    CONDITION_LABELS,
    condition,
    has_condition,
    margin,
)
from deqlab.papers.hieu2022.claims import lemma_statements, proposition_3_check
from deqlab.papers.hieu2022.conjecture import conjecture_1_check, stable_step_hypothesis
from deqlab.papers.hieu2022.gd_proof import GDTrace, theorem_3_3_5, trace_from_records
from deqlab.papers.hieu2022.mondeq import PARAMETERS
from deqlab.papers.hieu2022.width_fit import WidthFit
from deqlab.papers.hieu2022.widths import sweep_statements
from deqlab.statements import Run, Statement

if TYPE_CHECKING:
    from deqlab.experiments.hieu2022.mondeq_gd import MonDEQGDConfig

CONDITION_2 = ("eq3_16", "eq3_17", "eq3_18")


def by_width(rows: list[Row]) -> dict[int, list[Row]]:
    """Rows grouped by width (increasing), each group in step order."""
    groups: dict[int, list[Row]] = defaultdict(list)
    for row in rows:
        groups[int(row["width"])].append(row)
    return {w: sorted(groups[w], key=lambda r: int(r["step"])) for w in sorted(groups)}


def trace(config: MonDEQGDConfig, run: list[Row]) -> GDTrace:
    """The GD run of one width, as the statement builders take it."""
    first = run[0]
    return trace_from_records(
        run,
        width=int(first["width"]),
        eta=float(first["eta"]),
        eta_max=float(first["eta_max"]),
        lambda0=float(first["lambda0"]),
        radii=config.radii,
    )


def statements(config: MonDEQGDConfig, rows: list[Row]) -> list[Statement]:
    """Every statement of the experiment: :func:`mondeq_gd_statements`, Lemmas 3.3.2–3.3.4
    at the measured steps, Proposition 3 at each width and Conjecture 1 at the widest, under
    its stable-step hypothesis (ours)."""
    runs = by_width(rows)
    found = [
        proposition_3_check(
            _float(run[0].get("prop3_lhs")),
            _float(run[0].get("prop3_rhs")),
            alpha=_float(run[0].get("prop3_alpha")),
            width=width,
        )
        for width, run in runs.items()
    ]
    widest = config.widths[-1]
    run = runs.get(widest, [])
    losses = [_float(r.get("loss")) for r in run]
    first = run[0] if run else {}
    stable = stable_step_hypothesis(
        _float(first.get("eta")),
        _float(first.get("kernel_lambda_max0")),
        _float(first.get("gram_lambda_max0")),
        width=widest,
    )
    found += [stable, conjecture_1_check(losses, width=widest, given=[stable])]
    lemmas = lemma_statements(probes(runs), run="GD run")
    return mondeq_gd_statements(config, rows) + lemmas + found


def probes(runs: dict[int, list[Row]]) -> dict[int, Run]:
    """The rows of each width as a run (the lemmas' sides where they were evaluated)."""
    return {w: Run.from_rows(f"n{w}", run) for w, run in runs.items()}


def mondeq_gd_statements(config: MonDEQGDConfig, rows: list[Row]) -> list[Statement]:
    """The statements of the module docstring (widths without rows are not measured)."""
    runs = by_width(rows)
    keys = _condition_keys(runs)
    fits = {
        CONDITION_LABELS[k]: WidthFit.of(
            list(runs), [margin(r[0], k) for r in runs.values()], n_samples=config.n_samples
        )
        for k in keys
    }
    out: list[Statement] = []
    for run in runs.values():
        conditions = [condition(run[0], k) for k in CONDITION_2]
        proved = condition(run[0], AS_PROVED_KEY) if AS_PROVED_KEY in keys else None
        out += theorem_3_3_5(
            trace(config, run),
            conditions,
            fits=fits,
            m=config.m,
            n_samples=config.n_samples,
            as_proved=proved,
        )
    return out + _ours(config, runs, keys)


def _condition_keys(runs: dict[int, list[Row]]) -> tuple[str, ...]:
    """Condition 2's keys, with :data:`AS_PROVED_KEY` where every width has it (runs of an
    older deqlab lack it)."""
    proved = bool(runs) and all(has_condition(run[0], AS_PROVED_KEY) for run in runs.values())
    return (*CONDITION_2, AS_PROVED_KEY) if proved else CONDITION_2


def _ours(
    config: MonDEQGDConfig, runs: dict[int, list[Row]], keys: tuple[str, ...]
) -> list[Statement]:
    widths = list(config.widths)
    lambda0 = {w: _float(runs[w][0]["lambda0"]) if w in runs else math.nan for w in widths}
    margins = {
        CONDITION_LABELS[key]: {
            w: margin(runs[w][0], key) if w in runs else math.nan for w in widths
        }
        for key in keys
    }
    finals = {w: _final(runs.get(w)) for w in widths}
    return sweep_statements(
        finals, lambda0, margins, loss_rtol=config.loss_rtol, steps=config.steps
    )


def _final(run: list[Row] | None) -> float:
    """``L(K)/L(0)`` of a run (NaN without rows)."""
    if not run:
        return math.nan
    return _float(run[-1]["loss"]) / _float(run[0]["loss"])


def _float(x: object) -> float:
    return math.nan if x is None else float(x)


def plot(config: MonDEQGDConfig, rows: list[Row], directory: Path) -> list[Path]:
    """Write the figure of the module docstring; return its files."""
    import matplotlib.pyplot as plt

    from deqlab.report import add_reference_line, figure_style, save_figure, sequential_colors

    runs = by_width(rows)
    colors = sequential_colors(len(runs))
    with figure_style():
        fig, (ax_loss, ax_sigma, ax_cond) = plt.subplots(1, 3, figsize=(13, 4.4))
        for (width, run), color in zip(runs.items(), colors, strict=True):
            steps = [int(r["step"]) for r in run if r.get("loss_bound") is not None]
            ax_loss.semilogy(
                steps,
                [float(r["loss"]) for r in run[: len(steps)]],
                color=color,
                label=f"n = {width}",
            )
            ax_loss.semilogy(
                steps,
                [float(r["loss_bound"]) for r in run[: len(steps)]],
                color=color,
                linestyle="--",
                linewidth=1.0,
            )
            lam0 = float(run[0]["lambda0"])
            ratios = [float(r["sigma_min"]) / lam0 for r in run[: len(steps)]]
            ax_sigma.plot(steps, ratios, color=color, label=f"n = {width}")
        bound = "(1 − ηλ₀²/4)^k L(0), Eq. (3.20)"
        if any(r.get("loss_bound") == 0 for r in rows):
            bound += "\n(0 from k = 1, below the log axis)"
        ax_loss.plot([], [], color="0.35", linestyle="--", linewidth=1.0, label=bound)
        add_reference_line(ax_sigma, 0.5, r"$\lambda_0/2$ (Hypothesis 2)")
        widths = list(runs)
        places = range(len(widths))  # one place per width, labelled with it
        for key, label in CONDITION_LABELS.items():
            if all(has_condition(runs[w][0], key) for w in widths):
                margins = [margin(runs[w][0], key) for w in widths]
                ax_cond.semilogy(places, margins, marker="o", label=label)
        add_reference_line(ax_cond, 1.0, "lhs = rhs (holds above)")
        ax_loss.set(xlabel="GD step k", ylabel=r"loss $L(\theta(k))$")
        ax_sigma.set(xlabel="GD step k", ylabel=r"$\sigma_{\min}(Z(k))/\lambda_0$")
        ax_cond.set(xlabel="width n", ylabel="margin lhs / rhs at init")
        ax_cond.set_xticks(places, [str(w) for w in widths])
        for ax in (ax_loss, ax_sigma, ax_cond):
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)
        fig.suptitle(_setting(config, rows), fontsize=10)
        return save_figure(fig, directory, "mondeq_gd")


def _setting(config: MonDEQGDConfig, rows: list[Row]) -> str:
    """The subtitle: data, sizes, m, R, the initial scales and η."""
    if config.eta_rule == "theorem":
        eta = f"η = {config.eta_fraction:g}·η_max(n) (Theorem 3.3.5's bound)"
    else:
        value = f" = {float(rows[0]['eta']):.3g}" if rows else ""
        eta = f"η{value} ({config.eta_fraction:g}·2/λ_max(Z(0)ᵀZ(0)) of the widest)"
    scales = "/".join(f"{getattr(config, f'sigma_{p}'):g}" for p in PARAMETERS)
    return (
        f"sphere data, N = {config.n_samples}, d = {config.d}, m = {config.m:g}, "
        f"{config.radii_text()}, σ_A/σ_B/σ_U/σ_u = {scales}, {eta}, K = {config.steps}"
    )

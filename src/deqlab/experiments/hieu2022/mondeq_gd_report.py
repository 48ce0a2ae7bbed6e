"""Claims and figures of ``hieu2022-mondeq-gd``, computed from its tidy rows.

Claims (one set per run, widths in increasing order):

- GD drives the loss below ``loss_rtol · L(0)`` at the widest width (Thm 3.3.5);
- the final ``L(K)/L(0)`` decreases with the width (λ_0, hence the rate, grows with it);
- the loss stays under the Theorem 3.3.5 curve ``(1 − ηλ_0²/4)^k L(0)`` at every width;
- ``σ_min(Z(k)) ≥ λ_0/2`` throughout (Hypothesis 2) at the widest width;
- ``λ_0 = σ_min(Z(0))`` increases with the width;
- the margin ``lhs/rhs`` of each equation of Condition 2 grows with the width;
- Condition 2 holds at initialisation for some width (the premise of Theorem 3.3.5).

Figure ``mondeq_gd``: loss and the Theorem 3.3.5 curve per width (log scale);
``σ_min(Z(k))/λ_0`` with the line at 1/2; the margins of Conditions 1–2 against the width.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from pathlib import Path

from deqlab.experiments.base import Claim, Row

CONDITION_LABELS = {
    "eq3_8": "(3.8)",
    "eq3_9": "(3.9)",
    "eq3_16": "(3.16)",
    "eq3_17": "(3.17)",
    "eq3_18": "(3.18)",
}
CONDITION_2 = ("eq3_16", "eq3_17", "eq3_18")


def by_width(rows: list[Row]) -> dict[int, list[Row]]:
    """Rows grouped by width (increasing), each group in step order."""
    groups: dict[int, list[Row]] = defaultdict(list)
    for row in rows:
        groups[int(row["width"])].append(row)
    return {w: sorted(groups[w], key=lambda r: int(r["step"])) for w in sorted(groups)}


def margin(row: Row, key: str) -> float:
    """``lhs / rhs`` of condition ``key`` (≥ 1 exactly when it holds)."""
    rhs = float(row[f"{key}_rhs"])
    return float(row[f"{key}_lhs"]) / rhs if rhs > 0 else float("inf")


def _increasing(values: list[float]) -> bool:
    return all(b > a for a, b in itertools.pairwise(values))


def mondeq_gd_claims(config, rows: list[Row]) -> list[Claim]:
    """The named checks of the module docstring."""
    runs = by_width(rows)
    widths = list(runs)
    final = {w: float(r[-1]["loss"]) / float(r[0]["loss"]) for w, r in runs.items()}
    under = {w: all(bool(x.get("loss_ok")) for x in r) for w, r in runs.items()}
    widest = runs[widths[-1]]
    lam0_widest = float(widest[0]["lambda0"])
    sigma = (
        min(float(x.get("sigma_min", 0.0)) for x in widest) / lam0_widest if lam0_widest else 0.0
    )
    lambda0 = [float(runs[w][0]["lambda0"]) for w in widths]
    fmt = ", ".join
    claims = [
        Claim(
            "GD reaches a small training loss at the widest width",
            final[widths[-1]] <= config.loss_rtol,
            f"L(K)/L(0) = {final[widths[-1]]:.2e} at n = {widths[-1]}",
            f"<= {config.loss_rtol:g}",
        ),
        Claim(
            "wider is faster: L(K)/L(0) decreases with the width (λ₀ and the rate grow)",
            _increasing([-final[w] for w in widths]),
            fmt(f"n={w}: {v:.2e}" for w, v in final.items()),
            "strictly decreasing",
        ),
        Claim(
            "the loss stays under the Theorem 3.3.5 curve (1 − ηλ₀²/4)^k L(0)",
            all(under.values()),
            fmt(f"n={w}: {'yes' if ok else 'no'}" for w, ok in under.items()),
            "every step of every width",
        ),
        Claim(
            "σ_min(Z(k)) stays >= λ₀/2 at the widest width (Hypothesis 2)",
            sigma >= 0.5,
            f"min_k σ_min(Z(k))/λ₀ = {sigma:.3f} at n = {widths[-1]}",
            ">= 0.5",
        ),
        Claim(
            "λ₀ = σ_min(Z(0)) increases with the width",
            _increasing(lambda0),
            fmt(f"n={w}: {v:.3g}" for w, v in zip(widths, lambda0, strict=True)),
            "strictly increasing",
        ),
    ]
    for key in CONDITION_2:
        margins = [margin(runs[w][0], key) for w in widths]
        claims.append(
            Claim(
                f"the margin lhs/rhs of Eq. {CONDITION_LABELS[key]} grows with the width",
                _increasing(margins),
                fmt(f"n={w}: {v:.2e}" for w, v in zip(widths, margins, strict=True)),
                "strictly increasing",
            )
        )
    holds = {w: all(bool(runs[w][0][f"{k}_holds"]) for k in CONDITION_2) for w in widths}
    claims.append(
        Claim(
            "Condition 2 (Eqs. 3.16–3.18) holds at initialization for some width",
            any(holds.values()),
            fmt(
                f"n={w}: min margin {min(margin(runs[w][0], k) for k in CONDITION_2):.2e}"
                for w in widths
            ),
            "all three margins >= 1 for some width",
            "the premise of Theorem 3.3.5; (3.18) needs m < 1/√20 (Lemma 3.3.3)",
        )
    )
    return claims


def plot_mondeq_gd(rows: list[Row], directory: Path) -> list[Path]:
    """Write the figure of the module docstring; return its files."""
    import matplotlib.pyplot as plt

    from deqlab.report import add_reference_line, figure_style, save_figure, sequential_colors

    runs = by_width(rows)
    colors = sequential_colors(len(runs))
    with figure_style():
        fig, (ax_loss, ax_sigma, ax_cond) = plt.subplots(1, 3, figsize=(13, 3.6))
        for (width, run), color in zip(runs.items(), colors, strict=True):
            steps = [int(r["step"]) for r in run if r.get("loss_bound") is not None]
            ax_loss.semilogy(steps, [float(r["loss"]) for r in run[: len(steps)]], color=color,
                             label=f"n = {width}")  # fmt: skip
            ax_loss.semilogy(steps, [float(r["loss_bound"]) for r in run[: len(steps)]],
                             color=color, linestyle="--", linewidth=1.0)  # fmt: skip
            lam0 = float(run[0]["lambda0"])
            if lam0 > 0:
                ratios = [float(r["sigma_min"]) / lam0 for r in run[: len(steps)]]
                ax_sigma.plot(steps, ratios, color=color, label=f"n = {width}")
        add_reference_line(ax_sigma, 0.5, r"$\lambda_0/2$")
        widths = list(runs)
        for key, label in CONDITION_LABELS.items():
            ax_cond.semilogy(widths, [margin(runs[w][0], key) for w in widths], marker="o",
                             label=f"Eq. {label}")  # fmt: skip
        add_reference_line(ax_cond, 1.0, "holds above")
        ax_loss.set(xlabel="GD step k", ylabel="loss (dashed: Thm 3.3.5 curve)")
        ax_sigma.set(xlabel="GD step k", ylabel=r"$\sigma_{\min}(Z(k))/\lambda_0$")
        ax_cond.set(xlabel="width n", ylabel="margin lhs / rhs at init", xscale="log")
        for ax in (ax_loss, ax_sigma, ax_cond):
            ax.legend()
        return save_figure(fig, directory, "mondeq_gd")

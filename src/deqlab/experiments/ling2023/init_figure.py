"""The figure of ``ling2023-init``: six log-scale panels of the tidy table of
:mod:`deqlab.papers.ling2023.init_theorems` (Lemma 1, Theorems 3, 4, 5, the concentration of
G/m, and Theorem 2), each measured value beside the paper's form."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from deqlab.experiments.ling2023.init_report import draws
from deqlab.papers.ling2023.draws import seed_mean, select
from deqlab.papers.ling2023.init_theorems import lemma1_bound
from deqlab.papers.ling2023.initialization import FAILURE_PROBABILITY

if TYPE_CHECKING:
    pass


def plot_initialization(
    rows: Sequence[dict], n: int, setting: str, directory: str | Path
) -> list[Path]:
    """Six log-scale panels (Lemma 1, Theorems 3, 4, 5, concentration, Theorem 2) → PNG + PDF.

    ``n`` scales Theorem 3's form n l σ_w^(2l); ``setting`` (data set, n, d, σ_w²) is the
    figure's subtitle. Returns the paths of
    ``<directory>/init_theorems.png`` and ``.pdf``.
    """
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullLocator

    from deqlab.report.figures import (
        add_reference_line,
        figure_style,
        save_figure,
        sequential_colors,
    )

    measured = draws(rows)
    norms = select(measured, "W_spectral_norm")
    widths = sorted({int(r["m"]) for r in norms})
    sigma_w = norms[0]["theory"] / (2 * math.sqrt(2))
    with figure_style():
        fig, axes = plt.subplots(2, 3, figsize=(15, 9.5))
        ax = axes[0, 0]
        ax.semilogx(
            [r["m"] for r in norms],
            [r["measured"] for r in norms],
            "o",
            alpha=0.7,
            label=r"$\|W(0)\|_2$ (seeds)",
        )
        finite = [lemma1_bound(sigma_w**2, m, FAILURE_PROBABILITY) for m in widths]
        ax.semilogx(widths, finite, "k:", label=r"$2\sqrt{2}\sigma_w(1+\varepsilon_m)$")
        add_reference_line(ax, norms[0]["theory"], r"$2\sqrt{2}\sigma_w$ (Lemma 1)")
        ax.set(xlabel="width m", ylabel=r"$\|W(0)\|_2$", title="Lemma 1")
        ax = axes[0, 1]
        k3 = sorted(select(measured, "K_minus_Kl_fro"), key=lambda r: r["depth"])
        depths3 = [r["depth"] for r in k3]
        ax.semilogy(depths3, [r["measured"] for r in k3], "o-", label=r"$\|K - K^{(l)}\|_F$")
        ax.semilogy(depths3, [r["theory"] for r in k3], "k--", label=r"$\sigma_w^{2l}$")
        ax.semilogy(
            depths3,
            [n * l * r["theory"] for l, r in zip(depths3, k3, strict=True)],
            "k:",
            label=r"$n\,l\,\sigma_w^{2l}$ (Theorem 3)",
        )
        ax.set(xlabel="depth l", title="Theorem 3")
        colors = sequential_colors(len(widths))
        panels = (
            (
                "G_minus_Gl_fro_over_m",
                axes[0, 2],
                "Theorem 4",
                r"$(2\sqrt{2}\sigma_w)^l$",
                r"$\|G - G^{(l)}\|_F / m$",
            ),
            (
                "Gl_over_m_minus_Kl_fro",
                axes[1, 0],
                "Theorem 5",
                r"$n (2\sqrt{2}\sigma_w)^l$",
                r"$\|G^{(l)}/m - K^{(l)}\|_F$",
            ),
        )
        for quantity, ax, title, ref_label, ylabel in panels:
            for color, m in zip(colors, widths, strict=True):
                depths, mean = seed_mean(select(measured, quantity, m=m), "depth")
                ax.semilogy(depths, mean, "o-", color=color, label=f"m = {m}")
            ref = sorted({(r["depth"], r["theory"]) for r in select(measured, quantity)})
            ax.semilogy(*zip(*ref, strict=True), "k--", label=ref_label)
            ax.set(xlabel="depth l", ylabel=f"{ylabel} (seed mean)", title=title)
        ax = axes[1, 1]
        conc = select(measured, "G_over_m_minus_K_fro")
        ax.loglog(
            [r["m"] for r in conc], [r["measured"] for r in conc], "o", alpha=0.6, label="seeds"
        )
        ms, mean = seed_mean(conc, "m")
        if len(ms) >= 2:
            coef = np.polyfit(np.log(ms), np.log(mean), 1)
            ax.loglog(
                ms, np.exp(np.polyval(coef, np.log(ms))), "-", label=f"fit: slope {coef[0]:.2f}"
            )
        add_reference_line(ax, conc[0]["theory"], r"$\lambda_*/2$ (enough for Weyl)")
        ax.set(xlabel="width m", ylabel=r"$\|G/m - K\|_F$", title="Proof of Theorem 2")
        ax = axes[1, 2]
        lam = select(measured, "lambda0")
        ax.loglog(
            [r["m"] for r in lam],
            [r["measured"] for r in lam],
            "o",
            alpha=0.7,
            label=r"$\lambda_0$ (seeds)",
        )
        ref = sorted({(r["m"], r["theory"]) for r in lam})
        ax.loglog(*zip(*ref, strict=True), "k--", label=r"$m \lambda_* / 2$")
        ax.set(xlabel="width m", ylabel=r"$\lambda_0 = \lambda_{min}(G)$", title="Theorem 2")
        for ax in axes.flat:
            ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3)
        for ax in (axes[0, 0], axes[1, 1], axes[1, 2]):  # log width axes: one label per m
            ax.set_xticks(widths, [str(m) for m in widths])
            ax.xaxis.set_minor_locator(NullLocator())
        fig.suptitle(f"Lemma 1 and Theorems 2–5 at initialization: {setting}")
        return save_figure(fig, directory, "init_theorems")

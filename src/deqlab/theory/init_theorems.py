"""The initialization theorems of Ling et al. (2023), measured: Lemma 1 and Theorems 2-5.

For inputs X (d, n), widths m and seeds, each network is drawn by Assumption 1
(:meth:`deqlab.models.relu_deq.ReLUDEQ.init`) and measured next to the theory:

* Lemma 1: ‖W(0)‖₂ against 2√2 σ_w — the Bai-Yin edge 2√m·σ_w√(2/m), so at finite m the
  norm lands within O(m^(-2/3)) of it, on either side (computed by Lanczos, spectra.py).
* Theorem 3: ‖K - K^(l)‖_F against l, reference rate σ_w^{2l} (deterministic). Theorem 3
  states O(n l σ_w^{2l}); the last line of its proof (Appendix C.2) writes O(n σ_w^{2l}),
  dropping the factor l of the line before. The claim checks the stated form.
* Theorem 4: ‖G - G^(l)‖_F / m against l, reference rate (2√2 σ_w)^l, where
  G^(l) = Z^(l)ᵀZ^(l) for l explicit weight-tied layers from Z^(0) = 0 (Section 4).
* Theorem 5: ‖G^(l)/m - K^(l)‖_F against its bound n (2√2 σ_w)^l.
* Proof of Theorem 2 (Section 4.4): ‖G/m - K‖_F against m (concentration; slope ≈ -1/2),
  next to λ*/2, the size below which Weyl's inequality gives λ_0 ≥ m λ*/2.
* Theorem 2: λ_0 = λ_min(G) against m λ*/2.

The result is a tidy table: one dict per measurement with the keys of :data:`ROW_KEYS`
(``None`` where a key does not apply). :func:`initialization_claims` turns the table into
named pass/fail claims and :func:`plot_initialization` into log-log figures.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import torch

from deqlab._checks import check_int, check_real
from deqlab.models.relu_deq import ReLUDEQ
from deqlab.theory.kernels import (
    check_inputs,
    check_sigma_w2,
    least_eigenvalue,
    population_gram,
)
from deqlab.theory.spectra import gram_lambda_min, spectral_norm_lanczos

__all__ = [
    "ROW_KEYS",
    "fit_loglog_slope",
    "initialization_claims",
    "measure_initialization",
    "measure_theorem3",
    "measure_width_sweep",
    "plot_initialization",
    "theorem2_fractions",
]

#: Columns of every row: which result, what was measured, where, and the theory's value.
ROW_KEYS = ("theorem", "quantity", "m", "seed", "depth", "measured", "theory")
_QUANTITIES = (
    "W_spectral_norm",
    "K_minus_Kl_fro",
    "G_minus_Gl_fro_over_m",
    "Gl_over_m_minus_Kl_fro",
    "G_over_m_minus_K_fro",
    "lambda0",
)


def _row(theorem, quantity, measured, theory, *, m=None, seed=None, depth=None) -> dict:
    return dict(
        zip(
            ROW_KEYS,
            (theorem, quantity, m, seed, depth, float(measured), float(theory)),
            strict=True,
        )
    )


def _check_ints(name: str, values: Iterable[int], min_value: int) -> list[int]:
    values = [check_int(f"{name}[{i}]", v, min_value=min_value) for i, v in enumerate(values)]
    if not values:
        raise ValueError(f"`{name}` must hold at least one value; got none")
    return sorted(set(values))


def measure_theorem3(X: torch.Tensor, sigma_w2: float, depths: Sequence[int]) -> list[dict]:
    """Rows ``‖K - K^(l)‖_F`` for l in ``depths`` with theory σ_w^{2l} (Theorem 3 (i))."""
    X = check_inputs(X)
    sigma_w2 = check_sigma_w2(sigma_w2)
    K = population_gram(X, sigma_w2)
    return [
        _row(
            "theorem3",
            "K_minus_Kl_fro",
            torch.linalg.matrix_norm(K - population_gram(X, sigma_w2, l)),
            sigma_w2**l,
            depth=l,
        )
        for l in _check_ints("depths", depths, 1)
    ]


@torch.no_grad()
def measure_width_sweep(
    X: torch.Tensor,
    sigma_w2: float,
    widths: Sequence[int],
    seeds: Sequence[int],
    depths: Sequence[int],
    *,
    tol: float = 1e-12,
) -> list[dict]:
    """Rows for Lemma 1 and Theorems 2, 4, 5 over ``widths`` × ``seeds`` (module docstring).

    The equilibrium Z = Z(0) is solved to relative residual ``tol`` in X's dtype (float64
    recommended: errors below ~1e3·tol·‖G‖_F/m are round-off, not Theorem 4's decay).
    """
    X = check_inputs(X)
    sigma_w2 = check_sigma_w2(sigma_w2)
    widths, seeds = _check_ints("widths", widths, 1), _check_ints("seeds", seeds, 0)
    depths = _check_ints("depths", depths, 1)
    tol = check_real("tol", tol, low=0.0, low_inclusive=False)
    d, n = X.shape
    K = population_gram(X, sigma_w2)
    K_layers = {l: population_gram(X, sigma_w2, l) for l in depths}
    lambda_star = least_eigenvalue(K).value
    bound = 2.0 * math.sqrt(2.0 * sigma_w2)  # 2√2 σ_w
    rows: list[dict] = []
    for m in widths:
        for seed in seeds:
            model = ReLUDEQ.init(d, m, sigma_w2=sigma_w2, seed=seed, dtype=X.dtype, device=X.device)
            where = {"m": m, "seed": seed}
            w_norm, _ = spectral_norm_lanczos(model.W.detach(), tol=1e-10, max_iter=400)
            rows.append(_row("lemma1", "W_spectral_norm", w_norm, bound, **where))
            tied_grams = {}  # l -> G^(l), (n, n)
            Z_l = torch.zeros(m, n, dtype=X.dtype, device=X.device)
            for l in range(1, depths[-1] + 1):
                Z_l = model.layer(Z_l, X)  # (m, n) weight-tied layer l of Eq. (1), Z^(0) = 0
                if l in K_layers:
                    tied_grams[l] = (Z_l.T @ Z_l).to(K)
            # the equilibrium, warm-started from the last tied layer Z^(L)
            Z = model.equilibrium(X, tol=tol, Z0=Z_l).raise_if_failed("forward").Z  # (m, n)
            G = (Z.T @ Z).to(K)  # (n, n)
            for l, G_l in tied_grams.items():
                gap4 = torch.linalg.matrix_norm(G - G_l) / m
                rows.append(
                    _row("theorem4", "G_minus_Gl_fro_over_m", gap4, bound**l, depth=l, **where)
                )
                gap5 = torch.linalg.matrix_norm(G_l / m - K_layers[l])
                rows.append(
                    _row("theorem5", "Gl_over_m_minus_Kl_fro", gap5, n * bound**l, depth=l, **where)
                )
            gap = torch.linalg.matrix_norm(G / m - K)
            rows.append(_row("theorem2", "G_over_m_minus_K_fro", gap, lambda_star / 2, **where))
            rows.append(
                _row("theorem2", "lambda0", gram_lambda_min(Z), m * lambda_star / 2, **where)
            )
    return rows


def measure_initialization(
    X: torch.Tensor,
    sigma_w2: float = 0.08,
    widths: Sequence[int] = (256, 512, 1024, 2048, 4096, 8192),
    seeds: Sequence[int] = (0, 1, 2),
    depths: Sequence[int] = tuple(range(1, 13)),
    *,
    tol: float = 1e-12,
) -> list[dict]:
    """All rows: :func:`measure_theorem3` followed by :func:`measure_width_sweep`."""
    return measure_theorem3(X, sigma_w2, depths) + measure_width_sweep(
        X, sigma_w2, widths, seeds, depths, tol=tol
    )


def fit_loglog_slope(x: Sequence[float], y: Sequence[float]) -> float:
    """Least-squares slope of log y against log x (needs two distinct x and y > 0)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or len(np.unique(x)) < 2 or (x <= 0).any() or (y <= 0).any():
        raise ValueError(
            "`x`, `y` must be equally long with >= 2 distinct x and all values > 0; got "
            f"x={x.tolist()}, y={y.tolist()}"
        )
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def _select(rows: Sequence[dict], quantity: str, **where) -> list[dict]:
    return [
        r for r in rows if r["quantity"] == quantity and all(r[k] == v for k, v in where.items())
    ]


def _seed_mean(rows: Sequence[dict], by: str) -> tuple[list, list[float]]:
    """Mean of ``measured`` over seeds, grouped by ``by`` (sorted)."""
    keys = sorted({r[by] for r in rows})
    return keys, [float(np.mean([r["measured"] for r in rows if r[by] == k])) for k in keys]


def theorem2_fractions(rows: Sequence[dict]) -> dict[int, float]:
    """Per width m: the fraction of seeds with λ_0 ≥ m λ*/2 (Theorem 2)."""
    lam = _select(rows, "lambda0")
    return {
        m: float(np.mean([r["measured"] >= r["theory"] for r in lam if r["m"] == m]))
        for m in sorted({r["m"] for r in lam})
    }


def _decay_rate(depths: Sequence[int], errors: Sequence[float], floor: float) -> float:
    """exp of the slope of log(error) against l, over the errors above ``floor``."""
    kept = [(l, e) for l, e in zip(depths, errors, strict=True) if e > floor]
    if len(kept) < 2:
        return math.nan
    ls, es = zip(*kept, strict=True)
    return math.exp(float(np.polyfit(ls, np.log(es), 1)[0]))


def _claim(name: str, passed: bool, measured: float, expected: str) -> dict:
    return {"name": name, "passed": bool(passed), "measured": float(measured), "expected": expected}


def initialization_claims(rows: Sequence[dict], sigma_w2: float) -> list[dict]:
    """Named pass/fail claims {name, passed, measured, expected} from the tidy rows.

    * ``lemma1_well_posed``: ‖W(0)‖₂ < 1 for every width and seed.
    * ``lemma1_bound``: at the largest width, max ‖W(0)‖₂ / (2√2σ_w) ≤ 1.02 — the bound is
      the Bai-Yin edge, so finite m overshoots it by O(m^(-2/3)) at most.
    * ``theorem3_rate``: the per-layer decay factor of ‖K - K^(l)‖_F / l is ≤ σ_w²
      (Theorem 3: O(n l σ_w^{2l})), fitted over errors above round-off (1e-13·‖K‖).
    * ``theorem4_rate``: at the largest width, the decay factor of the seed-mean
      ‖G - G^(l)‖_F / m is ≤ 2√2σ_w, over errors above the solve's round-off floor.
    * ``theorem5_bound``: at the largest width, ‖G^(l)/m - K^(l)‖_F ≤ n (2√2σ_w)^l for every
      measured l and seed (the theorem's probability 1 - n² exp(-Ω(m (8σ_w²)^l)) fades as l
      grows at fixed m, so the bound is checked where m is largest).
    * ``theorem5_concentration_slope``: the log-log slope of the seed-mean ‖G/m - K‖_F
      against m is in [-0.75, -0.25] (≈ -1/2 for averages of m independent units).
    * ``theorem2_lambda0``: λ_0 ≥ m λ*/2 for every seed at the largest width.
    """
    sigma_w2 = check_sigma_w2(sigma_w2)
    missing = sorted(set(_QUANTITIES) - {r.get("quantity") for r in rows})
    if missing:
        raise ValueError(
            f"`rows` must hold the rows of measure_initialization; missing quantities {missing}"
        )
    bound = 2.0 * math.sqrt(2.0 * sigma_w2)
    claims = []
    norms = _select(rows, "W_spectral_norm")
    m_max = max(r["m"] for r in norms)
    worst = max(r["measured"] for r in norms)
    claims.append(_claim("lemma1_well_posed", worst < 1.0, worst, "max ‖W(0)‖₂ < 1"))
    ratio = max(r["measured"] for r in norms if r["m"] == m_max) / bound
    claims.append(
        _claim(
            "lemma1_bound", ratio <= 1.02, ratio, f"max ‖W(0)‖₂ / (2√2σ_w) ≤ 1.02 at m = {m_max}"
        )
    )
    k3 = sorted(_select(rows, "K_minus_Kl_fro"), key=lambda r: r["depth"])
    depths3 = [r["depth"] for r in k3]
    floor3 = 1e-13 * max(r["measured"] for r in k3) * 10
    rate3 = _decay_rate(depths3, [r["measured"] / r["depth"] for r in k3], floor3)
    claims.append(
        _claim(
            "theorem3_rate",
            rate3 <= sigma_w2 * (1 + 1e-6),
            rate3,
            f"decay factor per layer of ‖K - K^(l)‖_F / l ≤ σ_w² = {sigma_w2:g}",
        )
    )
    depths4, errors4 = _seed_mean(_select(rows, "G_minus_Gl_fro_over_m", m=m_max), "depth")
    floor4 = 1e-9 * errors4[0]
    rate4 = _decay_rate(depths4, errors4, floor4)
    claims.append(
        _claim(
            "theorem4_rate",
            rate4 <= bound,
            rate4,
            f"decay factor per layer of ‖G - G^(l)‖_F/m ≤ 2√2σ_w = {bound:.4g}",
        )
    )
    widths, conc = _seed_mean(_select(rows, "G_over_m_minus_K_fro"), "m")
    slope = fit_loglog_slope(widths, conc) if len(widths) >= 2 else math.nan
    claims.append(
        _claim(
            "theorem5_concentration_slope",
            -0.75 <= slope <= -0.25,
            slope,
            "log-log slope of ‖G/m - K‖_F against m in [-0.75, -0.25] (≈ -1/2)",
        )
    )
    thm5 = _select(rows, "Gl_over_m_minus_Kl_fro", m=m_max)
    worst5 = max(r["measured"] / r["theory"] for r in thm5)
    claims.append(
        _claim(
            "theorem5_bound",
            worst5 <= 1.0,
            worst5,
            f"‖G^(l)/m - K^(l)‖_F / (n (2√2σ_w)^l) ≤ 1 for all l, seeds at m = {m_max}",
        )
    )
    fraction = theorem2_fractions(rows)[m_max]
    claims.append(
        _claim(
            "theorem2_lambda0",
            fraction == 1.0,
            fraction,
            f"λ_0 ≥ m λ*/2 for every seed at m = {m_max}",
        )
    )
    return claims


def plot_initialization(rows: Sequence[dict], directory: str | Path) -> list[Path]:
    """Six log-scale panels (Lemma 1, Theorems 3, 4, 5, concentration, Theorem 2) → PNG + PDF.

    Returns the paths of ``<directory>/init_theorems.png`` and ``.pdf``.
    """
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    from deqlab.report.figures import (
        add_reference_line,
        figure_style,
        save_figure,
        sequential_colors,
    )

    norms = _select(rows, "W_spectral_norm")
    widths = sorted({r["m"] for r in norms})
    with figure_style():
        fig, axes = plt.subplots(2, 3, figsize=(15, 8.5))
        ax = axes[0, 0]
        ax.semilogx(
            [r["m"] for r in norms],
            [r["measured"] for r in norms],
            "o",
            alpha=0.7,
            label=r"$\|W(0)\|_2$ (seeds)",
        )
        add_reference_line(ax, norms[0]["theory"], r"$2\sqrt{2}\sigma_w$ (Lemma 1)")
        ax.set(xlabel="width m", ylabel=r"$\|W(0)\|_2$", title="Lemma 1")
        ax = axes[0, 1]
        k3 = sorted(_select(rows, "K_minus_Kl_fro"), key=lambda r: r["depth"])
        ax.semilogy(
            [r["depth"] for r in k3],
            [r["measured"] for r in k3],
            "o-",
            label=r"$\|K - K^{(l)}\|_F$",
        )
        ax.semilogy(
            [r["depth"] for r in k3], [r["theory"] for r in k3], "k--", label=r"$\sigma_w^{2l}$"
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
                depths, mean = _seed_mean(_select(rows, quantity, m=m), "depth")
                ax.semilogy(depths, mean, "o-", color=color, label=f"m = {m}")
            ref = sorted({(r["depth"], r["theory"]) for r in _select(rows, quantity)})
            ax.semilogy(*zip(*ref, strict=True), "k--", label=ref_label)
            ax.set(xlabel="depth l", ylabel=f"{ylabel} (seed mean)", title=title)
        ax = axes[1, 1]
        conc = _select(rows, "G_over_m_minus_K_fro")
        ax.loglog(
            [r["m"] for r in conc], [r["measured"] for r in conc], "o", alpha=0.6, label="seeds"
        )
        ms, mean = _seed_mean(conc, "m")
        if len(ms) >= 2:
            coef = np.polyfit(np.log(ms), np.log(mean), 1)
            ax.loglog(
                ms, np.exp(np.polyval(coef, np.log(ms))), "-", label=f"fit: slope {coef[0]:.2f}"
            )
        add_reference_line(ax, conc[0]["theory"], r"$\lambda_*/2$ (enough for Weyl)")
        ax.set(xlabel="width m", ylabel=r"$\|G/m - K\|_F$", title="Proof of Theorem 2")
        ax = axes[1, 2]
        lam = _select(rows, "lambda0")
        ax.loglog(
            [r["m"] for r in lam],
            [r["measured"] for r in lam],
            "o",
            alpha=0.7,
            label=r"$\lambda_0$ (seeds)",
        )
        ref = sorted({(r["m"], r["theory"]) for r in lam})
        ax.loglog(*zip(*ref, strict=True), "k--", label=r"$m \lambda_* / 2$")
        fractions = ", ".join(f"{v:.2g}" for v in theorem2_fractions(rows).values())
        ax.set(
            xlabel="width m",
            ylabel=r"$\lambda_0 = \lambda_{min}(G)$",
            title=f"Theorem 2 (fraction ≥ bound: {fractions})",
        )
        for ax in axes.flat:
            ax.legend(fontsize=7)
        for ax in (axes[0, 0], axes[1, 1], axes[1, 2]):  # log width axes: one label per m
            ax.set_xticks(widths, [str(m) for m in widths])
            ax.xaxis.set_minor_formatter(NullFormatter())
        return save_figure(fig, directory, "init_theorems")

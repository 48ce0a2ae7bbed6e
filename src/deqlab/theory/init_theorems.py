"""The initialization theorems of Ling et al. (2023), measured: Lemma 1 and Theorems 2-5.

For inputs X (d, n), widths m and seeds, each network is drawn by Assumption 1
(:meth:`deqlab.models.relu_deq.ReLUDEQ.init`) and measured next to the theory:

* Lemma 1: ‖W(0)‖₂ against 2√2 σ_w — the Bai-Yin edge 2√m·σ_w√(2/m), so at finite m the
  norm lands within O(m^(-2/3)) of it, on either side (computed by Lanczos, spectra.py);
  :func:`lemma1_bound` gives the finite-m bound that holds with a stated probability.
* Theorem 3: ‖K - K^(l)‖_F against l, reference rate σ_w^{2l} (deterministic). Theorem 3
  states O(n l σ_w^{2l}); the last line of its proof (Appendix C.2) writes O(n σ_w^{2l}),
  dropping the factor l of the line before.
* Theorem 4: ‖G - G^(l)‖_F / m against l, reference rate (2√2 σ_w)^l, where
  G^(l) = Z^(l)ᵀZ^(l) for l explicit weight-tied layers from Z^(0) = 0 (Section 4).
* Theorem 5: ‖G^(l)/m - K^(l)‖_F against its bound n (2√2 σ_w)^l.
* Proof of Theorem 2 (Section 4.4): ‖G/m - K‖_F against m (concentration; slope ≈ -1/2),
  next to λ*/2, the size below which Weyl's inequality gives λ_0 ≥ m λ*/2.
* Theorem 2: λ_0 = λ_min(G) against m λ*/2.

The result is a tidy table: one dict per measurement with the keys of :data:`ROW_KEYS`
(``None`` where a key does not apply); the experiment ``ling2023-init`` turns it into
checked statements and figures.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

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
    "geometric_decay",
    "lemma1_bound",
    "measure_initialization",
    "measure_theorem3",
    "measure_width_sweep",
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


def geometric_decay(depths: Sequence[int], errors: Sequence[float], floor: float) -> float:
    """Per-layer decay factor q of errors e_l ≈ C q^l: exp of the least-squares slope of
    ln e_l against l over the errors above ``floor`` (round-off); NaN with < 2 of them."""
    kept = [(l, e) for l, e in zip(depths, errors, strict=True) if e > floor]
    if len(kept) < 2:
        return math.nan
    ls, es = zip(*kept, strict=True)
    return math.exp(float(np.polyfit(ls, np.log(es), 1)[0]))


def lemma1_bound(sigma_w2: float, m: int, failure_probability: float) -> float:
    """2√2 σ_w (1 + √(ln(1/p) / (2m))): ‖W(0)‖₂ exceeds it with probability at most p.

    Lemma 1's 2√2 σ_w is the edge of the spectrum as m → ∞ (W = s G, s = √(2σ_w²/m),
    G standard m×m), which a finite-m draw may exceed. E‖G‖₂ <= 2√m (Gordon) and ‖G‖₂ is
    1-Lipschitz in G, so P(‖G‖₂ >= 2√m + t) <= exp(−t²/2) (Davidson & Szarek 2001,
    Theorem II.13); t = √(2 ln(1/p)) gives the slack above.
    """
    sigma_w2 = check_sigma_w2(sigma_w2)
    m = check_int("m", m, min_value=1)
    p = check_real("failure_probability", failure_probability, low=0.0, high=1.0,
                   low_inclusive=False, high_inclusive=False)  # fmt: skip
    return 2.0 * math.sqrt(2.0 * sigma_w2) * (1.0 + math.sqrt(math.log(1.0 / p) / (2.0 * m)))

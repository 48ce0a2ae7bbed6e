"""The initialization theorems of Ling et al. (2023), measured: Lemma 1, Theorems 2-5, the
bounds of Section 3.2 and Assumption 2 on the inputs.

For inputs X (d, n), widths m and seeds, each network is drawn by Assumption 1
(:meth:`deqlab.models.relu_deq.ReLUDEQ.init`) and measured next to the theory:

* Assumption 2 (i) on X: max_i |‖x_i‖₂/√d − 1| and max_{i≠j} |cos θ_ij| (no two inputs
  parallel).
* Theorem 3 (ii): λ* = λ_min(K) (0.0 when within the eigensolver's round-off of zero).
* Section 3.2: ‖U(0)‖₂ against √(m/d) (:func:`u_norm_ratio_bound` bounds the ratio), and
  with labels y, Φ(0)/n next to its conditional mean ½(s + ‖y‖²/n), s = ‖Z(0)‖_F²/(mn)
  (:func:`initial_loss_bound`).

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

from deqlab._checks import check_int, check_real, check_tensor
from deqlab.data.diagnostics import input_diagnostics
from deqlab.models.relu_deq import ReLUDEQ
from deqlab.theory.kernels import (
    check_inputs,
    check_sigma_w2,
    least_eigenvalue,
    population_gram,
)
from deqlab.theory.spectra import gram_lambda_min, spectral_norm, spectral_norm_lanczos

__all__ = [
    "ROW_KEYS",
    "fit_loglog_slope",
    "geometric_decay",
    "initial_loss_bound",
    "lemma1_bound",
    "measure_assumption2",
    "measure_initialization",
    "measure_theorem3",
    "measure_width_sweep",
    "u_norm_ratio_bound",
]

#: Columns of every row: which result, what was measured, where, and the theory's value.
ROW_KEYS = ("theorem", "quantity", "m", "seed", "depth", "measured", "theory")


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


def measure_assumption2(X: torch.Tensor) -> list[dict]:
    """Rows for Assumption 2 (i) on the inputs X (d, n): ``x_norm_deviation``
    max_i |‖x_i‖₂/√d − 1| (theory 0) and ``max_abs_cos`` max_{i≠j} |cos θ_ij| (theory 1, the
    value it must stay below; NaN for n = 1: no pair), by
    :func:`deqlab.data.diagnostics.input_diagnostics`.

    The extracted text prints "x_i ⊥ x_j"; the proof of Theorem 3 (Appendix C.2) uses
    max_{i≠j} |x_iᵀx_j/d| < 1, i.e. no two inputs parallel, which is what is measured.
    """
    X = check_inputs(X)
    found = input_diagnostics(X)
    worst = found.max_abs_cos if X.shape[1] > 1 else math.nan
    return [
        _row("assumption2", "x_norm_deviation", found.max_norm_error, 0.0),
        _row("assumption2", "max_abs_cos", worst, 1.0),
    ]


def measure_theorem3(X: torch.Tensor, sigma_w2: float, depths: Sequence[int]) -> list[dict]:
    """Rows ``‖K - K^(l)‖_F`` for l in ``depths`` with theory σ_w^{2l} (Theorem 3 (i)), and
    ``lambda_star`` λ* = λ_min(K) (Theorem 3 (ii)) with theory the eigensolver's round-off
    tolerance n·eps·‖K‖₂ (λ* is 0.0 within it: :func:`deqlab.theory.kernels.least_eigenvalue`)."""
    X = check_inputs(X)
    sigma_w2 = check_sigma_w2(sigma_w2)
    K = population_gram(X, sigma_w2)
    lam = least_eigenvalue(K)
    return [
        *(
            _row(
                "theorem3",
                "K_minus_Kl_fro",
                torch.linalg.matrix_norm(K - population_gram(X, sigma_w2, l)),
                sigma_w2**l,
                depth=l,
            )
            for l in _check_ints("depths", depths, 1)
        ),
        _row("theorem3", "lambda_star", lam.value, lam.tolerance),
    ]


@torch.no_grad()
def measure_width_sweep(
    X: torch.Tensor,
    sigma_w2: float,
    widths: Sequence[int],
    seeds: Sequence[int],
    depths: Sequence[int],
    *,
    y: torch.Tensor | None = None,
    tol: float = 1e-12,
) -> list[dict]:
    """Rows for Lemma 1, Theorems 2, 4, 5 and Section 3.2 over ``widths`` × ``seeds``
    (module docstring); the Φ(0) rows need the labels ``y`` (n,).

    The equilibrium Z = Z(0) is solved to relative residual ``tol`` in X's dtype (float64
    recommended: errors below ~1e3·tol·‖G‖_F/m are round-off, not Theorem 4's decay).
    """
    X = check_inputs(X)
    if y is not None:
        y = check_tensor("y", y, shape=(X.shape[1],)).to(torch.float64)
    sigma_w2 = check_sigma_w2(sigma_w2)
    widths, seeds = _check_ints("widths", widths, 1), _check_ints("seeds", seeds, 0)
    depths = _check_ints("depths", depths, 1)
    tol = check_real("tol", tol, low=0.0, low_inclusive=False)
    d, n = X.shape
    K = population_gram(X, sigma_w2)
    K_layers = {l: population_gram(X, sigma_w2, l) for l in depths}
    lambda_star = least_eigenvalue(K).value
    mean_diagonal = float(K.diagonal().mean())  # tr K / n, the limit of ‖Z(0)‖_F²/(mn)
    bound = 2.0 * math.sqrt(2.0 * sigma_w2)  # 2√2 σ_w
    rows: list[dict] = []
    for m in widths:
        for seed in seeds:
            model = ReLUDEQ.init(d, m, sigma_w2=sigma_w2, seed=seed, dtype=X.dtype, device=X.device)
            where = {"m": m, "seed": seed}
            w_norm, _ = spectral_norm_lanczos(model.W.detach(), tol=1e-10, max_iter=400)
            rows.append(_row("lemma1", "W_spectral_norm", w_norm, bound, **where))
            u_norm = spectral_norm(model.U.detach())  # (m, d): exact
            rows.append(_row("section3.2", "U_spectral_norm", u_norm, math.sqrt(m / d), **where))
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
            if y is not None:
                rows += _initial_loss_rows(model, Z, y, mean_diagonal, where)
    return rows


def _initial_loss_rows(model: ReLUDEQ, Z: torch.Tensor, y: torch.Tensor, mean_diagonal: float,
                       where: dict) -> list[dict]:  # fmt: skip
    """``feature_norm_sq`` s = ‖Z(0)‖_F²/(mn) (theory: its limit tr K / n) and
    ``initial_loss`` Φ(0)/n (theory: E[Φ(0) | Z]/n = ½(s + ‖y‖²/n), a being independent of
    Z)."""
    m, n = Z.shape
    Z64 = Z.to(torch.float64)
    s = float(Z64.square().sum()) / (m * n)
    r = model.a.detach().to(torch.float64) @ Z64 - y  # ŷ(0) − y, (n,)
    loss = 0.5 * float(r @ r) / n
    mean_loss = 0.5 * (s + float(y @ y) / n)
    return [
        _row("section3.2", "feature_norm_sq", s, mean_diagonal, **where),
        _row("section3.2", "initial_loss", loss, mean_loss, **where),
    ]


def measure_initialization(
    X: torch.Tensor,
    sigma_w2: float = 0.08,
    widths: Sequence[int] = (256, 512, 1024, 2048, 4096, 8192),
    seeds: Sequence[int] = (0, 1, 2),
    depths: Sequence[int] = tuple(range(1, 13)),
    *,
    y: torch.Tensor | None = None,
    tol: float = 1e-12,
) -> list[dict]:
    """All rows: :func:`measure_assumption2`, :func:`measure_theorem3`, then
    :func:`measure_width_sweep` (with the Φ(0) rows when the labels ``y`` are given)."""
    return (
        measure_assumption2(X)
        + measure_theorem3(X, sigma_w2, depths)
        + measure_width_sweep(X, sigma_w2, widths, seeds, depths, y=y, tol=tol)
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


def _deviation(failure_probability: float) -> float:
    """t = √(2 ln(1/p)): a 1-Lipschitz function of a standard Gaussian vector exceeds its
    mean by t with probability at most exp(−t²/2) = p."""
    p = check_real("failure_probability", failure_probability, low=0.0, high=1.0,
                   low_inclusive=False, high_inclusive=False)  # fmt: skip
    return math.sqrt(2.0 * math.log(1.0 / p))


def u_norm_ratio_bound(m: int, d: int, failure_probability: float) -> float:
    """√2 (1 + √(d/m) + t/√m): ‖U(0)‖₂/√(m/d) exceeds it with probability at most p.

    U = √(2/d) G with G standard m×d (Assumption 1); E‖G‖₂ <= √m + √d (Gordon) and ‖G‖₂ is
    1-Lipschitz in G, so ‖U‖₂ <= √(2/d)(√m + √d + t) w.p. >= 1 − p (Davidson & Szarek 2001,
    Theorem II.13), t as in :func:`_deviation`. The bound decreases in m: its value at the
    smallest width of a sweep holds at every width — the constant of ‖U(0)‖₂ = O(√(m/d)).
    """
    m = check_int("m", m, min_value=1)
    d = check_int("d", d, min_value=1)
    t = _deviation(failure_probability)
    return math.sqrt(2.0) * (1.0 + math.sqrt(d / m) + t / math.sqrt(m))


def initial_loss_bound(mean_loss: float, feature_norm_sq: float, failure_probability: float):
    """½ (√(2μ) + t √s)²: Φ(0)/n exceeds it with probability at most p, given Z(0).

    μ = E[Φ(0) | Z]/n = ½(s + ‖y‖²/n) and s = ‖Z‖_F²/(mn). With a = g/√m, g ~ N(0, I_m)
    independent of Z (Assumption 1), f(g) = ‖Zᵀg/√m − y‖₂ is ‖Z‖₂/√m <= √(ns)-Lipschitz
    with E f <= √(E f²) = √(2nμ), so f <= √n(√(2μ) + t√s) w.p. >= 1 − p (Gaussian
    concentration, t as in :func:`_deviation`) and Φ(0) = f²/2. As m → ∞, s → tr K / n (the
    diagonal of K, Lemma 3), so the bound tends to a constant: Φ(0) = O(n) (Section 3.2).
    """
    mean_loss = check_real("mean_loss", mean_loss, low=0.0)
    feature_norm_sq = check_real("feature_norm_sq", feature_norm_sq, low=0.0)
    t = _deviation(failure_probability)
    return 0.5 * (math.sqrt(2.0 * mean_loss) + t * math.sqrt(feature_norm_sq)) ** 2

"""Measurements of Lemma 1 and Theorems 2-5 (Ling et al. 2023) at tiny sizes."""

import itertools
import math

import pytest
import torch

from deqlab.theory.init_theorems import (
    ROW_KEYS,
    fit_loglog_slope,
    geometric_decay,
    lemma1_bound,
    measure_theorem3,
    measure_width_sweep,
)
from deqlab.theory.spectra import spectral_norm

SIGMA_W2 = 0.08
WIDTHS, SEEDS, DEPTHS = (32, 128, 512), (0, 1), tuple(range(1, 9))


def sphere(d, n, seed=0):
    X = torch.randn(d, n, generator=torch.Generator().manual_seed(seed))
    return X / X.norm(dim=0) * math.sqrt(d)


@pytest.fixture(scope="module")
def rows():
    X = sphere(10, 8)
    return measure_theorem3(X, SIGMA_W2, DEPTHS) + measure_width_sweep(
        X, SIGMA_W2, WIDTHS, SEEDS, DEPTHS
    )


def select(rows, quantity, **where):
    return [
        r for r in rows if r["quantity"] == quantity and all(r[k] == v for k, v in where.items())
    ]


def test_rows_are_tidy_with_one_row_per_measurement(rows):
    assert all(tuple(r) == ROW_KEYS for r in rows)
    per_network = 1 + 2 * len(DEPTHS) + 2  # Lemma 1, Theorems 4-5 per depth, Theorem 2 ×2
    assert len(rows) == len(DEPTHS) + per_network * len(WIDTHS) * len(SEEDS)
    assert {r["theorem"] for r in rows} == {
        "lemma1",
        "theorem2",
        "theorem3",
        "theorem4",
        "theorem5",
    }
    assert all(isinstance(r["measured"], float) and math.isfinite(r["measured"]) for r in rows)


def test_lemma1_norm_is_close_to_two_root_two_sigma_for_large_width(rows):
    bound = 2 * math.sqrt(2 * SIGMA_W2)
    for r in select(rows, "W_spectral_norm", m=512):
        assert r["theory"] == pytest.approx(bound)
        assert r["measured"] == pytest.approx(bound, rel=0.03)


def test_lemma1_lanczos_norm_matches_the_exact_svd():
    from deqlab.models.relu_deq import ReLUDEQ

    X = sphere(4, 3)
    row = select(measure_width_sweep(X, SIGMA_W2, (96,), (5,), (1,)), "W_spectral_norm")[0]
    W = ReLUDEQ.init(4, 96, sigma_w2=SIGMA_W2, seed=5).W.detach()
    assert row["measured"] == pytest.approx(spectral_norm(W), rel=1e-8)


def test_theorem3_error_decays_at_rate_sigma_w2_up_to_the_factor_l(rows):
    """Theorem 3 (i): ‖K - K^(l)‖_F = O(n l σ_w^{2l}), so (err_{l+1}/(l+1)) / (err_l/l) ≤ σ_w²."""
    errors = [
        r["measured"] for r in sorted(select(rows, "K_minus_Kl_fro"), key=lambda r: r["depth"])
    ]
    scaled = [e / l for l, e in zip(DEPTHS, errors, strict=True)]
    ratios = [b / a for a, b in itertools.pairwise(scaled)]
    assert all(0 < q <= SIGMA_W2 for q in ratios), ratios
    assert errors[-1] < 1e-6


def test_theorem4_tied_layers_approach_the_equilibrium_geometrically(rows):
    bound = 2 * math.sqrt(2 * SIGMA_W2)
    for m in WIDTHS:
        for seed in SEEDS:
            errs = [r["measured"] for r in select(rows, "G_minus_Gl_fro_over_m", m=m, seed=seed)]
            ratios = [b / a for a, b in itertools.pairwise(errs)]
            assert all(q < bound for q in ratios[1:]), (m, seed, ratios)


def test_concentration_of_g_over_m_improves_with_width(rows):
    means = [
        sum(r["measured"] for r in select(rows, "G_over_m_minus_K_fro", m=m)) / len(SEEDS)
        for m in WIDTHS
    ]
    assert means[0] > means[1] > means[2]
    assert -0.8 < fit_loglog_slope(WIDTHS, means) < -0.2


def test_lemma1_bound_is_exceeded_with_at_most_its_probability():
    """Monte Carlo over 400 draws of W at m = 20: the finite-m bound of p = 0.05 is exceeded
    in at most ~5% of draws (binomial 3σ: 2.6%), the m → ∞ edge 2√2σ_w far more often."""
    m, p = 20, 0.05
    bound = lemma1_bound(SIGMA_W2, m, p)
    edge = 2 * math.sqrt(2 * SIGMA_W2)
    assert bound == pytest.approx(edge * (1 + math.sqrt(math.log(1 / p) / (2 * m))))
    gen = torch.Generator().manual_seed(0)
    W = torch.randn(400, m, m, generator=gen, dtype=torch.float64) * math.sqrt(2 * SIGMA_W2 / m)
    norms = torch.linalg.matrix_norm(W, 2)
    assert float((norms > bound).double().mean()) <= p + 0.026
    assert float((norms > edge).double().mean()) > 0.1
    with pytest.raises(ValueError, match=r"`failure_probability` must be in \(0, 1\)"):
        lemma1_bound(SIGMA_W2, m, 1.0)


def test_geometric_decay_fits_above_the_floor():
    errors = [3 * 0.1**l for l in range(1, 8)] + [1e-20, 1e-20]
    assert geometric_decay(range(1, 10), errors, floor=1e-15) == pytest.approx(0.1)
    assert math.isnan(geometric_decay([1, 2], [1.0, 1e-20], floor=1e-15))


def test_fit_loglog_slope_recovers_a_power_law_and_rejects_bad_input():
    assert fit_loglog_slope([10, 100, 1000], [3.0, 0.3, 0.03]) == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="all values > 0"):
        fit_loglog_slope([1, 2], [1.0, 0.0])


def test_bad_arguments_raise():
    X = sphere(4, 3)
    with pytest.raises(ValueError, match="`widths` must hold at least one value"):
        measure_width_sweep(X, SIGMA_W2, (), (0,), (1,))
    with pytest.raises(ValueError, match=r"`seeds\[0\]` must be >= 0; got -1"):
        measure_width_sweep(X, SIGMA_W2, (8,), (-1,), (1,))
    with pytest.raises(ValueError, match=r"`depths\[0\]` must be >= 1; got 0"):
        measure_theorem3(X, SIGMA_W2, (0,))
    with pytest.raises(ValueError, match=r"`sigma_w2` must be in \(0, 1\)"):
        measure_theorem3(X, 1.2, (1,))

"""Measurements of Assumption 2, Lemma 1, Theorems 2-5 and the bounds of Section 3.2 (Ling et
al. 2023) at tiny sizes, with the concentration bounds checked by Monte Carlo."""

import itertools
import math

import pytest
import torch

from deqlab.papers.ling2023.init_theorems import (
    ROW_KEYS,
    fit_loglog_slope,
    geometric_decay,
    initial_loss_bound,
    lemma1_bound,
    measure_assumption2,
    measure_initialization,
    measure_theorem3,
    measure_width_sweep,
    u_norm_ratio_bound,
)
from deqlab.theory.kernels import population_gram
from deqlab.theory.spectra import spectral_norm

SIGMA_W2 = 0.08
WIDTHS, SEEDS, DEPTHS = (32, 128, 512), (0, 1), tuple(range(1, 9))


def sphere(d, n, seed=0):
    X = torch.randn(d, n, generator=torch.Generator().manual_seed(seed))
    return X / X.norm(dim=0) * math.sqrt(d)


def labels(n, seed=0):
    return torch.randn(n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.fixture(scope="module")
def rows():
    X = sphere(10, 8)
    return measure_initialization(X, SIGMA_W2, WIDTHS, SEEDS, DEPTHS, y=labels(8))


def select(rows, quantity, **where):
    return [
        r for r in rows if r["quantity"] == quantity and all(r[k] == v for k, v in where.items())
    ]


def test_rows_are_tidy_with_one_row_per_measurement(rows):
    assert all(tuple(r) == ROW_KEYS for r in rows)
    # Lemma 1, ‖U(0)‖₂, Theorems 4-5 per depth, Theorem 2 ×2, Φ(0) ×2
    per_network = 2 + 2 * len(DEPTHS) + 2 + 2
    # Assumption 2 ×2, Theorem 3 per depth and λ*
    assert len(rows) == 2 + len(DEPTHS) + 1 + per_network * len(WIDTHS) * len(SEEDS)
    assert {r["theorem"] for r in rows} == {
        "assumption2",
        "lemma1",
        "section3.2",
        "theorem2",
        "theorem3",
        "theorem4",
        "theorem5",
    }
    assert all(isinstance(r["measured"], float) and math.isfinite(r["measured"]) for r in rows)
    assert not select(measure_width_sweep(sphere(4, 3), SIGMA_W2, (8,), (0,), (1,)),
                      "initial_loss")  # fmt: skip  # no labels, no Φ(0) rows


def test_assumption2_rows_find_off_sphere_and_parallel_inputs():
    X = sphere(6, 5)
    norm, cos = measure_assumption2(X)
    assert norm["measured"] < 1e-15 and norm["theory"] == 0.0
    unit = X / X.norm(dim=0)
    exact = (unit.T @ unit).abs().fill_diagonal_(0).max()
    assert cos["measured"] == pytest.approx(float(exact)) and cos["measured"] < 1 == cos["theory"]
    scaled = X.clone()
    scaled[:, 2] *= 1.1
    assert measure_assumption2(scaled)[0]["measured"] == pytest.approx(0.1)
    for twin in (X[:, 1:2], -X[:, 1:2]):  # a duplicate and an opposite input
        _, parallel = measure_assumption2(torch.cat([X, twin], dim=1))
        assert parallel["measured"] == pytest.approx(1.0, abs=1e-15)
    assert math.isnan(measure_assumption2(X[:, :1])[1]["measured"])  # one input: no pair


def test_lambda_star_row_is_the_least_eigenvalue_of_k_and_zero_for_a_duplicate():
    X = sphere(6, 5)
    (lam,) = select(measure_theorem3(X, SIGMA_W2, (1,)), "lambda_star")
    reference = float(torch.linalg.eigvalsh(population_gram(X, SIGMA_W2))[0])
    assert lam["measured"] == pytest.approx(reference, rel=1e-10) and lam["measured"] > 0
    assert 0 < lam["theory"] < 1e-13  # n·eps·‖K‖₂
    (dup,) = select(measure_theorem3(torch.cat([X, X[:, :1]], dim=1), SIGMA_W2, (1,)),
                    "lambda_star")  # fmt: skip
    assert dup["measured"] == 0.0


def test_u_norm_bound_is_exceeded_with_at_most_its_probability():
    """Monte Carlo over 400 draws of U (m = 30, d = 10, entries N(0, 2/d)): the bound of
    p = 0.05 on ‖U‖₂/√(m/d) is exceeded in at most ~5% of draws; it falls with m to √2."""
    m, d, p = 30, 10, 0.05
    bound = u_norm_ratio_bound(m, d, p)
    t = math.sqrt(2 * math.log(1 / p))
    assert bound == pytest.approx(math.sqrt(2) * (1 + math.sqrt(d / m) + t / math.sqrt(m)))
    gen = torch.Generator().manual_seed(0)
    U = torch.randn(400, m, d, generator=gen, dtype=torch.float64) * math.sqrt(2 / d)
    ratios = torch.linalg.matrix_norm(U, 2) / math.sqrt(m / d)
    assert float((ratios > bound).double().mean()) <= p + 0.026
    assert u_norm_ratio_bound(10 * m, d, p) < bound
    assert u_norm_ratio_bound(10**12, d, p) == pytest.approx(math.sqrt(2), rel=1e-5)


def test_initial_loss_bound_is_exceeded_with_at_most_its_probability():
    """Given one Z (m = 40, n = 6) and y, 2000 draws a ~ N(0, I/m): Φ(0)/n exceeds the
    bound of p = 0.05 in at most ~5% of draws; its mean is ½(s + ‖y‖²/n)."""
    from deqlab.models.relu_deq import ReLUDEQ

    m, n, p = 40, 6, 0.05
    X, y = sphere(5, n), labels(n)
    model = ReLUDEQ.init(5, m, sigma_w2=SIGMA_W2, seed=3)
    Z = model.equilibrium(X, tol=1e-12).Z
    s = float(Z.square().sum()) / (m * n)
    mean = 0.5 * (s + float(y @ y) / n)
    bound = initial_loss_bound(mean, s, p)
    t = math.sqrt(2 * math.log(1 / p))
    assert bound == pytest.approx(0.5 * (math.sqrt(2 * mean) + t * math.sqrt(s)) ** 2)
    gen = torch.Generator().manual_seed(1)
    a = torch.randn(2000, m, generator=gen, dtype=torch.float64) / math.sqrt(m)
    losses = 0.5 * ((a @ Z - y) ** 2).sum(dim=1) / n
    assert float((losses > bound).double().mean()) <= p + 0.015
    assert float(losses.mean()) == pytest.approx(mean, rel=0.1)


def test_section32_rows_use_the_drawn_network(rows):
    from deqlab.models.relu_deq import ReLUDEQ

    X, y = sphere(10, 8), labels(8)
    model = ReLUDEQ.init(10, 32, sigma_w2=SIGMA_W2, seed=1)
    (u,) = select(rows, "U_spectral_norm", m=32, seed=1)
    assert u["measured"] == pytest.approx(spectral_norm(model.U.detach()), rel=1e-12)
    Z = model.equilibrium(X, tol=1e-12).Z
    (loss,) = select(rows, "initial_loss", m=32, seed=1)
    r = model.a.detach() @ Z - y
    assert loss["measured"] == pytest.approx(0.5 * float(r @ r) / 8, rel=1e-9)
    (feature,) = select(rows, "feature_norm_sq", m=32, seed=1)
    assert feature["theory"] == pytest.approx(1 / (1 - SIGMA_W2))  # tr K / n on the sphere


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

"""Ling et al. (2023) theory: Condition 1 (Eqs. 7–9) and Eq. (10) against a direct
evaluation of the formulas, the δ search and the width Condition 1 needs against
brute-force grids, and the spectra helpers against dense linear algebra (the quantities of
Theorem 1 along a run: test_papers_ling2023_margins.py)."""

import math

import numpy as np
import pytest
import torch

from deqlab.papers.ling2023.theory import (
    Condition1,
    Constants,
    condition1,
    eq9_margin_ceiling,
    learning_rate,
    lemma2_gradients,
    pl_gram_lambda_min,
    required_width,
    width_margin,
)
from deqlab.theory import gram_lambda_min, spectral_norm, spectral_norm_lanczos
from helpers import relu_problem


def _by_hand(model, X, y, delta):
    """Eqs. (7)–(10) written out from the paper with numpy, independent of the module."""
    W, U, a = (p.detach().numpy() for p in (model.W, model.U, model.a))
    Xn = X.numpy()
    Z = np.zeros((W.shape[0], Xn.shape[1]))
    for _ in range(2000):
        Z = np.maximum(W @ Z + U @ Xn, 0)
    lam0 = np.linalg.eigvalsh(Z.T @ Z)[0]
    res = np.linalg.norm(a @ Z - y.numpy())
    rw, ru = np.linalg.norm(W, 2) + delta, np.linalg.norm(U, 2) + delta
    ra = np.linalg.norm(a) + delta
    cw, cu, ca = ru * ra / (1 - rw) ** 2, ra / (1 - rw), ru / (1 - rw)
    xf = np.linalg.norm(Xn)
    return {
        "eq7": (lam0, 4 / delta * max(cw, cu, ca) * xf * res),
        "eq8": (lam0**1.5, 4 * (2 + np.sqrt(2)) / ra * (cw**2 + cu**2) * xf**2 * res),
        "eq9": (lam0, 4 * (cw**2 + cu**2) * xf**2),
        "lr": min(2 / lam0, 2 * (cw**2 + cu**2) / ((cw**2 + cu**2 + ca**2) ** 2 * xf**2)),
    }


def test_condition1_sides_match_the_paper_formulas():
    model, X, y = relu_problem(60, 8, 10, seed=0)
    cond = condition1(model, X, y, delta=0.05)
    want = _by_hand(model, X, y, 0.05)
    row = cond.as_dict()
    for key in ("eq7", "eq8", "eq9"):
        lhs, rhs = want[key]
        assert math.isclose(row[f"{key}_lhs"], lhs, rel_tol=1e-9)
        assert math.isclose(row[f"{key}_rhs"], rhs, rel_tol=1e-9)
        assert row[f"{key}_holds"] == (lhs >= rhs)
    assert math.isclose(cond.lr_bound, want["lr"], rel_tol=1e-9)
    assert cond.holds == (not cond.failing)
    # at practical widths Condition 1 is far from holding; all three sides are reported
    assert set(cond.failing) <= {"Eq. (7)", "Eq. (8)", "Eq. (9)"}
    assert math.isclose(learning_rate(cond, 0.5), 0.5 * want["lr"], rel_tol=1e-12)


def test_delta_search_maximizes_the_smallest_margin():
    model, X, y = relu_problem(60, 8, 10, seed=0)
    best = condition1(model, X, y)
    upper = 1 - best.W_norm
    assert 0 < best.delta < upper

    def worst(c):
        return min(q.margin for q in (c.eq7, c.eq8, c.eq9))

    for delta in np.linspace(0.0, upper, 41)[1:-1]:
        assert worst(condition1(model, X, y, delta=float(delta))) <= worst(best) * (1 + 1e-9)


def test_condition1_rejects_bad_input():
    model, X, y = relu_problem(60, 8, 10, seed=0)
    with pytest.raises(ValueError, match=r"`delta` must be in \(0, "):
        condition1(model, X, y, delta=0.5)  # 1 − ‖W(0)‖₂ ≈ 0.2 here
    with torch.no_grad():
        model.W.mul_(1.2 / float(torch.linalg.matrix_norm(model.W, 2)))
    with pytest.raises(ValueError, match=r"needs ‖W\(0\)‖₂ < 1; got ‖W\(0\)‖₂ = 1.2"):
        condition1(model, X, y)
    with pytest.raises(TypeError, match="`cond` must be a Condition1"):
        learning_rate(0.1)


def test_lemma2_rejects_large_problems():
    model, X, y = relu_problem(60, 8, 10, seed=0)
    with pytest.raises(ValueError, match=r"`m\*n` must be <= max_size=100"):
        lemma2_gradients(model, X, y, torch.zeros(60, 10), max_size=100)


def _hand_margin(key, delta, lam0, w, u, a, xf, res):
    """lhs/rhs of Eq. (7), (8) or (9) written out from the paper (numpy, any δ array)."""
    rw, ru, ra = w + delta, u + delta, a + delta
    cw, cu, ca = ru * ra / (1 - rw) ** 2, ra / (1 - rw), ru / (1 - rw)
    if key == "eq7":
        return lam0 / (4 / delta * np.maximum(np.maximum(cw, cu), ca) * xf * res)
    if key == "eq8":
        return lam0**1.5 / (4 * (2 + np.sqrt(2)) / ra * (cw**2 + cu**2) * xf**2 * res)
    return lam0 / (4 * (cw**2 + cu**2) * xf**2)


def _brute_force_width(k: Constants, m0: float, key: str) -> tuple[float, float]:
    """The first m of a log grid (ratio 1.01) where max over a dense δ grid of the margin
    reaches 1, λ_0 ∝ m and ‖U(0)‖₂ ∝ √m; (inf, margin at 10³⁰) if none."""
    delta = (1 - k.W_norm) * np.concatenate(
        [np.logspace(-10, -1, 3000), np.linspace(0.1, 1, 3001)[1:-1]]
    )
    ms = m0 * 1.01 ** np.arange(0, int(np.log(1e30 / m0) / np.log(1.01)) + 1)
    for m in ms:
        s = m / m0
        args = (k.lambda0 * s, k.W_norm, k.U_norm * np.sqrt(s), k.a_norm, k.X_fro,
                k.residual_norm)  # fmt: skip
        if np.max(_hand_margin(key, delta, *args)) >= 1:
            return float(m), math.nan
    s = 1e30 / m0
    args = (k.lambda0 * s, k.W_norm, k.U_norm * np.sqrt(s), k.a_norm, k.X_fro, k.residual_norm)
    return math.inf, float(np.max(_hand_margin(key, delta, *args)))


#: Constants of the quick preset's widest sphere model (m = 1600, rounded).
QUICK = Constants(lambda0=230.0, W_norm=0.795, U_norm=7.04, a_norm=1.01, X_fro=100.0,
                  residual_norm=13.5)  # fmt: skip
#: Constants for which Eq. (9)'s margin tends to a limit above 1 (λ_0 large against ‖X‖_F).
EQ9_REACHABLE = Constants(lambda0=5.0, W_norm=0.3, U_norm=1.0, a_norm=1.0, X_fro=0.5,
                          residual_norm=2.0)  # fmt: skip


@pytest.mark.parametrize(
    ("constants", "key"),
    [(QUICK, "eq7"), (QUICK, "eq8"), (QUICK, "eq9"), (EQ9_REACHABLE, "eq9"),
     (EQ9_REACHABLE, "eq7")],
)  # fmt: skip
def test_required_width_matches_a_brute_force_search(constants, key):
    m0 = 100.0
    want, limit = _brute_force_width(constants, m0, key)
    got = required_width(constants, m0, key)
    if math.isinf(want):
        assert math.isinf(got)
        assert width_margin(constants, m0, 1e30, key) == pytest.approx(limit, rel=1e-3)
    else:
        assert want / 1.01 <= got * (1 + 1e-6) and got <= want * (1 + 1e-3)
        assert width_margin(constants, m0, got * 1.001, key) >= 1


def test_required_width_at_a_width_that_already_holds_and_eq9_needs_no_width_at_quick_sizes():
    assert math.isinf(required_width(QUICK, 1600, "eq9"))  # both sides of Eq. (9) grow ∝ m
    assert width_margin(QUICK, 1600, 1e30, "eq9") < 1e-5
    holds = Constants(lambda0=1e6, W_norm=0.3, U_norm=1.0, a_norm=1.0, X_fro=0.5,
                      residual_norm=2.0)  # fmt: skip
    assert required_width(holds, 50, "eq9") == 50
    with pytest.raises(ValueError, match="`equation` must be one of"):
        required_width(QUICK, 100, "eq10")


@pytest.mark.parametrize(("n", "d", "m", "seed"), [(8, 8, 32, 0), (20, 10, 200, 1), (40, 5, 80, 2)])
def test_eq9_margin_stays_below_its_ceiling_at_every_width(n, d, m, seed):
    """Measured draws: Eq. (9)'s best margin over δ at the draw's width and carried to m = 10³⁰
    (Section 3.2's scaling) is at most (1 − ‖W(0)‖₂)²/(4n‖a(0)‖₂²) < 1 (Condition 1, Eq. (9)
    holds at no width); the ceiling is not a property of arbitrary constants."""
    model, X, y = relu_problem(m, d, n, seed=seed)
    k = condition1(model, X, y).constants
    ceiling = eq9_margin_ceiling(k, n)
    assert ceiling < 1 / (4 * n * k.a_norm**2) and ceiling < 1
    for width in (m, 1e3 * m, 1e30):
        assert width_margin(k, m, width, "eq9") <= ceiling
    assert math.isinf(required_width(k, m, "eq9"))
    assert width_margin(EQ9_REACHABLE, 100, 100, "eq9") > eq9_margin_ceiling(EQ9_REACHABLE, n)


def test_eq9_ceiling_lets_a_small_output_layer_through():
    """With ‖a(0)‖₂ below (1 − ‖W(0)‖₂)/(2√n) the ceiling exceeds 1 (Eq. (9) is not ruled out)."""
    model, X, y = relu_problem(32, 8, 8, seed=0)
    with torch.no_grad():
        model.a.mul_(0.01 / float(model.a.norm()))
    k = condition1(model, X, y).constants
    assert k.a_norm < (1 - k.W_norm) / (2 * math.sqrt(8))
    assert eq9_margin_ceiling(k, 8) > 1
    with pytest.raises(ValueError, match="`n` must be >= 1"):
        eq9_margin_ceiling(k, 0)


def test_pl_gram_lambda_min_against_the_unrolled_jacobian_and_nan_past_well_posedness():
    """λ_min(H) of Eq. (4) = λ_min(JJᵀ), J the Jacobian of ŷ over (W, U, a) through 400 unrolled
    iterations (‖W‖₂ < 0.9); NaN where the solve fails (W = −1.5 I: the iteration oscillates)."""
    model, X, _ = relu_problem(10, 4, 5, seed=3)
    params = [p.detach().clone() for p in (model.W, model.U, model.a)]

    def predict(W, U, a):
        Z = torch.zeros(10, 5, dtype=torch.float64)
        for _ in range(400):
            Z = torch.relu(W @ Z + U @ X)
        return a @ Z

    jac = torch.func.jacrev(predict, argnums=(0, 1, 2))(*params)
    H = sum(J.reshape(5, -1) @ J.reshape(5, -1).T for J in jac)
    want = float(torch.linalg.eigvalsh(H)[0])
    assert pl_gram_lambda_min(model, X, 1e-12) == pytest.approx(want, rel=1e-8)
    with torch.no_grad():
        model.W.copy_(-1.5 * torch.eye(10, dtype=torch.float64))  # the iteration oscillates
    assert math.isnan(pl_gram_lambda_min(model, X, 1e-12))


def test_condition1_round_trips_and_its_drift_bound_is_the_proof_formula():
    model, X, y = relu_problem(60, 8, 10, seed=0)
    cond = condition1(model, X, y)
    assert Condition1.from_dict(cond.as_dict()) == cond
    k = cond.constants
    want = 4 / k.lambda0 * math.sqrt(cond.c_w**2 + cond.c_u**2 + cond.c_a**2) * k.X_fro
    assert cond.drift_bound == pytest.approx(want * k.residual_norm, rel=1e-12)


def test_gram_lambda_min_and_spectral_norms_match_dense_algebra():
    gen = torch.Generator().manual_seed(0)
    Z = torch.randn(30, 8, generator=gen)
    assert math.isclose(gram_lambda_min(Z), float(np.linalg.eigvalsh((Z.T @ Z).numpy())[0]))
    A = torch.randn(70, 50, generator=gen) / 10
    exact = float(np.linalg.norm(A.numpy(), 2))
    assert math.isclose(spectral_norm(A), exact, rel_tol=1e-12)
    sigma, v = spectral_norm_lanczos(A, tol=1e-13)
    assert math.isclose(sigma, exact, rel_tol=1e-10) and sigma <= exact * (1 + 1e-12)
    B = A + 1e-3 * torch.randn(70, 50, generator=gen)  # warm start from the old vector
    warm, _ = spectral_norm_lanczos(B, v, tol=1e-13)
    assert math.isclose(warm, float(np.linalg.norm(B.numpy(), 2)), rel_tol=1e-10)
    with pytest.raises(ValueError, match="`v0` must be a non-zero vector"):
        spectral_norm_lanczos(A, torch.zeros(50))
    with pytest.raises(ValueError, match=r"`v0` must have shape \(50,\)"):
        spectral_norm_lanczos(A, torch.ones(70))

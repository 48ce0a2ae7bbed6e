"""Ling et al. (2023) theory: Condition 1 (Eqs. 7–9) and Eq. (10) against a direct
evaluation of the formulas, the δ search against a brute-force grid, Theorem 1's claims
on hand-made records, and the spectra helpers against dense linear algebra."""

import math

import numpy as np
import pytest
import torch

from deqlab.models import ReLUDEQ
from deqlab.theory import (
    condition1,
    gram_lambda_min,
    learning_rate,
    lemma2_gradients,
    spectral_norm,
    spectral_norm_lanczos,
    theorem1_claims,
)


def _problem(m=60, d=8, n=10, seed=0):
    model = ReLUDEQ.init(d, m, seed=seed)
    gen = torch.Generator().manual_seed(seed + 1)
    X = torch.randn(d, n, generator=gen, dtype=torch.float64)
    X = X / X.norm(dim=0) * d**0.5
    return model, X, torch.randn(n, generator=gen, dtype=torch.float64)


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
    model, X, y = _problem()
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
    model, X, y = _problem()
    best = condition1(model, X, y)
    upper = 1 - best.W_norm
    assert 0 < best.delta < upper

    def worst(c):
        return min(q.margin for q in (c.eq7, c.eq8, c.eq9))

    for delta in np.linspace(0.0, upper, 41)[1:-1]:
        assert worst(condition1(model, X, y, delta=float(delta))) <= worst(best) * (1 + 1e-9)


def test_condition1_rejects_bad_input():
    model, X, y = _problem()
    with pytest.raises(ValueError, match=r"`delta` must be in \(0, "):
        condition1(model, X, y, delta=0.5)  # 1 − ‖W(0)‖₂ ≈ 0.2 here
    with torch.no_grad():
        model.W.mul_(1.2 / float(torch.linalg.matrix_norm(model.W, 2)))
    with pytest.raises(ValueError, match=r"needs ‖W\(0\)‖₂ < 1; got ‖W\(0\)‖₂ = 1.2"):
        condition1(model, X, y)
    with pytest.raises(TypeError, match="`cond` must be a Condition1"):
        learning_rate(0.1)


def test_lemma2_rejects_large_problems():
    model, X, y = _problem()
    with pytest.raises(ValueError, match=r"`m\*n` must be <= max_size=100"):
        lemma2_gradients(model, X, y, torch.zeros(60, 10), max_size=100)


def _records(losses, lambdas, W_norms):
    return [
        {"step": s, "loss": p, "lambda_min": lam, "W_norm": w}
        for s, (p, lam, w) in enumerate(zip(losses, lambdas, W_norms, strict=True))
    ]


def test_theorem1_claims_hold_and_fail_where_they_should():
    lr, lam0 = 0.1, 2.0  # contraction factor 1 − ηλ_0/2 = 0.9
    losses = [1.0, 0.85, 0.8, 0.7]
    good = _records(losses, [lam0, 1.5, math.nan, 1.1], [0.5, 0.6, math.nan, 0.7])
    claims = theorem1_claims(good, lr)
    assert claims.holds and claims.lambda_checked == 2 and claims.W_checked == 3
    assert math.isclose(claims.max_loss_ratio, 1.0)  # step 0 meets the bound with equality
    assert math.isclose(claims.min_lambda_ratio, 0.55)

    bad = _records([1.0, 0.95, 0.8, 0.7], [lam0, 0.9, 1.5, 0.5], [0.5, 1.01, 0.9, 1.2])
    claims = theorem1_claims(bad, lr)
    assert not claims.holds
    assert claims.W_first_violation == 1 and claims.max_W_norm == 1.2
    assert claims.lambda_first_violation == 1 and claims.min_lambda_ratio == 0.25
    assert claims.loss_first_violation == 1  # 0.95 > 0.9
    assert claims.as_dict()["holds"] is False


def test_theorem1_claims_reject_bad_records():
    with pytest.raises(ValueError, match="must start with step 0"):
        theorem1_claims(_records([1.0], [math.nan], [0.5]), 0.1)
    with pytest.raises(ValueError, match="non-empty sequence"):
        theorem1_claims([], 0.1)


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

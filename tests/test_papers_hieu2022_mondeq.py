"""Conditions and rates of the monotone-DEQ convergence theory (thesis, Chapter 3); the lemmas
on the equilibrium are in test_papers_hieu2022_mondeq_lemmas.py."""

import pytest
import torch

from deqlab.models.mondeq import MonDEQ
from deqlab.papers.hieu2022.mondeq import (
    M_BOUND_3_18,
    MonDEQConstants,
    condition_1,
    condition_2,
    eq_3_17_as_proved,
    eq_3_18_possible,
    gd_bound,
    gd_rate,
    gradient_flow_bound,
    hypotheses,
    mondeq_constants,
    sigma_min,
    step_size_bound,
)
from deqlab.solvers.splitting import PeacemanRachford

TIGHT = PeacemanRachford(tol=1e-12, max_iter=5000)


def setup(m=0.5, width=12, N=5, d=3, seed=0, scale=0.6):
    torch.manual_seed(seed)
    model = MonDEQ(d, width, m=m, solver=TIGHT, sigma_A=scale, sigma_B=scale)
    X, y = torch.randn(d, N), torch.randn(N)
    with torch.no_grad():
        Z = model.equilibrium(X)
    return model, X, y, Z


def constants(model, X, y, Z, radius=1.0):
    p = dict(model.named_parameters())
    return mondeq_constants(**p, Z=Z, X=X, y=y, m=model.m, radius=radius)


def unit_constants(lambda0=2.0):
    """All λ̄ = 2 (norm 1 + radius 1), m = 1, ‖X‖_F = 1, L(θ0) = 1/2 so √(2L0) = 1."""
    ones = dict.fromkeys("ABUu", 1.0)
    twos = dict.fromkeys("ABUu", 2.0)
    return MonDEQConstants(1.0, lambda0, 1.0, 0.5, ones, ones, twos)


def test_constants_at_initialisation():
    model, X, y, Z = setup()
    c = constants(model, X, y, Z, radius={"A": 0.1, "B": 0.2, "U": 0.3, "u": 0.4})
    assert c.lambda0 == pytest.approx(float(torch.linalg.svdvals(Z)[-1]), rel=1e-10)
    with torch.no_grad():
        assert c.loss0 == pytest.approx(0.5 * float(((model(X) - y) ** 2).sum()))
    assert c.x_norm == pytest.approx(float(X.norm()))
    assert c.bars["A"] == pytest.approx(float(torch.linalg.svdvals(model.A.detach())[0]) + 0.1)
    assert c.bars["u"] == pytest.approx(float(model.u.detach().norm()) + 0.4)
    assert c.bar("U", "u") == pytest.approx(c.bars["U"] * c.bars["u"])


def test_conditions_by_hand():
    """Hand evaluation with every λ̄ = 2, m = 1, ‖X‖_F = 1, √(2L0) = 1, R = 1."""
    c = unit_constants(lambda0=2.0)
    ball = max(2 * 8, 2 * 4, 2, 2)  # 2λ̄_UuA/R_A = 16 is the largest
    rows = {r["name"]: r for r in condition_1(c) + condition_2(c)}
    assert rows["Eq. (3.8)"]["rhs"] == pytest.approx(4 * ball)
    assert rows["Eq. (3.9)"]["rhs"] == pytest.approx(8 * 2 * (4 * (16 + 4) + 1))
    assert rows["Eq. (3.16)"]["rhs"] == pytest.approx(8 * ball)
    assert rows["Eq. (3.17)"]["rhs"] == pytest.approx(8 * 2 * (1 + 6 * 16 + 4 * 4))
    assert rows["Eq. (3.18)"]["rhs"] == pytest.approx(20 * (4 + 4 * 16 + 4 * 64 + 4))
    assert rows["Eq. (3.8)"]["lhs"] == 4.0 and rows["Eq. (3.9)"]["lhs"] == 8.0
    assert not any(r["holds"] for r in rows.values())
    big = {r["name"]: r for r in condition_2(unit_constants(lambda0=100.0))}
    assert all(r["holds"] for r in big.values())
    assert step_size_bound(c) == pytest.approx(min(1.0, 1 / 328, 0.5 / 16, 1 / (6 * 4 * 16)))


@pytest.mark.parametrize("m", [0.05, 0.5, 2.0])
def test_eq_3_17_as_proved_is_lemma_3_3_4_with_proposition_5_at_half_lambda0(m):
    """Proposition 6's proof: Lemma 3.3.4 (Eq. 3.15) with Proposition 5's bounds on ΔU and ΔW,
    required ≤ λ₀/2; the margin λ₀³/rhs equals (λ₀/2)/that bound."""
    ones, bars = dict.fromkeys("ABUu", 1.0), {"A": 1.5, "B": 2.0, "U": 3.0, "u": 0.7}
    c = MonDEQConstants(m, 4.0, 1.3, 0.8, ones, ones, bars)
    r0 = (2 * c.loss0) ** 0.5
    dU = 8 * c.x_norm * bars["u"] * r0 / (c.lambda0**2 * m)  # Proposition 5, U
    dW = 16 * (3 * bars["A"] ** 2 + 2) * bars["U"] * bars["u"] * c.x_norm * r0 / c.lambda0**2 / m**2
    bound = c.x_norm * (dU / m + dW * bars["U"] / m**2)  # Lemma 3.3.4, ‖U(0)‖₂ ≤ λ̄_U
    row = eq_3_17_as_proved(c)
    assert row["name"] == "Eq. (3.17) as Proposition 6's proof needs (ours)"
    assert row["lhs"] / row["rhs"] == pytest.approx((c.lambda0 / 2) / bound, rel=1e-12)
    printed = {r["name"]: r for r in condition_2(c)}["Eq. (3.17)"]
    if m <= 1:  # the corrected right side is at least 2/m² times the printed one
        assert row["rhs"] >= 2 / m**2 * printed["rhs"]


def test_inequalities_are_plain_numbers():
    (row,) = condition_2(unit_constants(lambda0=100.0))[:1]
    assert row == {
        "name": "Eq. (3.16)",
        "lhs": 1e4,
        "relation": ">=",
        "rhs": 8 * 16.0,
        "holds": True,
    }


@pytest.mark.parametrize("seed", range(4))
def test_condition_318_needs_small_m(seed):
    """λ_0 ≤ ‖X‖_F‖U‖₂/m (Lemma 3.3.3) makes (3.18) impossible for m ≥ 1/√20."""
    model, X, y, Z = setup(m=M_BOUND_3_18, seed=seed, scale=0.1)
    (row,) = [r for r in condition_2(constants(model, X, y, Z, radius=1e-3)) if "3.18" in r["name"]]
    assert not row["holds"]


def test_rates_closed_form():
    c = unit_constants(lambda0=0.5)
    t = torch.tensor([0.0, 1.0, 8.0])
    assert torch.allclose(gradient_flow_bound(c, t), 0.5 * torch.exp(-0.125 * t))
    assert float(gd_bound(c, 3, eta=0.4)) == pytest.approx(0.5 * (1 - 0.4 * 0.25 / 4) ** 3)
    with pytest.raises(ValueError, match=r"makes the rate 1 − ηλ_0²/4 = .* negative"):
        gd_bound(c, 1, eta=100.0)
    with pytest.raises(ValueError, match="`eta` must be in"):
        gd_bound(c, 1, eta=0.0)


def test_gd_rate_reaches_zero_at_the_bound_and_rejects_larger_steps():
    assert gd_rate(2.0, 0.5) == pytest.approx(0.5)
    assert gd_rate(3.0, 4 / 3.0**2) == 0.0  # η = 4/λ_0² (a rounding error below 0 is 0)
    assert gd_bound(unit_constants(lambda0=2.0), torch.tensor([0, 1, 2]), eta=1.0).tolist() == [
        0.5,
        0.0,
        0.0,
    ]
    with pytest.raises(ValueError, match="negative"):
        gd_rate(2.0, 1.01)


def test_at_eta_4_over_lambda0_squared_the_output_step_expands_every_residual_direction():
    """The update of u alone maps ŷ − y to (I − ηZᵀZ)(ŷ − y); at η = 4/λ_0² every eigenvalue
    of I − ηZᵀZ is ≤ −3 (module docstring), so L(θ(1)) ≤ 0 cannot follow for u alone."""
    Z = torch.randn(12, 5, dtype=torch.float64)
    eta = 4 / sigma_min(Z) ** 2
    u, y = torch.randn(12, dtype=torch.float64), torch.randn(5, dtype=torch.float64)
    residual = Z.T @ u - y
    stepped = Z.T @ (u - eta * Z @ residual) - y
    assert float(torch.linalg.eigvalsh(torch.eye(5) - eta * Z.T @ Z).max()) <= -3 + 1e-9
    assert float(stepped.norm()) >= 3 * float(residual.norm()) * (1 - 1e-9)


def test_hypotheses_hold_at_step_zero_and_detect_leaving_the_ball():
    model, X, y, Z = setup()
    c = constants(model, X, y, Z, radius=0.5)
    params = {k: v.detach().clone() for k, v in model.named_parameters()}
    rows = hypotheses(c, initial=params, current=params, Z=Z, loss=c.loss0, k=0, eta=0.01)
    assert all(r["holds"] for r in rows) and len(rows) == 6
    moved = dict(params, A=params["A"] + 1.0)  # ‖ΔA‖_F = 12 > R_A
    rows = hypotheses(c, initial=params, current=moved, Z=Z, loss=c.loss0, k=0, eta=0.01)
    assert [r["name"] for r in rows if not r["holds"]] == ["Hypothesis 1 (A)"]


def test_bad_input():
    model, X, y, Z = setup()
    with pytest.raises(ValueError, match="`radius` must have exactly the keys"):
        constants(model, X, y, Z, radius={"A": 1.0})
    with pytest.raises(ValueError, match="`radius` must be in"):
        constants(model, X, y, Z, radius=0.0)
    with pytest.raises(ValueError, match="the thesis assumes n >= N"):
        sigma_min(torch.randn(3, 5))
    with pytest.raises(ValueError, match=r"`y` must have shape \(5,\)"):
        constants(model, X, y[:3], Z)
    theta = {k: p.detach() for k, p in model.named_parameters()}
    misnamed = {"v" if k == "u" else k: p for k, p in theta.items()}
    with pytest.raises(TypeError, match=r"missing \['u'\], unknown \['v'\]"):
        mondeq_constants(**misnamed, Z=Z, X=X, y=y, m=0.5, radius=1.0)


def test_a_width_below_n_has_lambda0_zero_only_when_allowed():
    """n = 3 < N = 5: Z(0) has rank ≤ 3, so σ_min(Z(0)) = 0 (the thesis assumes n ≥ N and the
    default refuses); the other constants are those of the same formulas, by hand."""
    model, X, y, Z = setup(width=3, N=5)
    theta = {k: p.detach() for k, p in model.named_parameters()}
    assert float(torch.linalg.eigvalsh(Z.T @ Z)[0]) == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="the thesis assumes n >= N"):
        mondeq_constants(**theta, Z=Z, X=X, y=y, m=model.m, radius=0.5)
    c = mondeq_constants(**theta, Z=Z, X=X, y=y, m=model.m, radius=0.5, allow_narrow=True)
    assert c.lambda0 == 0.0 and c.radii == dict.fromkeys("ABUu", 0.5)
    assert c.x_norm == pytest.approx(float(X.norm()), rel=1e-14)
    assert c.loss0 == pytest.approx(0.5 * float(((Z.T @ theta["u"] - y) ** 2).sum()), rel=1e-14)
    assert c.norms["U"] == pytest.approx(float(torch.linalg.svdvals(theta["U"])[0]), rel=1e-12)
    assert c.bars["u"] == pytest.approx(float(theta["u"].norm()) + 0.5, rel=1e-14)
    assert step_size_bound(c) == 0.0 and not any(r["holds"] for r in condition_2(c))
    model, X, y, Z = setup(width=12, N=5)
    theta = {k: p.detach() for k, p in model.named_parameters()}
    allowed = mondeq_constants(**theta, Z=Z, X=X, y=y, m=0.5, radius=0.5, allow_narrow=True)
    assert allowed == constants(model, X, y, Z, radius=0.5)  # at n ≥ N it changes nothing


@pytest.mark.parametrize("seed", range(4))
def test_condition_318_is_impossible_when_m_squared_n_reaches_one_twentieth(seed):
    """m = 0.2 < 1/√20 but N = 5: m²N = 0.2 ≥ 1/20, and λ₀² ≤ ‖Z(0)‖_F²/N makes (3.18) fail
    at any width and radius; with N = 1 the same m leaves it possible."""
    assert not eq_3_18_possible(0.2, 5) and eq_3_18_possible(0.2, 1)
    model, X, y, Z = setup(m=0.2, seed=seed, scale=0.1, width=40)
    c = constants(model, X, y, Z, radius=1e-6)
    assert c.lambda0**2 <= float(Z.norm()) ** 2 / 5  # the step the old m < 1/√20 test missed
    (row,) = [r for r in condition_2(c) if "3.18" in r["name"]]
    assert not row["holds"]

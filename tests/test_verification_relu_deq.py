"""verify on the ReLU DEQ (Ling et al. 2023): each number against an independent
computation (closed forms for n = 2, Monte Carlo for λ_0 against Theorem 2, the
condition-1 width solver against a brute-force scan), and each statement passing and not."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from deqlab.models.relu_deq import ReLUDEQ
from deqlab.papers.ling2023.margins import theorem1_margins
from deqlab.papers.ling2023.theory import (
    Constants,
    condition1,
    condition1_margin,
    condition1_width,
    eq9_margin_bound,
    lemma2_gradients,
    required_width,
    theorem2_depth,
    theorem2_scale,
    width_margin,
    width_where,
)
from deqlab.statements import Run, Verdict
from deqlab.theory.kernels import LeastEigenvalue
from deqlab.theory.ntk import pl_gram
from deqlab.theory.spectra import gram_lambda_min
from deqlab.verification import relu_deq as rd
from deqlab.verification import relu_deq_numbers
from deqlab.verification import relu_deq_statements as rs
from deqlab.verification import relu_deq_train as rt
from deqlab.verification.inputs import load_dataset, prepare

SIGMA_W2 = 0.08


def _q(x):
    """Q of Eq. (11), written out here (independent of deqlab.theory.kernels)."""
    return (np.sqrt(1 - x * x) + (np.pi - np.arccos(x)) * x) / np.pi


def _k_fixed_point(c: float, s2: float = SIGMA_W2) -> float:
    """k = Q(σ²k + (1 − σ²)c) by plain Picard iteration (a σ²-contraction)."""
    k = 0.0
    for _ in range(2000):
        k = _q(s2 * k + (1 - s2) * c)
    return k


def _pair(angle: float, d: int = 2):
    x = np.zeros((2, d))
    x[0, 0], x[1, 0], x[1, 1] = 1.0, math.cos(angle), math.sin(angle)
    return prepare(x * math.sqrt(d), np.array([0.5, -0.5]))


@pytest.fixture(scope="module")
def small():
    x, y, name = load_dataset("sphere", n=6, d=5, seed=1)
    return rd.initialize(prepare(x, y, name=name), width=300, sigma_w2=SIGMA_W2, seed=0)


def verdicts(statements):
    return {s.name: s.verdict for s in statements}


# ---- numbers against independent computations -----------------------------------------------


def test_lambda_star_and_ntk_of_two_points_in_closed_form():
    angle = 1.1
    init = rd.initialize(_pair(angle), width=50, sigma_w2=SIGMA_W2, seed=0)
    rho, c = 1 / (1 - SIGMA_W2), math.cos(angle)
    k = _k_fixed_point(c)
    assert init.lambda_star == pytest.approx(rho * (1 - k), rel=1e-10)
    assert init.K.max_eigenvalue == pytest.approx(rho * (1 + k), rel=1e-10)
    u = SIGMA_W2 * k + (1 - SIGMA_W2) * c
    slope = 1 - math.acos(u) / math.pi  # Q'(u)
    p_off, p_diag = slope / (2 * (1 - SIGMA_W2 * slope)), 1 / (2 * (1 - SIGMA_W2))
    diag, off = rho * (1 + p_diag), rho * k * (1 + p_off)
    assert init.ntk.value == pytest.approx(diag - off, rel=1e-10)


def test_lambda0_matches_theorem1s_helper_and_its_conditions(small):
    """λ_0, Condition 1 and Eq. (10) against deqlab.papers.ling2023.theory.condition1 (dense
    path)."""
    x, y = small.inputs.X, small.inputs.y
    reference = condition1(small.model, x, y, tol=1e-12)
    cond = small.cond
    assert cond.lambda0 == pytest.approx(reference.lambda0, rel=1e-8)
    for key in ("eq7", "eq8", "eq9"):
        assert getattr(cond, key).margin == pytest.approx(getattr(reference, key).margin, rel=1e-6)
    assert cond.lr_bound == pytest.approx(reference.lr_bound, rel=1e-6)
    k = cond.constants  # Eq. (9) written out
    assert cond.eq9.rhs == pytest.approx(4 * (cond.c_w**2 + cond.c_u**2) * k.X_fro**2)
    assert k.X_fro == pytest.approx(float(x.norm())) and k.W_norm < 1


def _equilibrium(d: int, m: int, n: int, tol: float):
    """A ReLU DEQ of width m at n seeded unit-scaled inputs, and its equilibrium to ``tol``."""
    X = torch.randn(d, n, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    X = X / X.norm(dim=0) * d**0.5
    model = ReLUDEQ.init(d, m, sigma_w2=0.1, seed=0)
    return model, X, model.equilibrium(X, tol=tol).Z


def test_lambda0_is_zero_below_n_columns_and_bracketed_above():
    model, X, Z = _equilibrium(4, 3, 5, 1e-12)
    narrow = rd._gram_lambda_min(model, X, Z)
    assert narrow.value == 0.0 and (narrow.bracket.lower, narrow.bracket.upper) == (0.0, 0.0)
    assert "rank" in narrow.bracket.lower_proof
    model, X, Z = _equilibrium(4, 7, 5, 1e-12)
    wide = rd._gram_lambda_min(model, X, Z)
    assert wide.value == pytest.approx(gram_lambda_min(Z), rel=1e-10)
    assert wide.bracket.contains(gram_lambda_min(Z))


def test_the_lambda0_bracket_holds_the_exact_equilibriums_not_only_the_stored_gram():
    """Z(0) solved to the relative residual 1e-10 gives λ_min(ZᵀZ) = 30.7147087383, its
    eigenvalue bracket ~1e-10 wide; the equilibrium solved to 1e-15 has 30.7147087385, outside
    it. The bracket of λ_0 now includes the solve's error and the product's rounding."""
    model, X, loose = _equilibrium(10, 400, 20, 1e-10)
    _, _, tight = _equilibrium(10, 400, 20, 1e-15)
    exact = float(torch.linalg.svdvals(tight)[-1]) ** 2  # σ_min², no Gram product
    stored = rd.least_eigenvalue_large(loose.T @ loose).bracket
    assert not stored.contains(exact)  # the stored matrix's bracket is not λ_0's
    found = rd._gram_lambda_min(model, X, loose).bracket
    assert found.contains(exact) and found.relative_width < 1e-7
    assert "equilibrium's error" in found.lower_proof and "r/(1 − w̄)" in found.upper_proof


def test_lambda0_monte_carlo_against_theorem2():
    """G/m → K: over seeds, λ_0/m is near λ* and above λ*/2 (Theorem 2)."""
    x, y, _ = load_dataset("sphere", n=3, d=3, seed=5)
    inputs = prepare(x, y)
    ratios = [rd.initialize(inputs, width=1500, sigma_w2=SIGMA_W2, seed=s) for s in range(4)]
    ratios = [i.lambda0 / (i.width * i.lambda_star) for i in ratios]
    assert min(ratios) >= 0.5
    assert float(np.mean(ratios)) == pytest.approx(1.0, abs=0.2)


def test_the_stand_ins_curvature_and_pl_ratio_against_lemma2_gradients(small):
    """μ = ‖∇Φ(0)‖²/(2Φ(0)) from Lemma 2's explicit Kronecker gradients (not H), and
    λ_max/λ_min of H(0) = J Jᵀ by a dense eigendecomposition."""
    model, X, y = small.model, small.inputs.X, small.inputs.y
    Z = model.equilibrium(X, tol=1e-12).Z
    grads = lemma2_gradients(model, X, y, Z)
    r = model.predict(Z).detach() - y
    mu = sum(float((g**2).sum()) for g in grads) / float(r @ r)
    assert small.pl_ratio0 == pytest.approx(mu, rel=1e-8)
    spectrum = torch.linalg.eigvalsh(pl_gram(model, X, tol=1e-12))
    assert small.curvature == pytest.approx(float(spectrum[-1]), rel=1e-10)
    assert small.h_lambda_min0 == pytest.approx(float(spectrum[0]), rel=1e-8)
    assert float(spectrum[0]) <= mu <= float(spectrum[-1])


def _margins_by_hand(k: Constants, m0: float, m: int, grid: np.ndarray) -> float:
    """Eqs. (7)–(9) of the paper written out (not via deqlab.theory), best δ on ``grid``."""
    s = m / m0
    lam, ru = k.lambda0 * s, k.U_norm * math.sqrt(s) + grid
    rw, ra = k.W_norm + grid, k.a_norm + grid
    cw, cu, ca = ru * ra / (1 - rw) ** 2, ra / (1 - rw), ru / (1 - rw)
    X2, r = k.X_fro**2, k.residual_norm
    eq7 = lam / (4 / grid * np.maximum(np.maximum(cw, cu), ca) * k.X_fro * r)
    eq8 = lam**1.5 / (4 * (2 + math.sqrt(2)) / ra * (cw**2 + cu**2) * X2 * r)
    eq9 = lam / (4 * (cw**2 + cu**2) * X2)
    return float(np.max(np.minimum(np.minimum(eq7, eq8), eq9)))


def test_condition1_width_against_a_brute_force_scan():
    k = Constants(lambda0=0.1, W_norm=0.3, U_norm=0.5, a_norm=0.01, X_fro=1.0, residual_norm=0.02)
    m0 = 10
    solved = condition1_width(k, m0)
    grid = (1 - k.W_norm) * np.linspace(1e-6, 1 - 1e-6, 20_000)
    first = next(m for m in range(1, 1000) if _margins_by_hand(k, m0, m, grid) >= 1)
    assert 100 < first < 1000 and abs(math.ceil(solved) - first) <= 1
    # one δ for all three asks for more than each equation alone
    assert max(required_width(k, m0, e) for e in ("eq7", "eq8", "eq9")) < 0.5 * solved
    assert condition1_margin(k, m0, solved * 1.001) >= 1 > condition1_margin(k, m0, solved * 0.999)
    # verify's widths start at the given width: the same number above it
    assert rd.widths_needed(k, m0)["condition1"] == pytest.approx(solved, rel=1e-8)


def test_eq9_never_holds_below_its_bound_and_the_bound_is_an_upper_bound():
    k = Constants(lambda0=1e-3, W_norm=0.5, U_norm=3.0, a_norm=1.0, X_fro=4.0, residual_norm=2.0)
    widths = rd.widths_needed(k, 1)
    assert math.isinf(widths["eq9"]) and math.isinf(widths["condition1"])
    bound = eq9_margin_bound(k)
    assert bound == pytest.approx(1e-3 / (4 * 9.0 * 1.0 * 16.0)) and bound < 1
    for m in (1.0, 1e3, 1e9, 1e20):  # the margin (δ free) stays under the bound
        assert width_margin(k, 1.0, m, "eq9") < bound
    big = replace(k, lambda0=1e4)  # a bound above 1: Eq. (9) can hold
    assert eq9_margin_bound(big) > 1 and math.isfinite(required_width(big, 1.0, "eq9"))


def test_width_where_at_the_ends():
    assert width_where(lambda m: 2.0, 1.0) == 1.0
    assert math.isinf(width_where(lambda m: 0.5, 1.0))
    assert width_where(lambda m: m / 1e4, 1.0) == pytest.approx(1e4, rel=1e-8)


def test_theorem2_scale_and_depth_in_closed_form():
    assert theorem2_scale(10, 0.5, 0.01) == pytest.approx(400 * math.log(2000))
    assert rd.theorem2_scale(10, 0.5) == theorem2_scale(10, 0.5, rd.THEOREM2_T)
    assert math.isinf(theorem2_scale(10, 0.0, 0.01))
    expected = math.log(40) / math.log(1 / (2 * math.sqrt(2 * 0.08)))
    assert theorem2_depth(10, 0.5, 0.08) == pytest.approx(expected)
    assert math.isinf(theorem2_depth(10, 0.5, 0.2))


def test_numbers_have_stable_keys(small):
    eta = rd.theorem_eta(small)
    k = relu_deq_numbers.numbers(small, eta)
    for key in (
        "lambda_star",
        "condition_number_K",
        "ntk_lambda_min",
        "lambda0",
        "lambda0_theorem2",
        "eq10_bound",
        "rate_at_bound",
        "rate",
        "delta",
    ):
        assert isinstance(k[key], float), key
    assert set(k["condition1"]) == {"eq7", "eq8", "eq9", "holds"}
    assert set(k["required_width"]) == {"condition1", "eq7", "eq8", "eq9", "scaling", "what"}
    assert k["eq9_limit"]["limit"] <= k["eq9_limit"]["bound"]
    assert k["lambda0_theorem2"] == pytest.approx(300 * k["lambda_star"] / 2)
    assert k["rate"] == pytest.approx(1 - eta * k["lambda0"] / 2)
    assert eta == pytest.approx(0.5 * k["eq10_bound"])
    assert k["condition_number_K"] == pytest.approx(k["lambda_max_K"] / k["lambda_star"])


# ---- statements: each passes (or holds) somewhere and fails (or is unmet) somewhere ---------


def _holding(init):
    """The same network with λ_0 so large that Eqs. (7)–(9) hold."""
    return replace(init, cond=rd.evaluate_condition1(replace(init.cond.constants, lambda0=1e12)))


A1 = "Assumption 1: σ_w² < 1/8"
WELL_POSED = "‖W(0)‖₂ < 1 (a δ of Section 3.1 exists)"
THM3 = "Theorem 3 (ii): λ* > 0 (K strictly positive definite)"
LEMMA1 = "Lemma 1: ‖W(0)‖₂ ≤ 2√2σ_w"
WIDTH = "Theorem 2's width m = Ω(n²/λ*² log(n/(λ*t))): at least m ≥ n"
SCALE = "Theorem 2's width m = Ω(n²/λ*² log(n/(λ*t))), its constant taken as 1"
THM2 = "Theorem 2: λ_0 ≥ mλ*/2"
EQS = [f"Condition 1, Eq. ({e}) at initialization" for e in (7, 8, 9)]
LR = "learning rate below Eq. (10)"
NTK = "DEQ NTK: λ_min(NTK) ≥ λ*"


def test_statements_that_hold_or_pass_on_a_good_setting(small):
    good = _holding(small)
    found = verdicts(rs.statements(good, rd.theorem_eta(good)))
    for name in (A1, WELL_POSED, WIDTH, *EQS, LR):
        assert found[name] is Verdict.HOLDS, name
    for name in (THM3, LEMMA1, NTK):
        assert found[name] is Verdict.PASS, name
    assert found[SCALE] is Verdict.UNMET and found[THM2] is Verdict.NOT_APPLICABLE


def test_condition1_and_eq10_unmet_with_the_width_they_need(small):
    statements = rs.statements(small, 2 * small.cond.lr_bound)
    found = {s.name: s for s in statements}
    for name in EQS:
        assert found[name].verdict is Verdict.UNMET
        assert "m ≥" in found[name].needs or "no width" in found[name].needs
    assert found[LR].verdict is Verdict.UNMET


def test_assumption1_and_well_posedness_unmet_for_a_large_sigma():
    x, y, _ = load_dataset("sphere", n=4, d=3)
    init = rd.initialize(prepare(x, y), width=200, sigma_w2=0.3, seed=0)
    found = {s.name: s for s in rs.statements(init, None)}
    assert found[A1].verdict is Verdict.UNMET and found[WELL_POSED].verdict is Verdict.UNMET
    assert init.cond is None and found[EQS[0]].verdict is Verdict.NOT_MEASURED
    assert found[THM2].verdict is Verdict.NOT_APPLICABLE  # Assumption 1 unmet


def test_theorem3_fails_on_a_singular_k_within_the_hypotheses(small):
    singular = LeastEigenvalue(0.0, 1e-20, 10.0, 1e-12, True, "singular")
    assert verdicts(rs.statements(replace(small, K=singular), None))[THM3] is Verdict.FAIL


def test_lemma1_fails_on_a_large_norm(small):
    assert verdicts(rs.statements(replace(small, W_norm=0.99), None))[LEMMA1] is Verdict.FAIL


def _wide_enough(init, ratio: float):
    """``init`` with a λ* so large that m ≥ n²/λ*² log(n/(λ*t)), and λ_0 = ratio·mλ*/2."""
    K = LeastEigenvalue(50.0, 50.0, 60.0, 1e-12, False, "")
    wide = replace(init, K=K)
    assert rd.theorem2_scale(init.inputs.n, 50.0) < init.width
    constants = replace(init.cond.constants, lambda0=ratio * wide.predicted_lambda0)
    return replace(wide, cond=rd.evaluate_condition1(constants))


def test_theorem2_passes_at_its_width_and_is_never_a_fail(small):
    found = verdicts(rs.statements(_wide_enough(small, 1.5), None))
    assert found[SCALE] is Verdict.HOLDS and found[THM2] is Verdict.PASS
    below = {s.name: s for s in rs.statements(_wide_enough(small, 0.1), None)}
    assert below[THM2].verdict is Verdict.NOT_APPLICABLE  # the constant is not given
    assert below[THM2].detail.startswith("the width hypothesis cannot be decided")
    low = replace(small.cond.constants, lambda0=0.1 * small.predicted_lambda0)
    found = verdicts(rs.statements(replace(small, cond=rd.evaluate_condition1(low)), None))
    assert found[SCALE] is Verdict.UNMET and found[THM2] is Verdict.NOT_APPLICABLE


def test_theorem2_is_not_applicable_below_n(small):
    x, y, _ = load_dataset("sphere", n=6, d=5, seed=1)
    narrow = rd.initialize(prepare(x, y), width=4, sigma_w2=SIGMA_W2, seed=0)
    found = {s.name: s for s in rs.statements(narrow, None)}
    assert narrow.lambda0 == 0.0 and found[WIDTH].verdict is Verdict.UNMET
    assert found[THM2].verdict is Verdict.NOT_APPLICABLE and found[WIDTH].needs == "m ≥ 6"
    assert "λ_0 > 0, so m ≥ n = 6" in found[EQS[0]].needs  # solved under Theorem 2's scaling
    assert "Condition 1 (one δ): m ≥" in found[EQS[0]].needs


def test_ntk_statement_fails_below_lambda_star(small):
    low = LeastEigenvalue(small.lambda_star / 2, small.lambda_star / 2, 1.0, 1e-14, False, "")
    assert verdicts(rs.statements(replace(small, ntk=low), None))[NTK] is Verdict.FAIL


# ---- training ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def trained(small):
    return rt.train(small, steps=4, eta=rd.theorem_eta(small))


THEOREM1 = [
    "Theorem 1 (i): ‖W(τ)‖₂ < 1 for τ ≥ 1",
    "Theorem 1 (ii): λ_τ > λ_0/2 for τ ≥ 1",
    "Theorem 1 (iii): Φ(τ) ≤ (1 − ηλ_0/2)^τ Φ(0) for τ ≥ 1",
    "proof of Theorem 1 (iii): Φ(τ+1) ≤ (1 − ηλ_0/2) Φ(τ)",
    "proof of Theorem 1: ‖θ(τ) − θ(0)‖ within its drift bound",
]
LEMMA2 = "Lemma 2: J(τ) invertible (‖W(τ)‖₂ < 1) where Eqs. (4)–(5) are checked"
PL = [
    "Eq. (4): ‖∇_θΦ(τ)‖² ≥ 2λ_min(H(τ))Φ(τ) for τ ≥ 1",
    "Section 2.3: λ_min(H(τ)) ≥ λ_τ for τ ≥ 1",
    "Eq. (5): ‖∇_θΦ(τ)‖² ≥ 2λ_τΦ(τ) for τ ≥ 1",
]


def test_training_records_steps_zero_to_t_and_side_by_side_numbers(small, trained):
    assert [r["step"] for r in trained.records] == [0, 1, 2, 3, 4]
    k = rt.numbers(small, trained)
    assert k["rate_predicted"] == pytest.approx(1 - trained.eta * small.lambda0 / 2)
    expected = (k["loss_final"] / k["loss0"]) ** (1 / 4)
    assert k["rate_measured"] == pytest.approx(expected) and k["rate_measured"] < 1
    assert k["h_steps"] == [1, 2, 3, 4] and len(k["records"]) == 5
    assert k["min_eq5"] >= 1 and k["min_eq4"] >= 1 and k["min_h_ratio"] >= 1


def test_h_is_the_gram_of_the_autograd_jacobian(small, trained):
    """λ_min(H(0)) against JJᵀ from autograd Jacobians of ŷ(θ) at initialization."""
    model, X = small.model, small.inputs.X
    params = [model.W, model.U, model.a]
    rows = []
    for i in range(X.shape[1]):
        yhat = model(X)[i]
        rows.append(torch.cat([g.reshape(-1) for g in torch.autograd.grad(yhat, params)]))
    J = torch.stack(rows)
    exact = float(torch.linalg.eigvalsh(J @ J.T)[0])
    assert trained.records[0]["H_lambda_min"] == pytest.approx(exact, rel=1e-6)


def test_h_is_formed_at_spread_steps_and_the_last(small, monkeypatch):
    monkeypatch.setattr(rt, "H_CHECKS", 2)
    run = rt.train(small, steps=5, eta=rd.theorem_eta(small))
    formed = [r["step"] for r in run.records if math.isfinite(r["H_lambda_min"])]
    assert formed == [0, 2, 4, 5]


def test_training_statements_pass_inside_their_hypotheses(small, trained):
    guards = [s for s in rs.guards(small, trained.eta) if s.name == A1]  # only what holds
    found = verdicts(rt.statements(small, trained, guards))
    assert found[LEMMA2] is Verdict.HOLDS
    for name in (*THEOREM1, *PL):
        assert found[name] is Verdict.PASS, name


def test_training_statements_not_applicable_outside_condition1(small, trained):
    found = verdicts(rt.statements(small, trained, rs.guards(small, trained.eta)))
    assert all(found[name] is Verdict.NOT_APPLICABLE for name in THEOREM1)


def _record(step, loss, lam, w, dist, grad, h=math.nan):
    return {
        "step": step,
        "loss": loss,
        "lambda_min": lam,
        "W_norm": w,
        "W_norm_bound": w,
        "dist_from_init": dist,
        "grad_norm": grad,
        "H_lambda_min": h,
    }


def _run(records, eta=0.1):
    return rt.Training(eta, records, "ok", "", theorem1_margins(Run.from_rows("t", records), eta))


def test_training_statements_fail_on_a_violating_run(small):
    records = [_record(0, 1.0, 1.0, 0.5, 0.0, 2.0, 1.0), _record(1, 2.0, 0.1, 0.99, 1e9, 0.1, 0.05)]
    guards = [s for s in rs.guards(small, 0.1) if s.name == A1]
    found = verdicts(rt.statements(small, _run(records), guards))
    for name in (*THEOREM1[1:], *PL):  # ‖W(τ)‖₂ = 0.99 keeps Lemma 2's hypothesis
        assert found[name] is Verdict.FAIL, name
    records[1]["W_norm"] = records[1]["W_norm_bound"] = 1.2
    assert verdicts(rt.statements(small, _run(records), guards))[THEOREM1[0]] is Verdict.FAIL


def test_pl_statements_not_applicable_past_well_posedness_and_not_measured_without_h(small):
    records = [_record(0, 1.0, 1.0, 0.5, 0.0, 2.0), _record(1, 1.0, 1.0, 1.2, 0.1, 2.0)]
    found = verdicts(rt.statements(small, _run(records), []))
    assert found[LEMMA2] is Verdict.UNMET
    assert all(found[name] is Verdict.NOT_APPLICABLE for name in PL)
    records[1]["W_norm"] = records[1]["W_norm_bound"] = 0.5
    found = verdicts(rt.statements(small, _run(records), []))
    assert found[PL[0]] is Verdict.NOT_MEASURED and found[PL[2]] is Verdict.PASS

"""verify on the monotone DEQ (the thesis, Chapter 3): λ_0, the conditions, the width fit
and the step-size bound against independent computations; each statement passing and not."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from deqlab.papers.hieu2022.mondeq import eq_3_17_as_proved, gd_rate, step_size_bound
from deqlab.statements import Verdict
from deqlab.verification import mondeq as md
from deqlab.verification.inputs import load_dataset, prepare


@pytest.fixture(scope="module")
def inputs():
    x, y, name = load_dataset("sphere", n=6, d=4, seed=2)
    return prepare(x, y, name=name)


@pytest.fixture(scope="module")
def init(inputs):
    return md.initialize(inputs, width=24, monotonicity=0.2, radius=1.0, seed=0)


AS_PROVED = "Eq. (3.17) as Proposition 6's proof needs (ours)"


def verdicts(statements):
    return {s.name: s.verdict for s in statements}


def test_the_lambda0_bracket_holds_the_exact_equilibriums_sigma_min(inputs):
    """Z(0) solved to 1e-6 (PR splitting): σ_min of the stored Gram's bracket misses σ_min of
    the equilibrium solved to 1e-13; the bracket of λ_0, widened by r(1 + w̄/m) and the
    product's rounding, holds it."""
    tight = md._model(inputs.d, 24, 0.2, 0)
    loose = md._model(inputs.d, 24, 0.2, 0)
    tight.solver = replace(tight.solver, tol=1e-13)
    loose.solver = replace(loose.solver, tol=1e-6)
    with torch.no_grad():
        exact = float(torch.linalg.svdvals(tight.equilibrium(inputs.X))[-1])
        Z = loose.equilibrium(inputs.X)
    stored = md.least_eigenvalue_large(Z.T @ Z).bracket
    assert not math.sqrt(stored.lower) <= exact <= math.sqrt(stored.upper)
    found = md.sigma_min_bracket(loose, inputs.X, Z)
    assert found.contains(exact) and found.width < 1e-3
    assert "r(1 + w̄/m)" in found.lower_proof


def test_lambda0_is_the_least_singular_value_of_the_equilibrium(init, inputs):
    model = init.model
    with torch.no_grad():
        Z = model.equilibrium(inputs.X)
        W = model.weight()
        assert float((Z - torch.relu(W @ Z + model.U @ inputs.X)).abs().max()) < 1e-8
    assert init.constants.lambda0 == pytest.approx(np.linalg.svd(Z.numpy())[1][-1], rel=1e-8)


def test_conditions_and_bound_written_out(init):
    c = init.constants
    b = c.bars
    rhs_318 = (
        20
        * c.x_norm**2
        * (
            b["u"] ** 2
            + 4 * (b["u"] * b["U"] * b["A"]) ** 2
            + 4 * (b["u"] * b["U"]) ** 2
            + b["U"] ** 2
        )
    )
    row = {r["name"]: r for r in init.conditions["Condition 2"]}["Eq. (3.18)"]
    assert row["lhs"] == pytest.approx(c.lambda0**2) and row["rhs"] == pytest.approx(rhs_318)
    k = md.numbers(init, None)
    assert k["eta_max"] == pytest.approx(step_size_bound(c))
    assert k["rate_at_eta_max"] == pytest.approx(1 - k["eta_max"] * c.lambda0**2 / 4)
    assert k["flow_rate"] == pytest.approx(math.exp(-(c.lambda0**2) / 2))
    assert k["conditions"]["Eq. (3.18)"]["margin"] == pytest.approx(row["lhs"] / row["rhs"])
    assert k["fit_widths"] == [24, 36, 48] and k["rate"] is None  # from 4N = 24


def _fitted(c):
    """Conditions 1–2 and Eq. (3.17) as Proposition 6's proof needs it, by name."""
    return {r["name"]: r for r in [*md.condition_1(c), *md.condition_2(c), eq_3_17_as_proved(c)]}


def test_width_fit_is_a_least_squares_power_law_through_the_fit_widths(init, inputs):
    constants = [
        md.constants_at(md._model(inputs.d, w, 0.2, 0), inputs, 1.0)[0] for w in init.fit_widths
    ]
    needed = md.numbers(init, None)["required_width"]
    for name in ("Eq. (3.8)", "Eq. (3.9)", "Eq. (3.16)", "Eq. (3.17)", AS_PROVED):
        rows = [_fitted(c)[name] for c in constants]
        ratios = [r["lhs"] / r["rhs"] for r in rows]
        slope, intercept = np.polyfit(np.log(init.fit_widths), np.log(ratios), 1)
        fit = init.fits[name]
        assert fit.slope == pytest.approx(slope) and fit.intercept == pytest.approx(intercept)
        want = math.exp(-intercept / slope) if slope > 0 else math.inf  # none if it shrinks
        assert needed[name]["width"] == pytest.approx(want, rel=1e-9), name

    grows = md._fit_width(md.WidthFit((24, 48), slope=2.0, intercept=-20.0))
    assert grows["width"] == pytest.approx(math.exp(10.0))  # lhs/rhs = e^-20 n² reaches 1


def test_below_n_samples_lambda0_is_zero_and_the_constants_are_the_same(inputs):
    model = md._model(inputs.d, 3, 0.2, 0)
    c, Z = md.constants_at(model, inputs, 0.5)
    assert c.lambda0 == 0.0 and Z.shape == (3, 6)
    assert c.norms["U"] == pytest.approx(float(torch.linalg.matrix_norm(model.U.detach(), 2)))
    assert c.bars["A"] == pytest.approx(c.norms["A"] + 0.5)
    assert c.loss0 == pytest.approx(0.5 * float(((Z.T @ model.u.detach() - inputs.y) ** 2).sum()))


# ---- statements -------------------------------------------------------------------------

WIDTH = "the width n ≥ N (λ_0 = σ_min(Z(0)) > 0 needs it)"
LEMMA = "Lemma 3.3.3: ‖Z(0)‖_F ≤ ‖X‖_F‖U(0)‖₂/m"
STEP = "η within the step-size bound of Theorem 3.3.5 at n = 24"
CONDITIONS = [f"Condition 1, Eq. (3.{k}) at n = 24" for k in (8, 9)] + [
    f"Condition 2, Eq. (3.{k}) at n = 24" for k in (16, 17, 18)
]
THEOREMS = [
    "Theorem 3.3.5: L(k+1) ≤ (1 − ηλ₀²/4)·L(k) at n = 24",
    "Proposition 5 (Hypothesis 1): the parameters stay in their balls at n = 24",
    "Proposition 6 (Hypothesis 2): σ_min(Z(k)) ≥ λ₀/2 at n = 24",
]


def _holding(init):
    rows = {
        name: [{**r, "lhs": 2 * r["rhs"], "holds": True} for r in rows]
        for name, rows in init.conditions.items()
    }
    return replace(init, conditions=rows)


def test_statements_hold_and_pass_on_a_good_setting(init):
    found = verdicts(md.statements(_holding(init), init.eta_max))
    assert all(found[n] is Verdict.HOLDS for n in (WIDTH, STEP, *CONDITIONS))
    assert found[LEMMA] is Verdict.PASS


def test_statements_unmet_and_failing(init, inputs):
    bad_lemma = replace(init, lemma={**init.lemma, "lhs": 2 * init.lemma["rhs"]})
    found = {s.name: s for s in md.statements(bad_lemma, 2 * init.eta_max)}
    assert found[LEMMA].verdict is Verdict.FAIL and found[STEP].verdict is Verdict.UNMET
    for name in CONDITIONS:
        assert found[name].verdict is Verdict.UNMET
        assert "n ≥" in found[name].needs or found[name].needs.startswith("no width")
    narrow = md.initialize(inputs, width=3, monotonicity=0.2, radius=1.0, seed=0)
    found = {s.name: s for s in md.statements(narrow, None)}
    assert found[WIDTH].verdict is Verdict.UNMET and found[WIDTH].needs == "width n ≥ N = 6"


@pytest.fixture(scope="module")
def trained(init):
    return md.train(init, steps=4, eta=init.eta_max)


def test_training_passes_inside_its_hypotheses_and_is_not_applicable_outside(init, trained):
    assert [r["step"] for r in trained.records] == [0, 1, 2, 3, 4]
    found = verdicts(md.train_statements(_holding(init), trained))
    assert all(found[n] is Verdict.PASS for n in THEOREMS)
    found = verdicts(md.train_statements(init, trained))
    assert all(found[n] is Verdict.NOT_APPLICABLE for n in THEOREMS)
    k = md.train_numbers(init, trained)
    assert k["rate_predicted"] == pytest.approx(gd_rate(init.constants.lambda0, init.eta_max))
    assert k["max_step_ratio"] <= k["rate_predicted"] and len(k["records"]) == 5


def test_training_fails_on_a_violating_run(init):
    def record(step, loss, sigma, dist):
        return {
            "step": step,
            "loss": loss,
            "sigma_min": sigma,
            **{f"dist_{p}": dist for p in ("A", "B", "U", "u")},
        }

    lam = init.constants.lambda0
    run = md.MonDEQTraining(init.eta_max, [record(0, 1.0, lam, 0.0), record(1, 2.0, lam / 4, 5.0)])
    found = verdicts(md.train_statements(_holding(init), run))
    assert all(found[n] is Verdict.FAIL for n in THEOREMS)


UNDER_AS_PROVED = f"{THEOREMS[0]}, under {AS_PROVED}"


def test_training_decides_theorem_3_3_5_also_under_eq_3_17_as_its_proof_needs(init, trained):
    """verify --train states Eq. (3.17) as Proposition 6's proof needs it (ours) as one more
    hypothesis, with the margin of eq_3_17_as_proved, and decides Theorem 3.3.5 under it too:
    NOT APPLICABLE where it is unmet although the printed conditions hold, PASS and FAIL
    where it holds."""
    row = eq_3_17_as_proved(init.constants)
    found = {s.name: s for s in md.train_statements(_holding(init), trained)}
    proved = found[f"Condition 2, {AS_PROVED} at n = 24"]
    assert proved.value == pytest.approx(row["lhs"] / row["rhs"], rel=1e-12)
    assert proved.needs == init.fits[AS_PROVED].needs()  # the width it needs, as Condition 2's
    assert proved.needs.startswith(("n ≥ ", "no width: ")) and "sweep" not in proved.needs
    assert proved.verdict is Verdict.UNMET and found[THEOREMS[0]].verdict is Verdict.PASS
    assert found[UNDER_AS_PROVED].verdict is Verdict.NOT_APPLICABLE
    small = {p: 1e-6 * b for p, b in init.constants.bars.items()}  # λ̄ small: it holds
    inside = _holding(replace(init, constants=replace(init.constants, bars=small)))
    found = verdicts(md.train_statements(inside, trained))
    assert found[f"Condition 2, {AS_PROVED} at n = 24"] is Verdict.HOLDS
    assert found[UNDER_AS_PROVED] is Verdict.PASS
    lam = init.constants.lambda0
    records = [
        {"step": k, "loss": loss, "sigma_min": lam, **{f"dist_{p}": 0.0 for p in "ABUu"}}
        for k, loss in enumerate((1.0, 2.0))
    ]
    found = verdicts(md.train_statements(inside, md.MonDEQTraining(init.eta_max, records)))
    assert found[THEOREMS[0]] is Verdict.FAIL and found[UNDER_AS_PROVED] is Verdict.FAIL


def test_training_below_n_samples_is_refused(inputs):
    narrow = md.initialize(inputs, width=3, monotonicity=0.2, radius=1.0, seed=0)
    with pytest.raises(ValueError, match=r"needs λ_0 = σ_min\(Z\(0\)\) > 0, i.e. width ≥ N = 6"):
        md.train(narrow, steps=2, eta=1e-4)


CONDITION2 = CONDITIONS[2:]


def test_training_hypotheses_hold_and_are_unmet(init, trained):
    """The hypotheses train_statements rebuilds for the run (the ones the page shows):
    Condition 2 and η ≤ η_max, each holding and unmet."""
    found = verdicts(md.train_statements(_holding(init), trained))
    assert all(found[n] is Verdict.HOLDS for n in (*CONDITION2, STEP))
    too_large = md.MonDEQTraining(2 * init.eta_max, trained.records)
    found = verdicts(md.train_statements(init, too_large))
    assert all(found[n] is Verdict.UNMET for n in (*CONDITION2, STEP))


def test_answers_say_why_theorem_3_3_5_applies_at_no_width(init, inputs):
    from deqlab.verification.answers import answers_for

    k = md.numbers(init, None)
    flow, gd = answers_for("mondeq", init, k, None)
    assert gd.status == "applies at no width" and "m²N = 0.24 ≥ 1/20" in gd.why
    assert f"m < 1/√(20N) = {(20 * 6) ** -0.5:.3g}" in gd.why
    assert flow.theorem.startswith("Hieu 2022 (thesis), Theorem 3.3.1: gradient flow")
    holding = md.initialize(inputs, width=24, monotonicity=0.05, radius=1.0, seed=0)
    gd = answers_for("mondeq", holding, md.numbers(holding, None), None)[1]
    assert "1/20" not in gd.why  # m²N = 0.015: Eq. (3.18) is possible, the fit decides
    narrow = md.initialize(inputs, width=3, monotonicity=0.2, radius=1.0, seed=0)
    gd = answers_for("mondeq", narrow, md.numbers(narrow, None), None)[1]
    assert gd.status == "can apply at a larger width" and gd.width == 6


def test_stand_ins_from_the_gauss_newton_curvature_of_the_monotone_deq(init, inputs):
    """λ_max(JJᵀ) and ‖Jᵀr‖²/‖r‖² at θ(0) against the dense Jacobian of ŷ = Z*ᵀu in
    (A, B, U, u) by autograd (one reverse pass per sample through the splitting's adjoint)."""
    model, X, y = init.model, inputs.X, inputs.y
    names = [n for n, _ in model.named_parameters()]
    shapes = [p.shape for _, p in model.named_parameters()]

    def predict(t):
        parts = t.split([s.numel() for s in shapes])
        params = {n: p.view(s) for n, p, s in zip(names, parts, shapes, strict=True)}
        return torch.func.functional_call(model, params, (X,))

    theta = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    J = torch.autograd.functional.jacobian(predict, theta)  # (N, p)
    r = predict(theta).detach() - y
    k = md.numbers(init, None)
    assert k["curvature"] == pytest.approx(float(torch.linalg.eigvalsh(J @ J.T)[-1]), rel=1e-5)
    assert k["pl_ratio0"] == pytest.approx(float((J.T @ r).square().sum() / (r @ r)), rel=1e-6)
    from deqlab.verification.stand_ins import standins

    lines = standins(k, None, None).lines()
    assert lines[0].startswith("ours: largest useful step from the measured curvature")

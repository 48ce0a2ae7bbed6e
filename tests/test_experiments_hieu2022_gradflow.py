"""hieu2022-gradflow (experiments/hieu2022/gradflow.py, flow_statements.py and its report):
the statement builders of Proposition 4, Eq. (3.14) and Theorem 3.3.1 in both directions on
made-up numbers, the Euler flow against an independent finite difference (and a wrong
kernel), and the tiny and theorem presets."""

import math

import pytest
import torch

from deqlab.data import get_dataset
from deqlab.experiments.config import ConfigError
from deqlab.experiments.hieu2022.gradflow import Hieu2022GradFlow, _initial_kernel_max
from deqlab.experiments.hieu2022.setting import build_model
from deqlab.experiments.registry import experiment_names
from deqlab.papers.hieu2022.flow import (
    FlowTrace,
    feature_learning_check,
    flow_rate_check,
    kernel_floor_check,
    proposition_4_check,
    step_error_check,
    theorem_3_3_1,
)
from deqlab.papers.hieu2022.mondeq import Inequality
from deqlab.papers.hieu2022.mondeq_kernel import prediction_kernel
from deqlab.papers.hieu2022.width_fit import WidthFit
from deqlab.statements import Kind, Verdict
from deqlab.train.mondeq_flow import MonDEQFlow
from helpers import MemoryCheckpoints

PASS, FAIL, NA, NM = Verdict.PASS, Verdict.FAIL, Verdict.NOT_APPLICABLE, Verdict.NOT_MEASURED
HOLDS, UNMET = Verdict.HOLDS, Verdict.UNMET


def _by_name(statements):
    return {s.name: s for s in statements}


# --- statement builders on made-up numbers --------------------------------------------------


def test_proposition_4_passes_on_a_removed_first_order_error_and_leaves_out_kinks():
    passed = proposition_4_check(
        [1e-5, 2e-5], [0.04, 0.02], [0.02, 0.01], [0, 0], rtol=1e-2, width=8
    )
    assert passed.verdict is PASS and passed.value == pytest.approx(2e-5)
    assert "median observed order 1" in passed.measured
    failed = proposition_4_check([0.3], [0.31], [0.3], [0], rtol=1e-2, width=8)
    assert failed.verdict is FAIL  # not shrinking with h: the kernel is wrong
    kink = proposition_4_check([1e-5, 0.5], [0.04, 0.6], [0.02, 0.5], [0, 3], rtol=1e-2, width=8)
    assert kink.verdict is PASS and "1 of 2 probes left out" in kink.detail
    assert proposition_4_check([0.5], [0.6], [0.5], [2], rtol=1e-2, width=8).verdict is NM


def test_feature_learning_check_needs_the_inner_parameters_in_the_kernel():
    assert feature_learning_check([1.0, 4.4], [1.0, 2.0], width=8).verdict is PASS  # +10%
    flat = feature_learning_check([1.00003, 4.0], [1.0, 2.0], width=8)
    assert flat.verdict is FAIL and flat.value == pytest.approx(3e-5)
    assert feature_learning_check([1.0, math.nan], [1.0, 2.0], width=8).verdict is NM


def test_kernel_floor_check():
    assert kernel_floor_check([4.0, 5.0], [1.0, 2.0], width=8).verdict is PASS
    low = kernel_floor_check([4.0, 3.0], [1.0, 2.0], width=8)
    assert low.verdict is FAIL and low.value == pytest.approx(0.75)
    assert kernel_floor_check([], [], width=8).verdict is NM


def _trace(loss_h, loss_h2, lambda0=1.0):
    times = [0.1 * k for k in range(len(loss_h))]
    return FlowTrace(
        width=8,
        lambda0=lambda0,
        radii=dict.fromkeys("ABUu", 1.0),
        times=times,
        loss_h=loss_h,
        loss_h2=loss_h2,
        bound=[loss_h2[0] * math.exp(-(lambda0**2) * t / 2) for t in times],
        sigmas=[lambda0] * len(times),
        distances={p: [0.1 * k for k in range(len(times))] for p in "ABUu"},
    )


def test_flow_rate_check_counts_the_step_error_against_the_bound():
    fast = [math.exp(-t) for t in (0.0, 0.1, 0.2)]  # rate 1 > λ₀²/2 = 0.5
    passed = flow_rate_check(_trace(fast, fast))
    assert passed.verdict is PASS and passed.value == pytest.approx(math.exp(-0.05))
    slow = [math.exp(-0.2 * t) for t in (0.0, 0.1, 0.2)]  # rate 0.2 < 0.5
    assert flow_rate_check(_trace(slow, slow)).verdict is FAIL
    near = [1.0, math.exp(-0.06), math.exp(-0.12)]  # inside the bound, by less than the error
    coarse = [1.0, math.exp(-0.06) + 0.02, math.exp(-0.12) + 0.02]
    assert flow_rate_check(_trace(near, near)).verdict is PASS
    assert flow_rate_check(_trace(coarse, near)).verdict is FAIL
    assert flow_rate_check(_trace([1.0], [1.0])).verdict is NM  # t = 0 only


def test_step_error_check_measures_the_exponent_once_the_loss_has_decayed():
    assert step_error_check(_trace([1.0, 0.5], [1.0, 0.49]), rtol=0.05).verdict is PASS
    early = step_error_check(_trace([1.0, 0.6], [1.0, 0.5]), rtol=0.05)
    assert early.verdict is FAIL and early.value == pytest.approx(math.log(1.2) / (1 + math.log(2)))
    decayed = step_error_check(_trace([1.0, 1.3e-10], [1.0, 1e-10]), rtol=0.05)
    assert decayed.verdict is PASS  # 30% of L, but 1% of its 23 e-folds


def test_theorem_3_3_1_applies_only_under_condition_1():
    fast = [math.exp(-t) for t in (0.0, 0.1, 0.2)]

    def conditions(lhs):
        return [
            Inequality(name=n, lhs=lhs, relation=">=", rhs=1.0, holds=lhs >= 1.0)
            for n in ("Eq. (3.8)", "Eq. (3.9)")
        ]

    fits = {"Eq. (3.8)": WidthFit.of([8, 32], [0.01, 0.16]), "Eq. (3.9)": None}
    inside = theorem_3_3_1(_trace(fast, fast), conditions(2.0), fits=fits, m=0.2)
    assert [s.verdict for s in inside] == [HOLDS, HOLDS, PASS, PASS, PASS]
    names = [s.name for s in inside]
    assert names[2] == "Theorem 3.3.1: L(θ(t)) ≤ exp(−λ₀²t/2)·L(θ(0)) at n = 8"
    assert names[3].startswith("Theorem 3.3.1's induction (1): the parameters stay")
    assert names[4].startswith("Theorem 3.3.1's proof (Weyl): σ_min(Z(k)) ≥ λ₀/2")
    outside = theorem_3_3_1(_trace(fast, fast), conditions(0.5), fits=fits, m=0.2)
    assert [s.verdict for s in outside] == [UNMET, UNMET, NA, NA, NA]
    assert outside[2].needs.startswith("n ≥ 80, if lhs/rhs ∝ n^2.00")
    assert outside[2].value is not None  # measured all the same


# --- the flow against an independent finite difference --------------------------------------


def _flow(width=8, fraction=0.1):
    config = Hieu2022GradFlow().resolve("tiny")
    data = get_dataset("sphere", n=config.n_samples, d=config.d, seed=0, dtype=torch.float64)
    h = fraction / _initial_kernel_max(config, width, data.X)
    return MonDEQFlow(build_model(config, width, "cpu"), data.X, data.y, h=h), data


def test_flow_probe_is_the_runs_own_step_against_minus_k_r_and_fails_for_a_wrong_kernel():
    flow, data = _flow()
    with torch.no_grad():
        before = flow.model(data.X)
    params = {k: p.detach().clone() for k, p in flow.model.named_parameters()}
    Z = flow.model.equilibrium(data.X).detach()
    record = flow.step(probe=True)
    with torch.no_grad():
        measured = (flow.model(data.X) - before) / flow.h  # (ŷ(k+1) − ŷ(k))/h
    blocks = prediction_kernel(**params, Z=Z, X=data.X, m=flow.model.m)
    residual = before - data.y

    def error(K):
        return float((measured + K @ residual).norm() / (K @ residual).norm())

    assert record["prop4_flips"] == 0
    assert error(blocks["K"]) == pytest.approx(record["prop4_err_h"], rel=1e-6)
    assert record["prop4_err_h"] == pytest.approx(2 * record["prop4_err_h2"], rel=0.05)
    assert record["prop4_err_extrap"] < 1e-3 < record["prop4_err_h"]
    wrong = error(blocks["K"] - blocks["u"])  # without ZᵀZ, the output layer's part
    assert wrong > 0.1
    errors = ([record["prop4_err_extrap"]], [record["prop4_err_h"]], [record["prop4_err_h2"]])
    assert proposition_4_check(*errors, [0], rtol=1e-2, width=8).verdict is PASS
    assert proposition_4_check([wrong], [wrong], [wrong], [0], rtol=1e-2, width=8).verdict is FAIL


def test_flow_takes_euler_steps_and_resumes_with_identical_numbers():
    full, _ = _flow()
    for k in range(4):
        full.step(probe=k % 2 == 0)
    part, _ = _flow()
    part.step(probe=True)
    part.step()
    again, _ = _flow()
    again.load_state_dict(part.state_dict())
    again.step(probe=True)
    again.step()
    assert again.records == full.records and again.step_count == 4
    assert [r["t"] for r in full.records] == pytest.approx([k * full.h for k in range(4)])
    assert full.records[-1]["loss"] < full.records[0]["loss"]


def test_flow_bad_input():
    flow, data = _flow()
    with pytest.raises(ValueError, match="`h` must be in"):
        MonDEQFlow(flow.model, data.X, data.y, h=0.0)
    with pytest.raises(TypeError, match="`model` must be a MonDEQ"):
        MonDEQFlow(torch.nn.Linear(2, 2), data.X, data.y, h=0.1)
    with pytest.raises(ValueError, match=r"`y` must have shape \(4,\)"):
        MonDEQFlow(flow.model, data.X, data.y[:2], h=0.1)


# --- the experiment at its presets ----------------------------------------------------------


def test_registered_with_its_paper_setting():
    assert "hieu2022-gradflow" in experiment_names()
    exp = Hieu2022GradFlow()
    found = {d.setting: d for d in exp.deviations(exp.resolve("quick"))}
    assert found["steps"].kind == "our choice" and found["widths"].kind == "our choice"
    assert all(c.endswith(".") for c in exp.figure_captions.values())
    with pytest.raises(ConfigError, match="`widths` must be >= n_samples = "):
        exp.resolve("tiny", overrides=["widths=[2, 8]"])
    with pytest.raises(ConfigError, match="`h_fraction` must be in"):
        exp.resolve("tiny", overrides=["h_fraction=1.5"])


@pytest.fixture(scope="module")
def tiny():
    exp = Hieu2022GradFlow()
    config = exp.resolve("tiny")
    rows = [
        r
        for t in exp.tasks(config)
        for r in exp.run_task(config, t, MemoryCheckpoints().context(10))
    ]
    return exp, config, rows


def test_tiny_rows_and_statements(tiny):
    exp, config, rows = tiny
    assert len(rows) == len(config.widths) * (config.steps + 1 + 2 * config.steps + 1)
    found = _by_name(exp.statements(config, rows))
    assert len(found) == len(config.widths) * (2 + 3 + 4 + 4)
    for width in config.widths:  # Condition 1 fails by orders of magnitude at these widths
        rate = found[f"Theorem 3.3.1: L(θ(t)) ≤ exp(−λ₀²t/2)·L(θ(0)) at n = {width}"]
        assert rate.verdict is NA and "a sweep over widths n ≥ 4N" in rate.needs  # N = 4: one width
        floor = found[f"Eq. (3.14): λ_min(K(t)) ≥ σ_min(Z(t))² along the run at n = {width}"]
        assert floor.verdict is PASS
        for lemma in ("Lemma 3.3.3", "Lemma 3.3.4", "Lemma 3.3.4 (Eq. C.6)"):
            assert found[f"{lemma} along the flow at n = {width}"].verdict is PASS
    assert found["Proposition 4: dŷ/dt = −K(t)(ŷ − y) along the run at n = 8"].verdict is PASS


def test_tiny_figure(tiny, tmp_path):
    exp, config, rows = tiny
    assert [p.name for p in exp.plot(config, rows, tmp_path)] == ["gradflow.png", "gradflow.pdf"]


def test_tiny_task_resumes_bit_exact(tiny):
    exp, config, rows = tiny
    task = exp.tasks(config)[0]
    interrupted = MemoryCheckpoints(stop_after=2)
    with pytest.raises(KeyboardInterrupt):
        exp.run_task(config, task, interrupted.context(5))  # stops after step 10
    interrupted.stop_after = None
    resumed = exp.run_task(config, task, interrupted.context(5))
    assert resumed == [r for r in rows if r["width"] == 8 and r["refine"] == 0]


def test_theorem_preset_meets_condition_1_and_the_flow_obeys_theorem_3_3_1():
    exp = Hieu2022GradFlow()
    config = exp.resolve("theorem", overrides=["widths=[200]", "steps=20", "probe_every=10"])
    rows = [
        r
        for t in exp.tasks(config)
        for r in exp.run_task(config, t, MemoryCheckpoints().context(100))
    ]
    found = exp.statements(config, rows)
    assert {s.verdict for s in found if s.kind is Kind.HYPOTHESIS} == {HOLDS}
    rate = _by_name(found)["Theorem 3.3.1: L(θ(t)) ≤ exp(−λ₀²t/2)·L(θ(0)) at n = 200"]
    assert rate.verdict is PASS and rate.value < 1
    # ... but only u moves: A, B, U add 3e-5 to the kernel (weak evidence, ours)
    linear = _by_name(found)[
        "A, B and U add to the kernel: the flow is not linear regression on u at n = 200"
    ]
    assert linear.verdict is FAIL and linear.value < 1e-4


def test_theorem_features_preset_meets_condition_1_with_the_inner_parameters_in_the_kernel():
    """Per-parameter radii reach inside Condition 1 with A, B and U carrying 2.6% of λ_min(K)
    beyond σ_min(Z)²: Proposition 4 and Theorem 3.3.1 are checked where the flow is not
    linear regression on u alone."""
    exp = Hieu2022GradFlow()
    config = exp.resolve(
        "theorem-features", overrides=["widths=[200]", "steps=20", "probe_every=10"]
    )
    assert config.radii == {"A": 0.85, "B": 0.018, "U": 0.037, "u": 0.05}
    rows = [
        r
        for t in exp.tasks(config)
        for r in exp.run_task(config, t, MemoryCheckpoints().context(100))
    ]
    found = _by_name(exp.statements(config, rows))
    margins = [found[f"Condition 1, Eq. (3.{k}) at n = 200"] for k in (8, 9)]
    assert [s.verdict for s in margins] == [HOLDS, HOLDS]
    assert margins[0].value == pytest.approx(3.62, abs=0.01)
    assert margins[1].value == pytest.approx(1.82, abs=0.01)
    features = found[
        "A, B and U add to the kernel: the flow is not linear regression on u at n = 200"
    ]
    assert features.verdict is PASS and 0.02 < features.value < 0.03
    for name in (
        "Proposition 4: dŷ/dt = −K(t)(ŷ − y) along the run at n = 200",
        "Theorem 3.3.1: L(θ(t)) ≤ exp(−λ₀²t/2)·L(θ(0)) at n = 200",
    ):
        assert found[name].verdict is PASS, found[name]

"""hieu2022-mondeq-gd (experiments/hieu2022/mondeq_gd.py and its report): every statement in
both directions on made-up rows, and the tiny, theorem and theorem-half presets (rows,
statements, bit-exact resume)."""

import math

import pytest

from deqlab.experiments.config import ConfigError
from deqlab.experiments.hieu2022.mondeq_gd import Hieu2022MonDEQGD
from deqlab.experiments.hieu2022.mondeq_gd_report import mondeq_gd_statements
from deqlab.experiments.hieu2022.setting import AS_PROVED_KEY, CONDITION_KEYS
from deqlab.statements import Kind, Verdict
from helpers import MemoryCheckpoints

PASS, FAIL, NA, NM = Verdict.PASS, Verdict.FAIL, Verdict.NOT_APPLICABLE, Verdict.NOT_MEASURED
HOLDS, UNMET = Verdict.HOLDS, Verdict.UNMET


def _by_name(statements):
    return {s.name: s for s in statements}


# --- statements on made-up rows -----------------------------------------------------------


def _gd_rows(width, losses, *, eta=1e-3, lhs=2.0, lam0=2.0, sigma=None):
    rows = []
    for k, loss in enumerate(losses):
        row = {
            "width": width,
            "step": k,
            "loss": loss,
            "eta": eta,
            "eta_max": 1e-2,
            "lambda0": lam0,
            "sigma_min": lam0 if sigma is None else sigma[k],
            **{f"dist_{p}": 0.1 * k for p in "ABUu"},
        }
        row.update({f"{key}_lhs": lhs * width for key in CONDITION_KEYS})
        row.update({f"{key}_rhs": 1.0 for key in CONDITION_KEYS})
        rows.append(row)
    return rows


def _gd_config(**overrides):
    defaults = {"n_samples": 2, "d": 2, "widths": [4, 8], "steps": 2, "loss_rtol": 0.5}
    return Hieu2022MonDEQGD().resolve(
        "tiny", overrides=[f"{k}={v}" for k, v in {**defaults, **overrides}.items()]
    )


def test_mondeq_gd_statements_pass_inside_the_hypotheses_and_fail_on_a_violating_run():
    config = _gd_config()
    good = _gd_rows(4, [1.0, 0.5, 0.3], lam0=1.0) + _gd_rows(8, [1.0, 0.4, 0.2])
    found = _by_name(mondeq_gd_statements(config, good))
    assert len(found) == 2 * 10 + 6  # 4 hypotheses, 3 premises, 3 theorems per width; 6 ours
    for name, verdict in [
        ("Theorem 3.3.5: L(k+1) ≤ (1 − ηλ₀²/4)·L(k) at n = 4", PASS),
        ("Proposition 5 (Hypothesis 1): the parameters stay in their balls at n = 8", PASS),
        ("Proposition 6 (Hypothesis 2): σ_min(Z(k)) ≥ λ₀/2 at n = 4", PASS),
        ("GD reaches L(K) ≤ 0.5·L(0) at the widest width", PASS),
        ("wider is faster: L(K)/L(0) decreases with the width", PASS),
        ("λ₀ = σ_min(Z(0)) increases with the width", PASS),
        ("the margin lhs/rhs of Eq. (3.17) grows with the width", PASS),
    ]:
        assert found[name].verdict is verdict, found[name]
    assert found["Theorem 3.3.5: L(k+1) ≤ (1 − ηλ₀²/4)·L(k) at n = 4"].kind is Kind.THEOREM
    assert found["wider is faster: L(K)/L(0) decreases with the width"].kind is Kind.OURS
    bad = _gd_rows(4, [1.0, 0.5, 0.1], lhs=4.0, sigma=[2.0, 0.9, 2.0])
    bad += _gd_rows(8, [1.0, 0.9, 0.95], lhs=2.0, lam0=2.0)
    found = _by_name(mondeq_gd_statements(config, bad))
    for name in (
        "Theorem 3.3.5: L(k+1) ≤ (1 − ηλ₀²/4)·L(k) at n = 8",
        "Proposition 6 (Hypothesis 2): σ_min(Z(k)) ≥ λ₀/2 at n = 4",
        "GD reaches L(K) ≤ 0.5·L(0) at the widest width",
        "wider is faster: L(K)/L(0) decreases with the width",
        "λ₀ = σ_min(Z(0)) increases with the width",
        "the margin lhs/rhs of Eq. (3.16) grows with the width",
    ):
        assert found[name].verdict is FAIL, found[name]


def test_mondeq_gd_checks_theorem_3_3_5_under_eq_3_17_printed_and_as_proved():
    """Both forms of Eq. (3.17) are hypotheses: the printed theorem is decided on the printed
    ones, the second statement also on Eq. (3.17) as Proposition 6's proof needs (ours);
    rows without that column (older runs) give the printed statements only."""
    config = _gd_config(widths=[8, 16])

    def rows(width, proved_lhs, losses=(1.0, 0.9, 0.95)):  # L(2) > L(1): the rate fails
        out = _gd_rows(width, list(losses), lam0=1.0)
        for r in out:
            r.update({f"{AS_PROVED_KEY}_lhs": proved_lhs, f"{AS_PROVED_KEY}_rhs": 1.0})
        return out

    under = ", under Eq. (3.17) as Proposition 6's proof needs (ours)"
    printed = "Theorem 3.3.5: L(k+1) ≤ (1 − ηλ₀²/4)·L(k) at n = 8"
    found = _by_name(mondeq_gd_statements(config, rows(8, 0.07) + rows(16, 0.14)))
    assert found[printed].verdict is FAIL  # every printed hypothesis holds
    proved = "Eq. (3.17) as Proposition 6's proof needs (ours)"
    assert found[f"Condition 2, {proved} at n = 8"].verdict is UNMET
    assert found[printed + under].verdict is NA and found[printed + under].value is not None
    assert "n ≥ 114, if lhs/rhs ∝ n^1.00" in found[printed + under].needs  # 8/0.07
    assert found[f"the margin lhs/rhs of {proved} grows with the width"].verdict is PASS
    found = _by_name(mondeq_gd_statements(config, rows(8, 7.0) + rows(16, 14.0)))
    assert found[printed].verdict is FAIL and found[printed + under].verdict is FAIL
    decaying = (1.0, 0.5, 0.3)  # within the rate 1 − ηλ₀²/4 ≈ 1 at every step
    found = _by_name(mondeq_gd_statements(config, rows(8, 7.0, decaying) + rows(16, 14.0)))
    assert found[printed].verdict is PASS and found[printed + under].verdict is PASS
    good = _by_name(mondeq_gd_statements(config, _gd_rows(8, [1.0, 0.5, 0.3], lam0=1.0)))
    assert printed in good and not any(name.endswith(under) for name in good)


def test_mondeq_gd_statements_outside_the_hypotheses_are_not_applicable():
    config = _gd_config(radius=0.05, widths=[8, 16])
    rows = _gd_rows(8, [1.0, 0.5, 0.3], eta=0.3, lhs=0.01) + _gd_rows(16, [1.0, 0.4, 0.2], eta=0.3)
    found = _by_name(mondeq_gd_statements(config, rows))
    eq = found["Condition 2, Eq. (3.16) at n = 8"]
    width = 8 * 12.5 ** (1 / math.log2(400))  # the line through (8, 0.08) and (16, 32) meets 1
    assert eq.verdict is UNMET and eq.needs.startswith(f"n ≥ {width:.3g}, if lhs/rhs ∝ n^8.64")
    assert found["Condition 2, Eq. (3.18) at n = 8"].needs.startswith("no width: m²N = 0.08")
    theorem = found["Theorem 3.3.5: L(k+1) ≤ (1 − ηλ₀²/4)·L(k) at n = 16"]
    assert theorem.verdict is NA and "30× smaller" in theorem.needs
    # Hypothesis 1 fails at step 1 (0.1 > R = 0.05): Proposition 5 is checked at step 1 only
    ball = found["Proposition 5 (Hypothesis 1): the parameters stay in their balls at n = 16"]
    assert ball.verdict is NA and ball.value == pytest.approx(2.0)  # 0.1/0.05, kept
    rest = "Proposition 5 (Hypothesis 1): the parameters stay in their balls at n = 16, from step 2"
    assert found[rest].verdict is NA and found[rest].value == pytest.approx(4.0)


def test_mondeq_gd_checks_each_parameter_against_its_own_radius():
    """R_A, R_B, R_U, R_u (Section 3.3): `radius_B` alone shrinks B's ball."""
    config = _gd_config(radius_B=0.05)
    assert config.radii == {"A": 1.0, "B": 0.05, "U": 1.0, "u": 1.0}
    assert config.radii_text() == "R_A/R_B/R_U/R_u = 1/0.05/1/1"
    assert _gd_config().radii_text() == "R = 1"
    rows = _gd_rows(4, [1.0, 0.5, 0.3], lam0=1.0) + _gd_rows(8, [1.0, 0.4, 0.2])
    premise = "Hypothesis 1 at every step k′ ≥ 1 at n = 8 (the premise of the induction's steps)"
    assert _by_name(mondeq_gd_statements(_gd_config(), rows))[premise].verdict is HOLDS
    found = _by_name(mondeq_gd_statements(config, rows))
    assert found[premise].verdict is UNMET and found[premise].value == pytest.approx(1.0)
    ball = found["Proposition 5 (Hypothesis 1): the parameters stay in their balls at n = 8"]
    assert "‖B(k) − B(0)‖_F / R = 2" in ball.measured  # 0.1 / R_B at step 1
    with pytest.raises(ConfigError, match="radius_u"):
        _gd_config(radius_u=-1.0)


def test_mondeq_gd_statements_without_data_are_not_measured():
    config = _gd_config()
    statements = mondeq_gd_statements(config, [])
    assert len(statements) == 6 and {s.verdict for s in statements} == {NM}
    nan = _gd_rows(4, [1.0, math.nan, math.nan]) + _gd_rows(8, [1.0, 0.5, 0.2])
    found = _by_name(mondeq_gd_statements(config, nan))
    assert found["Theorem 3.3.5: L(k+1) ≤ (1 − ηλ₀²/4)·L(k) at n = 4"].verdict is NM
    assert found["wider is faster: L(K)/L(0) decreases with the width"].verdict is NM


# --- the experiment at its presets --------------------------------------------------------


def test_paper_setting_declares_every_field_and_the_eta_rule_change():
    exp = Hieu2022MonDEQGD()
    found = {d.setting: d for d in exp.deviations(exp.resolve("quick"))}
    assert found["eta_rule"].kind == "changed"  # the thesis' η is Theorem 3.3.5's bound
    assert "eta_rule" not in {d.setting for d in exp.deviations(exp.resolve("theorem"))}
    assert exp.figure_captions and all(c.endswith(".") for c in exp.figure_captions.values())


def test_mondeq_gd_tiny_rows_statements_and_bit_exact_resume():
    experiment = Hieu2022MonDEQGD()
    config = experiment.resolve("tiny")
    tasks = experiment.tasks(config)
    rows = [
        r for t in tasks for r in experiment.run_task(config, t, MemoryCheckpoints().context(10))
    ]
    assert {r["width"] for r in rows} == set(config.widths)
    assert len(rows) == len(config.widths) * (config.steps + 1)
    found = _by_name(experiment.statements(config, rows))
    for width in config.widths:  # η is hundreds of times the bound: nothing applies
        eta = found[f"η within the step-size bound of Theorem 3.3.5 at n = {width}"]
        assert eta.verdict is UNMET and eta.value / eta.threshold > 100
        sigma = found[f"Proposition 6 (Hypothesis 2): σ_min(Z(k)) ≥ λ₀/2 at n = {width}"]
        assert sigma.verdict is NA and sigma.value is not None
    assert found["GD reaches L(K) ≤ 0.5·L(0) at the widest width"].verdict is PASS
    # η = ½·2/λ_max(Z(0)ᵀZ(0)) of the widest, but A, B and U raise λ_max(K(0)): 2.54 ≥ 2
    stable = found["Conjecture 1's suitable conditions (ours): a stable step size at n = 48"]
    assert stable.verdict is UNMET and stable.value == pytest.approx(2.54, abs=0.01)
    assert "η·λ_max(Z(0)ᵀZ(0)) = 1," in stable.measured
    assert found["Conjecture 1: GD converges at a linear rate at n = 48"].verdict is NA
    interrupted = MemoryCheckpoints(stop_after=2)
    with pytest.raises(KeyboardInterrupt):
        experiment.run_task(config, tasks[0], interrupted.context(10))
    interrupted.stop_after = None
    resumed = experiment.run_task(config, tasks[0], interrupted.context(10))
    assert resumed == [r for r in rows if r["width"] == config.widths[0]]


def test_mondeq_gd_theorem_preset_meets_the_hypotheses_and_the_theorem_fails():
    experiment = Hieu2022MonDEQGD()
    config = experiment.resolve("theorem", overrides=["widths=[200]", "steps=2"])
    (task,) = experiment.tasks(config)
    rows = experiment.run_task(config, task, MemoryCheckpoints().context(10))
    assert rows[0]["eta"] == pytest.approx(rows[0]["eta_max"], rel=1e-12)
    found = experiment.statements(config, rows)
    outer = [s for s in found if s.name.startswith(("Condition 2", "η within"))]
    assert len(outer) == 5 and {s.verdict for s in outer} == {HOLDS}
    named = _by_name(found)
    # Eq. (3.17) as Proposition 6's proof needs it (ours) holds too, with margin 6.64
    proved = named["Condition 2, Eq. (3.17) as Proposition 6's proof needs (ours) at n = 200"]
    assert 5 < proved.value < 10
    rate = named["Theorem 3.3.5: L(k+1) ≤ (1 − ηλ₀²/4)·L(k) at n = 200"]
    assert rate.verdict is FAIL and rate.value > 9  # the residual grows ≥ 3× (|1 − ηλ²| ≥ 3)
    assert rate.threshold == pytest.approx(0.0, abs=1e-12)  # η = 4/λ₀²: L(1) ≤ 0 promised
    as_proved = named[
        "Theorem 3.3.5: L(k+1) ≤ (1 − ηλ₀²/4)·L(k) at n = 200, under Eq. (3.17) as "
        "Proposition 6's proof needs (ours)"
    ]
    assert as_proved.verdict is FAIL and as_proved.value == rate.value
    # Conjecture 1 (ours: under a stable step): η·λ_max(K(0)) = 6.84 ≥ 2, NOT APPLICABLE
    stable = named["Conjecture 1's suitable conditions (ours): a stable step size at n = 200"]
    assert stable.verdict is UNMET and 6 < stable.value < 8
    assert named["Conjecture 1: GD converges at a linear rate at n = 200"].verdict is NA
    # Hypothesis 3 fails at step 1: Propositions 5–6 hold at step 1, NOT APPLICABLE from step 2
    premise = named[
        "Hypotheses 1 and 3 at every step k′ ≥ 1 at n = 200 (the premise of the induction's steps)"
    ]
    assert premise.verdict is UNMET and "first fails at step 1: Hypothesis 3" in premise.measured
    for prop in (
        "Proposition 5 (Hypothesis 1): the parameters stay in their balls at n = 200",
        "Proposition 6 (Hypothesis 2): σ_min(Z(k)) ≥ λ₀/2 at n = 200",
    ):
        assert named[prop].verdict is PASS and "over steps 1–1" in named[prop].measured
        assert named[f"{prop}, from step 2"].verdict is NA
    # Lemma 3.3.8 at step 0 (its premise is empty): I₁ is thousands of times the printed bound
    lemma = named["Lemma 3.3.8 at every GD step at n = 200"]
    assert lemma.verdict is FAIL and lemma.value > 1e3 and "step 0" in lemma.measured
    assert rows[0]["lemma3_3_8_lhs"] > 20 and rows[0]["lemma3_3_8_rhs"] < 0.01
    assert named["Lemma 3.3.8 at every GD step at n = 200, from step 1"].verdict is NA
    prop3 = named["Proposition 3: L[T_α] ≤ √(1 − 2αm + α²L[I − W]²) at n = 200"]
    assert prop3.verdict is PASS and 0.9 < prop3.value <= 1  # ‖T_α‖₂ = 0.0554, bound 0.0557


def test_mondeq_gd_theorem_at_a_quarter_of_the_bound_holds_with_its_propositions():
    """At ¼·η_max every hypothesis holds at all 30 steps: Propositions 5–6 are checked at every
    step and pass, and so do Theorem 3.3.5 and Lemma 3.3.10 — Lemma 3.3.8 still fails."""
    experiment = Hieu2022MonDEQGD()
    config = experiment.resolve(
        "theorem", overrides=["widths=[200]", "steps=30", "eta_fraction=0.25"]
    )
    (task,) = experiment.tasks(config)
    rows = experiment.run_task(config, task, MemoryCheckpoints().context(100))
    named = _by_name(experiment.statements(config, rows))
    for name in (
        "Theorem 3.3.5: L(k+1) ≤ (1 − ηλ₀²/4)·L(k) at n = 200",
        "Proposition 5 (Hypothesis 1): the parameters stay in their balls at n = 200",
        "Proposition 6 (Hypothesis 2): σ_min(Z(k)) ≥ λ₀/2 at n = 200",
        "Lemma 3.3.10 at every GD step at n = 200",
    ):
        assert named[name].verdict is PASS, named[name]
    assert (
        "over steps 1–30"
        in named[
            "Proposition 5 (Hypothesis 1): the parameters stay in their balls at n = 200"
        ].measured
    )
    assert not any(n.endswith(", from step 2") for n in named)
    assert named["Lemma 3.3.8 at every GD step at n = 200"].verdict is FAIL


def test_mondeq_gd_theorem_half_preset_fails_theorem_3_3_5_at_a_positive_rate():
    """η = ½·η_max: the promised factor is 1 − ηλ₀²/4 = 0.5, the measured worst ≈ 5.8."""
    experiment = Hieu2022MonDEQGD()
    config = experiment.resolve("theorem-half", overrides=["widths=[200]", "steps=4"])
    (task,) = experiment.tasks(config)
    rows = experiment.run_task(config, task, MemoryCheckpoints().context(100))
    rate = _by_name(experiment.statements(config, rows))[
        "Theorem 3.3.5: L(k+1) ≤ (1 − ηλ₀²/4)·L(k) at n = 200"
    ]
    assert rate.threshold == pytest.approx(0.5) and rate.verdict is FAIL and rate.value > 5


def test_mondeq_gd_measures_the_lemmas_along_its_gd_runs():
    exp = Hieu2022MonDEQGD()
    config = exp.resolve("tiny", overrides=["widths=[12]", "steps=10", "lemma_every=5"])
    (task,) = exp.tasks(config)
    rows = exp.run_task(config, task, MemoryCheckpoints().context(100))
    assert [int(r["step"]) for r in rows if "lemma3_3_3_lhs" in r] == [0, 5, 10]
    found = _by_name(exp.statements(config, rows))
    for lemma in ("Lemma 3.3.2", "Lemma 3.3.3", "Lemma 3.3.4", "Lemma 3.3.4 (Eq. C.6)"):
        statement = found[f"{lemma} along the GD run at n = 12"]
        assert statement.kind is Kind.THEOREM and statement.verdict is PASS
    # Hypothesis 2 (Proposition 6) is a statement at every width, not only the widest
    assert "Proposition 6 (Hypothesis 2): σ_min(Z(k)) ≥ λ₀/2 at n = 12" in found


def test_mondeq_gd_config_rejects_bad_widths_and_eta_rules():
    with pytest.raises(ConfigError, match="`widths` must be >= n_samples = "):
        Hieu2022MonDEQGD().resolve("tiny", overrides=["widths=[4, 12]"])
    with pytest.raises(ConfigError, match="`eta_rule` must be one of"):
        Hieu2022MonDEQGD().resolve("tiny", overrides=["eta_rule=fast"])

"""kawaguchi2021-fig2 (experiments/kawaguchi2021/fig2.py and its report): the observations
and the sweep's statements in both directions, the ResNet's sharpness against a dense
Hessian, divergence, the tiny and tiny-sweep presets (statements, resume) and the config.

(Plots and the run directory are exercised for every registered experiment by
tests/test_cli_experiments.py.)"""

import dataclasses
import math

import pytest
import torch

from deqlab.experiments.kawaguchi2021 import fig2, fig2_report
from deqlab.experiments.kawaguchi2021.fig2 import Fig2Config, Kawaguchi2021Fig2
from deqlab.statements import Kind, Verdict
from helpers import MemoryCheckpoints, assert_settings_declared_and_captions_sentences, run_all

PASS, FAIL, NM, NA = Verdict.PASS, Verdict.FAIL, Verdict.NOT_MEASURED, Verdict.NOT_APPLICABLE


def _by_name(statements):
    return {s.name: s for s in statements}


def _final_rows(config, task, model, loss, *, step=None):
    step = config.steps if step is None else step
    row = {"task": task, "panel": task[0], "model": model, "init": "x", "step": step}
    return [{**row, "loss": loss, "loss_star": 10.0}]


@pytest.mark.parametrize(
    ("delm_a", "delm_b", "resnet_a", "resnet_b", "verdicts"),
    [
        (10.0, 10.0, 20.0, 10.0, (PASS, PASS, PASS, PASS)),
        (11.0, 11.0, 10.0, 20.0, (FAIL, FAIL, FAIL, FAIL)),
        (10.0, 11.0, 20.0, 10.0, (PASS, FAIL, PASS, PASS)),
        (math.nan, math.nan, math.nan, math.nan, (NM, NM, NM, NM)),
    ],
)
def test_fig2_observations_in_both_directions(delm_a, delm_b, resnet_a, resnet_b, verdicts):
    """DELMs on (a), on (b) (a final gap 0.1 > optimum_rtol fails it), ResNet on (a), (b)."""
    config = Fig2Config(n_random=0, steps=100)
    rows = [
        *_final_rows(config, "a-delm-identity", "DELM", delm_a),
        *_final_rows(config, "b-delm-identity", "DELM", delm_b),
        *_final_rows(config, "a-resnet", "LinearResNet", resnet_a),
        *_final_rows(config, "b-resnet", "LinearResNet", resnet_b),
    ]
    found = fig2_report.statements(config, rows)
    observed = [s for s in found if s.kind is Kind.OBSERVATION][:4]
    assert tuple(s.verdict for s in observed) == verdicts
    assert "uniform" in observed[1].name
    assert (
        "modified identity" in observed[2].detail and "η·λ_max(∇²L(W₀)) = —" in observed[2].detail
    )
    diverged = _final_rows(config, "a-resnet", "LinearResNet", math.inf, step=7)
    statement = fig2_report.statements(config, diverged)[2]
    assert statement.verdict is NM and "diverged: the loss is inf at step 7" in statement.measured
    unfinished = _final_rows(config, "a-delm-identity", "DELM", 10.0, step=50)
    assert fig2_report.statements(config, unfinished)[0].verdict is NM


def test_resnet_sharpness_is_the_top_eigenvalue_of_the_dense_hessian():
    config = Fig2Config(n=30, d=2, resnet_depth=2, resnet_io="gaussian")
    X, Y = fig2.zou_synthetic(30, 2, seed=0).X, fig2.zou_synthetic(30, 2, seed=0).y
    model = fig2.resnet_model(config, X)
    with torch.no_grad():
        for W in model.blocks:
            W.normal_(std=0.3)  # away from W = 0, where the Hessian is simpler
    sizes = [W.numel() for W in model.blocks]

    def loss(theta):
        H = model.input_layer @ X
        for w in theta.split(sizes):
            H = H + w.view(4, 4) @ H
        return ((model.output_layer @ H - Y) ** 2).sum()

    theta = torch.cat([W.detach().reshape(-1) for W in model.blocks])
    dense = torch.linalg.eigvalsh(torch.autograd.functional.hessian(loss, theta))[-1]
    assert fig2.resnet_sharpness(model, X, Y) == pytest.approx(float(dense), rel=1e-9)


def test_a_diverging_resnet_stops_at_its_first_non_finite_loss():
    experiment = Kawaguchi2021Fig2()
    config = experiment.resolve("tiny", overrides=["lr=10.0", "steps=40"])
    rows = experiment.run_task(
        config, experiment.tasks(config)[-2], MemoryCheckpoints().context(100)
    )
    assert rows[-1]["step"] < 40 and not math.isfinite(rows[-1]["loss"])
    assert all(math.isfinite(r["loss"]) for r in rows[:-1])


def test_fig2_tiny_statements():
    """The tiny run: observations decided (Zou et al.'s modified-identity ResNet reaches L*
    on both data sets, so panel (a)'s contrast fails), Corollary 1 not applicable because
    its step is above 1/λ_max, with the step it needs."""
    experiment = Kawaguchi2021Fig2()
    config = experiment.resolve("tiny")
    rows = run_all(experiment, config)
    assert {r["panel"] for r in rows} == {"a", "b", "c"}
    found = _by_name(experiment.statements(config, rows))
    assert found["DELMs reach the global minimum value on Gaussian data from every "
                 "initialization"].verdict is PASS  # fmt: skip
    resnet = "linear ResNet (identity init) {} the global minimum value on {} data"
    assert found[resnet.format("stays above", "Gaussian")].verdict is FAIL
    assert found[resnet.format("reaches", "uniform")].verdict is PASS
    assert found["Theorem 1: λ_min(D_t) ≥ 1/(m(1+γ)²) at every step"].verdict is PASS
    flow = found["gradient descent follows the gradient flow (Eq. 6)"]
    assert flow.verdict is Verdict.UNMET and flow.value > 1
    corollary = [s for name, s in found.items() if name.startswith("Corollary 1")]
    assert len(corollary) == 2 and all(s.verdict is NA for s in corollary)
    assert all(s.needs.startswith("η ≤ ") and s.value >= 1 for s in corollary)
    assert all(s.kind is not Kind.OURS for s in found.values())


# --- the sweep over (η, γ) ----------------------------------------------------------------


def test_fig2_sweep_tiny_adds_tasks_without_changing_the_figure_rows():
    """tiny-sweep = tiny + the sweep: the figure's tasks and rows are tiny's; at η = 2.5e-3
    every DELM reaches L* and so does the ResNet on both data sets (panel (a)'s contrast
    fails); at η = 0.2 everything diverges (the DELMs' observations FAIL on it, the
    ResNet's are NOT MEASURED)."""
    experiment = Kawaguchi2021Fig2()
    tiny, swept = experiment.resolve("tiny"), experiment.resolve("tiny-sweep")
    assert dataclasses.replace(swept, sweep_lrs=(), sweep_gammas=()) == tiny
    keys = [t.key for t in experiment.tasks(swept)]
    assert keys[: len(experiment.tasks(tiny))] == [t.key for t in experiment.tasks(tiny)]
    sweep = [t for t in experiment.tasks(swept) if t.key.startswith("sweep-")]
    assert len(sweep) == 2 * (2 + 2 * 2)  # per η: 2 ResNets, 2 panels × 2 DELM inits
    rows = [r for t in sweep
            for r in experiment.run_task(swept, t, MemoryCheckpoints().context(100))]  # fmt: skip
    assert all(r["sweep_lr"] in swept.sweep_lrs for r in rows)
    found = _by_name(fig2_report.sweep_statements(swept, rows))
    at = "at η = 0.0025, γ = 0.5 (sweep)"
    assert found[f"Figure 2 (a)–(b) reproduces {at}"].verdict is FAIL
    assert found[f"Figure 2 (a)–(b) reproduces {at}"].value == 3
    assert "docs/findings.md#kawaguchi-fig2" in found[f"Figure 2 (a)–(b) reproduces {at}"].detail
    reach = "DELMs reach the global minimum value on {} data from every initialization {}"
    assert found[reach.format("Gaussian", at)].verdict is PASS
    assert found[reach.format("uniform", at)].verdict is PASS
    blown = found[reach.format("Gaussian", "at η = 0.2, γ = 0.5 (sweep)")]
    assert blown.verdict is FAIL and blown.value == 2 and "diverged at step" in blown.measured
    stays = "linear ResNet (identity init) stays above the global minimum value on Gaussian data"
    assert found[f"{stays} at η = 0.0025 (sweep)"].verdict is FAIL
    assert found[f"{stays} at η = 0.2 (sweep)"].verdict is NM
    figure = experiment.statements(tiny, [])  # the sweep's rows do not enter the figure's
    assert experiment.statements(swept, rows) == [*figure, *found.values()]


@pytest.mark.parametrize(
    "key", ["sweep-lr0.0025-g0.5-b-delm-random1", "sweep-lr0.2-g0.5-a-delm-identity"]
)
def test_a_sweep_delm_resumes_to_the_same_rows_whether_it_converges_or_diverges(key):
    experiment = Kawaguchi2021Fig2()
    config = experiment.resolve("tiny-sweep")
    (task,) = [t for t in experiment.tasks(config) if t.key == key]
    rows = experiment.run_task(config, task, MemoryCheckpoints().context(50))
    interrupted = MemoryCheckpoints(stop_after=2)
    with pytest.raises(KeyboardInterrupt):
        experiment.run_task(config, task, interrupted.context(50))
    interrupted.stop_after = None
    assert experiment.run_task(config, task, interrupted.context(50)) == rows
    assert math.isfinite(rows[-1]["loss"]) == ("0.0025" in key)


def _sweep_rows(config, gaps, resnet_a=20.0, resnet_b=10.0, lr=1e-3, gamma=0.5):
    """Final rows of one sweep point: DELM gaps per (panel, init) (None: diverged at step 7),
    ResNet final losses on (a) and (b); L* = 10."""
    prefix = fig2_report.sweep_key(lr, gamma)
    rows = []
    for (panel, init), gap in gaps.items():
        loss, step = (math.inf, 7) if gap is None else (10.0 * (1 + gap), config.steps)
        rows += [{"task": f"{prefix}-{panel}-delm-{init}", "panel": panel, "model": "DELM",
                  "init": init, "step": step, "loss": loss, "loss_star": 10.0}]  # fmt: skip
    for panel, loss in (("a", resnet_a), ("b", resnet_b)):
        rows += _final_rows(config, f"{fig2_report.sweep_key(lr)}-{panel}-resnet",
                            "LinearResNet", loss)  # fmt: skip
    return rows


@pytest.mark.parametrize(
    ("gaps", "verdicts"),
    [
        ({("a", "identity"): 0.0, ("b", "identity"): 0.0}, (PASS, PASS, PASS)),
        ({("a", "identity"): 0.5, ("b", "identity"): 0.0}, (FAIL, PASS, FAIL)),
        ({("a", "identity"): None, ("b", "identity"): 0.0}, (FAIL, PASS, FAIL)),
        ({("b", "identity"): 0.0}, (NM, PASS, NM)),
    ],
)
def test_fig2_sweep_statements_in_both_directions(gaps, verdicts):
    """Per (η, γ): DELMs on (a), on (b), and all four observations; a diverged DELM fails."""
    config = Fig2Config(n_random=0, steps=100, sweep_lrs=(1e-3,), sweep_gammas=(0.5,))
    found = fig2_report.sweep_statements(config, _sweep_rows(config, gaps))
    resnet_a, resnet_b, delm_a, delm_b, both = found
    assert (resnet_a.verdict, resnet_b.verdict) == (PASS, PASS)
    assert (delm_a.verdict, delm_b.verdict, both.verdict) == verdicts
    assert both.kind is Kind.OURS and "η = 0.001, γ = 0.5" in both.name
    stalled = fig2_report.sweep_statements(config, _sweep_rows(config, gaps, resnet_a=10.0))
    assert stalled[0].verdict is FAIL and stalled[-1].verdict is FAIL


# --- settings, captions, config -----------------------------------------------------------


def test_paper_settings_declare_every_field_and_captions_are_sentences():
    assert_settings_declared_and_captions_sentences(Kawaguchi2021Fig2())


def test_paper_preset_lists_its_substitutions():
    fig2 = Kawaguchi2021Fig2()
    found = {d.setting: d for d in fig2.deviations(fig2.resolve("paper"))}
    assert "resnet_io" not in found and found["resnet_width"].kind == "our choice"
    found = {d.setting: d for d in fig2.deviations(fig2.resolve("paper", overrides=[
        "resnet_io=identity"]))}  # fmt: skip
    assert found["resnet_io"].kind == "substitution" and found["resnet_io"].run == "identity"


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("n", -3, r"`n` must be >= 1; got -3"),
        ("gamma", 1.5, r"`gamma` must be in \(0, 1\); got 1.5"),
        ("lr", 0.0, r"`lr` must be in \(0, inf\); got 0"),
        (
            "resnet_io",
            "zou",
            r"`resnet_io` must be one of 'modified_identity', "
            r"'gaussian', 'identity'; got 'zou'",
        ),
        ("resnet_width", 19, r"`resnet_width` must be 0 or >= d \+ k = 20"),
        ("sweep_lrs", (1e-4,), r"`sweep_lrs` must be empty exactly when `sweep_gam"),
    ],
)
def test_bad_config_values_are_rejected_naming_the_field(field, value, message):
    with pytest.raises(ValueError, match=message):
        Fig2Config(**{field: value})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"sweep_lrs": (1e-4,), "sweep_gammas": (0.5, 1.0)}, r"`sweep_gammas` must be in \(0, 1\)"),
        ({"sweep_lrs": (1e-4, 1e-4), "sweep_gammas": (0.5,)}, r"`sweep_lrs` must not repeat"),
        ({"resnet_io": "gaussian", "resnet_width": -1}, r"`resnet_width` must be >= 0; got -1"),
    ],
)
def test_fig2_sweep_and_width_constraints(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Fig2Config(**kwargs)
    assert Fig2Config(resnet_io="gaussian", resnet_width=5).resnet_width == 5  # any width

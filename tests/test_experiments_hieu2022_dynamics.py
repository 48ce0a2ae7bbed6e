"""hieu2022-dynamics (experiments/hieu2022/dynamics.py and its report): every statement in
both directions on made-up rows, PCA against an SVD, and the tiny preset (rows,
statements, resume)."""

import pytest
import torch

from deqlab.experiments.config import ConfigError
from deqlab.experiments.hieu2022 import dynamics_report
from deqlab.experiments.hieu2022.dynamics import Hieu2022Dynamics, pca_2d
from deqlab.statements import Kind, Verdict
from helpers import MemoryCheckpoints

PASS, FAIL, NM = Verdict.PASS, Verdict.FAIL, Verdict.NOT_MEASURED


def _by_name(statements):
    return {s.name: s for s in statements}


# --- statements on made-up rows -----------------------------------------------------------


def _init_rows(std, residuals, samples=3):
    return [
        {
            "panel": "init",
            "init_std": std,
            "epoch": 0,
            "sample": b,
            "label": b,
            "step": s,
            "residual": r,
            "pc1": 0.0,
            "pc2": 0.0,
        }
        for b in range(samples)
        for s, r in enumerate(residuals)
    ]


def _snapshot(epoch, steps, spread):
    """Two classes of two inputs; final PCA points ``±spread`` apart, ±1 within a class."""
    rows = []
    for b, (label, offset) in enumerate([(0, -1), (0, 1), (1, -1), (1, 1)]):
        centre = spread * (1 if label else -1)
        for s in range(steps):
            rows.append(
                {
                    "panel": "training",
                    "init_std": 0.01,
                    "epoch": epoch,
                    "sample": b,
                    "label": label,
                    "step": s,
                    "residual": 0.1,
                    "pc1": centre if s == steps - 1 else 0.0,
                    "pc2": float(offset),
                }
            )
    return rows


def _train_rows(accuracy, epochs=(1,)):
    return [
        {"panel": "train", "init_std": 0.01, "epoch": e, "train_loss": 1.0, "train_acc": accuracy}
        for e in epochs
    ]


def _dyn_config():
    return Hieu2022Dynamics().resolve("tiny", overrides=["max_iter=10"])


def test_dynamics_statements_pass_and_fail():
    config = _dyn_config()
    steady = _init_rows(0.01, [1.0, 0.1, 0.005]) + _init_rows(1.0, [1.0, 0.5, 0.4, 0.3])
    trained = _snapshot(0, 3, 1.0) + _snapshot(1, 5, 4.0) + _train_rows(0.9)
    found = _by_name(dynamics_report.statements(config, steady + trained))
    names = list(found)
    assert [found[n].kind for n in names] == [
        Kind.OBSERVATION,
        Kind.OURS,
        Kind.OURS,
        Kind.OBSERVATION,
        Kind.OBSERVATION,
    ]
    assert all(s.verdict is PASS for s in found.values()), found
    assert found[names[0]].source.quote.startswith("the sequence of z^[i] is more chaos")
    assert found[names[3]].source.location == "Section 4.1.2, Fig. 4.3"
    chaotic = _init_rows(0.01, [1.0, 0.5, 0.4, 0.3]) + _init_rows(1.0, [1.0, 0.5, 0.4, 0.3])
    reversed_ = _snapshot(0, 5, 4.0) + _snapshot(1, 5, 1.0) + _train_rows(0.9)
    found = _by_name(dynamics_report.statements(config, chaotic + reversed_))
    assert all(s.verdict is FAIL for s in found.values()), found  # ties and reversals fail


def test_dynamics_statements_not_measured_untrained_saturated_or_missing():
    config = _dyn_config()
    init = _init_rows(0.01, [1.0, 0.1, 0.005]) + _init_rows(1.0, [1.0, 0.5, 0.4, 0.3])
    untrained_run = _snapshot(0, 3, 1.0) + _snapshot(1, 5, 4.0) + _train_rows(0.2)
    found = list(dynamics_report.statements(config, init + untrained_run))
    assert [s.verdict for s in found[3:]] == [NM, NM]
    assert "not trained" in found[3].detail
    capped = _snapshot(0, 10, 1.0) + _snapshot(1, 10, 4.0) + _train_rows(0.9)
    longer = dynamics_report.statements(config, init + capped)[3]
    assert longer.verdict is NM and "all max_iter = 10" in longer.detail
    one_step = _init_rows(0.01, [1.0]) + _init_rows(1.0, [1.0])
    assert dynamics_report.statements(config, one_step)[0].verdict is NM  # no step after the first
    assert {s.verdict for s in dynamics_report.statements(config, [])} == {NM}


# --- the experiment at its presets --------------------------------------------------------


def test_paper_setting_declares_every_field_and_the_data_set_substitution():
    exp = Hieu2022Dynamics()
    found = {d.setting: d for d in exp.deviations(exp.resolve("quick"))}
    assert found["dataset"].kind == "substitution" and found["dataset"].run == "fashion-mnist"
    assert exp.figure_captions and all(c.endswith(".") for c in exp.figure_captions.values())


def test_dynamics_tiny_rows_statements_and_resume():
    experiment = Hieu2022Dynamics()
    config = experiment.resolve("tiny")
    small, large, training = experiment.tasks(config)
    rows = experiment.run_task(config, small, MemoryCheckpoints().context(1))
    rows += experiment.run_task(config, large, MemoryCheckpoints().context(1))
    first = [r for r in rows if r["sample"] == 0 and r["init_std"] == 1.0]
    assert first[0]["residual"] == pytest.approx(1.0)  # z = 0: ‖f(0)‖/‖f(0)‖
    trained = experiment.run_task(config, training, MemoryCheckpoints().context(1))
    assert {r["panel"] for r in trained} == {"training", "train"}
    assert {r["epoch"] for r in trained if r["panel"] == "training"} == {0, 1}
    found = experiment.statements(config, rows + trained)
    assert [s.verdict for s in found] == [PASS, PASS, PASS, NM, NM]  # 2 steps train nothing
    saved = MemoryCheckpoints()
    experiment.run_task(config, training, saved.context(1))
    assert experiment.run_task(config, training, saved.context(1)) == trained  # resumed at end


def test_pca_2d_matches_svd():
    points = torch.randn(30, 7) @ torch.diag(torch.tensor([5.0, 3.0, 1, 1, 1, 1, 1]))
    projected = pca_2d(points)
    centered = points - points.mean(0)
    _, _, vh = torch.linalg.svd(centered, full_matrices=False)
    expected = centered @ vh[:2].T
    assert torch.allclose(projected.abs(), expected.abs(), atol=1e-10)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("channels=0", "`channels` must be >= 1"),
        ("groups=-1", "`groups` must be >= 1"),
    ],
)
def test_config_rejects_non_positive_sizes(override, message):
    with pytest.raises(ConfigError, match=message):
        Hieu2022Dynamics().resolve("tiny", overrides=[override])

"""The thesis experiments (Hieu 2022) at the tiny preset: rows, claims and resume."""

import pytest
import torch

from deqlab.experiments.config import ConfigError
from deqlab.experiments.hieu2022_dynamics import Hieu2022Dynamics, pca_2d
from deqlab.experiments.hieu2022_landscape import Hieu2022Landscape
from deqlab.experiments.hieu2022_landscape_report import flat_areas, surfaces
from deqlab.experiments.hieu2022_mondeq_gd import Hieu2022MonDEQGD
from test_experiments_kawaguchi2021 import MemoryCheckpoints


def test_mondeq_gd_tiny_rows_claims_and_bit_exact_resume():
    experiment = Hieu2022MonDEQGD()
    config = experiment.resolve("tiny")
    tasks = experiment.tasks(config)
    rows = [
        r for t in tasks for r in experiment.run_task(config, t, MemoryCheckpoints().context(10))
    ]
    assert {r["width"] for r in rows} == set(config.widths)
    assert len(rows) == len(config.widths) * (config.steps + 1)
    claims = {c.name: c for c in experiment.claims(config, rows)}
    for name in (
        "GD reaches a small training loss at the widest width",
        "the loss stays under the Theorem 3.3.5 curve (1 − ηλ₀²/4)^k L(0)",
        "λ₀ = σ_min(Z(0)) increases with the width",
    ):
        assert claims[name].passed, claims[name]
    assert not claims["Condition 2 (Eqs. 3.16–3.18) holds at initialization for some width"].passed
    interrupted = MemoryCheckpoints(stop_after=2)
    with pytest.raises(KeyboardInterrupt):
        experiment.run_task(config, tasks[0], interrupted.context(10))
    interrupted.stop_after = None
    resumed = experiment.run_task(config, tasks[0], interrupted.context(10))
    assert resumed == [r for r in rows if r["width"] == config.widths[0]]


def test_mondeq_gd_config_rejects_widths_below_the_sample_count():
    with pytest.raises(ConfigError, match="must all be >= n_samples"):
        Hieu2022MonDEQGD().resolve("tiny", overrides=["widths=[4, 12]"])


def test_dynamics_tiny_rows_claims_and_resume():
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
    claims = {c.name: c for c in experiment.claims(config, rows + trained)}
    assert claims["N(0, 0.01) init needs fewer solver steps than N(0, 1) (Fig. 4.1)"].passed
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


def test_landscape_tiny_rows_surfaces_and_claims():
    experiment = Hieu2022Landscape()
    config = experiment.resolve("tiny")
    assert [t.key for t in experiment.tasks(config)] == ["deq", "repeat1", "repeat2"]
    rows = []
    for task in experiment.tasks(config):
        rows += experiment.run_task(config, task, MemoryCheckpoints().context(1))
    found = surfaces(rows)
    assert set(found) == {"deq", "repeat1", "repeat2"}
    assert all(
        s.losses.shape == (3, 3) and bool(torch.isfinite(s.losses).all()) for s in found.values()
    )
    assert flat_areas(rows, 1e9) == dict.fromkeys(found, 9.0)  # whole 3 × 3 grid, unit cells
    names = [c.name for c in experiment.claims(config, rows)]
    assert names == [
        "the flat area grows with the number of repetitions (weight-tied nets)",
        "the DEQ's flat area is at least that of the deepest weight-tied net",
    ]

"""hieu2022-landscape (experiments/hieu2022/landscape.py and its report): every statement in
both directions on made-up surfaces, the tiny preset's rows, surfaces and statements, and
the presets (the paper preset is the thesis's setting, the others say how they differ)."""

import pytest
import torch

from deqlab.experiments.config import ConfigError
from deqlab.experiments.hieu2022 import landscape_report
from deqlab.experiments.hieu2022.landscape import Hieu2022Landscape
from deqlab.experiments.hieu2022.landscape_report import surfaces
from deqlab.papers.hieu2022.landscapes import flat_areas
from deqlab.statements import Kind, Verdict
from helpers import MemoryCheckpoints

PASS, FAIL, NM = Verdict.PASS, Verdict.FAIL, Verdict.NOT_MEASURED


# --- statements on made-up rows -----------------------------------------------------------


def _bowl(model, curvature, grid=5, accuracy=0.9):
    """``L = curvature · (α² + β²)`` on a ``grid²`` lattice over [−1, 1]², and a trained row."""
    points = torch.linspace(-1, 1, grid).tolist()
    rows = [
        {"model": model, "alpha": a, "beta": b, "loss": curvature * (a * a + b * b)}
        for a in points
        for b in points
    ]
    return [*rows, {"model": model, "epoch": 1, "train_loss": 0.1, "train_acc": accuracy}]


def _land_config():
    return Hieu2022Landscape().resolve("tiny", overrides=["flat_delta=1.0", "grid=5"])


def test_landscape_statements_pass_only_on_strict_growth_and_a_largest_deq():
    config = _land_config()  # repeats 1, 2
    good = _bowl("deq", 0.9) + _bowl("repeat1", 4.0) + _bowl("repeat2", 2.0)  # 13, 5, 9 points
    grows, largest = landscape_report.statements(config, good)
    assert grows.kind is Kind.OBSERVATION and grows.verdict is PASS
    assert largest.verdict is PASS and largest.value > 0
    assert "small-loss neighborhood around the minimizer is expanded" in grows.source.quote
    assert largest.source.quote.endswith("This suggests the superior of training DEQ models.")
    assert grows.source.location == "Section 4.2.1, Figure 4.4"
    tie = _bowl("deq", 2.0) + _bowl("repeat1", 2.0) + _bowl("repeat2", 2.0)
    assert [s.verdict for s in landscape_report.statements(config, tie)] == [FAIL, FAIL]
    reversed_ = _bowl("deq", 4.0) + _bowl("repeat1", 0.9) + _bowl("repeat2", 2.0)
    assert [s.verdict for s in landscape_report.statements(config, reversed_)] == [FAIL, FAIL]


def test_landscape_statements_not_measured_when_saturated_untrained_or_missing():
    config = _land_config()
    flat = _bowl("deq", 0.1) + _bowl("repeat1", 4.0) + _bowl("repeat2", 2.0)
    found = landscape_report.statements(config, flat)
    assert {s.verdict for s in found} == {NM}
    assert "deq: the whole grid (grid too small or flat_delta too loose)" in found[0].detail
    sharp = _bowl("deq", 1.2) + _bowl("repeat1", 100.0) + _bowl("repeat2", 2.0)
    assert "repeat1: only the centre" in landscape_report.statements(config, sharp)[0].detail
    weak = _bowl("deq", 1.2) + _bowl("repeat1", 4.0, accuracy=0.2) + _bowl("repeat2", 2.0)
    assert "not trained" in landscape_report.statements(config, weak)[1].detail
    missing = landscape_report.statements(config, _bowl("deq", 1.2))
    assert {s.verdict for s in missing} == {NM} and "no surface for repeat1" in missing[0].detail


def test_landscape_deq_statement_not_measured_when_its_solves_stop_at_max_iter():
    config = _land_config()  # max_iter 10
    good = _bowl("deq", 0.9) + _bowl("repeat1", 4.0) + _bowl("repeat2", 2.0)
    steps = [dict(r, solver_steps=9 if r["model"] == "deq" else 0) for r in good]
    assert [s.verdict for s in landscape_report.statements(config, steps)] == [PASS, PASS]
    capped = [
        dict(r, solver_steps=10 if r.get("beta") == 1.0 else r["solver_steps"]) for r in steps
    ]
    grows, largest = landscape_report.statements(config, capped)
    assert grows.verdict is PASS and largest.verdict is NM
    assert "all max_iter = 10 evaluations at 5 of 25 grid points" in largest.detail


# --- the experiment at its presets --------------------------------------------------------


def test_paper_setting_declares_every_field_and_the_data_set_substitution():
    exp = Hieu2022Landscape()
    found = {d.setting: d for d in exp.deviations(exp.resolve("quick"))}
    assert found["dataset"].kind == "substitution" and found["dataset"].run == "fashion-mnist"
    assert exp.figure_captions and all(c.endswith(".") for c in exp.figure_captions.values())


def test_landscape_tiny_rows_surfaces_and_statements():
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
    assert flat_areas(surfaces(rows), 1e9) == dict.fromkeys(
        found, 9.0
    )  # whole 3 × 3 grid, unit cells
    statements = experiment.statements(config, rows)
    assert [s.verdict for s in statements] == [NM, NM]  # untrained and saturated at tiny
    assert "saturated" in statements[0].detail


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("inner_channels=0", "`inner_channels` must be >= 1"),
        ("max_iter=0", "`max_iter` must be >= 1"),
        ("batch_size=0", "`batch_size` must be >= 1"),
        ("repeats=[0, 2]", "`repeats` must be >= 1"),
    ],
)
def test_config_rejects_non_positive_sizes(override, message):
    with pytest.raises(ConfigError, match=message):
        Hieu2022Landscape().resolve("tiny", overrides=[override])


def _departures(preset):
    experiment = Hieu2022Landscape()
    found = experiment.deviations(experiment.resolve(preset))
    return {d.setting: d for d in found if d.kind != "our choice"}


def test_paper_preset_is_the_thesis_setting():
    assert _departures("paper") == {}
    config = Hieu2022Landscape().resolve("paper")
    assert (config.dataset, config.n_train, config.epochs) == ("cifar10", 50_000, 50)
    assert (config.batch_size, config.lr, config.grid) == (100, 1e-3, 51)


@pytest.mark.parametrize("preset", ["quick", "hour"])
def test_offline_presets_list_the_stand_in_and_the_smaller_budget(preset):
    found = _departures(preset)
    assert found["dataset"].kind == "substitution" and found["dataset"].run == "fashion-mnist"
    assert {"n_train", "epochs", "grid"} <= set(found)


def test_hour_preset_keeps_the_thesis_optimiser_and_batch():
    found = _departures("hour")
    assert not {"lr", "batch_size", "repeats"} & set(found)

"""hieu2022-landscape presets: the paper preset is the thesis's setting, the others say how
they differ (the tiny preset's run: tests/test_experiments_hieu2022.py)."""

import pytest

from deqlab.experiments.hieu2022.landscape import Hieu2022Landscape


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

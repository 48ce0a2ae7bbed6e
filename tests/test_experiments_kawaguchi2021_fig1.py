"""kawaguchi2021-fig1 (experiments/kawaguchi2021/fig1.py and its report), Figure 1 and
Figures 4–8 (Appendix D.2): the tiny preset, the stand-in and the presets, every statement
in both directions."""

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from deqlab.data.registry import RawImages
from deqlab.experiments.kawaguchi2021 import fig1, fig1_data, fig1_report
from deqlab.experiments.kawaguchi2021.fig1 import Fig1Config, Kawaguchi2021Fig1
from deqlab.papers.kawaguchi2021.figure1 import choices
from deqlab.statements import Kind, Verdict
from helpers import assert_settings_declared_and_captions_sentences, run_all

PASS, FAIL, NM = Verdict.PASS, Verdict.FAIL, Verdict.NOT_MEASURED


def _by_name(statements):
    return {s.name: s for s in statements}


def test_fig1_tiny_rows_statements_and_divergence():
    """Linear model = DELM at initialization (W₀ = B₀U₀⁻¹); a diverging lr is counted."""
    experiment = Kawaguchi2021Fig1()
    config = experiment.resolve("tiny", overrides=["lrs=[1e30, 0.001]"])
    rows = run_all(experiment, config)
    start = {(r["model"], r["lr"]): r for r in rows if r["epoch"] == 0}
    for lr in config.lrs:
        assert start[("Linear", lr)]["test_loss"] == pytest.approx(start[("DELM", lr)]["test_loss"])
    summary = choices(fig1_report.runs(rows), fig1_report.grid(config))
    assert summary["DELM"].best[0] == 0.001 and summary["Linear"].diverged == 1
    found = experiment.statements(config, rows)
    *observed, rank = found
    assert [s.name for s in observed] == [
        "digits: all models start at about the same test loss",
        "digits: the DELM ends with a lower test loss than Linear (best lrs)",
        "digits: the DELM ends with a lower test loss than DNN-H2 (best lrs)",
    ]
    assert all(s.kind is Kind.OBSERVATION and s.source.quote for s in observed)
    assert all(s.verdict in (PASS, FAIL) for s in observed)
    assert rank.kind is Kind.OURS and rank.verdict is PASS  # 20 points of 64 pixels


def _fig1_rows(config, finals, starts):
    """One trial per model: epoch 0 at ``starts[model]``, the last epoch at ``finals[model]``."""
    return [
        {"dataset": "digits", "model": model, "trial": 0, "lr": config.lrs[0], "epoch": epoch,
         "train_loss": 1.0, "test_loss": loss}
        for model in finals
        for epoch, loss in ((0, starts[model]), (config.epochs, finals[model]))
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("finals", "starts", "verdicts"),
    [
        ({"DELM": 1.0, "Linear": 2.0}, {"DELM": 5.0, "Linear": 6.0}, (PASS, PASS)),
        ({"DELM": 2.0, "Linear": 1.0}, {"DELM": 5.0, "Linear": 15.0}, (FAIL, FAIL)),
        ({"DELM": 1.0, "Linear": math.nan}, {"DELM": 5.0, "Linear": math.nan}, (NM, NM)),
        ({}, {}, (NM, NM)),
    ],
)
def test_fig1_statements_in_both_directions(finals, starts, verdicts):
    config = Fig1Config(datasets=("digits",), lrs=(0.001,), trials=1, depths=())
    found = fig1_report.statements(config, _fig1_rows(config, finals, starts))
    assert tuple(s.verdict for s in found[:-1]) == verdicts


@pytest.mark.parametrize(("dataset", "verdict"), [("sphere", PASS), ("digits", FAIL)])
def test_fig1_stand_in_keeps_the_interpolation_regime(dataset, verdict):
    """rank(Φ_train) = 100 for the sphere stand-in; sklearn digits (8×8) gives 64 < 100."""
    config = Fig1Config(datasets=(dataset,), lrs=(0.001,), trials=1, depths=())
    rank = int(torch.linalg.matrix_rank(fig1.teacher_data(config, dataset, "cpu")["X_train"]))
    rows = [
        {**r, "dataset": dataset, "train_rank": rank}
        for r in _fig1_rows(config, {"DELM": 1.0}, {"DELM": 1.0})
    ]
    statement = fig1_report.statements(config, rows)[-1]
    assert statement.verdict is verdict and statement.value == rank / 100
    assert fig1_report.statements(config, _fig1_rows(config, {}, {}))[-1].verdict is NM


def test_fig1_paper_preset_uses_the_paper_sets_present_and_the_stand_in_for_the_others(
    monkeypatch,
):
    experiment = Kawaguchi2021Fig1()
    monkeypatch.setattr(fig1_data, "is_present", lambda name: name == "kmnist")
    assert experiment.resolve("paper").datasets == ("kmnist", "sphere")
    assert experiment.datasets(experiment.resolve("paper")) == ("kmnist",)
    monkeypatch.setattr(fig1_data, "is_present", lambda name: True)
    assert experiment.resolve("quick").datasets == fig1.PAPER_DATASETS
    assert experiment.resolve("paper", overrides=["datasets=['digits']"]).datasets == ("digits",)


# --- Figures 4–8 (Appendix D.2) -----------------------------------------------------------


@pytest.mark.parametrize(
    ("preset", "figure", "changes"),
    [
        ("fig4", 4, {}),
        ("fig5", 5, {"dnn_bias": False}),
        ("fig6", 6, {"dnn_bias": False, "depths": (10, 100, 200)}),
        ("fig7", 7, {"depths": (10, 100, 200)}),
        ("fig8", 8, {"n_train": 0, "n_test": 0, "epochs": 100, "trials": 3}),
    ],
)
def test_appendix_d2_presets_declare_their_figure_and_its_setting(
    preset, figure, changes, monkeypatch
):
    """Each preset is its figure's setting: only the stand-in (for the data sets missing
    here) and our choices are deviations."""
    monkeypatch.setattr(fig1_data, "is_present", lambda name: name == "mnist")
    experiment = Kawaguchi2021Fig1()
    config = experiment.resolve(preset)
    assert config.figure == figure and all(getattr(config, k) == v for k, v in changes.items())
    wanted = fig1.FIGURE_DATASETS[figure]
    assert config.datasets == (("mnist",) if "mnist" in wanted else ()) + ("sphere",)
    found = {d.setting: d for d in experiment.deviations(config)}
    assert {d.kind for d in found.values()} == {"substitution", "our choice"}
    assert found["datasets"].kind == "substitution" and set(found) == {"datasets", "seed"}


def _deep_rows(config, deep_final, *, diverge=False):
    """DELM and DNN-H10/H100 at each lr: DELM train loss 4 → 1, DNN-H10 1 → 0.5 (faster),
    DNN-H100 1 → ``deep_final`` (or non-finite when ``diverge``)."""
    curves = {"DELM": (4.0, 2.0, 1.0), "DNN-H10": (4.0, 1.0, 0.5),
              "DNN-H100": (1.0, 1.0, math.nan if diverge else deep_final)}  # fmt: skip
    return [
        {"dataset": "sphere", "model": model, "trial": 0, "lr": lr, "epoch": epoch,
         "train_loss": loss, "test_loss": 2.0 if model == "DELM" else 3.0}
        for model, losses in curves.items()
        for lr in config.lrs
        for epoch, loss in zip((0, config.record_every, config.epochs), losses, strict=True)
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("deep_final", "diverge", "verdict"),
    [(1.0, False, PASS), (None, True, PASS), (0.2, False, FAIL)],
)
def test_figure_6_statements_in_both_directions(deep_final, diverge, verdict):
    config = Fig1Config(datasets=("sphere",), lrs=(0.001,), trials=1, depths=(10, 100),
                        epochs=100, record_every=10, dnn_bias=False, figure=6)  # fmt: skip
    found = _by_name(fig1_report.statements(config, _deep_rows(config, deep_final,
                                                               diverge=diverge)))  # fmt: skip
    assert "sphere: all models start at about the same test loss" not in found  # Figure 6
    assert not any("than Linear" in name for name in found)
    faster = found["sphere: the DNNs reduce the training loss faster than the DELM"]
    assert faster.verdict is PASS and faster.value == 2.0 and "Figure 6" in faster.source.location
    stuck = found["sphere: DNNs with H ≥ 100 show gradient explosion or vanishing"]
    assert stuck.verdict is verdict and stuck.source.quote.startswith("We experienced")
    slow = [{**r, "train_loss": 8.0} if r["model"] != "DELM" and r["epoch"] == 10 else r
            for r in _deep_rows(config, 1.0)]  # fmt: skip
    assert fig1_report.statements(config, slow)[2].verdict is FAIL
    assert all(s.verdict is NM for s in fig1_report.statements(config, [])[:-1])


def test_deep_dnns_need_explosion_or_vanishing_at_one_learning_rate_only():
    """Appendix D.2 says the authors experienced explosion and vanishing at H = 100, 200, not
    that these depths train at no lr: H = 100 training at one lr and stalling at the other
    passes; training at both fails."""
    config = Fig1Config(datasets=("sphere",), lrs=(0.001, 0.01), trials=1, depths=(10, 100),
                        epochs=100, record_every=10, dnn_bias=False, figure=6)  # fmt: skip
    name = "sphere: DNNs with H ≥ 100 show gradient explosion or vanishing"

    def verdict(finals):
        rows = [r for lr, final in zip(config.lrs, finals, strict=True)
                for r in _deep_rows(dataclasses.replace(config, lrs=(lr,)), final)]  # fmt: skip
        return _by_name(fig1_report.statements(config, rows))[name]

    mixed = verdict((0.2, 1.0))
    assert mixed.verdict is PASS and "1 vanish" in mixed.measured
    both = verdict((0.2, 0.3))
    assert both.verdict is FAIL and both.value == 1 and "(H = 100)" in both.measured


def test_figure_8_reads_every_image_and_has_no_rank_statement(monkeypatch):
    """n_train = n_test = 0: whole splits (colour as luma, a single split halved, the stand-in
    at MNIST's sizes); the 200-point rank statement is not made."""
    images = np.arange(4 * 3 * 2 * 2, dtype=np.uint8).reshape(4, 3, 2, 2)
    monkeypatch.setattr(fig1_data, "load_images", lambda name, split: RawImages(
        images, np.zeros(4, dtype=np.int64), Path("x"), 255))  # fmt: skip
    monkeypatch.setattr(fig1_data, "WHOLE_STANDIN", (6, 2))
    config = Fig1Config(figure=8, n_train=0, n_test=0, datasets=("cifar10",))
    train, test = fig1_data._pre_images(config, "cifar10", torch.Generator().manual_seed(0))
    assert train.shape == test.shape == (4, 4) and float(train.max()) <= 1.0
    train, test = fig1_data._pre_images(config, "semeion", torch.Generator().manual_seed(0))
    assert train.shape == test.shape == (4, 2)
    train, test = fig1_data._pre_images(config, "sphere", torch.Generator().manual_seed(0))
    assert train.shape == (784, 6) and test.shape == (784, 2)
    rows = _fig1_rows(config, {"DELM": 1.0, "Linear": 2.0}, {"DELM": 1.0, "Linear": 1.0})
    rows = [{**r, "dataset": "cifar10"} for r in rows]
    found = fig1_report.statements(config, rows)
    assert len(found) == 4  # Linear and the three DNNs; no same-start, no rank statement
    assert {s.source.location for s in found} == {"Appendix D.2, Figure 8"}
    with pytest.raises(ValueError, match="`n_train` must be 0 exactly when `n_test` is 0"):
        Fig1Config(n_train=0)


# --- settings, captions, config -----------------------------------------------------------


def test_paper_settings_declare_every_field_and_captions_are_sentences():
    assert_settings_declared_and_captions_sentences(Kawaguchi2021Fig1())


def test_paper_preset_lists_its_substitutions():
    fig1 = Kawaguchi2021Fig1()
    found = {d.setting: d for d in fig1.deviations(fig1.resolve("paper"))}
    assert found["datasets"].kind == "substitution" and "cifar10" in found["datasets"].paper


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("datasets", ("blobs",), r"`datasets` must be one of .*'sphere'; got 'blobs'"),
        ("momentum", 1.0, r"`momentum` must be in \[0, 1\); got 1"),
        ("lrs", (), r"`lrs` must hold at least 1 value; got \[\]"),
    ],
)
def test_bad_config_values_are_rejected_naming_the_field(field, value, message):
    with pytest.raises(ValueError, match=message):
        Fig1Config(**{field: value})

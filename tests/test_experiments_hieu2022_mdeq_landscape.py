"""hieu2022-landscape-mdeq (thesis Figures 3.1 and 4.5): statements in both directions on
made-up surfaces, the tiny preset end to end, and the paper preset's data check: a one-line
refusal without ImageNet, a pass with it (the reader: tests/test_data_imagenet.py)."""

import json

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from deqlab.cli import app
from deqlab.experiments.hieu2022.landscape_report import surfaces
from deqlab.experiments.hieu2022.mdeq_landscape import (
    CappedSolves,
    Hieu2022LandscapeMDEQ,
    MDEQLandscapeConfig,
    build_model,
    cifar10_present,
    load_images,
)
from deqlab.experiments.hieu2022.mdeq_landscape_report import local_minima, statements
from deqlab.runs.data_check import DataError, check_datasets
from deqlab.runs.describe import dataset_status
from deqlab.statements import Kind, Verdict
from helpers import fake_imagenet

PASS, FAIL, NM = Verdict.PASS, Verdict.FAIL, Verdict.NOT_MEASURED
CONFIG = MDEQLandscapeConfig(dataset="digits", classes=10, grid=21, tol=1e-3)


def rows_of(loss, *, acc=0.9, residual=1e-4, grid=21):
    """Training, residual (0.3 at init, ``residual`` after the epoch) and surface rows of
    ``loss(α, β)`` on a grid over [−1, 1]²."""
    rows = [{"model": "mdeq", "epoch": 0, "residual": 0.3}]
    rows.append({"model": "mdeq", "epoch": 1, "train_loss": 0.3, "train_acc": acc})
    rows.append({"model": "mdeq", "epoch": 1, "residual": residual})
    axis = np.linspace(-1, 1, grid)
    return rows + [
        {"model": "mdeq", "alpha": float(a), "beta": float(b), "loss": float(loss(a, b))}
        for a in axis
        for b in axis
    ]


def by_name(rows):
    return {s.name: s for s in statements(CONFIG, rows)}


def bowl(a, b):
    return 0.2 + 0.5 * (a**2 + b**2)  # one minimum; {Φ ≤ 0.7}: the unit disc


def test_a_wide_bowl_has_one_flat_minimum_and_the_solve_passes():
    found = by_name(rows_of(bowl))
    one, flat = found["the loss landscape has only one minimum"], found["the minimum is flat"]
    assert (one.verdict, one.value) == (PASS, 1)
    # 21² points, each the centre of a 0.1² cell: the disc's π over the cells' 2.1²
    assert flat.verdict is PASS and flat.value == pytest.approx(np.pi / 2.1**2, abs=0.01)
    assert one.source.quote.startswith("As in Fig 3.1") and one.kind is Kind.OBSERVATION
    solved = found["the equilibrium at θ* is solved on the evaluation images"]
    assert solved.verdict is PASS and solved.kind is Kind.OURS and solved.value == 1e-4
    assert solved.measured == "0.0001 after epoch 1 (0.3 at init)"


def test_two_wells_a_sharp_minimum_and_an_unsolved_equilibrium_fail():
    def wells(a, b):
        return 0.2 + 4 * (a**2 - 0.25) ** 2 + 4 * b**2  # minima at α = ±0.5

    assert by_name(rows_of(wells))["the loss landscape has only one minimum"].value == 2
    assert by_name(rows_of(wells))["the loss landscape has only one minimum"].verdict is FAIL
    sharp = by_name(rows_of(lambda a, b: 0.2 + 50 * (a**2 + b**2)))["the minimum is flat"]
    assert sharp.verdict is FAIL and sharp.value < 0.25
    unsolved = by_name(rows_of(bowl, residual=0.2))
    assert unsolved["the equilibrium at θ* is solved on the evaluation images"].verdict is FAIL
    just_above = by_name(rows_of(bowl, residual=1.01e-3))  # tol = 1e-3, not loosened
    assert just_above["the equilibrium at θ* is solved on the evaluation images"].verdict is FAIL


def test_untrained_or_missing_surface_is_not_measured():
    for rows in (rows_of(bowl, acc=0.2), rows_of(bowl)[:3]):
        found = by_name(rows)
        for name in ("the loss landscape has only one minimum", "the minimum is flat"):
            assert found[name].verdict is NM, found[name]
    assert "not trained" in by_name(rows_of(bowl, acc=0.2))["the minimum is flat"].detail
    no_residual = [r for r in rows_of(bowl) if "residual" not in r]
    solved = by_name(no_residual)["the equilibrium at θ* is solved on the evaluation images"]
    assert solved.verdict is NM
    flat = by_name(no_residual)["the minimum is flat"]
    assert flat.verdict is NM and "not measured (no residual row)" in flat.detail
    assert "above tol" not in flat.detail  # no residual was measured to be above it


def test_an_unsolved_equilibrium_or_capped_grid_solves_leave_the_observations_not_measured():
    """Seed 1 of `quick` ends with residual 0.619: its surface is a truncated solver's."""
    names = ("the loss landscape has only one minimum", "the minimum is flat")
    unsolved = by_name(rows_of(bowl, residual=0.619))
    for name in names:
        assert unsolved[name].verdict is NM and "not solved" in unsolved[name].detail
    capped = [{**r, "capped_points": 3} if "alpha" in r else r for r in rows_of(bowl)]
    for name in names:
        assert by_name(capped)[name].verdict is NM
        assert (
            "used all max_iter = 26 iterations at 3 of the 21² grid" in by_name(capped)[name].detail
        )
    clean = [{**r, "capped_points": 0} if "alpha" in r else r for r in rows_of(bowl)]
    assert {by_name(clean)[n].verdict for n in names} == {PASS}


def test_capped_solves_counts_the_grid_evaluations_whose_solve_hit_max_iter():
    config = Hieu2022LandscapeMDEQ().resolve("tiny")
    model = build_model(config, "cpu")
    x = torch.randn(4, 3, config.image_size, config.image_size, dtype=torch.float32)

    def loss(module):
        with torch.no_grad():
            return float(module(x).sum())

    few = CappedSolves(model, loss, max_iter=1)  # every solve takes ≥ 1 iteration
    few(model), few(model)
    assert few.points == 2 and few.solves >= 2
    few.hook.remove()
    many = CappedSolves(model, loss, max_iter=10_000)
    many(model)
    assert many.points == 0 and many.solves == 0
    many.hook.remove()


def test_local_minima_match_a_brute_force_count():
    losses = torch.rand(9, 9, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    axis = np.linspace(-1, 1, 9)
    rows = [
        {"model": "mdeq", "alpha": float(a), "beta": float(b), "loss": float(losses[i, j])}
        for i, a in enumerate(axis)
        for j, b in enumerate(axis)
    ]
    mask = local_minima(surfaces(rows)["mdeq"])
    for i in range(9):
        for j in range(9):
            near = [(p, q) for p in range(i - 1, i + 2) for q in range(j - 1, j + 2)]
            neighbours = [
                losses[p, q] for p, q in near if 0 <= p < 9 and 0 <= q < 9 and (p, q) != (i, j)
            ]
            assert bool(mask[i, j]) == all(losses[i, j] <= v for v in neighbours)


def test_tiny_preset_runs_and_writes_its_report(tmp_path):
    result = CliRunner().invoke(
        app,
        [
            "reproduce",
            "hieu2022-landscape-mdeq",
            "--preset",
            "tiny",
            "--out",
            str(tmp_path),
            "--quiet",
        ],
    )
    assert result.exit_code == 0, result.output
    run = next((tmp_path / "hieu2022-landscape-mdeq").iterdir())
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "finished" and (run / "report.html").stat().st_size > 0
    assert "figures/mdeq-landscape.png" in [f["path"] for f in summary["figures"]]
    names = {s["name"]: s["verdict"] for s in summary["statements"]}
    assert names["the minimum is flat"] == "NOT MEASURED"  # tiny: one epoch, untrained


def test_quick_preset_reads_cifar10_or_its_stand_in():
    config = Hieu2022LandscapeMDEQ().resolve("quick")
    assert config.dataset == ("cifar10" if cifar10_present() else "digits")
    images, labels = load_images(config, "train", 30, seed=0)
    assert images.shape == (30, 3, 32, 32) and torch.bincount(labels).tolist() == [3] * 10
    assert torch.equal(images[:, 0], images[:, 2]) or config.dataset == "cifar10"


def test_paper_preset_refuses_in_one_line_without_imagenet(tmp_path, monkeypatch):
    monkeypatch.setenv("DEQLAB_DATA", str(tmp_path / "data"))
    result = CliRunner().invoke(
        app,
        [
            "reproduce",
            "hieu2022-landscape-mdeq",
            "--preset",
            "paper",
            "--out",
            str(tmp_path / "runs"),
        ],
    )
    assert result.exit_code == 2
    assert result.stderr.startswith("error: data set 'imagenet' not found")
    assert result.stderr.count("\n") == 1 and "need a GPU (--device cuda)" in result.stderr
    assert "image-net.org" in result.stderr and "val/<wnid>/*.JPEG" in result.stderr
    assert not (tmp_path / "runs" / "hieu2022-landscape-mdeq").exists()
    experiment = Hieu2022LandscapeMDEQ()
    with pytest.raises(DataError, match="data set 'imagenet' not found"):
        check_datasets(experiment, experiment.resolve("paper"))  # the runner's generic check
    shown = dataset_status("imagenet")
    assert (shown["status"], shown["fetch"]) == ("missing", None)
    assert "not downloadable" in shown["detail"]


def test_paper_preset_passes_the_data_check_when_imagenet_is_present(tmp_path, monkeypatch):
    fake_imagenet(tmp_path)
    monkeypatch.setenv("DEQLAB_DATA", str(tmp_path))
    experiment = Hieu2022LandscapeMDEQ()
    check_datasets(experiment, experiment.resolve("paper"))  # present: no DataError
    assert dataset_status("imagenet")["status"] == "present"

"""Constraints declared on config fields: checked on every way a config is built, one
line naming the field (and the file), both directions."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import pytest

from deqlab.experiments.blocks import ConvDEQBlock, DELMSynthetic, MinibatchTraining
from deqlab.experiments.config import ConfigError, read_config_file, resolve_config
from deqlab.experiments.constraints import (
    DISTINCT,
    FRACTION,
    INCREASING,
    NONEMPTY,
    POSITIVE,
    SEED,
    Config,
    Interval,
    OneOf,
    Rule,
    declared,
)


@dataclass(frozen=True)
class Sweep(Config):
    datasets: tuple[str, ...] = ("sphere", "mnist")
    widths: tuple[int, ...] = (64, 128)
    n_samples: int = 10
    n: int = 10
    tol: float = 1e-6
    eta_fraction: float = 0.5
    eta: float | None = None
    seed: int = 0
    n_train: int = 0
    n_test: int = 0

    constraints: ClassVar = {
        "datasets": (NONEMPTY, OneOf(("sphere", "mnist", "cifar10")), DISTINCT),
        "widths": (NONEMPTY, Interval("n_samples"), INCREASING),
        "n": Interval(2),
        "tol": POSITIVE,
        "eta_fraction": FRACTION,
        "eta": POSITIVE,
        "seed": SEED,
        "n_train": Rule(lambda c: (c.n_train == 0) == (c.n_test == 0), "be 0 with n_test"),
        "n_test": Rule(lambda c: c.n_test <= 10 * c.n, lambda c: f"be <= 10·n = {10 * c.n}"),
    }


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["datasets=sphere,sphere"],
            r"`datasets` must not repeat a value \(each names a task; "
            r"repeated: 'sphere'\); got \['sphere', 'sphere'\]",
        ),
        (
            ['datasets=["sphere","imagenet"]'],
            r"`datasets` must be one of 'sphere', 'mnist', "
            r"'cifar10'; got 'imagenet'",
        ),
        (["datasets=[]"], r"`datasets` must hold at least 1 value; got \[\]"),
        (["widths=64,64"], r"`widths` must be strictly increasing; got \[64, 64\]"),
        (["widths=128,64"], r"`widths` must be strictly increasing; got \[128, 64\]"),
        (["widths=5,64"], r"`widths` must be >= n_samples = 10; got 5"),
        (["n=1"], r"`n` must be >= 2; got 1"),
        (["tol=0"], r"`tol` must be in \(0, inf\); got 0"),
        (["eta_fraction=1"], r"`eta_fraction` must be in \(0, 1\); got 1"),
        (["eta=-1"], r"`eta` must be in \(0, inf\); got -1"),
        (["seed=-1"], r"`seed` must be >= 0; got -1"),
        (["n_train=5"], r"`n_train` must be 0 with n_test; got 5"),
        (["n_test=101", "n_train=1"], r"`n_test` must be <= 10·n = 100; got 101"),
    ],
)
def test_a_value_breaking_a_declared_constraint_is_refused_in_one_line(overrides, message):
    with pytest.raises(ConfigError, match=f"^{message}$"):
        resolve_config(Sweep, overrides=overrides)


def test_values_inside_the_constraints_are_accepted_and_none_skips_them():
    cfg = resolve_config(
        Sweep, overrides=["widths=10,11", "n=2", "eta=0.1", "n_train=3", "n_test=4"]
    )
    assert cfg.widths == (10, 11) and cfg.eta == 0.1
    assert resolve_config(Sweep).eta is None  # an optional field left unset


def test_python_construction_is_checked_the_same_way():
    with pytest.raises(ValueError, match=r"`widths` must be strictly increasing"):
        Sweep(widths=(64, 64))
    with pytest.raises(TypeError, match=r"`n` must be int; got float 2.5"):
        Sweep(n=2.5)
    with pytest.raises(ValueError, match=r"`tol` must be in \(0, inf\); got nan"):
        Sweep(tol=math.nan)


def test_an_error_from_a_config_file_names_the_file(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text('datasets = ["sphere", "sphere"]\n')
    with pytest.raises(ConfigError, match=f"^config file '{path}': `datasets` must not repeat"):
        resolve_config(Sweep, read_config_file(path))
    path.write_text("n = 2.5\n")
    with pytest.raises(ConfigError, match=f"^config file '{path}': `n` must be int"):
        resolve_config(Sweep, read_config_file(path))
    path.write_text("widthz = [1]\n")
    with pytest.raises(ConfigError, match=f"^config file '{path}': unknown config key 'widthz'"):
        resolve_config(Sweep, read_config_file(path))
    # the same value from --set names no file; a later --set fixes the file's value
    with pytest.raises(ConfigError, match=r"^`n` must be >= 2; got 1$"):
        resolve_config(Sweep, overrides=["n=1"])
    path.write_text("n = 1\n")
    assert resolve_config(Sweep, read_config_file(path), overrides=["n=3"]).n == 3


def test_constraints_merge_over_the_blocks():
    @dataclass(frozen=True)
    class Cell(ConvDEQBlock, MinibatchTraining):
        epochs: int = 40  # the block's field, another default
        init_std: float = 0.01

        constraints: ClassVar = {"init_std": POSITIVE}

    assert set(declared(Cell)) == {
        "channels",
        "inner_channels",
        "groups",
        "tol",
        "max_iter",
        "epochs",
        "batch_size",
        "lr",
        "seed",
        "init_std",
    }
    assert Cell().epochs == 40 and Cell().channels == 48
    with pytest.raises(ValueError, match=r"`groups` must be >= 1; got 0"):
        Cell(groups=0)
    with pytest.raises(ValueError, match=r"`init_std` must be in \(0, inf\)"):
        Cell(init_std=0.0)
    with pytest.raises(ValueError, match=r"`gamma` must be in \(0, 1\); got 1"):
        DELMSynthetic(gamma=1.0)


def test_a_constraint_on_a_non_field_is_a_mistake_of_the_declaration():
    @dataclass(frozen=True)
    class Wrong(Config):
        n: int = 1
        constraints: ClassVar = {"m": Interval(1)}

    with pytest.raises(TypeError, match=r"declares constraints on non-fields \['m'\]"):
        Wrong()

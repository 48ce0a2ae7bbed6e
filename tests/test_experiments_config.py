"""Config resolution: defaults < preset < TOML file < --set, type-checked, unknown keys rejected."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from deqlab.experiments.config import (
    ConfigError,
    coerce_value,
    parse_override,
    resolve_config,
)


@dataclass(frozen=True)
class Cfg:
    n: int = 10
    lr: float = 0.5
    name: str = "sphere"
    widths: tuple[int, ...] = (64, 128)
    names: tuple[str, ...] = ("sphere",)
    eta: float | None = None
    flag: bool = False

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"`n` must be >= 1; got {self.n}")


def test_layers_apply_in_order(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('n = 30\nname = "mnist"\nwidths = [8, 16, 32]\n')
    cfg = resolve_config(Cfg, {"n": 20, "lr": 2}, {"n": 25}, overrides=["lr=0.25"])
    assert cfg == Cfg(n=25, lr=0.25)
    from deqlab.experiments.config import read_config_file

    cfg = resolve_config(Cfg, {"n": 20}, read_config_file(path), overrides=["flag=true"])
    assert cfg == Cfg(n=30, name="mnist", widths=(8, 16, 32), flag=True)
    assert isinstance(cfg.lr, float) and isinstance(cfg.widths, tuple)


def test_config_table_of_a_saved_run_is_read(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text('[experiment]\nname = "x"\n[config]\nn = 7\neta = 0.1\n')
    from deqlab.experiments.config import read_config_file

    assert resolve_config(Cfg, read_config_file(path)) == Cfg(n=7, eta=0.1)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("lr=0.5", ("lr", 0.5)),
        ("widths=[64, 128]", ("widths", [64, 128])),
        ("widths=64,128", ("widths", [64, 128])),
        ("names=sphere,mnist", ("names", ["sphere", "mnist"])),
        ("name=fashion-mnist", ("name", "fashion-mnist")),
        ("name='a=b'", ("name", "a=b")),
        ("eta=none", ("eta", None)),
        ("flag=false", ("flag", False)),
    ],
)
def test_parse_override(text, expected):
    assert parse_override(text) == expected


def test_overrides_are_type_checked():
    assert resolve_config(Cfg, overrides=["widths=32", "eta=1e-3", "n=3"]) == Cfg(
        n=3, widths=(32,), eta=1e-3
    )
    with pytest.raises(ConfigError, match=r"`n` must be int; got float 2.5"):
        resolve_config(Cfg, overrides=["n=2.5"])
    with pytest.raises(ConfigError, match=r"`lr` must be float; got bool True"):
        resolve_config(Cfg, overrides=["lr=true"])
    with pytest.raises(ConfigError, match=r"`widths\[1\]` must be int; got str 'x'"):
        resolve_config(Cfg, overrides=["widths=[1, 'x']"])
    with pytest.raises(ConfigError, match=r"`eta` must be float \| None; got str 'fast'"):
        resolve_config(Cfg, overrides=["eta=fast"])
    with pytest.raises(ConfigError, match=r"`n` must be >= 1; got 0"):  # __post_init__
        resolve_config(Cfg, overrides=["n=0"])


def test_unknown_key_lists_the_valid_ones():
    with pytest.raises(
        ConfigError,
        match=r"unknown config key 'lrr'; valid keys: n, lr, name, widths, names, eta, flag",
    ):
        resolve_config(Cfg, {"lrr": 1.0})


def test_bad_override_and_file_errors(tmp_path):
    with pytest.raises(ConfigError, match="override must look like key=value; got 'lr'"):
        parse_override("lr")
    bad = tmp_path / "bad.toml"
    bad.write_text("n = = 3\n")
    from deqlab.experiments.config import read_config_file

    with pytest.raises(ConfigError, match="is not valid TOML"):
        read_config_file(bad)
    with pytest.raises(ConfigError, match="does not exist"):
        read_config_file(tmp_path / "missing.toml")


def test_coerce_int_to_float_only():
    assert coerce_value("lr", 2, float) == 2.0 and isinstance(coerce_value("lr", 2, float), float)
    with pytest.raises(ConfigError):
        coerce_value("n", 2.0, int)


def test_a_repeated_data_set_is_refused_like_a_repeated_width(tmp_path):
    """Issue 26: two equal tasks would share one checkpoint and write their rows twice."""
    from typer.testing import CliRunner

    from deqlab.cli import app

    config = tmp_path / "twice.toml"
    config.write_text('datasets = ["sphere", "sphere"]\n')
    runs = [
        ["--set", 'datasets=["sphere","sphere"]'],
        ["--set", "datasets=sphere,sphere"],
        ["--config", str(config)],
    ]
    for extra in runs:
        args = ["reproduce", "ling2023-fig1", "--preset", "tiny", "--out", str(tmp_path / "r")]
        result = CliRunner().invoke(app, [*args, *extra])
        assert result.exit_code == 2, result.output
        said = " ".join(result.output.split())
        assert "`datasets` must not repeat a value" in said and "repeated: 'sphere'" in said
    assert f"config file '{config}'" in said  # the file is named beside the key
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").rglob("metrics.csv"))

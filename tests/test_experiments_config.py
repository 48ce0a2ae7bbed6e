"""Config resolution: defaults < preset < TOML file < --set, type-checked, unknown keys rejected."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from deqlab.experiments.base import Task, linear_fit
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


def test_task_key_must_be_file_safe():
    with pytest.raises(ValueError, match=r"`Task.key` must be non-empty"):
        Task("a/b")


def test_linear_fit_recovers_a_line_and_r2():
    x = [0.0, 1.0, 2.0, 3.0]
    slope, intercept, r2 = linear_fit(x, [1.0 - 2.0 * t for t in x])
    assert slope == pytest.approx(-2.0) and intercept == pytest.approx(1.0) and r2 == 1.0
    _, _, r2 = linear_fit(x, [0.0, 1.0, 0.0, 1.0])
    assert r2 == pytest.approx(0.2)  # closed form: 1 − SS_res/SS_tot = 1 − 0.8/1
    with pytest.raises(ValueError, match="same length >= 2"):
        linear_fit([1.0], [1.0])


def test_an_experiment_must_declare_its_presets_paper_setting_and_paper_record():
    from deqlab.experiments.base import Experiment
    from deqlab.papers import LING

    methods = {
        "tasks": lambda self, c: [],
        "run_task": lambda self, c, t, x: [],
        "plot": lambda self, c, r, d: [],
        "statements": lambda self, c, r: [],
        "name": "ling2023-x",
        "paper": LING,
    }
    presets = {"tiny": {}, "quick": {}, "paper": {}}
    with pytest.raises(TypeError, match=r"lacks the presets \['quick', 'paper'\]"):
        type("NoPresets", (Experiment,), {**methods, "presets": {"tiny": {}}})
    with pytest.raises(TypeError, match="NoSetting must declare its paper_setting"):
        type("NoSetting", (Experiment,), {**methods, "presets": presets})
    declared = {**methods, "presets": presets, "paper_setting": {}}
    for not_a_record in (None, "Ling et al., AISTATS 2023"):
        with pytest.raises(TypeError, match=r"`paper` must be a Paper record of deqlab\.papers"):
            type("NoPaper", (Experiment,), {**declared, "paper": not_a_record})
    with pytest.raises(TypeError, match="`name` must start with its paper's key 'ling2023-'"):
        type("Misnamed", (Experiment,), {**declared, "name": "hieu2022-x"})
    cited = type("Declared", (Experiment,), {**declared, "where": "Figure 1"})
    assert cited.paper_setting == {}
    assert cited.citation == f"{LING.full} (Figure 1)"


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

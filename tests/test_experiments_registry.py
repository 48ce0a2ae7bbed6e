"""Adding a paper is two folders, run end to end.

Follows the checklist of docs/architecture.md ("Adding a paper") on a toy paper whose two
folders are generated under ``tmp_path``: ``papers/toy2099/`` (the record and one claim, a
function of a typed measurement) and ``experiments/toy2099/`` (a run module that declares
the experiment, a report module that turns its rows into the measurement and draws a
figure). The experiment is found by name, run through the runner at its tiny preset, its
rows, figure and statement written and the statement cited to the toy paper; the claim is
registered with the papers'.
"""

from __future__ import annotations

import importlib
import sys
import textwrap

import pytest

import deqlab.experiments
from deqlab import papers
from deqlab.experiments import registry
from deqlab.experiments.config import ConfigError
from deqlab.statements import Run, Verdict, claims, statement

#: papers/toy2099/: the paper's record, and its one claim.
PAPER = {
    "__init__.py": '''
        """Toy 2099, the slope of a line: its record and its claims."""

        from deqlab.statements import Paper

        TOY = Paper("toy2099", "Toy 2099", "Toy, The slope of a line (Journal of Toys, 2099)")
    ''',
    "claims.py": '''
        """The claim of Figure 1: every fitted slope is the paper's 2."""

        from __future__ import annotations

        from collections.abc import Mapping

        from deqlab.papers.toy2099 import TOY
        from deqlab.statements import Run, Statement, claim, number, worst


        @claim
        def slope_is_two(runs: Mapping[str, Run]) -> Statement:
            """|slope − 2| ≤ 1e-9 at every point of every run (worst over them)."""
            errors = [abs(v - 2.0) for run in runs.values() for v in run["slope"]]
            value = worst(errors, "<=", 1e-9)
            return TOY.observation(
                "Figure 1",
                name="the least-squares slope is 2",
                quote="the slope is 2",
                value=value,
                relation="<=",
                threshold=1e-9,
                measured=f"|slope − 2| = {number(value)}",
            )
    ''',
}

#: experiments/toy2099/: its one experiment (run module + report module).
FOLDER = {
    "__init__.py": '''
        """Toy 2099: its one experiment."""

        from deqlab.experiments.toy2099 import line  # noqa: F401  (registers it)
    ''',
    "line_report.py": '''
        """Figure 1 of the toy paper: the rows as runs (the claim's measurement), the figure."""

        from __future__ import annotations

        from typing import TYPE_CHECKING

        from deqlab.papers.toy2099.claims import slope_is_two
        from deqlab.statements import runs_from_rows

        if TYPE_CHECKING:
            from deqlab.experiments.toy2099.line import LineConfig


        def statements(config: LineConfig, rows):
            return [slope_is_two(runs_from_rows(rows))]


        def plot(config: LineConfig, rows, directory):
            import matplotlib.pyplot as plt

            from deqlab.report import figure_style, save_figure

            with figure_style():
                fig, ax = plt.subplots()
                ax.plot([r["task"] for r in rows], [r["slope"] for r in rows], "o")
                ax.set(xlabel="seed", ylabel="fitted slope", title="Figure 1: the slope is 2")
                return save_figure(fig, directory, "line")
    ''',
    "line.py": '''
        """The toy experiment: least squares on y = slope·x, one task per seed."""

        from __future__ import annotations

        from dataclasses import dataclass
        from typing import ClassVar

        import torch

        from deqlab.experiments.base import Experiment, Task
        from deqlab.experiments.constraints import DISTINCT, NONEMPTY, Config, Interval
        from deqlab.experiments.deviations import not_given, paper
        from deqlab.experiments.registry import register
        from deqlab.experiments.toy2099 import line_report
        from deqlab.papers.toy2099 import TOY


        @dataclass(frozen=True)
        class LineConfig(Config):
            n: int = 100
            slope: float = 2.0
            seeds: tuple[int, ...] = (0,)

            constraints: ClassVar = {"n": Interval(2), "seeds": (NONEMPTY, Interval(0), DISTINCT)}


        PAPER_SETTING = {
            "n": paper(100, "Section 1"),
            "slope": paper(2.0, "Eq. (1)"),
            "seeds": not_given(),
        }


        @register
        class Toy2099Line(Experiment):
            slug = "line"
            title = "The slope of a line (Figure 1)"
            paper = TOY
            report = line_report
            where = "Figure 1"
            Config = LineConfig
            presets: ClassVar = {"tiny": {"n": 5, "seeds": (0, 1)}, "quick": {}, "paper": {}}
            paper_setting: ClassVar = PAPER_SETTING
            figure_captions: ClassVar = {"line": "The fitted slope of each seed."}

            def tasks(self, config):
                return [Task(f"seed{s}", {"seed": s}) for s in config.seeds]

            def run_task(self, config, task, ctx):
                g = torch.Generator().manual_seed(int(task.params["seed"]))
                x = torch.randn(config.n, dtype=torch.float64, generator=g)
                y = config.slope * x
                fitted = float(x @ y / (x @ x))
                return [{"task": task.key, "step": 0, "n": config.n, "slope": fitted}]

    ''',
}


@pytest.fixture
def toy_paper(tmp_path, monkeypatch):
    """The two folders of the toy paper, under ``tmp_path``; undone afterwards."""
    registry.experiment_names()  # load the real papers first: the copies below then hold
    # them, and the restored originals lack nothing that was imported meanwhile
    folder = tmp_path / "experiments" / "toy2099"
    folder.mkdir(parents=True)
    for name, text in FOLDER.items():
        (folder / name).write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    monkeypatch.setattr(
        deqlab.experiments, "__path__", [*deqlab.experiments.__path__, str(folder.parent)]
    )
    monkeypatch.setattr(statement, "_PAPERS", dict(statement._PAPERS))
    monkeypatch.setattr(claims, "_CLAIMS", dict(claims._CLAIMS))
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.setattr(registry, "_loaded", set(registry._loaded))
    # the paper's folder: its record and its claim
    record = tmp_path / "papers" / "toy2099"
    record.mkdir(parents=True)
    for name, text in PAPER.items():
        (record / name).write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    monkeypatch.setattr(papers, "__path__", [*papers.__path__, str(record.parent)])
    yield importlib.import_module("deqlab.papers.toy2099").TOY
    for module in [
        m
        for m in sys.modules
        if m.startswith(("deqlab.experiments.toy2099", "deqlab.papers.toy2099"))
    ]:
        del sys.modules[module]


def test_a_toy_paper_is_two_folders(toy_paper, tmp_path):
    from deqlab.runs.api import reproduce

    assert "toy2099-line" in registry.experiment_names()
    experiment = registry.get_experiment("toy2099-line")
    assert experiment.citation == f"{toy_paper.full} (Figure 1)"
    run = reproduce("toy2099-line", "tiny", out=tmp_path / "results", workers=1)
    assert run.status == "finished" and not run.reused
    assert [r["task"] for r in run.rows] == ["seed0", "seed1"]
    assert all(r["slope"] == pytest.approx(2.0, abs=1e-12) for r in run.rows)
    (s,) = run.statements
    assert s.verdict is Verdict.PASS and s.source.citation == "Toy 2099, Figure 1"
    assert [p.name for p in run.figures if p.suffix == ".png"] == ["line.png"]
    registered = papers.claims()
    assert "deqlab.papers.toy2099.claims.slope_is_two" in registered
    bent = {"s": Run("seed9", (0,), {"slope": (2.5,)})}
    assert registered["deqlab.papers.toy2099.claims.slope_is_two"](bent).verdict is Verdict.FAIL
    assert run.summary()["paper"] == experiment.citation
    with pytest.raises(ConfigError, match=r"`seeds` must not repeat a value"):
        reproduce("toy2099-line", "tiny", overrides=["seeds=3,3"], out=tmp_path / "r", workers=1)


def test_without_its_papers_folder_the_toy_paper_is_unknown(toy_paper, monkeypatch):
    monkeypatch.setattr(papers, "__path__", papers.__path__[:-1])
    assert "toy2099-line" not in registry.experiment_names()
    with pytest.raises(ConfigError, match="unknown experiment 'toy2099-line'"):
        registry.get_experiment("toy2099-line")

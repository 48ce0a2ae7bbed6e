"""Adding a paper: one Paper record (the registry line) + one folder, run end to end.

Follows the checklist of docs/architecture.md ("Adding a paper and an experiment") on a toy
paper whose folder is generated under ``tmp_path``: the experiment is found by name,
resolved, run through the runner at its tiny preset, its rows written and its statements
cited to the toy paper.
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
from deqlab.statements import Verdict, statement

#: papers/toy2099/__init__.py: the paper's record.
RECORD = '''
    """Toy 2099: a paper with one experiment (the checklist's test)."""

    from deqlab.statements import Paper

    TOY = Paper("toy2099", "Toy 2099", "Toy, The slope of a line (Journal of Toys, 2099)")
'''

#: experiments/toy2099/: the package and its one experiment (run module + report module).
FOLDER = {
    "__init__.py": '''
        """Toy 2099: a paper with one experiment (the checklist's test)."""

        from deqlab.experiments.toy2099 import line  # noqa: F401  (registers it)
    ''',
    "line_report.py": '''
        """Figure 1 of the toy paper: the fitted slope, checked against the paper's 2."""

        from __future__ import annotations

        from typing import TYPE_CHECKING

        from deqlab.papers.toy2099 import TOY
        from deqlab.statements import number, worst

        if TYPE_CHECKING:
            from deqlab.experiments.toy2099.line import LineConfig


        def statements(config: LineConfig, rows):
            errors = [abs(float(r["slope"]) - 2.0) for r in rows]
            value = worst(errors, "<=", 1e-9)
            return [
                TOY.observation(
                    "Figure 1",
                    name="the least-squares slope is 2",
                    quote="the slope is 2",
                    value=value,
                    relation="<=",
                    threshold=1e-9,
                    measured=f"|slope − 2| = {number(value)}",
                )
            ]
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
            where = "Figure 1"
            Config = LineConfig
            presets: ClassVar = {"tiny": {"n": 5, "seeds": (0, 1)}, "quick": {}, "paper": {}}
            paper_setting: ClassVar = PAPER_SETTING

            def tasks(self, config):
                return [Task(f"seed{s}", {"seed": s}) for s in config.seeds]

            def run_task(self, config, task, ctx):
                g = torch.Generator().manual_seed(int(task.params["seed"]))
                x = torch.randn(config.n, dtype=torch.float64, generator=g)
                y = config.slope * x
                fitted = float(x @ y / (x @ x))
                return [{"task": task.key, "n": config.n, "slope": fitted}]

            def plot(self, config, rows, directory):
                return []

            def statements(self, config, rows):
                return line_report.statements(config, rows)
    ''',
}


@pytest.fixture
def toy_paper(tmp_path, monkeypatch):
    """The folder under ``experiments/`` and the one registry line, undone afterwards."""
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
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.setattr(registry, "_loaded", set(registry._loaded))
    # the paper's folder: its record in papers/toy2099/__init__.py
    record = tmp_path / "papers" / "toy2099"
    record.mkdir(parents=True)
    (record / "__init__.py").write_text(textwrap.dedent(RECORD).lstrip(), encoding="utf-8")
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
    assert run.summary()["paper"] == experiment.citation
    with pytest.raises(ConfigError, match=r"`seeds` must not repeat a value"):
        reproduce("toy2099-line", "tiny", overrides=["seeds=3,3"], out=tmp_path / "r", workers=1)


def test_without_its_papers_folder_the_toy_paper_is_unknown(toy_paper, monkeypatch):
    monkeypatch.setattr(papers, "__path__", papers.__path__[:-1])
    assert "toy2099-line" not in registry.experiment_names()
    with pytest.raises(ConfigError, match="unknown experiment 'toy2099-line'"):
        registry.get_experiment("toy2099-line")

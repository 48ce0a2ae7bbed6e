"""The experiment contract: a config dataclass, presets, tasks, a tidy run, plots and claims.

An experiment reproduces one figure or claim of a paper. It is a subclass of
:class:`Experiment` with

- ``paper`` (its :class:`~deqlab.statements.Paper` record in ``deqlab.papers.<key>``),
  ``slug`` (its ``name`` is ``<key>-<slug>``) and ``where`` in the paper (e.g. "Figure 1"):
  the experiment's ``citation``;
- ``Config``: a frozen dataclass whose defaults are the paper's settings (seed included),
  with its fields' constraints declared (:mod:`deqlab.experiments.constraints`);
- ``presets``: named partial overrides; ``tiny`` (seconds, used by the tests), ``quick``
  (minutes on 2 CPU cores) and ``paper`` (the paper's sizes) are required;
- :meth:`Experiment.tasks`: the independent units of a sweep (one per width, dataset, seed…),
  run by an executor, possibly in other processes;
- :meth:`Experiment.run_task`: computes one task and returns tidy rows (one ``dict`` per
  measurement), checkpointing through :class:`TaskContext` so that an interrupted task
  resumes with identical numbers;
- ``report``: the module that reads the tidy table back (compute and plotting are
  separate): its ``statements(config, rows)`` turns the rows into the measurements the
  paper's claims take and returns their :class:`~deqlab.statements.Statement` s, its
  ``plot(config, rows, directory)`` draws the figures (:meth:`Experiment.statements`,
  :meth:`Experiment.plot`);
- ``paper_setting``: for every config field, the paper's value, "not given", or a
  measurement setting (:mod:`deqlab.experiments.deviations`), from which each run's
  deviations from the paper are computed.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

from deqlab.experiments.config import ConfigError, read_config_file, resolve_config
from deqlab.experiments.deviations import Deviation, PaperValue, deviations
from deqlab.statements import Paper, Statement

REQUIRED_PRESETS = ("tiny", "quick", "paper")

Row = dict[str, object]


@dataclass(frozen=True)
class Task:
    """One independent unit of a sweep. ``key`` is unique in the run and safe as a file name."""

    key: str
    params: Mapping[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.key or not all(c.isalnum() or c in "-_." for c in self.key):
            raise ValueError(
                f"`Task.key` must be non-empty and use only letters, digits, '-', '_', '.'; "
                f"got {self.key!r}"
            )


@dataclass
class TaskContext:
    """What a running task may use: its device, checkpoints and a progress callback.

    ``resume()`` returns the ``(state, rows)`` of the last checkpoint or ``None``;
    ``checkpoint(state, rows)`` persists them atomically (the store decides where);
    ``progress(done, total)`` reports steps. ``checkpoint_every`` is a hint in steps.
    """

    device: str
    checkpoint_every: int
    load: Callable[[], tuple[Any, list[Row]] | None]
    save: Callable[[Any, list[Row]], None]
    progress: Callable[[int, int], None] = lambda done, total: None

    def resume(self) -> tuple[Any, list[Row]] | None:
        return self.load()

    def checkpoint(self, state: Any, rows: list[Row]) -> None:
        self.save(state, rows)


class Experiment(ABC):
    """Base class of a reproducible experiment; see the module docstring for the contract."""

    #: ``<paper key>-<slug>``, set at class creation.
    name: ClassVar[str]
    #: The experiment's part of its name, after its paper's key (``"fig1"``).
    slug: ClassVar[str]
    title: ClassVar[str]
    #: The paper reproduced (its record in ``deqlab.papers.<key>``).
    paper: ClassVar[Paper]
    #: The module of ``statements(config, rows)`` and ``plot(config, rows, directory)``.
    report: ClassVar[ModuleType]
    #: Where in the paper (e.g. ``"Figure 1, Appendix D"``), cited after the paper.
    where: ClassVar[str] = ""
    #: ``"<full citation> (<where>)"``, set at class creation: what summaries and lists show.
    citation: ClassVar[str]
    Config: ClassVar[type]
    presets: ClassVar[Mapping[str, Mapping[str, object]]]
    #: Column name -> meaning, for the tidy ``metrics.csv`` (shown by ``deqlab show``).
    metric_columns: ClassVar[Mapping[str, str]] = {}
    #: Figure file stem -> caption, a sentence saying what the figure shows and its setting.
    figure_captions: ClassVar[Mapping[str, str]] = {}
    #: Config field -> what the paper used (see :mod:`deqlab.experiments.deviations`).
    paper_setting: ClassVar[Mapping[str, PaperValue]]
    default_checkpoint_every: ClassVar[int] = 50

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if getattr(cls, "__abstractmethods__", None):
            return
        missing = [p for p in REQUIRED_PRESETS if p not in getattr(cls, "presets", {})]
        if missing:
            raise TypeError(f"experiment {cls.__name__} lacks the presets {missing}")
        if not isinstance(getattr(cls, "paper_setting", None), Mapping):
            raise TypeError(f"experiment {cls.__name__} must declare its paper_setting")
        cls.name = _name(cls)
        cls.citation = _citation(cls)

    def resolve(
        self,
        preset: str = "quick",
        *,
        config_file: Path | str | None = None,
        overrides: Sequence[str] = (),
    ) -> Any:
        """The config of ``preset``, then TOML ``config_file``, then ``key=value`` overrides."""
        if preset not in self.presets:
            valid = ", ".join(self.presets)
            raise ConfigError(f"unknown preset {preset!r} for {self.name}; valid presets: {valid}")
        layers: list[Mapping[str, object]] = [self.presets[preset]]
        if config_file is not None:
            layers.append(read_config_file(config_file))
        return resolve_config(self.Config, *layers, overrides=overrides)

    @abstractmethod
    def tasks(self, config: Any) -> list[Task]:
        """The independent tasks of this config, in the order the report shows them."""

    @abstractmethod
    def run_task(self, config: Any, task: Task, ctx: TaskContext) -> list[Row]:
        """Compute ``task`` and return its tidy rows; resume from ``ctx.resume()`` if set."""

    def plot(self, config: Any, rows: list[Row], directory: Path) -> list[Path]:
        """Draw the figures from the tidy rows into ``directory``; return the files written
        (``report.plot``)."""
        return self.report.plot(config, rows, directory)

    def statements(self, config: Any, rows: list[Row]) -> list[Statement]:
        """The checked statements, computed from the tidy rows (NOT MEASURED where empty;
        ``report.statements``)."""
        return self.report.statements(config, rows)

    def datasets(self, config: Any) -> tuple[str, ...]:
        """The data sets a run of ``config`` reads (its ``dataset`` / ``datasets`` field)."""
        if hasattr(config, "datasets"):
            return tuple(config.datasets)
        return (config.dataset,) if hasattr(config, "dataset") else ()

    def deviations(self, config: Any) -> list[Deviation]:
        """How ``config`` differs from the paper's setting (every substitution and choice)."""
        return deviations(config, self.paper_setting)


def _name(cls: type[Experiment]) -> str:
    """``<paper key>-<slug>``; refuses a paper that is not a :class:`Paper` record, a
    declared ``name`` and a report without ``statements`` and ``plot``."""
    paper = getattr(cls, "paper", None)
    if not isinstance(paper, Paper):
        raise TypeError(
            f"experiment {cls.__name__}: `paper` must be a Paper record of deqlab.papers; "
            f"got {paper!r}"
        )
    if "name" in vars(cls):
        raise TypeError(
            f"experiment {cls.__name__}: declare `slug`, not `name` (the name is "
            f"{paper.key + '-'!r} and the slug)"
        )
    slug = getattr(cls, "slug", "")
    if not (isinstance(slug, str) and slug and all(c.isalnum() or c == "-" for c in slug)):
        raise TypeError(
            f"experiment {cls.__name__}: `slug` must be a non-empty str of letters, digits "
            f"and '-'; got {slug!r}"
        )
    own = [m for m in ("statements", "plot") if getattr(cls, m) is getattr(Experiment, m)]
    missing = [m for m in own if not callable(getattr(getattr(cls, "report", None), m, None))]
    if missing:
        raise TypeError(
            f"experiment {cls.__name__}: `report` must be a module with {' and '.join(missing)}"
        )
    return f"{paper.key}-{slug}"


def _citation(cls: type[Experiment]) -> str:
    """``"<full citation> (<where>)"``."""
    paper = cls.paper
    return f"{paper.full} ({cls.where})" if cls.where else paper.full

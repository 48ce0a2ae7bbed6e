"""The one-call Python API: ``deqlab.reproduce(name, ...)`` returns a :class:`Run`.

::

    import deqlab

    run = deqlab.reproduce("ling2023-fig1", preset="quick", overrides={"steps": 100})
    run.status                      # "finished" (or "failed": see run.failed_tasks)
    for s in run.statements:        # deqlab.statements.Statement
        print(s.verdict.value, s.name, s.measured, s.expected)
    run.deviations                  # differences from the paper's setting
    run.metrics[:3]                 # the tidy metrics.csv as a list of row dicts
    run.path, run.report            # the run directory and its HTML report

It does what ``deqlab reproduce`` does (same run store, same reuse and resume), with the
same checks: ``overrides`` given as a dict are type-checked like ``--set`` values.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from deqlab.experiments.base import Experiment
from deqlab.experiments.config import ConfigError, read_config_file, resolve_config
from deqlab.experiments.deviations import Deviation
from deqlab.runs.executors import Executor, make_executor
from deqlab.runs.runner import RunOutcome, check_device
from deqlab.runs.runner import reproduce as _run
from deqlab.runs.tables import read_rows_csv
from deqlab.statements import Counts, Statement

Overrides = Mapping[str, object] | Sequence[str] | None


@dataclass
class Run:
    """A run of an experiment, as :func:`reproduce` left it.

    ``status``: ``finished`` or ``failed`` (some tasks failed: ``failed_tasks``);
    ``reused``: an earlier finished run of the same config was returned as it is;
    ``statements``: the checked statements with their verdicts; ``deviations``: how the
    config differs from the paper; ``metrics``: the rows of ``metrics.csv`` (read on first
    use); ``report``: the HTML report; ``warnings``: e.g. a reused run computed by another
    deqlab version; ``task_errors``: the whole error text of each failed task.
    """

    experiment: str
    preset: str
    config: Any
    path: Path
    status: str
    reused: bool
    device: str
    statements: list[Statement] = field(default_factory=list)
    deviations: list[Deviation] = field(default_factory=list)
    failed_tasks: list[str] = field(default_factory=list)
    report: Path | None = None
    warnings: list[str] = field(default_factory=list)
    task_errors: dict[str, str] = field(default_factory=dict)

    @property
    def config_hash(self) -> str:
        """The run's hash (the name of its directory)."""
        return self.path.name

    @property
    def metrics_file(self) -> Path:
        return self.path / "metrics.csv"

    @cached_property
    def metrics(self) -> list[dict[str, object]]:
        """The tidy rows of ``metrics.csv`` (ints, floats, bools parsed; blanks as None)."""
        return read_rows_csv(self.metrics_file) if self.metrics_file.is_file() else []

    @property
    def counts(self) -> Counts:
        """Verdicts by kind (``counts.sentence()``, ``counts.failed``)."""
        return Counts.of(self.statements)

    @property
    def ok(self) -> bool:
        """True when the run finished and no statement FAILs."""
        return self.status == "finished" and not self.counts.failed

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (what ``deqlab reproduce --json`` prints)."""
        return {
            "experiment": self.experiment,
            "preset": self.preset,
            "config_hash": self.config_hash,
            "device": self.device,
            "status": self.status,
            "reused": self.reused,
            "path": str(self.path),
            "report": None if self.report is None else str(self.report),
            "failed_tasks": list(self.failed_tasks),
            "task_errors": dict(self.task_errors),
            "warnings": list(self.warnings),
            "verdicts": self.counts.as_dict(),
            "verdict_sentence": self.counts.sentence(),
            "statements": [s.as_dict() for s in self.statements],
            "deviations": [d.as_dict() for d in self.deviations],
            "metrics_file": str(self.metrics_file),
        }

    def summary(self) -> dict[str, Any]:
        """The run's ``summary.json``."""
        import json

        return json.loads((self.path / "summary.json").read_text(encoding="utf-8"))

    def __repr__(self) -> str:
        return (
            f"Run({self.experiment!r}, preset={self.preset!r}, status={self.status!r}, "
            f"reused={self.reused}, verdicts={self.counts.sentence()!r}, path='{self.path}')"
        )


def resolve(
    experiment: Experiment,
    preset: str,
    *,
    config_file: Path | str | None = None,
    overrides: Overrides = None,
) -> Any:
    """The config of ``preset``, then ``config_file``, then ``overrides`` (later wins).

    ``overrides``: a mapping ``{key: value}`` (values type-checked against the config's
    fields, exactly as ``--set`` values are) or a sequence of ``"key=value"`` strings.
    Raises :class:`~deqlab.experiments.config.ConfigError` naming the offending key.
    """
    if overrides is None or not isinstance(overrides, Mapping):
        if isinstance(overrides, str | bytes):
            raise TypeError(
                "`overrides` must be a dict {key: value} or a list of 'key=value' strings; "
                f"got the string {overrides!r}"
            )
        return experiment.resolve(preset, config_file=config_file, overrides=overrides or ())
    if preset not in experiment.presets:
        experiment.resolve(preset)  # raises the unknown-preset error listing the valid ones
    layers: list[Mapping[str, object]] = [experiment.presets[preset]]
    if config_file is not None:
        layers.append(read_config_file(config_file))
    bad = [k for k in overrides if not isinstance(k, str)]
    if bad:
        raise ConfigError(f"override keys must be strings; got {bad[0]!r}")
    layers.append(dict(overrides))
    return resolve_config(experiment.Config, *layers)


@dataclass(frozen=True)
class Prepared:
    """A checked request: the experiment, its resolved config, the device, the executor."""

    experiment: Experiment
    config: Any
    preset: str
    device: str
    executor: Executor


def prepare(
    name: str,
    preset: str = "quick",
    *,
    overrides: Overrides = None,
    config_file: Path | str | None = None,
    device: str = "cpu",
    workers: int | None = None,
    executor: str = "local",
    address: str | None = None,
) -> Prepared:
    """Check every argument of a run before anything runs (raises ValueError/TypeError).

    ``workers=None``: one process per CPU core on ``cpu``, 1 on a CUDA device.
    """
    from deqlab.experiments.registry import get_experiment

    experiment = get_experiment(name)
    config = resolve(experiment, preset, config_file=config_file, overrides=overrides)
    device = check_device(device)
    if workers is None and device.startswith("cuda"):
        workers = 1  # one process per GPU
    pool = make_executor(executor, workers=workers, address=address)
    return Prepared(experiment, config, preset, device, pool)


def execute(
    prepared: Prepared,
    *,
    out: Path | str = "results",
    force: bool = False,
    checkpoint_every: int | None = None,
    quiet: bool = True,
    on_warning: Callable[[str], None] | None = None,
) -> Run:
    """Run (or reuse, or resume) a prepared request; warnings are left in ``Run.warnings``
    (and passed to ``on_warning`` as they arise)."""
    outcome = _run(
        prepared.experiment,
        prepared.config,
        preset=prepared.preset,
        out=out,
        device=prepared.device,
        executor=prepared.executor,
        checkpoint_every=checkpoint_every,
        quiet=quiet,
        force=force,
        on_warning=on_warning,
    )
    return _as_run(prepared, outcome)


def _as_run(prepared: Prepared, outcome: RunOutcome) -> Run:
    return Run(
        experiment=prepared.experiment.name,
        preset=prepared.preset,
        config=prepared.config,
        path=outcome.run.path,
        status=outcome.status,
        reused=outcome.reused,
        device=prepared.device,
        statements=list(outcome.statements),
        deviations=list(outcome.deviations),
        failed_tasks=list(outcome.failed_tasks),
        report=outcome.report,
        warnings=list(outcome.warnings),
        task_errors=dict(outcome.task_errors),
    )


def reproduce(
    name: str,
    preset: str = "quick",
    *,
    overrides: Overrides = None,
    out: Path | str = "results",
    device: str = "cpu",
    workers: int | None = None,
    force: bool = False,
    config_file: Path | str | None = None,
    executor: str = "local",
    address: str | None = None,
    checkpoint_every: int | None = None,
    quiet: bool = True,
) -> Run:
    """Run the registered experiment ``name`` (or reuse / resume its run); return the Run.

    ``preset``: ``tiny`` (seconds), ``quick`` (minutes on 2 CPU cores) or ``paper``;
    ``overrides``: ``{key: value}`` (type-checked like ``--set``) or ``["key=value", ...]``;
    ``config_file``: a TOML file applied before the overrides; ``out``: the run store;
    ``device``: ``cpu``, ``cuda`` or ``cuda:N``; ``workers``: parallel tasks (``None``: one
    process per CPU core on cpu, 1 on CUDA; ``1`` runs the tasks in this process — a
    script that uses more must guard its entry point with ``if __name__ == "__main__":``,
    as processes are started with ``spawn``); ``executor``: ``local`` or ``ray``
    (``address``: a Ray cluster); ``force``: recompute even a finished run;
    ``quiet=False`` shows progress bars on stderr.

    A reused run computed by another deqlab version or commit raises a
    :class:`UserWarning` naming both (and keeps it in ``Run.warnings``). Raises
    :class:`~deqlab.experiments.config.ConfigError` (a ValueError) for an unknown
    experiment, preset or key, a wrongly typed or out-of-range value, or a data set that is
    not on this machine (:class:`~deqlab.runs.runner.DataError`, with where it was looked
    for and how to fetch it), before anything runs; ``KeyboardInterrupt`` (on SIGTERM:
    :class:`~deqlab.runs.runner.Terminated`) leaves the run ``interrupted``, resumable.
    """
    prepared = prepare(
        name,
        preset,
        overrides=overrides,
        config_file=config_file,
        device=device,
        workers=workers,
        executor=executor,
        address=address,
    )
    run = execute(prepared, out=out, force=force, checkpoint_every=checkpoint_every, quiet=quiet)
    for message in run.warnings:
        warnings.warn(message, UserWarning, stacklevel=2)
    return run

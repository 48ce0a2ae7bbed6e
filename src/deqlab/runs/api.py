"""The one-call Python API: ``deqlab.reproduce(name, ...)`` returns a :class:`Run`.

::

    import deqlab

    run = deqlab.reproduce("ling2023-fig1", preset="quick", overrides={"steps": 100})
    run.status                      # "finished" (or "failed": see run.failed_tasks)
    for s in run.statements:        # deqlab.statements.Statement
        print(s.verdict.value, s.name, s.measured, s.expected)
    run.deviations                  # differences from the paper's setting
    run.metrics.head()              # the tidy metrics.csv as a pandas DataFrame
    run.path, run.report            # the run directory and its HTML report

It does what ``deqlab reproduce`` does (same run store, same reuse and resume), with the
same checks: ``overrides`` given as a dict are type-checked like ``--set`` values.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deqlab.devices import check_device
from deqlab.experiments.base import Experiment
from deqlab.experiments.config import ConfigError, read_config_file, resolve_config
from deqlab.runs.executors import Executor, make_executor
from deqlab.runs.run import Run
from deqlab.runs.runner import reproduce as _run

Overrides = Mapping[str, object] | Sequence[str] | None


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
    return _run(
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
    not on this machine (:class:`~deqlab.runs.data_check.DataError`, with where it was looked
    for and how to fetch it), before anything runs; ``KeyboardInterrupt`` (on SIGTERM:
    :class:`~deqlab.runs.signals.Terminated`) leaves the run ``interrupted``, resumable.
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

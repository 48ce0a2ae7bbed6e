"""``reproduce``: config → tasks on an executor → tidy table → statements, figures, report.

A finished run (same experiment, resolved config and device type) is reused as it is (its
statements, deviations and figures are re-derived from ``metrics.csv`` when the summary
was written in an older format); an interrupted or failed one resumes: its finished tasks
are read from their checkpoints and the others continue from their last checkpoint.
``force=True`` discards the run's checkpoints and results and computes it again.

The deqlab version and git commit that computed a run are recorded in its summary
(``environment``, :func:`deqlab.report.collect_environment`). A finished run computed by
another version or commit is still reused, with a warning naming both
(:attr:`RunOutcome.warnings`); ``force=True`` recomputes it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from deqlab.experiments.base import Experiment, Row
from deqlab.experiments.config import ConfigError, config_hash
from deqlab.experiments.deviations import Deviation
from deqlab.runs.executors import Executor, LocalExecutor, TaskResult, TaskSpec
from deqlab.runs.store import RunDir, RunStore, now_iso, read_rows_csv, write_rows_csv
from deqlab.statements import Counts, Statement

#: The device forms ``--device`` accepts (N: a CUDA device index).
DEVICES = ("cpu", "cuda", "cuda:N")
#: Version of summary.json's layout; a reused run of another format is re-derived.
SUMMARY_FORMAT = 2


@dataclass
class RunOutcome:
    """What :func:`reproduce` did: where the run lives and how it ended."""

    run: RunDir
    status: str
    reused: bool
    statements: list[Statement] = field(default_factory=list)
    deviations: list[Deviation] = field(default_factory=list)
    failed_tasks: list[str] = field(default_factory=list)
    report: Path | None = None
    #: Warnings for the caller (e.g. a reused run computed by another deqlab version).
    warnings: list[str] = field(default_factory=list)

    @property
    def counts(self) -> Counts:
        """Verdicts by kind."""
        return Counts.of(self.statements)


def check_device(device: str) -> str:
    """``cpu``, ``cuda`` or ``cuda:N`` (returned normalised); the CUDA device must exist.

    Raises :class:`ConfigError` (one line) for another form, when CUDA is not available,
    or when ``N`` is not below ``torch.cuda.device_count()``.
    """
    if not isinstance(device, str):
        raise ConfigError(f"`device` must be a str; got {type(device).__name__} {device!r}")
    kind, colon, index = device.strip().partition(":")
    if kind not in ("cpu", "cuda") or (colon and (kind == "cpu" or not index.isdigit())):
        raise ConfigError(
            f"`device` must be cpu, cuda or cuda:N (N a CUDA device index); got {device!r}"
        )
    if kind == "cpu":
        return "cpu"
    if not torch.cuda.is_available():
        raise ConfigError(
            f"device {device!r} was requested but CUDA is not available (torch {torch.__version__})"
        )
    if not colon:
        return "cuda"
    count = torch.cuda.device_count()
    if int(index) >= count:
        raise ConfigError(
            f"device {device!r} names CUDA device {int(index)}, but this machine has {count} "
            f"(cuda:0 to cuda:{count - 1})"
        )
    return f"cuda:{int(index)}"


def device_type(device: str) -> str:
    """``cpu`` or ``cuda``: the part of a device that decides a run's numbers (its hash)."""
    return device.partition(":")[0]


def current_provenance() -> dict[str, Any]:
    """The deqlab version, git commit and dirtiness of this process, as the summary records."""
    import deqlab
    from deqlab.report.environment import git_state

    commit, dirty = git_state(Path(deqlab.__file__).resolve().parent)
    return {"deqlab": deqlab.__version__, "git_commit": commit, "git_dirty": dirty}


def describe_provenance(record: Any) -> str:
    """E.g. ``deqlab 0.1.0 (commit 4cf640f1d2e3, modified)``; ``unrecorded`` parts say so."""
    record = record if isinstance(record, dict) else {}
    version = record.get("deqlab") or "(unrecorded version)"
    commit = record.get("git_commit")
    where = f"commit {str(commit)[:12]}" if commit else "no git commit"
    if commit and record.get("git_dirty"):
        where += ", modified"
    return f"deqlab {version} ({where})"


def provenance_warning(run_path: Path, summary: dict[str, Any]) -> str | None:
    """The warning for reusing ``summary``'s run under another deqlab version or commit."""
    recorded = summary.get("environment")
    recorded = recorded if isinstance(recorded, dict) else {}
    current = current_provenance()
    if all(recorded.get(k) == current[k] for k in ("deqlab", "git_commit")):
        return None
    return (
        f"reusing the finished run {run_path}, computed by {describe_provenance(recorded)}; "
        f"this is {describe_provenance(current)}. Recompute it with --force (force=True)."
    )


def reproduce(
    experiment: Experiment,
    config: Any,
    *,
    preset: str,
    out: Path | str = "results",
    device: str = "cpu",
    executor: Executor | None = None,
    checkpoint_every: int | None = None,
    quiet: bool = False,
    console: Console | None = None,
    force: bool = False,
) -> RunOutcome:
    """Run (or reuse, or resume) ``experiment`` at ``config``; write the run directory.

    ``device``: ``cpu``, ``cuda`` or ``cuda:N`` (:func:`check_device`); runs on any CUDA
    device share one hash. ``force``: discard the run's checkpoints and results first.
    """
    device = check_device(device)
    store = RunStore(out)
    digest = config_hash(experiment.name, config, device=device_type(device))
    run = store.run_dir(experiment.name, digest)
    known = store.lookup(experiment.name, digest)
    if force:
        run.clear()
    elif known and known["status"] == "finished" and run.summary_file.exists():
        summary = run.read_summary()
        if summary.get("status") == "finished":
            return _reuse(experiment, config, run, summary)

    run = store.begin(experiment.name, digest, preset=preset, device=device, config=config)
    started, start = now_iso(), time.perf_counter()
    base_summary = {
        "experiment": experiment.name,
        "title": experiment.title,
        "paper": experiment.paper,
        "config_hash": digest,
        "preset": preset,
        "device": device,
        "started": started,
    }
    run.write_summary({**base_summary, "status": "running"})
    tasks = experiment.tasks(config)
    specs = [
        TaskSpec(
            type(experiment),
            config,
            task,
            str(run.path),
            device,
            checkpoint_every or experiment.default_checkpoint_every,
        )
        for task in tasks
    ]
    results: dict[str, TaskResult] = {}

    def record(result: TaskResult) -> None:
        results[result.key] = result
        store.record_task(
            experiment.name,
            digest,
            result.key,
            status=result.status,
            error=result.error,
            wall_s=result.wall_s,
        )

    try:
        _run_with_progress(executor or LocalExecutor(1), specs, record, quiet, console)
        ordered = [results[t.key] for t in tasks]
        write_rows_csv(run.metrics_file, [row for r in ordered for row in r.rows])
        rows = read_rows_csv(run.metrics_file)  # statements and plots read the table back
        derived = _derive(experiment, config, run, rows)
    except BaseException as err:
        status = "interrupted" if isinstance(err, KeyboardInterrupt) else "failed"
        store.finish(
            experiment.name,
            digest,
            status=status,
            wall_s=time.perf_counter() - start,
            n_tasks=len(tasks),
            n_failed=sum(r.status == "failed" for r in results.values()),
            error=type(err).__name__ + (f": {err}" if str(err) else ""),
        )
        raise
    failed = [r.key for r in ordered if r.status == "failed"]
    status = "failed" if failed else "finished"
    error = "; ".join(f"{r.key}: {r.error}" for r in ordered if r.error) or None
    from deqlab.report import collect_environment, write_report

    wall_s = time.perf_counter() - start
    run.write_summary(
        {
            **base_summary,
            **derived,
            "status": status,
            "finished": now_iso(),
            "wall_s": wall_s,
            "tasks": [
                {
                    "key": r.key,
                    "status": r.status,
                    "error": r.error,
                    "wall_s": r.wall_s,
                    "reused": r.reused,
                    "traceback": r.traceback,
                }
                for r in ordered
            ],
            "environment": collect_environment(device=device),
        }
    )
    store.finish(
        experiment.name,
        digest,
        status=status,
        wall_s=wall_s,
        n_tasks=len(tasks),
        n_failed=len(failed),
        error=error,
    )
    report = write_report(run.path)
    statements = [Statement.from_dict(d) for d in derived["statements"]]
    deviations = experiment.deviations(config)
    return RunOutcome(run, status, False, statements, deviations, failed, report)


def _derive(experiment: Experiment, config: Any, run: RunDir, rows: list[Row]) -> dict:
    """The summary's derived part: statements, verdict counts, deviations, figures."""
    statements = experiment.statements(config, rows)
    figures = experiment.plot(config, rows, run.figures_dir) if rows else []
    return {
        "format": SUMMARY_FORMAT,
        "statements": [s.as_dict() for s in statements],
        "verdicts": Counts.of(statements).as_dict(),
        "verdict_sentence": Counts.of(statements).sentence(),
        "deviations": [d.as_dict() for d in experiment.deviations(config)],
        "figures": [
            {"path": str(p.relative_to(run.path)), "caption": _caption(experiment, p)}
            for p in figures
        ],
    }


def _caption(experiment: Experiment, figure: Path) -> str:
    return experiment.figure_captions.get(figure.stem, figure.stem.replace("_", " "))


def _reuse(experiment: Experiment, config: Any, run: RunDir, summary: dict) -> RunOutcome:
    """A finished run as it is; statements and figures re-derived if its format is older."""
    from deqlab.report import write_report

    report = run.path / "report.html"
    if summary.get("format") != SUMMARY_FORMAT:
        summary = {**summary, **_derive(experiment, config, run, read_rows_csv(run.metrics_file))}
        run.write_summary(summary)
        report = write_report(run.path)
    elif not report.exists():
        report = write_report(run.path)
    statements = [Statement.from_dict(d) for d in summary["statements"]]
    warning = provenance_warning(run.path, summary)
    return RunOutcome(
        run, "finished", True, statements, experiment.deviations(config), [], report,
        [warning] if warning else [],
    )  # fmt: skip


def _run_with_progress(
    executor: Executor,
    specs: Sequence[TaskSpec],
    on_result: Any,
    quiet: bool,
    console: Console | None,
) -> None:
    """Run ``specs`` on ``executor`` under rich progress bars (none when ``quiet``)."""
    if quiet:
        executor.run(specs, on_result, lambda key, done, total: None)
        return
    progress = Progress(
        TextColumn("{task.description:<24}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console or Console(stderr=True),
        transient=False,
    )
    with progress:
        overall = progress.add_task("tasks", total=len(specs))
        bars: dict[str, Any] = {}

        def on_progress(key: str, done: int, total: int) -> None:
            if key not in bars:
                bars[key] = progress.add_task(key, total=total)
            progress.update(bars[key], completed=done, total=total)

        def finished(result: TaskResult) -> None:
            progress.advance(overall)
            if result.key in bars:
                progress.remove_task(bars.pop(result.key))
            if result.status == "failed":
                progress.console.print(f"[red]task {result.key} failed:[/red] {result.error}")
            on_result(result)

        executor.run(specs, finished, on_progress)

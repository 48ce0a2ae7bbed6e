"""``reproduce``: config → tasks on an executor → tidy table → statements, figures, report.

A finished run (same experiment, resolved config and device) is reused as it is (its
statements, deviations and figures are re-derived from ``metrics.csv`` when the summary
was written in an older format); an interrupted or failed one resumes: its finished tasks
are read from their checkpoints and the others continue from their last checkpoint.
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

from deqlab._checks import check_choice
from deqlab.experiments.base import Experiment, Row
from deqlab.experiments.config import ConfigError, config_hash
from deqlab.experiments.deviations import Deviation
from deqlab.runs.executors import Executor, LocalExecutor, TaskResult, TaskSpec
from deqlab.runs.store import RunDir, RunStore, now_iso, read_rows_csv, write_rows_csv
from deqlab.statements import Counts, Statement

DEVICES = ("cpu", "cuda")
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

    @property
    def counts(self) -> Counts:
        """Verdicts by kind."""
        return Counts.of(self.statements)


def check_device(device: str) -> str:
    """``cpu`` or ``cuda``; ``cuda`` must be available."""
    check_choice("device", device, DEVICES)
    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError(
            f"device 'cuda' was requested but CUDA is not available (torch {torch.__version__})"
        )
    return device


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
) -> RunOutcome:
    """Run (or reuse, or resume) ``experiment`` at ``config``; write the run directory."""
    check_device(device)
    store = RunStore(out)
    digest = config_hash(experiment.name, config, device=device)
    run = store.run_dir(experiment.name, digest)
    known = store.lookup(experiment.name, digest)
    if known and known["status"] == "finished" and run.summary_file.exists():
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
    return RunOutcome(run, "finished", True, statements, experiment.deviations(config), [], report)


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

"""``reproduce``: config → tasks on an executor → tidy table → statements, figures, report.

A finished run (same experiment, resolved config and device type) is reused as it is, once
its result files (metrics.csv, the figures) match the sizes and SHA-256 digests its
summary.json records (its statements, deviations and figures are re-derived from
``metrics.csv`` when the summary was written in an older format). A run whose files do not
match, or whose summary.json cannot be read, is rebuilt from its checkpoints (tasks without
a finished checkpoint are computed again), and says so: a warning and a note in the
summary. An interrupted or failed run resumes: its finished tasks are read from their
checkpoints and the others continue from their last checkpoint; a checkpoint that cannot
be read is set aside as ``*.corrupt`` and its task restarts from scratch.
``force=True`` discards the run's checkpoints and results and computes it again.

One process at a time computes a run: it holds the run directory's lock
(:class:`~deqlab.runs.lock.RunLock`); a second ``reproduce`` of the same run waits for
it, then reuses the finished run. SIGTERM (and SIGHUP) stop a run like Ctrl-C: it is
recorded as ``interrupted`` (:class:`~deqlab.runs.signals.Terminated`). Data sets the
tasks read are checked before anything is created
(:func:`~deqlab.runs.data_check.check_datasets`): a run refused there leaves nothing
behind, not even an index.

The deqlab version and git commit that computed a run are recorded in its summary
(``environment``, :func:`deqlab.report.collect_environment`). A finished run computed by
another version or commit is still reused, with a warning naming both
(:attr:`Run.warnings`); ``force=True`` recomputes it.

Under the run's lock, :func:`reproduce` goes reuse → collect checkpoints → execute →
finalize: :func:`_reusable` finds a finished run whose files match; else
:func:`_collect_checkpoints` reads the finished tasks, :func:`_execute` runs the others and
:func:`_finalize` writes metrics.csv, summary.json, the index's end and the report.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from deqlab.devices import check_device, device_type
from deqlab.experiments.base import Experiment, Task
from deqlab.experiments.config import config_hash
from deqlab.runs.data_check import check_datasets
from deqlab.runs.executors import Executor, LocalExecutor, TaskResult, TaskSpec
from deqlab.runs.lock import RunLock, now_iso, owner_environment
from deqlab.runs.progress import run_with_progress
from deqlab.runs.run import Run
from deqlab.runs.rundir import SUMMARY_FORMAT, RunDir, RunStoreError, SummaryError
from deqlab.runs.signals import signals_interrupt
from deqlab.runs.store import RunStore
from deqlab.runs.summary import derive_summary, provenance_warning, task_entry, whole_error
from deqlab.runs.tables import read_rows_csv, write_rows_csv
from deqlab.statements import Statement


@dataclass(frozen=True)
class _Job:
    """One run under its lock: the experiment and config, where it lives, how it warns."""

    experiment: Experiment
    config: Any
    preset: str
    device: str
    store: RunStore
    run: RunDir
    digest: str
    warn: Callable[[str], None]

    def note(self, notes: list[str], message: str) -> None:
        """Warn, and keep ``message`` (timed) among the notes of the run's summary."""
        self.warn(message)
        notes.append(f"{now_iso()}: {message}")

    def finish(
        self, status: str, wall_s: float, n_tasks: int, n_failed: int, error: str | None
    ) -> None:
        """Record the run's end (status, timings, error text) in the index."""
        self.store.finish(self.experiment.name, self.digest, status=status, wall_s=wall_s,
                          n_tasks=n_tasks, n_failed=n_failed, error=error)  # fmt: skip

    def as_run(self, status: str, reused: bool, summary: dict[str, Any], **extra: Any) -> Run:
        """The :class:`Run` of this job, its statements read from ``summary``."""
        return Run(
            experiment=self.experiment.name,
            preset=self.preset,
            config=self.config,
            path=self.run.path,
            status=status,
            reused=reused,
            device=self.device,
            statements=[Statement.from_dict(d) for d in summary["statements"]],
            deviations=self.experiment.deviations(self.config),
            **extra,
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
    on_warning: Callable[[str], None] | None = None,
) -> Run:
    """Run (or reuse, or resume, or rebuild) ``experiment`` at ``config``; write the run
    directory.

    ``device``: ``cpu``, ``cuda`` or ``cuda:N`` (:func:`check_device`); runs on any CUDA
    device share one hash. ``force``: discard the run's checkpoints and results first.
    ``on_warning``: called with each warning as it arises (they are also returned in
    :attr:`Run.warnings`). Raises :class:`~deqlab.runs.data_check.DataError` for a missing
    data set before the run is created, :class:`~deqlab.runs.rundir.RunStoreError` for an
    unusable store, :class:`~deqlab.runs.signals.Terminated` (a ``KeyboardInterrupt``) on
    SIGTERM.
    """
    device = check_device(device)
    store = RunStore(out)
    digest = config_hash(experiment.name, config, device=device_type(device))
    run = store.run_dir(experiment.name, digest)
    warnings: list[str] = []

    def warn(message: str) -> None:
        warnings.append(message)
        if on_warning is not None:
            on_warning(message)

    def waiting(owner: dict[str, Any] | None) -> None:
        who = f"process {owner.get('pid')} on {owner.get('host')}" if owner else "another process"
        warn(f"run {run.path} is being computed by {who}; waiting for it to finish")

    job = _Job(experiment, config, preset, device, store, run, digest, warn)
    lock = RunLock(run)
    with signals_interrupt():
        lock.acquire(on_wait=waiting)
        try:
            result = _reproduce_locked(
                job, executor=executor, checkpoint_every=checkpoint_every, quiet=quiet,
                console=console, force=force,
            )  # fmt: skip
        finally:
            lock.remove_if_empty()  # a run that never began (a missing data set) leaves nothing
            lock.release()
            store.remove_if_unused()
    for message in result.warnings:  # the reuse warnings (another deqlab version)
        if message not in warnings:
            warn(message)
    result.warnings = warnings
    return result


def _reproduce_locked(
    job: _Job,
    *,
    executor: Executor | None,
    checkpoint_every: int | None,
    quiet: bool,
    console: Console | None,
    force: bool,
) -> Run:
    """:func:`reproduce` while holding the run's lock: reuse → collect checkpoints →
    execute → finalize."""
    job.run.remove_stale_temporaries()
    known = job.store.lookup(job.experiment.name, job.digest)
    notes: list[str] = []
    if force:
        job.run.clear()
    else:
        summary, notes = _reusable(job, known)
        if summary is not None:
            return _reuse(job, summary)
    tasks = job.experiment.tasks(job.config)
    done = _collect_checkpoints(job, tasks, notes)
    if len(done) < len(tasks):
        check_datasets(job.experiment, job.config)
    return _compute(job, tasks, done, notes, executor, checkpoint_every, quiet, console)


def _compute(
    job: _Job,
    tasks: list[Task],
    done: dict[str, TaskResult],
    notes: list[str],
    executor: Executor | None,
    checkpoint_every: int | None,
    quiet: bool,
    console: Console | None,
) -> Run:
    """Mark the run running, :func:`_execute` the tasks not ``done``, :func:`_finalize`;
    a run stopped on the way is recorded ``interrupted`` or ``failed`` (:func:`_abandon`)."""
    job.store.begin(job.experiment.name, job.digest, preset=job.preset, device=job.device,
                    config=job.config)  # fmt: skip
    start = time.perf_counter()
    base_summary = {
        "experiment": job.experiment.name,
        "title": job.experiment.title,
        "paper": job.experiment.citation,
        "config_hash": job.digest,
        "preset": job.preset,
        "device": job.device,
        "started": now_iso(),
    }
    results: dict[str, TaskResult] = {}

    def record(result: TaskResult) -> None:
        result = whole_error(result)
        results[result.key] = result
        job.store.record_task(job.experiment.name, job.digest, result.key, status=result.status,
                              error=result.error, wall_s=result.wall_s)  # fmt: skip

    try:
        job.run.write_summary({**base_summary, "status": "running", "notes": notes})
        for result in done.values():
            record(result)
        pending = [t for t in tasks if t.key not in done]
        _execute(job, pending, record, executor, checkpoint_every, quiet, console)
        status, summary, report = _finalize(job, tasks, results, base_summary, notes, start)
    except BaseException as err:
        _abandon(job, err, base_summary, tasks, results, notes, time.perf_counter() - start)
        raise
    failed = {t.key: results[t.key].error or "" for t in tasks
              if results[t.key].status == "failed"}  # fmt: skip
    return job.as_run(status, False, summary, failed_tasks=list(failed),
                      report=report, task_errors=failed)  # fmt: skip


def _reusable(job: _Job, known: dict[str, Any] | None) -> tuple[dict[str, Any] | None, list[str]]:
    """The summary of the finished run to reuse as it is (``None`` when there is none, or
    its result files do not match summary.json), and the notes the run carries on."""
    finished = bool(known and known["status"] == "finished")
    notes: list[str] = []
    if not (job.run.summary_file.exists() or finished):
        return None, notes
    try:
        summary = job.run.read_summary()
    except SummaryError as err:
        if finished:
            job.note(notes, f"{err}; rebuilding it from the run's checkpoints and metrics")
        return None, notes
    notes = list(summary.get("notes", []))
    if not (finished and summary["status"] == "finished"):
        return None, notes
    problems = job.run.verify_files(summary.get("files", {}))
    if not job.run.metrics_file.is_file() and "metrics.csv is missing" not in problems:
        problems.append("metrics.csv is missing")
    if not problems:
        return summary, notes
    job.note(notes, f"the result files of {job.run.path} do not match its summary.json "
                    f"({'; '.join(problems)}); rebuilding them from the checkpoints")  # fmt: skip
    return None, notes


def _collect_checkpoints(job: _Job, tasks: list[Task], notes: list[str]) -> dict[str, TaskResult]:
    """The tasks whose checkpoint says ``done``, as reused results (a checkpoint that cannot
    be read is set aside, with a warning and a note)."""
    done: dict[str, TaskResult] = {}
    for task in tasks:
        checkpoint = job.run.load_checkpoint(
            task.key, on_corrupt=lambda message: job.note(notes, message), mmap=True
        )
        if checkpoint is not None and checkpoint["done"]:
            done[task.key] = TaskResult(
                key=task.key, status="finished", rows=list(checkpoint["rows"]), reused=True
            )
    return done


def _execute(
    job: _Job,
    pending: list[Task],
    record: Callable[[TaskResult], None],
    executor: Executor | None,
    checkpoint_every: int | None,
    quiet: bool,
    console: Console | None,
) -> None:
    """Run the ``pending`` tasks on ``executor`` (default: this process); ``record`` each."""
    specs = [
        TaskSpec(
            type(job.experiment),
            job.config,
            task,
            str(job.run.path.absolute()),  # a worker's working directory may be another
            job.device,
            checkpoint_every or job.experiment.default_checkpoint_every,
        )
        for task in pending
    ]
    if specs:
        with owner_environment():
            run_with_progress(executor or LocalExecutor(1), specs, record, quiet, console)


def _finalize(
    job: _Job,
    tasks: list[Task],
    results: dict[str, TaskResult],
    base_summary: dict[str, Any],
    notes: list[str],
    start: float,
) -> tuple[str, dict[str, Any], Path]:
    """Write metrics.csv, summary.json (statements and figures derived from the table read
    back), the run's end in the index, and the report; return the status, the summary and
    the report's path."""
    from deqlab.report import collect_environment, write_report

    run = job.run
    ordered = [results[t.key] for t in tasks]
    write_rows_csv(run.metrics_file, [row for r in ordered for row in r.rows])
    rows = read_rows_csv(run.metrics_file)  # statements and plots read the table back
    derived = derive_summary(job.experiment, job.config, run, rows)
    failed = [r.key for r in ordered if r.status == "failed"]
    status = "failed" if failed else "finished"
    wall_s = time.perf_counter() - start
    summary = {
        **base_summary,
        **derived,
        "status": status,
        "finished": now_iso(),
        "wall_s": wall_s,
        "tasks": [task_entry(r) for r in ordered],
        "environment": collect_environment(device=job.device),
        "files": run.result_files(derived["figures"]),
        "notes": notes,
    }
    run.write_summary(summary)
    error = "; ".join(f"{r.key}: {r.error}" for r in ordered if r.error) or None
    job.finish(status, wall_s, len(tasks), len(failed), error)
    return status, summary, write_report(run.path)


def _reuse(job: _Job, summary: dict[str, Any]) -> Run:
    """A finished run as it is; statements and figures re-derived if its format is older."""
    from deqlab.report import write_report

    run = job.run
    report = run.path / "report.html"
    if summary.get("format") != SUMMARY_FORMAT:
        derived = derive_summary(job.experiment, job.config, run, read_rows_csv(run.metrics_file))
        summary = {**summary, **derived, "files": run.result_files(derived["figures"])}
        run.write_summary(summary)
        report = write_report(run.path)
    elif not report.exists():
        report = write_report(run.path)
    warning = provenance_warning(run.path, summary)
    return job.as_run("finished", True, summary, report=report,
                      warnings=[warning] if warning else [])  # fmt: skip


def _abandon(
    job: _Job,
    err: BaseException,
    base_summary: dict[str, Any],
    tasks: list[Task],
    results: dict[str, TaskResult],
    notes: list[str],
    wall_s: float,
) -> None:
    """Record a run that stopped on ``err`` as ``interrupted`` or ``failed``, in the index and
    in summary.json (which never keeps saying ``running``); best effort, never raises."""
    status = "interrupted" if isinstance(err, KeyboardInterrupt) else "failed"
    error = type(err).__name__ + (f": {err}" if str(err) else "")
    try:
        job.run.write_summary(
            {
                **base_summary,
                "status": status,
                "finished": now_iso(),
                "wall_s": wall_s,
                "error": error,
                "tasks": [task_entry(results[t.key]) for t in tasks if t.key in results],
                "notes": notes,
            }
        )
    except OSError:
        with suppress(OSError):  # no room for a true summary: none beats one saying "running"
            job.run.summary_file.unlink(missing_ok=True)
    with suppress(RunStoreError, OSError):
        n_failed = sum(r.status == "failed" for r in results.values())
        job.finish(status, wall_s, len(tasks), n_failed, error)

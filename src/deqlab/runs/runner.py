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
recorded as ``interrupted`` (:class:`Terminated`). Data sets the tasks read are checked
before anything is created (:func:`check_datasets`).

The deqlab version and git commit that computed a run are recorded in its summary
(``environment``, :func:`deqlab.report.collect_environment`). A finished run computed by
another version or commit is still reused, with a warning naming both
(:attr:`RunOutcome.warnings`); ``force=True`` recomputes it.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from deqlab.experiments.base import Experiment, Row
from deqlab.experiments.config import ConfigError, config_hash, resolve_config
from deqlab.experiments.deviations import Deviation
from deqlab.runs.executors import Executor, LocalExecutor, TaskResult, TaskSpec
from deqlab.runs.lock import OWNER_ENV, RunLock, now_iso
from deqlab.runs.rundir import SUMMARY_FORMAT, RunDir, RunStoreError, SummaryError
from deqlab.runs.store import RunStore
from deqlab.runs.tables import read_rows_csv, write_rows_csv
from deqlab.statements import Counts, Statement

#: The device forms ``--device`` accepts (N: a CUDA device index).
DEVICES = ("cpu", "cuda", "cuda:N")


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
    #: The whole error text of each failed task.
    task_errors: dict[str, str] = field(default_factory=dict)

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


class DataError(ConfigError):
    """A data set the run reads is missing, incomplete or corrupt (found before any task)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP stopped the run; handled like Ctrl-C (the run is ``interrupted``)."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"terminated by {signal.Signals(signum).name}")


@contextmanager
def signals_interrupt() -> Iterator[None]:
    """While active (in the main thread), SIGTERM and SIGHUP raise :class:`Terminated`.

    A second such signal is not caught (it ends the process as it would have), and a
    signal ignored before (``nohup``) stays ignored.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        signal.signal(signum, signal.SIG_DFL)
        raise Terminated(signum)

    previous = {}
    for name in ("SIGTERM", "SIGHUP"):
        signum = getattr(signal, name, None)
        if signum is None or signal.getsignal(signum) is signal.SIG_IGN:
            continue
        previous[signum] = signal.signal(signum, handler)
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def check_datasets(experiment: Experiment, config: Any) -> None:
    """Raise :class:`DataError` (the reader's whole message: where it looked, how to fetch,
    or for a data set deqlab cannot download where to get it and what its runs need)
    unless every split of every data set ``config`` reads is on this machine and sound."""
    names = [n for n in experiment.datasets(config) if n != "sphere"]
    if not names:
        return
    from deqlab.data import DATASETS, DatasetNotFoundError, check_split, dataset_splits, locate
    from deqlab.data.registry import MANUAL_DATASETS, locate_manual

    for name in names:
        if name in MANUAL_DATASETS:
            try:
                locate_manual(name)
            except DatasetNotFoundError as err:
                raise DataError(str(err)) from None
        if name not in DATASETS:
            continue  # present, or the config's own validation names unknown data sets
        for split in dataset_splits(name):
            entry = check_split(name, split)
            if entry.status in ("present", "generated"):
                continue
            if entry.status == "missing":
                try:
                    locate(name, split)
                except DatasetNotFoundError as err:
                    raise DataError(str(err)) from None
            detail = f": {entry.detail}" if entry.detail else ""
            fetch = f". Fetch it with: {entry.fetch}" if entry.fetch else ""
            raise DataError(f"data set {name!r} ({split} split) is {entry.status}{detail}{fetch}")


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
) -> RunOutcome:
    """Run (or reuse, or resume, or rebuild) ``experiment`` at ``config``; write the run
    directory.

    ``device``: ``cpu``, ``cuda`` or ``cuda:N`` (:func:`check_device`); runs on any CUDA
    device share one hash. ``force``: discard the run's checkpoints and results first.
    ``on_warning``: called with each warning as it arises (they are also returned in
    :attr:`RunOutcome.warnings`). Raises :class:`DataError` for a missing data set before
    the run is created, :class:`~deqlab.runs.rundir.RunStoreError` for an unusable store,
    :class:`Terminated` (a ``KeyboardInterrupt``) on SIGTERM.
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

    lock = RunLock(run)
    with signals_interrupt():
        lock.acquire(on_wait=waiting)
        try:
            outcome = _reproduce_locked(
                experiment, config, store, run, digest, preset=preset, device=device,
                executor=executor, checkpoint_every=checkpoint_every, quiet=quiet,
                console=console, force=force, warn=warn,
            )  # fmt: skip
        finally:
            lock.remove_if_empty()  # a run that never began (a missing data set) leaves nothing
            lock.release()
    for message in outcome.warnings:  # the reuse warnings (another deqlab version)
        if message not in warnings:
            warn(message)
    outcome.warnings = warnings
    return outcome


def _reproduce_locked(
    experiment: Experiment,
    config: Any,
    store: RunStore,
    run: RunDir,
    digest: str,
    *,
    preset: str,
    device: str,
    executor: Executor | None,
    checkpoint_every: int | None,
    quiet: bool,
    console: Console | None,
    force: bool,
    warn: Callable[[str], None],
) -> RunOutcome:
    """:func:`reproduce` while holding the run's lock."""
    run.remove_stale_temporaries()
    known = store.lookup(experiment.name, digest)
    notes: list[str] = []
    if force:
        run.clear()
    elif run.summary_file.exists() or (known and known["status"] == "finished"):
        try:
            summary = run.read_summary()
        except SummaryError as err:
            if known and known["status"] == "finished":
                message = f"{err}; rebuilding it from the run's checkpoints and metrics"
                warn(message)
                notes.append(f"{now_iso()}: {message}")
        else:
            notes = list(summary.get("notes", []))
            if known and known["status"] == "finished" and summary["status"] == "finished":
                problems = run.verify_files(summary.get("files", {}))
                if not run.metrics_file.is_file() and "metrics.csv is missing" not in problems:
                    problems.append("metrics.csv is missing")
                if not problems:
                    return _reuse(experiment, config, run, summary)
                message = (
                    f"the result files of {run.path} do not match its summary.json "
                    f"({'; '.join(problems)}); rebuilding them from the checkpoints"
                )
                warn(message)
                notes.append(f"{now_iso()}: {message}")

    tasks = experiment.tasks(config)
    done: dict[str, TaskResult] = {}

    def corrupt(message: str) -> None:
        warn(message)
        notes.append(f"{now_iso()}: {message}")

    for task in tasks:
        checkpoint = run.load_checkpoint(task.key, on_corrupt=corrupt, mmap=True)
        if checkpoint is not None and checkpoint["done"]:
            done[task.key] = TaskResult(
                key=task.key, status="finished", rows=list(checkpoint["rows"]), reused=True
            )
    if len(done) < len(tasks):
        check_datasets(experiment, config)

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
    pending = [t for t in tasks if t.key not in done]
    specs = [
        TaskSpec(
            type(experiment),
            config,
            task,
            str(run.path.absolute()),  # a worker's working directory may be another
            device,
            checkpoint_every or experiment.default_checkpoint_every,
        )
        for task in pending
    ]
    results: dict[str, TaskResult] = {}

    def record(result: TaskResult) -> None:
        result = whole_error(result)
        results[result.key] = result
        store.record_task(
            experiment.name,
            digest,
            result.key,
            status=result.status,
            error=result.error,
            wall_s=result.wall_s,
        )

    from deqlab.report import collect_environment, write_report

    try:
        run.write_summary({**base_summary, "status": "running", "notes": notes})
        for result in done.values():
            record(result)
        if specs:
            with _owner_environment():
                _run_with_progress(executor or LocalExecutor(1), specs, record, quiet, console)
        ordered = [results[t.key] for t in tasks]
        write_rows_csv(run.metrics_file, [row for r in ordered for row in r.rows])
        rows = read_rows_csv(run.metrics_file)  # statements and plots read the table back
        derived = _derive(experiment, config, run, rows)
        failed = [r.key for r in ordered if r.status == "failed"]
        status = "failed" if failed else "finished"
        error = "; ".join(f"{r.key}: {r.error}" for r in ordered if r.error) or None
        wall_s = time.perf_counter() - start
        run.write_summary(
            {
                **base_summary,
                **derived,
                "status": status,
                "finished": now_iso(),
                "wall_s": wall_s,
                "tasks": [_task_entry(r) for r in ordered],
                "environment": collect_environment(device=device),
                "files": run.result_files(derived["figures"]),
                "notes": notes,
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
    except BaseException as err:
        _abandon(store, run, experiment.name, digest, err, base_summary, tasks, results, notes,
                 time.perf_counter() - start)  # fmt: skip
        raise
    statements = [Statement.from_dict(d) for d in derived["statements"]]
    deviations = experiment.deviations(config)
    errors = {r.key: r.error or "" for r in ordered if r.status == "failed"}
    return RunOutcome(
        run, status, False, statements, deviations, failed, report, task_errors=errors
    )


def whole_error(result: TaskResult) -> TaskResult:
    """``result`` with its whole error text: a multi-line message (a data set's "Looked in:
    … Fetch it with: …") is taken from the end of its traceback when ``error`` holds only
    its first line."""
    if not (result.error and result.traceback):
        return result
    at = result.traceback.rfind(result.error)
    whole = result.traceback[at:].rstrip() if at >= 0 else ""
    if len(whole) > len(result.error) and whole.startswith(result.error):
        return replace(result, error=whole)
    return result


def _task_entry(r: TaskResult) -> dict[str, Any]:
    return {
        "key": r.key,
        "status": r.status,
        "error": r.error,
        "wall_s": r.wall_s,
        "reused": r.reused,
        "traceback": r.traceback,
    }


@contextmanager
def _owner_environment() -> Iterator[None]:
    """``$DEQLAB_RUN_OWNER`` = this process while tasks run (workers inherit it, and
    :meth:`RunDir.check_owner` refuses their writes once the owner has changed)."""
    previous = os.environ.get(OWNER_ENV)
    os.environ[OWNER_ENV] = str(os.getpid())
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(OWNER_ENV, None)
        else:
            os.environ[OWNER_ENV] = previous


def _abandon(
    store: RunStore,
    run: RunDir,
    experiment: str,
    digest: str,
    err: BaseException,
    base_summary: dict[str, Any],
    tasks: Sequence[Any],
    results: dict[str, TaskResult],
    notes: list[str],
    wall_s: float,
) -> None:
    """Record a run that stopped on ``err`` as ``interrupted`` or ``failed``, in the index and
    in summary.json (which never keeps saying ``running``); best effort, never raises."""
    status = "interrupted" if isinstance(err, KeyboardInterrupt) else "failed"
    error = type(err).__name__ + (f": {err}" if str(err) else "")
    try:
        run.write_summary(
            {
                **base_summary,
                "status": status,
                "finished": now_iso(),
                "wall_s": wall_s,
                "error": error,
                "tasks": [_task_entry(results[t.key]) for t in tasks if t.key in results],
                "notes": notes,
            }
        )
    except OSError:
        with suppress(OSError):  # no room for a true summary: none beats one saying "running"
            run.summary_file.unlink(missing_ok=True)
    with suppress(RunStoreError, OSError):
        store.finish(
            experiment,
            digest,
            status=status,
            wall_s=wall_s,
            n_tasks=len(tasks),
            n_failed=sum(r.status == "failed" for r in results.values()),
            error=error,
        )


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
        derived = _derive(experiment, config, run, read_rows_csv(run.metrics_file))
        summary = {**summary, **derived, "files": run.result_files(derived["figures"])}
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


def rebuild_summary(store: RunStore, row: dict[str, Any]) -> str:
    """Write a new summary.json for the run of index ``row`` whose summary cannot be read.

    Its rows come from the tasks' finished checkpoints (metrics.csv is written again from
    them) or, when a task has none, from metrics.csv; statements, figures and the report
    are derived again, the task list is the index's. Returns the source used (``the
    checkpoints`` or ``metrics.csv``); a note in the summary says so. Raises
    :class:`~deqlab.runs.rundir.RunStoreError` (one line) when it cannot: the run is being
    computed, its experiment is not registered here, or neither source is complete.
    """
    from deqlab.experiments.registry import get_experiment
    from deqlab.report import collect_environment, write_report

    run = RunDir(Path(row["path"]))
    try:
        experiment = get_experiment(row["experiment"])
        config = resolve_config(experiment.Config, json.loads(row["config_json"]))
    except (ValueError, TypeError) as err:
        raise RunStoreError(f"cannot rebuild {run.summary_file}: {err}") from None
    lock = RunLock(run)
    if not lock.acquire_nowait():
        raise RunStoreError(f"cannot rebuild {run.summary_file}: the run is being computed")
    try:
        tasks = experiment.tasks(config)
        problems: list[str] = []
        checkpoints = {t.key: run.load_checkpoint(t.key, on_corrupt=problems.append, mmap=True)
                       for t in tasks}  # fmt: skip
        if all(c is not None and c["done"] for c in checkpoints.values()):
            write_rows_csv(run.metrics_file, [r for c in checkpoints.values() for r in c["rows"]])
            source = "the checkpoints"
        elif run.metrics_file.is_file():
            source = "metrics.csv"
        else:
            lacking = [k for k, c in checkpoints.items() if c is None or not c["done"]]
            raise RunStoreError(
                f"cannot rebuild {run.summary_file}: no metrics.csv, and task(s) "
                f"{', '.join(lacking)} have no finished checkpoint; `deqlab reproduce "
                f"{row['experiment']} --preset {row['preset']}` with the same config computes them"
            )
        rows = read_rows_csv(run.metrics_file)
        derived = _derive(experiment, config, run, rows)
        status = row["status"] if row["status"] in ("finished", "failed") else "interrupted"
        note = (f"{now_iso()}: summary.json was unreadable; rebuilt from {source} by "
                f"{describe_provenance(current_provenance())} (the version that computed the "
                "run is not known)")  # fmt: skip
        run.write_summary(
            {
                "experiment": experiment.name,
                "title": experiment.title,
                "paper": experiment.paper,
                "config_hash": row["config_hash"],
                "preset": row["preset"],
                "device": row["device"],
                "started": row["started"],
                **derived,
                "status": status,
                "finished": row["finished"],
                "wall_s": row["wall_s"],
                "tasks": [
                    {
                        "key": t["task_key"],
                        "status": t["status"],
                        "error": t["error"],
                        "wall_s": t["wall_s"],
                        "reused": False,
                        "traceback": None,
                    }
                    for t in store.tasks(row["experiment"], row["config_hash"])
                ],
                "environment": collect_environment(device=row["device"]),
                "files": run.result_files(derived["figures"]),
                "notes": [*problems, note],
            }
        )
        write_report(run.path)
    finally:
        lock.release()
    return source


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
                progress.console.print(
                    f"[red]task {escape(result.key)} failed:[/red] {escape(result.error or '')}"
                )
            on_result(result)

        executor.run(specs, finished, on_progress)

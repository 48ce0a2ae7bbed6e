"""What a run's summary.json says beyond its schema (:mod:`deqlab.runs.rundir`): the part
derived from metrics.csv (statements, verdicts, deviations, figures), the task entries, the
provenance (deqlab version and git commit), and how an unreadable summary is rebuilt.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from deqlab.experiments.base import Experiment, Row
from deqlab.experiments.config import resolve_config
from deqlab.runs.executors import TaskResult
from deqlab.runs.lock import RunLock, now_iso
from deqlab.runs.rundir import SUMMARY_FORMAT, RunDir, RunStoreError
from deqlab.runs.store import RunStore
from deqlab.runs.tables import read_rows_csv, write_rows_csv
from deqlab.statements import Counts


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


def task_entry(r: TaskResult) -> dict[str, Any]:
    """A task as summary.json lists it."""
    return {
        "key": r.key,
        "status": r.status,
        "error": r.error,
        "wall_s": r.wall_s,
        "reused": r.reused,
        "traceback": r.traceback,
    }


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


def derive_summary(experiment: Experiment, config: Any, run: RunDir, rows: list[Row]) -> dict:
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
            {"path": str(p.relative_to(run.path)), "caption": caption(experiment, p)}
            for p in figures
        ],
    }


def caption(experiment: Experiment, figure: Path) -> str:
    """The experiment's caption of ``figure``, else its name in words."""
    return experiment.figure_captions.get(figure.stem, figure.stem.replace("_", " "))


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
        derived = derive_summary(experiment, config, run, rows)
        status = row["status"] if row["status"] in ("finished", "failed") else "interrupted"
        note = (f"{now_iso()}: summary.json was unreadable; rebuilt from {source} by "
                f"{describe_provenance(current_provenance())} (the version that computed the "
                "run is not known)")  # fmt: skip
        run.write_summary(
            {
                "experiment": experiment.name,
                "title": experiment.title,
                "paper": experiment.citation,
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

"""``deqlab runs``: the run store — list, show, diff two runs, write the HTML index, and
rebuild the SQLite index from the run directories (``reindex``).

Listing and showing only read: they work on a read-only store. A ``running`` run whose
process is gone (same host, its pid not alive or reused) is listed as ``dead``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from deqlab.cli.app import EXIT_FAILED, JSON_HELP, app, check_output_file, echo_json, fail, warn

runs_app = typer.Typer(
    name="runs",
    help="Inspect the run store (<out>/index.sqlite and the run directories).",
    no_args_is_help=True,
)
app.add_typer(runs_app)

OUT_HELP = "Root of the run store."
#: The summary error of a run whose directory is gone.
MISSING = "the run directory is missing"
REF_HELP = "Config hash of the run (or a unique prefix of it, or its directory)."


def _open_store(out: Path):
    from deqlab.runs.rundir import RunStoreError
    from deqlab.runs.store import RunStore

    try:
        return RunStore.open_existing(out)
    except RunStoreError as err:
        raise fail(str(err)) from None


def _find(store, ref: str) -> dict[str, Any]:
    try:
        return store.find(ref)
    except ValueError as err:
        raise fail(str(err)) from None


def _row_document(row: dict[str, Any]) -> dict[str, Any]:
    """An index row as JSON: ``config_json`` parsed into ``config``."""
    doc = {k: v for k, v in row.items() if k != "config_json"}
    doc["config"] = json.loads(row["config_json"])
    return doc


@runs_app.command(
    "list",
    epilog=(
        "Examples:\n\n  deqlab runs list --out results\n\n"
        "  deqlab runs list --experiment ling2023-fig1 --json"
    ),
)
def runs_list(
    out: Path = typer.Option(Path("results"), help=OUT_HELP),
    experiment: str | None = typer.Option(
        None, "--experiment", metavar="NAME", help="Only the runs of this experiment."
    ),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """List the runs in the index, newest first: experiment, hash, preset, status, wall time.

    Status: running, finished, failed, interrupted, or dead (a running run whose process
    is gone). Works on a read-only store.
    """
    store = _open_store(out)
    rows = store.runs()
    if experiment is not None:
        _check_experiment_name(experiment, rows)
        rows = [r for r in rows if r["experiment"] == experiment]
    if as_json:
        echo_json([_row_document(r) for r in rows])
        return
    table = Table("experiment", "hash", "preset", "device", "status", "started", "wall_s", "failed")
    for r in rows:
        wall = "" if r["wall_s"] is None else f"{r['wall_s']:.1f}"
        table.add_row(
            r["experiment"],
            r["config_hash"],
            r["preset"],
            r["device"],
            r["status"],
            r["started"] or "",
            wall,
            str(r["n_failed"] or 0),
        )
    Console(width=160).print(table)
    if experiment is not None and not rows:
        typer.echo(f"no runs of {experiment} in {str(out)!r}")
    if any(r["status"] == "dead" for r in rows):
        typer.echo(
            "dead: the process computing the run is gone (killed, or its machine restarted); "
            "rerun its `deqlab reproduce` command to resume it from the checkpoints"
        )
    if any(r["status"] == "missing" for r in rows):
        typer.echo(
            "missing: the run directory is gone (deleted or moved); "
            f"`deqlab runs reindex --out {out}` drops it from the index"
        )


def _check_experiment_name(name: str, rows: list[dict[str, Any]]) -> None:
    """Refuse an ``--experiment`` that names no registered experiment and no run in the
    store (a registered one without runs lists nothing, and says so)."""
    from deqlab.experiments.registry import experiment_names

    if any(r["experiment"] == name for r in rows):
        return
    known = experiment_names()
    if name not in known:
        raise fail(f"`--experiment` {name!r} is not an experiment; known: {', '.join(known)}")


def run_document(store, row: dict[str, Any]) -> dict[str, Any]:
    """One run as JSON: index row, config, tasks, statements, deviations, verdict counts."""
    from deqlab.runs.rundir import RunDir, SummaryError
    from deqlab.runs.summary import describe_provenance
    from deqlab.statements import Counts, Statement

    doc = _row_document(row)
    doc["tasks"] = store.tasks(row["experiment"], row["config_hash"])
    path = Path(row["path"])
    summary: dict[str, Any] = {}
    run = RunDir(path)
    if row["status"] == "missing":
        doc["summary_error"] = MISSING
    elif not run.summary_file.exists():
        doc["summary_error"] = "summary.json not written yet"
    else:
        try:
            summary = run.read_summary()
        except SummaryError as err:
            doc["summary_error"] = str(err)
    statements = summary.get("statements", [])
    try:
        counts = Counts.of(Statement.from_dict(s) for s in statements)
    except (KeyError, ValueError, TypeError) as err:
        doc["summary_error"] = f"{run.summary_file}: a statement is malformed ({err})"
        statements, counts = [], Counts.of([])
    env = summary.get("environment") if isinstance(summary.get("environment"), dict) else {}
    report = path / "report.html"
    doc.update(
        statements=statements,
        deviations=summary.get("deviations", []),
        verdicts=counts.as_dict(),
        verdict_sentence=counts.sentence(),
        figures=summary.get("figures", []),
        notes=summary.get("notes", []),
        report=str(report) if report.is_file() else None,
        provenance={k: env.get(k) for k in ("deqlab", "git_commit", "git_dirty")},
        computed_by=describe_provenance(env) if env else None,
    )
    return doc


def _repair(out: Path, row: dict[str, Any], problem: str) -> bool:
    """Rebuild the unreadable summary of ``row``'s run when the store can be written; say
    what happened on stderr. Returns whether it was rebuilt."""
    from deqlab.runs.rundir import RunStoreError
    from deqlab.runs.store import RunStore
    from deqlab.runs.summary import rebuild_summary

    if row["status"] == "running":
        warn(f"{problem} (the run is in progress)")
        return False
    try:
        source = rebuild_summary(RunStore(out), row)
    except (RunStoreError, OSError) as err:
        warn(f"{problem}; it could not be rebuilt: {err}")
        return False
    warn(f"{problem}; rebuilt it from {source}")
    return True


@runs_app.command(
    "show",
    epilog=(
        "Examples:\n\n  deqlab runs show 3f2a9c --out results\n\n  deqlab runs show 3f2a9c --json"
    ),
)
def runs_show(
    ref: str = typer.Argument(..., metavar="REF", help=REF_HELP),
    out: Path = typer.Option(Path("results"), help=OUT_HELP),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Show one run: status, error, config, tasks, statements, deviations and verdicts."""
    from deqlab.experiments.deviations import Deviation, one_line

    store = _open_store(out)
    row = _find(store, ref)
    doc = run_document(store, row)
    problem = doc.get("summary_error")
    unreadable = problem not in (None, MISSING, "summary.json not written yet")
    if unreadable and _repair(out, row, problem):
        doc = run_document(store, row)
    if as_json:
        echo_json(doc)
        return
    typer.echo(
        f"{doc['experiment']} {doc['config_hash']}  status={doc['status']}  path={doc['path']}"
    )
    if problem == MISSING:
        typer.echo(
            f"error: the run directory {doc['path']!r} is missing; "
            f"`deqlab runs reindex --out {out}` drops it from the index"
        )
    if doc["error"]:
        typer.echo(f"error: {doc['error']}")
    typer.echo(f"config: {json.dumps(doc['config'])}")
    if doc["computed_by"]:
        typer.echo(f"computed by: {doc['computed_by']}")
    for task in doc["tasks"]:
        error = f"  {task['error']}" if task["error"] else ""
        wall = "" if task["wall_s"] is None else f" ({task['wall_s']:.1f} s)"
        typer.echo(f"  task {task['task_key']}: {task['status']}{wall}{error}")
    for s in doc["statements"]:
        needs = f"; would need {s['needs']}" if s.get("needs") else ""
        typer.echo(
            f"  [{s['verdict']}] ({s['kind']}, {s['citation']}) {s['name']}: "
            f"{s['measured']} (expected {s['expected']}){needs}"
        )
    for note in doc["notes"]:
        typer.echo(f"note: {note}")
    if "summary_error" not in doc:
        typer.echo(f"verdicts: {doc['verdict_sentence']}")
        fields = ("setting", "paper", "run", "kind", "where")
        deviations = [Deviation(*(str(d.get(k, "")) for k in fields)) for d in doc["deviations"]]
        typer.echo(one_line(deviations))
    if doc["report"]:
        typer.echo(f"report: {doc['report']}")


@runs_app.command(
    "diff",
    help=(
        "Compare two runs: run facts (preset, device, deqlab version…), config keys that "
        "differ, and every statement side by side (verdict and measurement, A vs B).\n\n"
        "With --figure PATH (.png, .pdf or .svg) also draw the two runs' curves overlaid: "
        "the x axis is a step-like column both metrics.csv files have (step, iteration, "
        "epoch…), one panel per shared numeric column that varies, A solid and B dashed. "
        "No figure is written without --figure."
    ),
    epilog=(
        "Examples:\n\n  deqlab runs diff 3f2a9c 7be410 --out results\n\n"
        "  deqlab runs diff 3f2a9c 7be410 --figure diff.png\n\n"
        "  deqlab runs diff 3f2a9c 7be410 --json"
    ),
)
def runs_diff(
    ref_a: str = typer.Argument(..., metavar="A", help=REF_HELP),
    ref_b: str = typer.Argument(..., metavar="B", help=REF_HELP),
    out: Path = typer.Option(Path("results"), help=OUT_HELP),
    figure: Path | None = typer.Option(
        None, "--figure", metavar="PATH", help="Write the overlaid curves here."
    ),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Compare two runs: config, statements side by side, and (--figure) their curves."""
    from deqlab.runs.diff import diff_runs, overlay_figure

    if figure is not None:
        if figure.suffix.lower() not in (".png", ".pdf", ".svg"):
            raise fail(f"`--figure` must end in .png, .pdf or .svg; got {str(figure)!r}")
        try:
            check_output_file("--figure", figure, "diff.png")
        except ValueError as err:
            raise fail(str(err)) from None
    store = _open_store(out)
    try:
        diff = diff_runs(store, ref_a, ref_b)
    except ValueError as err:
        raise fail(str(err)) from None
    figure_error = None
    if figure is not None:
        labels = (diff["a"]["config_hash"][:6], diff["b"]["config_hash"][:6])
        try:
            diff["figure"] = overlay_figure(diff["a"]["path"], diff["b"]["path"], figure, labels)
        except (ValueError, OSError) as err:
            figure_error = str(err)
            diff["figure"] = {"error": figure_error}
    if as_json:
        echo_json(diff)
    else:
        _print_diff(diff)
    if figure_error is not None:
        raise fail(f"no figure: {figure_error}", EXIT_FAILED)


def _cell(value: object) -> str:
    if value is None:
        return "—"
    return escape(value if isinstance(value, str) else json.dumps(value))


def _print_diff(diff: dict[str, Any]) -> None:
    a, b = diff["a"], diff["b"]
    console = Console(width=160)
    console.print(f"A: {a['experiment']} {a['config_hash']} ({a['preset']}, {a['device']}, "
                  f"{a['status']})  {escape(a['path'])}")  # fmt: skip
    console.print(f"B: {b['experiment']} {b['config_hash']} ({b['preset']}, {b['device']}, "
                  f"{b['status']})  {escape(b['path'])}")  # fmt: skip
    for key in diff["facts"]:
        console.print(f"{key}: A {_cell(a[key])}, B {_cell(b[key])}")
    if diff["config"]:
        table = Table("key", "A", "B", title="Config differences")
        for c in diff["config"]:
            missing = "(absent)"
            table.add_row(
                c["key"],
                missing if c["only_in"] == "b" else _cell(c["a"]),
                missing if c["only_in"] == "a" else _cell(c["b"]),
            )
        console.print(table)
    else:
        console.print("config: identical")
    if diff["statements"]:
        table = Table("statement", "kind", "verdict A", "verdict B", "measured A", "measured B",
                      title="Statements (* verdict changed)")  # fmt: skip
        for s in diff["statements"]:
            mark = "* " if s["changed"] else ""
            table.add_row(
                escape(mark + s["name"]), str(s["kind"]), _cell(s["verdict_a"]),
                _cell(s["verdict_b"]), _cell(s["measured_a"]), _cell(s["measured_b"]),
            )  # fmt: skip
        console.print(table)
    console.print(f"verdicts A: {escape(a['verdict_sentence'])}")
    console.print(f"verdicts B: {escape(b['verdict_sentence'])}")
    for note in diff["notes"]:
        console.print(f"note: {escape(note)}")
    fig = diff.get("figure")
    if fig and "path" in fig:
        left = f"; left out: {', '.join(fig['left_out'])}" if fig["left_out"] else ""
        console.print(
            f"figure: {escape(fig['path'])} (x: {fig['x']}; panels: "
            f"{', '.join(fig['columns'])}{left})"
        )


@runs_app.command(
    "index",
    epilog="Examples:\n\n  deqlab runs index\n\n  deqlab runs index --out results",
)
def runs_index(out: Path = typer.Option(Path("results"), help=OUT_HELP)) -> None:
    """Write <out>/index.html, the HTML index of every run, and print its path."""
    from deqlab.report import write_index

    if not out.is_dir():
        raise fail(f"`--out` must be a run store directory; {str(out)!r} does not exist")
    try:
        typer.echo(str(write_index(out)))
    except OSError as err:
        raise fail(f"cannot write the index in {str(out)!r}: {err}") from None


@runs_app.command(
    "reindex",
    epilog="Examples:\n\n  deqlab runs reindex\n\n  deqlab runs reindex --out results",
)
def runs_reindex(out: Path = typer.Option(Path("results"), help=OUT_HELP)) -> None:
    """Rebuild <out>/index.sqlite from the run directories (config.toml, summary.json).

    Use it when the index is lost or unreadable. A run whose summary says running is
    interrupted unless a live process holds its lock; an unreadable old index is kept as
    index.sqlite.corrupt.
    """
    from deqlab.runs.rundir import RunStoreError
    from deqlab.runs.store import RunStore

    if not out.is_dir():
        raise fail(f"`--out` must be a run store directory; {str(out)!r} does not exist")
    store = RunStore.unopened(out)
    if not store.run_directories():
        raise fail(
            f"`--out` {str(out)!r} holds no run directories (<experiment>/<hash>/config.toml)"
        )
    try:
        done = store.reindex()
    except OSError as err:
        raise fail(f"cannot write the index in {str(out)!r}: {err}") from None
    except RunStoreError as err:
        raise fail(str(err)) from None
    for skipped in done["skipped"]:
        warn(f"skipped {skipped}")
    if done["set_aside"]:
        typer.echo(f"the unreadable index was kept as {done['set_aside']}")
    typer.echo(f"rebuilt {store.index} from {done['runs']} run director"
               f"{'y' if done['runs'] == 1 else 'ies'}")  # fmt: skip

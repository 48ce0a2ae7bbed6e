"""CLI commands for experiments: ``reproduce``, ``list``, ``runs list|show``, ``report``.

Every user error (unknown experiment, key or preset, a wrongly typed value, an unwritable
output directory, an unavailable device) is one line on stderr and exit code 2.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from deqlab.cli.app import app
from deqlab.experiments.deviations import one_line

runs_app = typer.Typer(
    name="runs",
    help="Inspect the run store (results/index.sqlite).",
    no_args_is_help=True,
)
app.add_typer(runs_app)

_EXIT_USAGE = 2


def _fail(message: str, code: int = _EXIT_USAGE) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


@app.command(
    help=(
        "Run a registered experiment (or reuse / resume its run) and write its report.\n\n"
        "The run directory is <out>/<name>/<config-hash>. Rerunning the same command reuses "
        "a finished run and resumes an interrupted one from its checkpoints."
    ),
    epilog=(
        "Examples:\n\n"
        "  deqlab reproduce ling2023-fig1 --preset quick\n\n"
        "  deqlab reproduce ling2023-fig1 --preset paper --device cuda --workers 2\n\n"
        "  deqlab reproduce ling2023-fig1 --set widths=[256,1024] --set steps=500\n\n"
        "  deqlab reproduce ling2023-fig1 --config my.toml --executor ray --workers 4\n\n"
        "  deqlab reproduce ling2023-fig1 --executor ray --address 10.0.0.5:6379"
    ),
)
def reproduce(
    name: str = typer.Argument(..., help="Experiment name (see `deqlab list`)."),
    preset: str = typer.Option("quick", help="Preset: tiny (seconds), quick (minutes), paper."),
    config: Path | None = typer.Option(
        None, "--config", help="TOML file of config values (flat, or a \\[config] table)."
    ),
    overrides: list[str] = typer.Option(
        [], "--set", help="Override one config value: key=value (repeatable)."
    ),
    out: Path = typer.Option(Path("results"), help="Root of the run store."),
    workers: int | None = typer.Option(
        None,
        min=1,
        help="Parallel tasks: N processes (or Ray CPUs); 1 runs them in this process. "
        "Default: one per CPU core on cpu, 1 with --device cuda. Resume with the same value.",
    ),
    executor: str = typer.Option("local", help="local (process pool) or ray."),
    address: str | None = typer.Option(
        None, help="Ray cluster address; default: start a local cluster on 127.0.0.1."
    ),
    device: str = typer.Option("cpu", help="cpu or cuda."),
    checkpoint_every: int | None = typer.Option(
        None, min=1, help="Checkpoint every N steps (default: the experiment's)."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars or tables."),
    strict: bool = typer.Option(
        False, "--strict", help="Exit with code 1 when any statement's verdict is FAIL."
    ),
) -> None:
    """Run a registered experiment (or reuse / resume its run) and write its report."""
    from deqlab.experiments.registry import get_experiment
    from deqlab.runs.executors import make_executor
    from deqlab.runs.runner import reproduce as run_experiment

    try:
        experiment = get_experiment(name)
        resolved = experiment.resolve(preset, config_file=config, overrides=overrides)
        if workers is None and device == "cuda":
            workers = 1  # one process per GPU
        pool = make_executor(executor, workers=workers, address=address)
        outcome = run_experiment(
            experiment,
            resolved,
            preset=preset,
            out=out,
            device=device,
            executor=pool,
            checkpoint_every=checkpoint_every,
            quiet=quiet,
        )
    except (ValueError, TypeError) as err:
        raise _fail(str(err)) from None
    except KeyboardInterrupt:
        raise _fail(
            "interrupted; rerun the same command to resume from the checkpoints", 130
        ) from None
    if not quiet:
        print_statements([s.as_dict() for s in outcome.statements])
    typer.echo(f"verdicts: {outcome.counts.sentence()}")
    typer.echo(one_line(outcome.deviations))
    what = "reused finished run" if outcome.reused else f"run {outcome.status}"
    typer.echo(f"{what}: {outcome.run.path}")
    if outcome.failed_tasks:
        typer.echo(f"failed tasks: {', '.join(outcome.failed_tasks)}", err=True)
    if outcome.report is not None:
        typer.echo(f"report: {outcome.report}")
    if outcome.status != "finished":
        raise typer.Exit(1)
    if strict and outcome.counts.failed:
        typer.echo(f"--strict: {outcome.counts.failed} statement(s) FAIL", err=True)
        raise typer.Exit(1)


_VERDICT_STYLE = {
    "PASS": "green", "HOLDS": "green", "FAIL": "bold red", "UNMET": "yellow",
    "NOT APPLICABLE": "dim", "NOT MEASURED": "dim",
}  # fmt: skip


def print_statements(statements: list[dict[str, object]]) -> None:
    """The statements as one table: verdict, kind, source, measured, expected, what is needed."""
    if not statements:
        return
    table = Table("statement", "kind", "source", "verdict", "measured", "expected", "needs",
                  title="Statements")  # fmt: skip
    for s in statements:
        style = _VERDICT_STYLE.get(str(s["verdict"]), "")
        table.add_row(
            str(s["name"]), str(s["kind"]), str(s["citation"]),
            f"[{style}]{s['verdict']}[/{style}]", str(s["measured"]), str(s["expected"]),
            str(s.get("needs", "")),
        )  # fmt: skip
    Console(width=200).print(table)


@app.command("list")
def list_experiments() -> None:
    """List the registered experiments, their presets and paper."""
    from deqlab.experiments.registry import experiment_names, get_experiment

    table = Table("name", "title", "presets", "paper")
    for name in experiment_names():
        exp = get_experiment(name)
        table.add_row(name, exp.title, ", ".join(exp.presets), exp.paper)
    Console(width=160).print(table)


@runs_app.command("list")
def runs_list(out: Path = typer.Option(Path("results"), help="Root of the run store.")) -> None:
    """List the runs in the index: experiment, hash, preset, status, wall time."""
    store = _open_store(out)
    table = Table("experiment", "hash", "preset", "device", "status", "started", "wall_s", "failed")
    for r in store.runs():
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


@runs_app.command("show")
def runs_show(
    ref: str = typer.Argument(..., help="Config hash (or a unique prefix) of the run."),
    out: Path = typer.Option(Path("results"), help="Root of the run store."),
) -> None:
    """Show one run: status, error, config, tasks and claims.

    Example: deqlab runs show 3f2a9c --out results
    """
    store = _open_store(out)
    try:
        row = store.find(ref)
    except ValueError as err:
        raise _fail(str(err)) from None
    typer.echo(
        f"{row['experiment']} {row['config_hash']}  status={row['status']}  path={row['path']}"
    )
    if row["error"]:
        typer.echo(f"error: {row['error']}")
    typer.echo(f"config: {json.dumps(json.loads(row['config_json']))}")
    for task in store.tasks(row["experiment"], row["config_hash"]):
        error = f"  {task['error']}" if task["error"] else ""
        typer.echo(f"  task {task['task_key']}: {task['status']} ({task['wall_s']:.1f} s){error}")
    summary = Path(row["path"]) / "summary.json"
    if summary.exists():
        for s in json.loads(summary.read_text(encoding="utf-8")).get("statements", []):
            needs = f"; would need {s['needs']}" if s.get("needs") else ""
            typer.echo(
                f"  [{s['verdict']}] ({s['kind']}, {s['citation']}) {s['name']}: "
                f"{s['measured']} (expected {s['expected']}){needs}"
            )


def _open_store(out: Path):
    from deqlab.runs.store import RunStore

    if not (out / "index.sqlite").exists():
        raise _fail(f"no run index at {str(out / 'index.sqlite')!r}; run `deqlab reproduce` first")
    return RunStore(out)


@app.command()
def report(
    path: Path = typer.Argument(..., help="A run directory (<out>/<experiment>/<hash>)."),
) -> None:
    """Write (again) the HTML report of a run directory and print its path.

    Example: deqlab report results/ling2023-fig1/3f2a9c0d1e2b
    """
    from deqlab.report import write_report

    try:
        typer.echo(f"report: {write_report(path)}")
    except (ValueError, TypeError, OSError) as err:
        raise _fail(str(err)) from None

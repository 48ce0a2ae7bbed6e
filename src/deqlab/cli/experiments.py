"""CLI commands for experiments: ``reproduce``, ``list``, ``show``, ``report``.

Every user error (unknown experiment, key or preset, a wrongly typed value, an unwritable
output directory, an unavailable device) is one line on stderr and exit code 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from typer.core import TyperCommand

from deqlab.cli.app import (
    EXIT_FAILED,
    JSON_HELP,
    app,
    echo_json,
    fail,
    running_as_command,
    warn,
)
from deqlab.cli.statements_table import print_statements

PRESET_METAVAR = "tiny|quick|paper"
DEVICE_METAVAR = "cpu|cuda|cuda:N"
EXECUTOR_METAVAR = "local|ray"
NAME_HELP = "Experiment name (see `deqlab list`; TAB completes with shell completion)."
OUT_HELP = "Root of the run store."
DATA_DIR_HELP = "Data root (default: $DEQLAB_DATA, else ~/.cache/deqlab)."


def complete_name(incomplete: str) -> list[str]:
    """Shell completion of experiment names."""
    from deqlab.experiments.registry import experiment_names

    return [n for n in experiment_names() if n.startswith(incomplete)]


def complete_preset(ctx: typer.Context, incomplete: str) -> list[str]:
    """Shell completion of the presets of the experiment named on the line."""
    from deqlab.experiments.registry import get_experiment

    try:
        presets = list(get_experiment(ctx.params.get("name") or "").presets)
    except ValueError:
        presets = ["tiny", "quick", "paper"]
    return [p for p in presets if p.startswith(incomplete)]


class _NamesInHelp(TyperCommand):
    """A command whose ``--help`` lists the registered experiment names (loaded only then)."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        try:
            from deqlab.experiments.registry import experiment_names

            names = ", ".join(experiment_names())
        except Exception:  # a broken experiment module must not break --help
            names = ""
        for param in self.params:
            if param.name == "name" and names:
                param.help = f"{NAME_HELP} One of: {names}."
        return super().format_help(ctx, formatter)


def _console() -> Console:
    return Console(width=160)


@app.command(
    cls=_NamesInHelp,
    help=(
        "Run a registered experiment (or reuse / resume its run) and write its report.\n\n"
        "The run directory is <out>/<name>/<config-hash>. Rerunning the same command reuses "
        "a finished run (with a warning when another deqlab version or commit computed it) "
        "and resumes an interrupted one from its checkpoints; --force recomputes it."
    ),
    epilog=(
        "Examples:\n\n"
        "  deqlab reproduce ling2023-fig1 --preset quick\n\n"
        "  deqlab reproduce ling2023-fig1 --preset paper --device cuda:0 --workers 2\n\n"
        "  deqlab reproduce ling2023-fig1 --set widths=[256,1024] --set steps=500\n\n"
        "  deqlab reproduce ling2023-fig1 --config my.toml --executor ray --workers 4\n\n"
        "  deqlab reproduce ling2023-fig1 --executor ray --address 10.0.0.5:6379\n\n"
        "  deqlab reproduce ling2023-fig1 --preset tiny --force --json"
    ),
)
def reproduce(
    name: str = typer.Argument(..., metavar="NAME", help=NAME_HELP, autocompletion=complete_name),
    preset: str = typer.Option(
        "quick",
        metavar=PRESET_METAVAR,
        help="Preset: tiny (seconds), quick (minutes on 2 CPU cores), paper (the paper's "
        "sizes). `deqlab show NAME` lists an experiment's presets.",
        autocompletion=complete_preset,
    ),
    config: Path | None = typer.Option(
        None, "--config", help="TOML file of config values (flat, or a \\[config] table)."
    ),
    overrides: list[str] = typer.Option(
        [],
        "--set",
        metavar="KEY=VALUE",
        help="Override one config value (repeatable); `deqlab show NAME` lists the keys.",
    ),
    out: Path = typer.Option(Path("results"), help=OUT_HELP),
    workers: int | None = typer.Option(
        None,
        min=1,
        help="Parallel tasks: N processes (or Ray CPUs); 1 runs them in this process. "
        "Default: one per CPU core on cpu, 1 on a CUDA device. Resume with the same value.",
    ),
    executor: str = typer.Option(
        "local", metavar=EXECUTOR_METAVAR, help="local (process pool) or ray."
    ),
    address: str | None = typer.Option(
        None, help="Ray cluster address; default: start a local cluster on 127.0.0.1."
    ),
    device: str = typer.Option(
        "cpu",
        metavar=DEVICE_METAVAR,
        help="cpu, cuda (the current GPU) or cuda:N (GPU N, N < the number of GPUs). With "
        "--executor ray each task requests one GPU and Ray picks it.",
    ),
    checkpoint_every: int | None = typer.Option(
        None, min=1, help="Checkpoint every N steps (default: the experiment's)."
    ),
    force: bool = typer.Option(
        False, "--force", help="Recompute the run from scratch, even a finished one."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars or tables."),
    strict: bool = typer.Option(
        False, "--strict", help="Exit with code 1 when any statement's verdict is FAIL."
    ),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Run a registered experiment (or reuse / resume its run) and write its report."""
    from deqlab.experiments.config import ConfigError
    from deqlab.experiments.deviations import one_line
    from deqlab.runs.api import execute, prepare
    from deqlab.runs.rundir import RunStoreError
    from deqlab.runs.signals import Terminated

    try:
        prepared = prepare(
            name,
            preset,
            overrides=overrides,
            config_file=config,
            device=device,
            workers=workers,
            executor=executor,
            address=address,
        )
    except (ValueError, TypeError) as err:
        raise fail(str(err)) from None
    try:
        run = execute(
            prepared,
            out=out,
            force=force,
            checkpoint_every=checkpoint_every,
            quiet=quiet,
            on_warning=warn,
        )
    except (RunStoreError, ConfigError) as err:  # the store, the data: nothing ran
        raise fail(str(err)) from None
    except (ValueError, TypeError, OSError) as err:
        raise fail(f"the run stopped: {err}", EXIT_FAILED) from None
    except Terminated as err:
        raise fail(
            f"interrupted ({err}); rerun the same command to resume from the checkpoints",
            128 + err.signum,
        ) from None
    except KeyboardInterrupt:
        raise fail(
            "interrupted; rerun the same command to resume from the checkpoints", 130
        ) from None
    if run.failed_tasks:
        typer.echo(f"failed tasks: {', '.join(run.failed_tasks)}", err=True)
        if quiet or as_json:  # the progress display has shown them already otherwise
            for key, error in run.task_errors.items():
                typer.echo(f"task {key} failed: {error}", err=True)
    if as_json:
        echo_json(run.as_dict())
    else:
        if not quiet:
            print_statements([s.as_dict() for s in run.statements], _console())
        typer.echo(f"verdicts: {run.counts.sentence()}")
        typer.echo(one_line(run.deviations))
        what = "reused finished run" if run.reused else f"run {run.status}"
        typer.echo(f"{what}: {run.path}")
        if run.report is not None:
            typer.echo(f"report: {run.report}")
    if run.status != "finished":
        raise typer.Exit(EXIT_FAILED)
    if strict and run.counts.failed:
        typer.echo(f"--strict: {run.counts.failed} statement(s) FAIL", err=True)
        raise typer.Exit(EXIT_FAILED)


def _mark(status: dict[str, Any]) -> str:
    """✓ for a present data set; ✗ for a missing one, with the status when it is not that."""
    if status["present"]:
        return "[green]✓[/]"
    other = status.get("status")
    return "[red]✗[/]" + (f" ({other})" if other not in (None, "missing") else "")


def _data_cell(by_preset: dict[str, list[dict[str, Any]]]) -> str:
    """One line per group of presets reading the same data sets, e.g.
    ``tiny: digits ✓`` and ``quick, paper: fashion-mnist ✗, digits ✓``."""
    groups: dict[str, list[str]] = {}
    for preset, sets in by_preset.items():
        text = ", ".join(f"{s['name']} {_mark(s)}" for s in sets)
        groups.setdefault(text or "none", []).append(preset)
    return "\n".join(f"{', '.join(presets)}: {text}" for text, presets in groups.items())


@app.command(
    "list",
    epilog=(
        "Examples:\n\n  deqlab list\n\n  deqlab list --json | python -m json.tool\n\n"
        "  deqlab list --data-dir /data/deqlab"
    ),
)
def list_experiments(
    data_dir: Path | None = typer.Option(None, "--data-dir", help=DATA_DIR_HELP),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """List the registered experiments: presets, paper, data sets needed and present.

    For each preset, the data sets it reads: ✓ present on this machine, ✗ missing (fetch
    it with `deqlab data fetch NAME`).
    """
    from deqlab.experiments.registry import experiment_names, get_experiment
    from deqlab.runs.describe import preset_datasets

    cache: dict = {}
    entries = []
    for name in experiment_names():
        exp = get_experiment(name)
        entries.append(
            {
                "name": name,
                "title": exp.title,
                "paper": exp.citation,
                "presets": list(exp.presets),
                "datasets": preset_datasets(exp, data_dir, cache),
            }
        )
    if as_json:
        echo_json(entries)
        return
    table = Table()
    table.add_column("name", no_wrap=True)
    table.add_column("presets")
    table.add_column("data sets (✓ present, ✗ missing)", no_wrap=True)
    table.add_column("title", ratio=1)
    table.add_column("paper", ratio=1)
    for e in entries:
        table.add_row(
            e["name"],
            ", ".join(e["presets"]),
            _data_cell(e["datasets"]),
            escape(e["title"]),
            escape(e["paper"]),
        )
    _console().print(table)
    missing = sorted({s["name"] for e in entries for v in e["datasets"].values() for s in v
                      if not s["present"]})  # fmt: skip
    from deqlab.data.registry import MANUAL_DATASETS

    fetchable = [name for name in missing if name not in MANUAL_DATASETS]
    manual = [name for name in missing if name in MANUAL_DATASETS]
    if fetchable:
        typer.echo(f"missing data sets: {', '.join(fetchable)} (fetch: deqlab data fetch NAME)")
    if manual:
        typer.echo(f"missing data sets copied by hand: {', '.join(manual)} "
                   "(`deqlab data fetch NAME` says from where)")  # fmt: skip


@app.command(
    "show",
    cls=_NamesInHelp,
    epilog=(
        "Examples:\n\n  deqlab show ling2023-fig1\n\n"
        "  deqlab show ling2023-fig1 --preset paper --out results\n\n"
        "  deqlab show kawaguchi2021-fig1 --preset tiny --set datasets=mnist --json"
    ),
)
def show(
    name: str = typer.Argument(..., metavar="NAME", help=NAME_HELP, autocompletion=complete_name),
    preset: str = typer.Option(
        "quick",
        metavar=PRESET_METAVAR,
        help="The preset to show.",
        autocompletion=complete_preset,
    ),
    config: Path | None = typer.Option(
        None, "--config", help="TOML file of config values, as `reproduce --config`."
    ),
    overrides: list[str] = typer.Option(
        [], "--set", metavar="KEY=VALUE", help="Override one config value, as `reproduce`."
    ),
    out: Path = typer.Option(
        Path("results"), help="Run store whose finished runs time the run-time estimate."
    ),
    data_dir: Path | None = typer.Option(None, "--data-dir", help=DATA_DIR_HELP),
    measure: float | None = typer.Option(
        None,
        "--measure",
        metavar="SECONDS",
        min=1,
        help="Time the preset here for about SECONDS (its own tasks at its config, no "
        "checkpoints: whole where they fit, else their first steps, extrapolated) and estimate "
        "the whole run: start-up, worker processes, tasks, statements and figures.",
    ),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Show an experiment's config, data, metrics, paper setting and run time, before a run.

    The config keys with their types, defaults and the preset's values; the data sets the
    preset reads and whether each is on this machine; the columns of metrics.csv and their
    meanings; the paper's setting and this preset's deviations from it; an estimated run
    time (from finished runs of this preset in --out, or with --measure timed now on this
    machine, start-up and statements included, else a generic estimate).
    """
    from deqlab.experiments.registry import get_experiment
    from deqlab.runs.api import resolve
    from deqlab.runs.describe import describe_experiment

    try:
        experiment = get_experiment(name)
        resolved = resolve(experiment, preset, config_file=config, overrides=overrides)
    except (ValueError, TypeError) as err:
        raise fail(str(err)) from None
    startup = None
    if measure is not None and running_as_command():
        from deqlab.runs.costs import process_age

        startup = process_age()
    info = describe_experiment(
        experiment,
        preset,
        config=resolved,
        out=out,
        data_dir=data_dir,
        measure=measure,
        startup_s=startup,
    )
    if as_json:
        echo_json(info)
        return
    from deqlab.cli.show_output import print_show

    print_show(info)


@app.command(
    epilog="Example:\n\n  deqlab report results/ling2023-fig1/3f2a9c0d1e2b",
)
def report(
    path: Path = typer.Argument(..., help="A run directory (<out>/<experiment>/<hash>)."),
) -> None:
    """Write (again) the HTML report of a run directory and print its path."""
    from deqlab.report import write_report

    try:
        typer.echo(f"report: {write_report(path)}")
    except (ValueError, TypeError, OSError) as err:
        raise fail(str(err)) from None

"""``deqlab data``: list the data sets present on disk, fetch the missing ones."""

from __future__ import annotations

from pathlib import Path

import typer

from deqlab.cli.app import app

data_app = typer.Typer(
    help="Data sets: list what is present locally, fetch what is missing.",
    no_args_is_help=True,
)
app.add_typer(data_app, name="data")

_DIR_HELP = "Data root (default: $DEQLAB_DATA, else ~/.cache/deqlab)."


@data_app.command("list")
def list_datasets(
    data_dir: Path | None = typer.Option(None, "--dir", help=_DIR_HELP),
) -> None:
    """Show each data set, split by split: where it is, or the command that fetches it."""
    from rich.console import Console
    from rich.table import Table

    from deqlab.data import DATASETS, DatasetNotFoundError, locate
    from deqlab.data.locate import fetch_command

    table = Table("data set", "split", "status", "location")
    for name in DATASETS:
        if name == "sphere":
            table.add_row(name, "-", "generated", "synthetic (Ling et al. 2023, Section 5)")
            continue
        for split in ("train",) if name == "digits" else ("train", "test"):
            try:
                where = locate(name, split, data_dir)
                table.add_row(name, split, "[green]present[/]", str(where))
            except DatasetNotFoundError:
                table.add_row(name, split, "[red]missing[/]", fetch_command(name, data_dir))
    Console(width=200).print(table)


@data_app.command("fetch")
def fetch_dataset(
    name: str = typer.Argument(..., help="mnist, fashion-mnist or cifar10."),
    data_dir: Path | None = typer.Option(None, "--dir", help=_DIR_HELP),
    base_url: str | None = typer.Option(None, "--base-url", help="Download from this mirror."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
) -> None:
    """Download a data set, verify its checksums, and put it where the readers look."""
    from deqlab.data import DownloadError, fetch

    try:
        paths = fetch(name, data_dir, base_url=base_url, show_progress=progress)
    except (DownloadError, ValueError) as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(1) from err
    for path in paths:
        typer.echo(f"{path}")

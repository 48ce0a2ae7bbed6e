"""``deqlab data``: list the data sets on this machine (the catalog), fetch the missing ones."""

from __future__ import annotations

from pathlib import Path

import typer

from deqlab.cli.app import EXIT_FAILED, JSON_HELP, app, echo_json, fail
from deqlab.data.sources import SOURCES

data_app = typer.Typer(
    help="Data sets: list what is present locally, fetch what is missing.",
    no_args_is_help=True,
)
app.add_typer(data_app, name="data")

_DIR_HELP = "Data root (default: $DEQLAB_DATA, else ~/.cache/deqlab)."
_STYLE = {
    "present": "[green]present[/]",
    "missing": "[red]missing[/]",
    "incomplete": "[yellow]incomplete[/]",
    "corrupt": "[bold red]corrupt[/]",
}


@data_app.command(
    "list",
    epilog=(
        "Examples:\n\n  deqlab data list\n\n  deqlab data list --dir /data/deqlab --json\n\n"
        "  deqlab data list --checksums"
    ),
)
def list_datasets(
    data_dir: Path | None = typer.Option(None, "--dir", help=_DIR_HELP),
    checksums: bool = typer.Option(
        False, "--checksums", help="Also compare each file's published digest (slower)."
    ),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Show each data set, split by split: present, missing, incomplete or corrupt, where it
    is, and the command that fetches (or resumes, or replaces) it."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from deqlab.data import catalog

    _check_dir(data_dir)
    entries = catalog(data_dir, checksums=checksums)
    if as_json:
        echo_json([e.as_dict() for e in entries])
        return
    table = Table("data set", "split", "status")
    table.add_column("location / how to fetch", no_wrap=True)  # a command stays copyable
    table.add_column("detail", ratio=1)
    for e in entries:
        table.add_row(
            e.name,
            e.split or "-",
            _STYLE.get(e.status, e.status),
            escape(str(e.fetch if e.status != "present" and e.fetch else e.location or "")),
            escape(e.detail or ""),
        )
    Console(width=200).print(table)


@data_app.command(
    "fetch",
    epilog=(
        "Examples:\n\n  deqlab data fetch mnist\n\n"
        "  deqlab data fetch cifar10 --dir /data/deqlab --base-url https://my.mirror/cifar/"
    ),
)
def fetch_dataset(
    name: str = typer.Argument(..., metavar="|".join(SOURCES), help="The data set to fetch."),
    data_dir: Path | None = typer.Option(None, "--dir", help=_DIR_HELP),
    base_url: str | None = typer.Option(None, "--base-url", help="Download from this mirror."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
) -> None:
    """Download a data set, verify its checksums, and put it where the readers look."""
    from deqlab.data import DownloadError, fetch
    from deqlab.data.registry import MANUAL_DATASETS

    if name in MANUAL_DATASETS:
        entry = MANUAL_DATASETS[name]
        raise fail(
            f"{name!r} is fetched by hand: get {entry.source}, and put it under "
            f"<data root>/{name}/ as {entry.layout}; `deqlab data list` then finds it"
        )
    try:
        paths = fetch(name, data_dir, base_url=base_url, show_progress=progress)
    except ValueError as err:
        bundled = name in ("sphere", "digits")
        hint = f" ({name!r} is generated or bundled: nothing to fetch)" if bundled else ""
        raise fail(f"{err}{hint}") from None
    except (DownloadError, OSError) as err:
        raise fail(str(err), EXIT_FAILED) from None
    for path in paths:
        typer.echo(f"{path}")


def _check_dir(data_dir: Path | None) -> None:
    """Refuse a ``--dir`` that exists but is not a directory (nothing could be found or
    fetched there)."""
    if data_dir is not None and data_dir.exists() and not data_dir.is_dir():
        raise fail(f"`--dir` {str(data_dir)!r} is not a directory; give the data root directory")

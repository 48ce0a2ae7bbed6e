"""The typer application; command modules register themselves on ``app`` when imported."""

from __future__ import annotations

import typer

import deqlab

app = typer.Typer(
    name="deqlab",
    help="deqlab — deep equilibrium models and the theory of their training.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """deqlab — deep equilibrium models and the theory of their training."""


@app.command()
def version() -> None:
    """Print the deqlab version."""
    typer.echo(deqlab.__version__)


def _register_commands() -> None:
    """Import the command modules (each adds its commands or sub-apps to ``app``)."""
    # One import per command module; keep them light (heavy imports inside commands).
    import deqlab.cli.data
    import deqlab.cli.experiments
    import deqlab.cli.kernel  # noqa: F401


_register_commands()


def main() -> None:
    """Console-script entry point."""
    app()

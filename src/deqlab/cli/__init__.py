"""The ``deqlab`` command line (typer). Each command group lives in its own module."""

from deqlab.cli.app import app, main

__all__ = ["app", "main"]

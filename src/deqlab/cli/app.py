"""The typer application; command modules register themselves on ``app`` when imported.

Conventions of every command:

- a usage error (an unknown name, a wrongly typed or out-of-range value, a missing
  argument, a file that cannot be read) or a missing input (a data set that is not on this
  machine: the line names it, where it was looked for and the ``deqlab data fetch`` command)
  is one line on stderr, ``error: …``, naming the argument and what was expected, and exit
  code 2 (:data:`EXIT_USAGE`);
- a command that ran but did not succeed (a failed run, a failed download, a FAIL verdict
  under ``--strict``) exits 1 (:data:`EXIT_FAILED`);
- ``--json`` prints one JSON document on stdout and nothing else (progress and
  warnings go to stderr), so ``deqlab list --json | python -m json.tool`` works.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperGroup

import deqlab

try:  # typer >= 0.2x ships its own copy of click
    from typer._click import exceptions as _click_errors
except ImportError:  # pragma: no cover - older typer uses click itself
    from click import exceptions as _click_errors

#: Exit code of a usage error or a missing input (as click's own parse errors).
EXIT_USAGE = 2
#: Exit code of a command that ran but failed (a failed run, a failed download).
EXIT_FAILED = 1

JSON_HELP = "Print one JSON document on stdout (nothing else) instead of tables."


class _OneLineErrors(TyperGroup):
    """The root group: click's usage errors become one ``error:`` line and exit code 2."""

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except _click_errors.NoArgsIsHelpError:
            sys.exit(EXIT_USAGE)  # the help was printed when the error was made
        except _click_errors.UsageError as err:
            typer.echo(_usage_line(err), err=True)
            sys.exit(EXIT_USAGE)
        except _click_errors.ClickException as err:
            err.show()
            sys.exit(err.exit_code)
        except typer.Abort:
            typer.echo("Aborted!", err=True)
            sys.exit(EXIT_FAILED)
        sys.exit(code if isinstance(code, int) else 0)


def _usage_line(err: Any) -> str:
    """``error: <click's message> (see '<command> --help')`` on one line."""
    message = " ".join(str(err.format_message()).split())
    ctx = getattr(err, "ctx", None)
    hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    return f"error: {message}{hint}"


app = typer.Typer(
    name="deqlab",
    cls=_OneLineErrors,
    help="deqlab — deep equilibrium models and the theory of their training.",
    epilog=(
        "Examples:\n\n"
        "  deqlab list\n\n"
        "  deqlab show ling2023-fig1 --preset quick\n\n"
        "  deqlab reproduce ling2023-fig1 --preset quick\n\n"
        "  deqlab runs list --json\n\n"
        "Shell completion: deqlab --install-completion"
    ),
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """deqlab — deep equilibrium models and the theory of their training."""


@app.command(epilog="Example:\n\n  deqlab version")
def version() -> None:
    """Print the deqlab version."""
    typer.echo(deqlab.__version__)


def fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    """Print ``error: message`` (one line) on stderr; return the Exit to raise."""
    typer.echo(f"error: {' '.join(message.split())}", err=True)
    return typer.Exit(code)


def warn(message: str) -> None:
    """Print ``warning: message`` (one line) on stderr."""
    typer.echo(f"warning: {' '.join(message.split())}", err=True)


def failed_allocation(err: BaseException, advice: str) -> BaseException:
    """An allocation that failed (:func:`deqlab._memory.out_of_memory`) as one ``error:``
    line with ``advice`` and exit 2 (the input is too large for this process), to raise;
    any other error as it is."""
    from deqlab._memory import out_of_memory

    line = out_of_memory(err)
    return err if line is None else fail(f"{line}; {advice}")


def check_output_file(flag: str, path: Path, example: str) -> None:
    """Raise a ValueError (one line naming ``flag``) when no file can be written at
    ``path``: it is a directory, a file stands where a directory above it must be, or
    the nearest existing directory above it is not writable; checked before any work."""
    import tempfile

    where = f"`{flag}` {str(path)!r}"
    if path.is_dir():
        raise ValueError(f"{where} is a directory; give a file name, e.g. {path / example}")
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise ValueError(f"{where} cannot be written: {str(parent)!r} is not a directory")
    try:
        with tempfile.TemporaryFile(dir=parent):
            pass
    except OSError as err:
        raise ValueError(
            f"{where} cannot be written: {str(parent)!r} is not writable ({err.strerror or err})"
        ) from None


def echo_json(document: Any) -> None:
    """Print ``document`` as indented JSON on stdout (non-finite floats as strings)."""
    typer.echo(json.dumps(_finite(document), indent=2, default=str, ensure_ascii=False))


def _finite(value: Any) -> Any:
    """NaN and ±inf become strings: strict JSON parsers reject them as numbers."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


_as_command = False


def running_as_command() -> bool:
    """Whether this process is the ``deqlab`` command (:func:`main`), whose start-up
    (interpreter, imports) is what a ``deqlab reproduce`` pays before its first task."""
    return _as_command


def _register_commands() -> None:
    """Import the command modules (each adds its commands or sub-apps to ``app``)."""
    # One import per command module; keep them light (heavy imports inside commands).
    import deqlab.cli.data
    import deqlab.cli.experiments
    import deqlab.cli.kernel
    import deqlab.cli.runs
    import deqlab.cli.verify  # noqa: F401


_register_commands()


def main() -> None:
    """Console-script entry point."""
    global _as_command
    _as_command = True
    app()

"""How long computations report progress: ``progress(what, done, total)`` before each stage or
step (a row block of a Gram matrix, a Lanczos step, a training step).

The CLI draws it as a rich progress bar on stderr; the Python API is silent by default.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["Progress", "silent"]

#: ``progress(what, done, total)``: ``what`` is starting, ``done`` of ``total`` finished.
Progress = Callable[[str, int, int], None]


def silent(what: str, done: int, total: int) -> None:
    """The default :data:`Progress`: reports nothing."""

"""How verify reports progress: :data:`deqlab._progress.Progress` (``progress(what, done,
total)``), silent by default in the Python API, a bar on stderr in the CLI."""

from deqlab._progress import Progress, silent

__all__ = ["Progress", "silent"]

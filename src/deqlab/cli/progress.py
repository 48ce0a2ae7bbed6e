"""The progress bar of long commands (``kernel``, ``verify``): a :data:`deqlab._progress.Progress`
drawn by rich on stderr, only when stderr is a terminal (nothing on stdout, nothing in pipes,
logs or ``--json`` output), and removed when done."""

from __future__ import annotations

from deqlab._progress import Progress


class progress_bar:
    """``with progress_bar() as progress: compute(progress=progress)``."""

    def __enter__(self) -> Progress:
        from rich.console import Console
        from rich.progress import BarColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as Bar

        console = Console(stderr=True)
        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.percentage:>3.0f}%"),
            TimeElapsedColumn(),
        )
        self.bar = Bar(*columns, console=console, transient=True, disable=not console.is_terminal)
        self.bar.start()
        self.task = self.bar.add_task("", total=1)
        return self.update

    def update(self, what: str, done: int, total: int) -> None:
        self.bar.update(self.task, description=what, completed=done, total=max(total, 1))

    def __exit__(self, *exc: object) -> None:
        self.bar.stop()

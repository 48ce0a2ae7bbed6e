"""Running task specs on an executor under rich progress bars (one per running task)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from deqlab.runs.executors import Executor, TaskResult, TaskSpec


def run_with_progress(
    executor: Executor,
    specs: Sequence[TaskSpec],
    on_result: Any,
    quiet: bool,
    console: Console | None,
) -> None:
    """Run ``specs`` on ``executor`` under rich progress bars (none when ``quiet``)."""
    if quiet:
        executor.run(specs, on_result, lambda key, done, total: None)
        return
    progress = Progress(
        TextColumn("{task.description:<24}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console or Console(stderr=True),
        transient=False,
    )
    with progress:
        overall = progress.add_task("tasks", total=len(specs))
        bars: dict[str, Any] = {}

        def on_progress(key: str, done: int, total: int) -> None:
            if key not in bars:
                bars[key] = progress.add_task(key, total=total)
            progress.update(bars[key], completed=done, total=total)

        def finished(result: TaskResult) -> None:
            progress.advance(overall)
            if result.key in bars:
                progress.remove_task(bars.pop(result.key))
            if result.status == "failed":
                progress.console.print(
                    f"[red]task {escape(result.key)} failed:[/red] {escape(result.error or '')}"
                )
            on_result(result)

        executor.run(specs, finished, on_progress)

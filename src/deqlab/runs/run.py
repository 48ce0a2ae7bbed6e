"""The :class:`Run` entity: a run of an experiment as :func:`deqlab.reproduce` left it.

What the runner returns and the Python API hands to the user; it reads the run directory
(``metrics.csv``, ``summary.json``) on demand and holds no connection to the store.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from deqlab.experiments.deviations import Deviation
from deqlab.runs.tables import read_rows_csv
from deqlab.statements import Counts, Statement


@dataclass
class Run:
    """A run of an experiment, as :func:`reproduce` left it.

    ``status``: ``finished`` or ``failed`` (some tasks failed: ``failed_tasks``);
    ``reused``: an earlier finished run of the same config was returned as it is;
    ``statements``: the checked statements with their verdicts; ``deviations``: how the
    config differs from the paper; ``metrics``: the rows of ``metrics.csv`` (read on first
    use); ``report``: the HTML report; ``warnings``: e.g. a reused run computed by another
    deqlab version; ``task_errors``: the whole error text of each failed task.
    """

    experiment: str
    preset: str
    config: Any
    path: Path
    status: str
    reused: bool
    device: str
    statements: list[Statement] = field(default_factory=list)
    deviations: list[Deviation] = field(default_factory=list)
    failed_tasks: list[str] = field(default_factory=list)
    report: Path | None = None
    warnings: list[str] = field(default_factory=list)
    task_errors: dict[str, str] = field(default_factory=dict)

    @property
    def config_hash(self) -> str:
        """The run's hash (the name of its directory)."""
        return self.path.name

    @property
    def metrics_file(self) -> Path:
        return self.path / "metrics.csv"

    @cached_property
    def metrics(self) -> list[dict[str, object]]:
        """The tidy rows of ``metrics.csv`` (ints, floats, bools parsed; blanks as None)."""
        return read_rows_csv(self.metrics_file) if self.metrics_file.is_file() else []

    @property
    def counts(self) -> Counts:
        """Verdicts by kind (``counts.sentence()``, ``counts.failed``)."""
        return Counts.of(self.statements)

    @property
    def ok(self) -> bool:
        """True when the run finished and no statement FAILs."""
        return self.status == "finished" and not self.counts.failed

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (what ``deqlab reproduce --json`` prints)."""
        return {
            "experiment": self.experiment,
            "preset": self.preset,
            "config_hash": self.config_hash,
            "device": self.device,
            "status": self.status,
            "reused": self.reused,
            "path": str(self.path),
            "report": None if self.report is None else str(self.report),
            "failed_tasks": list(self.failed_tasks),
            "task_errors": dict(self.task_errors),
            "warnings": list(self.warnings),
            "verdicts": self.counts.as_dict(),
            "verdict_sentence": self.counts.sentence(),
            "statements": [s.as_dict() for s in self.statements],
            "deviations": [d.as_dict() for d in self.deviations],
            "metrics_file": str(self.metrics_file),
        }

    def summary(self) -> dict[str, Any]:
        """The run's ``summary.json``."""
        return json.loads((self.path / "summary.json").read_text(encoding="utf-8"))

    def __repr__(self) -> str:
        return (
            f"Run({self.experiment!r}, preset={self.preset!r}, status={self.status!r}, "
            f"reused={self.reused}, verdicts={self.counts.sentence()!r}, path='{self.path}')"
        )

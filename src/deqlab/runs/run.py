"""The :class:`Run` entity: a run of an experiment as :func:`deqlab.reproduce` left it.

What the runner returns and the Python API hands to the user; it reads the run directory
(``metrics.csv``, ``summary.json``, ``report.html``, ``figures/``) on demand and holds no
connection to the store. In Jupyter a run shows its HTML report (``_repr_html_``) and,
where only images are shown, its first figure (``_repr_png_``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deqlab.experiments.deviations import Deviation
from deqlab.runs.tables import read_rows_csv
from deqlab.statements import Counts, Statement

if TYPE_CHECKING:
    import pandas as pd

_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@dataclass
class Run:
    """A run of an experiment, as :func:`reproduce` left it.

    ``status``: ``finished`` or ``failed`` (some tasks failed: ``failed_tasks``);
    ``reused``: an earlier finished run of the same config was returned as it is;
    ``statements``: the checked statements with their verdicts; ``deviations``: how the
    config differs from the paper; ``metrics``: ``metrics.csv`` as a pandas DataFrame
    (``rows``: the same as a list of dicts, read on first use); ``figures``: its PNG files;
    ``report``: the HTML report; ``warnings``: e.g. a reused run computed by another deqlab
    version; ``task_errors``: the whole error text of each failed task.
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
    def rows(self) -> list[dict[str, object]]:
        """The tidy rows of ``metrics.csv`` (ints, floats, bools parsed; blanks as None)."""
        return read_rows_csv(self.metrics_file) if self.metrics_file.is_file() else []

    @property
    def metrics(self) -> pd.DataFrame:
        """``metrics.csv`` as a pandas DataFrame: one row per measurement, its columns in
        the file's order (a blank cell is NaN in a numeric column, None elsewhere)."""
        import pandas as pd

        return pd.DataFrame.from_records(self.rows) if self.rows else pd.DataFrame()

    @property
    def figures(self) -> list[Path]:
        """The PNG figures of the run, in the order its summary lists them."""
        try:
            listed = self.summary().get("figures", [])
        except (OSError, ValueError):
            return []
        paths = [self.path / (f["path"] if isinstance(f, dict) else f) for f in listed]
        return [p for p in paths if p.suffix == ".png" and p.is_file()]

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

    def _repr_html_(self) -> str:
        """The run's HTML report, in an ``iframe`` (its styles stay inside), for Jupyter."""
        report = self.report if self.report is not None else self.path / "report.html"
        if not report.is_file():
            return f"<pre>{escape(repr(self))}</pre>"
        page = report.read_text(encoding="utf-8")
        return (
            f'<iframe srcdoc="{escape(page, quote=True)}" title="{escape(repr(self))}" '
            'style="width: 100%; height: 640px; border: 0"></iframe>'
        )

    def _repr_png_(self) -> bytes | None:
        """The run's first figure as PNG bytes (None without one), for Jupyter."""
        for path in self.figures:
            data = path.read_bytes()
            if data.startswith(_PNG_MAGIC):
                return data
        return None

    def __repr__(self) -> str:
        return (
            f"Run({self.experiment!r}, preset={self.preset!r}, status={self.status!r}, "
            f"reused={self.reused}, verdicts={self.counts.sentence()!r}, path='{self.path}')"
        )

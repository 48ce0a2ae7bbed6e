"""``ling2023-init``: the tidy table of :mod:`deqlab.papers.ling2023.init_theorems` as the
claims take it (:func:`draws`: per quantity, one :class:`~deqlab.statements.Run` over the
draws) and its statements, :func:`deqlab.papers.ling2023.initialization.initialization`:
Assumptions 1–2, Lemma 1, Theorems 2–5 and the bounds of Section 3.2 at initialization (its
figure: :mod:`.init_figure`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from deqlab.experiments.base import Row
from deqlab.papers.ling2023.draws import Draws
from deqlab.papers.ling2023.initialization import initialization
from deqlab.statements import Statement, runs_from_rows

if TYPE_CHECKING:
    from deqlab.experiments.ling2023.init import InitConfig


def draws(rows: Sequence[Row]) -> Draws:
    """Per quantity, its draws in the order of the rows."""
    indexed = [{**r, "draw": i} for i, r in enumerate(rows)]
    return runs_from_rows(indexed, key="quantity", labels=("theorem",), step="draw")


def statements(config: InitConfig, rows: list[Row]) -> list[Statement]:
    """The statements of the run's rows (:func:`initialization`)."""
    return initialization(draws(rows), config.sigma_w2)


def plot(config: InitConfig, rows: list[Row], directory: Path) -> list[Path]:
    """The run's figure (:func:`.init_figure.plot_initialization`), its subtitle the data
    setting."""
    from deqlab.experiments.ling2023.init_figure import plot_initialization  # only to plot

    d = f", d = {config.d}" if config.dataset == "sphere" else ""  # images fix their own
    setting = f"{config.dataset}, n = {config.n}{d}, σ_w² = {config.sigma_w2:g}"
    return plot_initialization(rows, config.n, setting, directory)

"""Reports: matplotlib figures and the self-contained HTML report of a run."""

from deqlab.report.environment import collect_environment
from deqlab.report.figures import (
    CATEGORICAL_COLORS,
    add_reference_line,
    apply_style,
    figure_style,
    save_figure,
    sequential_colors,
)
from deqlab.report.html import write_index, write_report

__all__ = [
    "CATEGORICAL_COLORS",
    "add_reference_line",
    "apply_style",
    "collect_environment",
    "figure_style",
    "save_figure",
    "sequential_colors",
    "write_index",
    "write_report",
]

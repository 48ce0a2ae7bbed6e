"""Matplotlib figures: one shared style, colour-blind-safe palettes, atomic PNG + PDF saving.

Every experiment plots through these helpers so that all figures of a report look alike::

    with figure_style():
        fig, ax = plt.subplots()
        for color, m in zip(sequential_colors(len(widths)), widths):
            ax.semilogy(steps, loss[m], color=color, label=f"m = {m}")
        add_reference_line(ax, 1.0, "‖W‖₂ = 1")
        save_figure(fig, run_dir / "figures", "loss")
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.pyplot as plt
from cycler import cycler
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import LogFormatterMathtext

from deqlab._atomic import atomic_path
from deqlab._checks import check_int

#: Okabe & Ito (2008) palette: distinguishable under the common colour-vision deficiencies.
CATEGORICAL_COLORS: tuple[str, ...] = (
    "#0072B2",  # blue
    "#D55E00",  # vermillion
    "#009E73",  # bluish green
    "#CC79A7",  # reddish purple
    "#E69F00",  # orange
    "#56B4E9",  # sky blue
    "#F0E442",  # yellow
    "#000000",  # black
)

#: The shared rcParams: readable fonts, light grids (major and minor, for log axes),
#: mathtext tick labels (10^k on log axes), no top/right spines, tight PNG at 150 dpi.
STYLE: dict[str, Any] = {
    "figure.figsize": (5.0, 3.6),
    "figure.dpi": 100,
    "figure.constrained_layout.use": True,
    "savefig.dpi": 150,
    "savefig.bbox": "tight",
    "savefig.pad_inches": 0.05,
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "legend.fontsize": 8.5,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "axes.prop_cycle": cycler(color=list(CATEGORICAL_COLORS)),
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "axes.grid.which": "both",
    "grid.alpha": 0.25,
    "grid.linewidth": 0.6,
    "axes.formatter.use_mathtext": True,
    "lines.linewidth": 1.6,
    "legend.frameon": False,
    "image.cmap": "viridis",
    "pdf.fonttype": 42,  # TrueType in PDFs: editable text, no Type 3 fonts
}

_SEQUENTIAL_CMAP = "viridis"
_SEQUENTIAL_RANGE = (0.0, 0.85)  # stop before viridis' palest yellow, unreadable on white
_NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def apply_style() -> None:
    """Select the headless Agg backend and apply :data:`STYLE` globally (CLI and scripts).

    Library code should prefer :func:`figure_style`, which changes neither the backend
    (a notebook keeps its inline backend) nor the rcParams outside its block.
    """
    matplotlib.use("Agg")
    matplotlib.rcParams.update(STYLE)


@contextmanager
def figure_style() -> Iterator[None]:
    """Context manager: :data:`STYLE` inside the block, the previous rcParams after it.

    Create, draw and save the figure inside the block: matplotlib reads most rcParams
    when an artist is created (fonts, grids, tick formatters), not when it is saved.
    """
    with matplotlib.rc_context(STYLE):
        yield


def sequential_colors(n: int) -> list[str]:
    """``n`` hex colours of increasing lightness (viridis), for an ordered sweep such as widths.

    Viridis is perceptually uniform and readable under colour-vision deficiencies and in
    greyscale; the darkest colour goes to the first (e.g. the narrowest) value.
    """
    n = check_int("n", n, min_value=1)
    cmap = matplotlib.colormaps[_SEQUENTIAL_CMAP]
    low, high = _SEQUENTIAL_RANGE
    positions = (
        [(low + high) / 2] if n == 1 else [low + (high - low) * i / (n - 1) for i in range(n)]
    )
    return [matplotlib.colors.to_hex(cmap(p)) for p in positions]


def add_reference_line(ax: Axes, y: float, label: str | None = None) -> None:
    """Draw the dashed grey horizontal line of a theory value (e.g. ‖W‖₂ = 1, λ_τ/λ_0 = 1/2)."""
    if not isinstance(ax, Axes):
        raise TypeError(f"`ax` must be a matplotlib Axes; got {type(ax).__name__}")
    ax.axhline(y, color="0.35", linestyle="--", linewidth=1.0, label=label, zorder=1)


class PlainLogFormatter(LogFormatterMathtext):
    """Log-axis labels: decades as 10^k, other ticks as plain numbers ("40", not "4×10¹")."""

    def _non_decade_format(self, sign_string: str, base: str, fx: float, usetex: bool) -> str:
        return rf"$\mathdefault{{{sign_string}{float(base) ** fx:.3g}}}$"


def plain_log_ticks(fig: Figure) -> None:
    """Give every log axis of ``fig`` :class:`PlainLogFormatter` labels (major and minor)."""
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            if axis.get_scale() == "log":
                axis.set_major_formatter(PlainLogFormatter())
                axis.set_minor_formatter(PlainLogFormatter(labelOnlyBase=False))


def save_figure(fig: Figure, directory: str | os.PathLike[str], name: str) -> list[Path]:
    """Save ``fig`` as ``<directory>/<name>.png`` (150 dpi) and ``.pdf``, then close it.

    Log axes get plain-number labels between decades (:func:`plain_log_ticks`).

    Each file is written to a temporary name and moved into place with ``os.replace``, so
    a reader never sees a partial file; ``directory`` is created if needed. The PDF carries
    no creation date, so re-plotting the same data gives byte-identical files. The figure
    is closed even when saving fails. Returns ``[png_path, pdf_path]``.
    """
    if not isinstance(fig, Figure):
        raise TypeError(f"`fig` must be a matplotlib Figure; got {type(fig).__name__}")
    if not isinstance(directory, str | os.PathLike):
        raise TypeError(f"`directory` must be a str or path; got {type(directory).__name__}")
    if not isinstance(name, str):
        raise TypeError(f"`name` must be a str; got {type(name).__name__}")
    if not _NAME_PATTERN.fullmatch(name):
        raise ValueError(
            "`name` must be a plain file stem of letters, digits, '.', '_' or '-' "
            f"(no directory, no extension needed); got {name!r}"
        )
    directory = Path(directory)
    plain_log_ticks(fig)
    paths = [directory / f"{name}.png", directory / f"{name}.pdf"]
    metadata = {"png": {"Software": None}, "pdf": {"CreationDate": None, "Producer": None}}
    try:
        for path in paths:
            fmt = path.suffix[1:]
            with atomic_path(path) as tmp:
                fig.savefig(
                    tmp,
                    format=fmt,
                    dpi=STYLE["savefig.dpi"],
                    bbox_inches="tight",
                    pad_inches=STYLE["savefig.pad_inches"],
                    metadata=metadata[fmt],
                )
    finally:
        plt.close(fig)
    return paths

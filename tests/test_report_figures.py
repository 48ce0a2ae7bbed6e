"""Figure saving (atomic PNG + PDF), the shared style and the colour palettes."""

from __future__ import annotations

import itertools
from pathlib import Path

import matplotlib
import matplotlib.image as mpimg
import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure

from deqlab.report import (
    CATEGORICAL_COLORS,
    add_reference_line,
    figure_style,
    save_figure,
    sequential_colors,
)
from deqlab.report.figures import STYLE, PlainLogFormatter


def _line_figure(width_in: float = 4.0, height_in: float = 3.0) -> Figure:
    fig, ax = plt.subplots(figsize=(width_in, height_in))
    ax.semilogy(np.arange(10), np.exp(-np.arange(10)))
    ax.set_xlabel("step")
    return fig


def test_save_figure_writes_png_and_pdf_and_closes(tmp_path: Path) -> None:
    directory = tmp_path / "new" / "figures"  # created on demand
    fig = _line_figure()
    paths = save_figure(fig, directory, "loss")
    assert paths == [directory / "loss.png", directory / "loss.pdf"]
    assert sorted(p.name for p in directory.iterdir()) == ["loss.pdf", "loss.png"]  # no temp
    assert not plt.fignum_exists(fig.number)
    pixels = mpimg.imread(paths[0])
    # 4 x 3 inches at 150 dpi, trimmed by the tight bounding box: never more than that.
    assert 300 < pixels.shape[1] <= 600 and 250 < pixels.shape[0] <= 450
    assert pixels[..., :3].std() > 0.05
    assert paths[1].read_bytes().startswith(b"%PDF-")


def test_save_figure_is_reproducible_and_overwrites(tmp_path: Path) -> None:
    first = [p.read_bytes() for p in save_figure(_line_figure(), tmp_path, "a")]
    second = [p.read_bytes() for p in save_figure(_line_figure(), tmp_path, "a")]
    assert first == second  # no timestamps in the files
    third = save_figure(_line_figure(6.0, 3.0), tmp_path, "a")
    assert mpimg.imread(third[0]).shape[1] > 700  # replaced by the wider figure
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.pdf", "a.png"]


def test_save_figure_failure_leaves_no_partial_file_and_closes(tmp_path: Path) -> None:
    (tmp_path / "bad.png").write_bytes(b"old")
    fig, ax = plt.subplots()
    ax.set_title(r"$\frac{1}$")  # invalid mathtext: raises when drawn
    with pytest.raises(ValueError):
        save_figure(fig, tmp_path, "bad")
    assert not plt.fignum_exists(fig.number)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.png"]
    assert (tmp_path / "bad.png").read_bytes() == b"old"


def test_save_figure_works_without_pyplot(tmp_path: Path) -> None:
    fig = Figure(figsize=(3, 2))
    fig.add_subplot().plot([0, 1], [1, 0])
    png, _ = save_figure(fig, str(tmp_path), "plain")
    assert mpimg.imread(png).shape[1] > 200


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        (("not a figure", ".", "x"), TypeError, "`fig` must be a matplotlib Figure; got str"),
        ((None, 3, "x"), TypeError, "`directory` must be a str or path; got int"),
        ((None, ".", 3), TypeError, "`name` must be a str; got int"),
        ((None, ".", "sub/x"), ValueError, "`name` must be a plain file stem.*got 'sub/x'"),
        ((None, ".", ""), ValueError, "`name` must be a plain file stem"),
        ((None, ".", ".hidden"), ValueError, "`name` must be a plain file stem"),
    ],
)
def test_save_figure_rejects_bad_arguments(
    args: tuple, error: type[Exception], match: str, tmp_path: Path
) -> None:
    fig = Figure()
    args = (fig if args[0] is None else args[0], *args[1:])
    with pytest.raises(error, match=match):
        save_figure(*args)
    assert list(tmp_path.iterdir()) == []


def _luminance(hex_color: str) -> float:
    """Relative luminance (WCAG 2.1) of an sRGB colour."""
    channels = np.array(to_rgb(hex_color))
    linear = np.where(channels <= 0.04045, channels / 12.92, ((channels + 0.055) / 1.055) ** 2.4)
    return float(linear @ np.array([0.2126, 0.7152, 0.0722]))


@pytest.mark.parametrize("n", [1, 2, 5, 12])
def test_sequential_colors_get_strictly_lighter(n: int) -> None:
    colors = sequential_colors(n)
    assert len(colors) == n and len(set(colors)) == n
    assert all(c.startswith("#") and len(c) == 7 for c in colors)
    luminances = [_luminance(c) for c in colors]
    assert all(a < b for a, b in itertools.pairwise(luminances))
    # readable on white: the lightest stays well below white (contrast ratio > 1.5)
    assert 1.05 / (max(luminances) + 0.05) > 1.5


def test_sequential_colors_rejects_bad_n() -> None:
    with pytest.raises(ValueError, match="`n` must be >= 1; got 0"):
        sequential_colors(0)
    with pytest.raises(TypeError, match="`n` must be an int; got float"):
        sequential_colors(2.0)  # type: ignore[arg-type]


def test_figure_style_is_scoped_and_reference_line_drawn() -> None:
    before = matplotlib.rcParams["axes.spines.top"]
    with figure_style():
        assert matplotlib.rcParams["savefig.dpi"] == STYLE["savefig.dpi"]
        assert matplotlib.rcParams["axes.spines.top"] is False
        fig, ax = plt.subplots()
        (line,) = ax.plot([0, 1])
        assert line.get_color() == CATEGORICAL_COLORS[0]
        add_reference_line(ax, 0.5, "λ_τ/λ_0 = 1/2")
        reference = ax.get_lines()[-1]
        assert reference.get_ydata() == [0.5, 0.5]
        assert reference.get_linestyle() == "--" and reference.get_label() == "λ_τ/λ_0 = 1/2"
        plt.close(fig)
    assert matplotlib.rcParams["axes.spines.top"] == before
    with pytest.raises(TypeError, match="`ax` must be a matplotlib Axes; got Figure"):
        add_reference_line(Figure(), 1.0)


def test_log_axis_labels_are_plain_numbers_between_decades(tmp_path: Path) -> None:
    with figure_style():
        fig, ax = plt.subplots()
        ax.semilogy([0, 1, 2], [20.0, 40.0, 60.0])  # less than a decade: minor labels shown
        save_figure(fig, tmp_path, "short_log")
        fig.canvas.draw()
        labels = [t.get_text() for t in ax.yaxis.get_ticklabels(minor=True) if t.get_text()]
    assert labels and not any("times" in t for t in labels), labels
    assert r"$\mathdefault{40}$" in labels
    formatter = PlainLogFormatter()
    assert formatter(100.0) == r"$\mathdefault{10^{2}}$"  # decades keep the power form

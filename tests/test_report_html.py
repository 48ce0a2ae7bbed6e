"""The HTML report of a real run directory: content, escaping, embedding, errors, browser."""

from __future__ import annotations

import base64
import csv
import io
import json
import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import matplotlib.image as mpimg
import matplotlib.pyplot as plt
import numpy as np
import pytest
import tomli_w

from deqlab.report import (
    add_reference_line,
    collect_environment,
    figure_style,
    save_figure,
    sequential_colors,
    write_index,
    write_report,
)
from deqlab.statements import OURS, Kind, Source, measure, not_measured

EVIL_CLAIM = "<script>alert('x')</script> & Φ(τ) bound"
N_METRIC_ROWS = 300
CSV_SENTINEL = "sentinel-value-not-in-report"
CONFIG = {
    "experiment": {"name": "ling2023-fig1", "preset": "quick", "hash": "3f2a9c"},
    "config": {
        "n": 64,
        "d": 16,
        "widths": [32, 64, 128],
        "sigma_w2": 0.08,
        "seed": 0,
        "data": {"kind": "synthetic"},
    },
}
STATEMENTS = [
    measure("loss decreases", Kind.OBSERVATION, Source("ling2023", "Figure 1", "converges"),
            value=0.0123456, relation="<", threshold=1.0, measured="Φ(T)/Φ(0) = 0.0123",
            expected="< 1"),
    measure("‖W(τ)‖₂ < 1", Kind.THEOREM, Source("ling2023", "Theorem 1 (i)"), value=0.52,
            relation="<", threshold=1.0, measured="max 0.52", expected="< 1"),
    measure(EVIL_CLAIM, Kind.OURS, OURS, value=2.5, relation="<=", threshold=1.0,
            measured="2.5", expected="≤ 1", detail="a<b"),
    not_measured("λ_τ ≥ λ_0/2", Kind.THEOREM, Source("ling2023", "Theorem 1 (ii)"),
                 expected="≥ 0.5", why="no λ_τ after step 0"),
    measure("Condition 1, Eq. (7)", Kind.HYPOTHESIS, Source("ling2023", "Eq. (7)"),
            value=1e-9, relation=">=", threshold=1.0, measured="lhs/rhs = 1e-09",
            expected="≥ 1", needs="m ≥ 3.2·10⁹"),
]  # fmt: skip
TASKS = [
    {"key": "width=32", "status": "finished", "error": None, "wall_s": 1.5, "reused": True},
    {"key": "width=64", "status": "finished", "error": None, "wall_s": 2.5},
    {
        "key": "width=128",
        "status": "failed",
        "error": "RuntimeError: solver diverged <at step 12>",
        "traceback": "Traceback (most recent call last):\n  File 'gd.py', line 3",
        "wall_s": 0.7,
    },
]


def _plot_figures(figures_dir: Path) -> None:
    steps = np.arange(50)
    with figure_style():
        fig, ax = plt.subplots()
        for color, rate in zip(sequential_colors(3), (0.02, 0.05, 0.1), strict=True):
            ax.semilogy(steps, np.exp(-rate * steps), color=color, label=f"rate {rate}")
        ax.set(xlabel="GD step τ", ylabel="loss Φ(τ)")
        ax.legend()
        save_figure(fig, figures_dir, "loss")
        fig, ax = plt.subplots()
        ax.plot(steps, 0.5 + 0.001 * steps)
        add_reference_line(ax, 1.0, "‖W‖₂ = 1")
        ax.legend()
        save_figure(fig, figures_dir, "w_norm")


def _write_metrics(path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["width", "step", "loss", "note"])
        for i in range(N_METRIC_ROWS):
            # One quoted field spans two lines: a line count would over-count it.
            note = "comma, and\nnewline" if i == 7 else (CSV_SENTINEL if i == 11 else "")
            writer.writerow([32, i, 1.0 / (i + 1), note])


def _build_run_dir(run_dir: Path) -> Path:
    _plot_figures(run_dir / "figures")
    (run_dir / "config.toml").write_text(tomli_w.dumps(CONFIG), encoding="utf-8")
    _write_metrics(run_dir / "metrics.csv")
    summary = {
        "experiment": "ling2023-fig1",
        "title": "Ling et al. 2023 — Figure 1",
        "paper": "Global convergence of over-parameterized DEQs (AISTATS 2023)",
        "config_hash": "3f2a9c",
        "preset": "quick",
        "status": "failed",
        "started": "2026-11-26T01:00:00+00:00",
        "finished": "2026-11-26T01:03:05+00:00",
        "wall_s": 185.0,
        "tasks": TASKS,
        "statements": [s.as_dict() for s in STATEMENTS],
        "deviations": [
            {
                "setting": "dataset",
                "paper": "mnist",
                "run": "digits",
                "kind": "substitution",
                "where": "Section 5",
            },
        ],
        "figures": [  # the PDF beside a listed PNG is linked, not shown twice
            "figures/loss.png",
            "figures/loss.pdf",
            {"path": "figures/w_norm.png", "caption": "‖W(τ)‖₂"},
        ],
        "environment": collect_environment(),
    }
    (run_dir / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    return run_dir


class _Page(HTMLParser):
    """Tables (by id, as lists of rows of cell texts), key-value tables and image sources."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tables: list[tuple[str | None, list[list[str]]]] = []
        self.images: list[str] = []
        self.notes: list[str] = []
        self._cell: list[str] | None = None
        self._in_note = False
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "table":
            self.tables.append((attributes.get("id"), []))
        elif tag == "tr":
            self.tables[-1][1].append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "img":
            self.images.append(attributes["src"] or "")
        elif tag == "p" and attributes.get("class") == "note":
            self._in_note = True
            self.notes.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][1][-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "p":
            self._in_note = False

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        if self._in_note:
            self.notes[-1] += data

    def table(self, table_id: str) -> list[list[str]]:
        return next(rows for tid, rows in self.tables if tid == table_id)

    def key_values(self) -> dict[str, str]:
        return {row[0]: row[1] for _, rows in self.tables for row in rows if len(row) == 2}


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    run_dir = _build_run_dir(tmp_path_factory.mktemp("run"))
    path = write_report(run_dir)
    return path, path.read_text(encoding="utf-8")


def test_report_is_written_atomically_in_the_run_dir(report: tuple[Path, str]) -> None:
    path, _ = report
    assert path == path.parent / "report.html"
    write_report(path.parent)  # overwrite in place
    assert sorted(p.name for p in path.parent.iterdir()) == [
        "config.toml",
        "figures",
        "metrics.csv",
        "report.html",
        "summary.json",
    ]


def test_statements_are_grouped_by_kind_with_verdict_margin_and_needs(
    report: tuple[Path, str],
) -> None:
    page = _Page(report[1])
    paper = page.table("statements-paper")
    assert paper[0] == ["Statement", "Kind", "Source", "Verdict", "Measured", "Expected",
                        "Margin", "Detail"]  # fmt: skip
    assert [row[:4] for row in paper[1:]] == [
        ["loss decreases", "observation", "Ling et al. 2023, Figure 1“converges”", "PASS"],
        ["‖W(τ)‖₂ < 1", "theorem", "Ling et al. 2023, Theorem 1 (i)", "PASS"],
        ["λ_τ ≥ λ_0/2", "theorem", "Ling et al. 2023, Theorem 1 (ii)", "NOT MEASURED"],
    ]
    assert paper[2][6] == "0.48" and paper[3][6] == "—"
    hypotheses = page.table("statements-hypotheses")
    assert hypotheses[1][3] == "UNMET"
    assert hypotheses[1][7] == "Would need: m ≥ 3.2·10⁹"
    ours = page.table("statements-ours")
    assert [row[:4] for row in ours[1:]] == [[EVIL_CLAIM, "ours", "ours", "FAIL"]]
    assert ours[1][7] == "a<b"


def test_deviations_table_lists_each_difference_from_the_paper(report: tuple[Path, str]) -> None:
    rows = _Page(report[1]).table("deviations")
    assert rows[0] == ["Setting", "Paper", "This run", "Kind", "Where in the paper"]
    assert rows[1] == ["dataset", "mnist", "digits", "substitution", "Section 5"]


def test_header_counts_verdicts_by_kind_and_shows_status_and_wall_time(
    report: tuple[Path, str],
) -> None:
    text = report[1]
    assert "<h1>Ling et al. 2023 — Figure 1</h1>" in text
    assert (
        "paper observations: 1 of 1 reproduced; theorems: 1 checked (1 pass), 0 not "
        "applicable, 1 not measured; hypotheses: 0 of 1 hold (margins shown); ours: 0 of 1 pass"
    ) in text
    assert "<span class='badge bad'>1 FAIL</span>" in text
    assert "<span class='badge bad'>failed</span>" in text
    assert "3 min 05 s" in text
    assert "3 (1 failed)" in text


def test_figures_are_embedded_pngs_identical_to_the_files(report: tuple[Path, str]) -> None:
    path, text = report
    images = _Page(text).images
    assert len(images) == 2
    for src, name in zip(images, ("loss", "w_norm"), strict=True):
        prefix = "data:image/png;base64,"
        assert src.startswith(prefix)
        data = base64.b64decode(src[len(prefix) :], validate=True)
        on_disk = path.parent / "figures" / f"{name}.png"
        assert data == on_disk.read_bytes()
        pixels = mpimg.imread(io.BytesIO(data), format="png")
        assert pixels.ndim == 3 and min(pixels.shape[:2]) > 200
    assert "href='figures/loss.pdf'" in text
    assert "<a href='figures/loss.png'><img" in text  # full size on click
    assert "<figcaption>‖W(τ)‖₂" in text


def test_text_from_the_run_is_escaped(report: tuple[Path, str]) -> None:
    text = report[1]
    assert "<script" not in text.lower()
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; Φ(τ) bound" in text
    assert "solver diverged &lt;at step 12&gt;" in text


def test_page_is_self_contained(report: tuple[Path, str]) -> None:
    text = report[1]
    for marker in ("<link", "<script", "@import", "url(", "src='http", 'src="http'):
        assert marker not in text
    assert all(src.startswith("data:") for src in _Page(text).images)


def test_tasks_table_shows_failed_task_with_its_error(report: tuple[Path, str]) -> None:
    page = _Page(report[1])
    tasks = next(rows for _, rows in page.tables if rows and rows[0][0] == "Task")
    assert [row[:2] for row in tasks[1:]] == [
        ["width=32", "finished (reused)"],
        ["width=64", "finished"],
        ["width=128", "failed"],
    ]
    assert tasks[3][3] == f"{TASKS[2]['error']}traceback{TASKS[2]['traceback']}"
    assert tasks[1][3] == ""


def test_config_metrics_and_environment_are_shown(report: tuple[Path, str]) -> None:
    _, text = report
    values = _Page(text).key_values()
    assert values["name"] == "ling2023-fig1"
    assert values["sigma_w2"] == "0.08"
    assert values["widths"] == "[32, 64, 128]"
    assert values["data.kind"] == "synthetic"
    assert values["rows"] == str(N_METRIC_ROWS)
    assert values["columns"] == "width, step, loss, note"
    assert values["file"] == "metrics.csv"
    assert "<a href='metrics.csv'>metrics.csv</a>" in text  # relative: the run can move
    assert CSV_SENTINEL not in text  # the table itself is not embedded
    environment = collect_environment()
    assert values["torch"] == environment["torch"]
    assert values["deqlab"] == environment["deqlab"]
    assert values["torch_threads"] == str(environment["torch_threads"])


def test_missing_optional_pieces_render_as_notes(tmp_path: Path) -> None:
    summary = {"experiment": "ling2023-fig1", "status": "running", "figures": ["figures/a.png"]}
    (tmp_path / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    page = _Page(write_report(tmp_path).read_text(encoding="utf-8"))
    assert page.notes == [
        "No statement was checked in this run.",
        "This run uses the paper's setting throughout.",
        "Figure 'figures/a.png' is listed but the file is missing.",
        "No tasks recorded.",
        "metrics.csv not found in the run directory (no metrics written yet)",
        "config.toml not found in the run directory",
        "No environment recorded.",
    ]
    summary["figures"] = []
    (tmp_path / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    assert "No figures yet." in _Page(write_report(tmp_path).read_text(encoding="utf-8")).notes


def test_figure_that_is_not_a_png_is_a_note(tmp_path: Path) -> None:
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "only.pdf").write_bytes(b"%PDF-1.4")
    summary = {"figures": ["figures/only.pdf"]}
    (tmp_path / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    page = _Page(write_report(tmp_path).read_text(encoding="utf-8"))
    assert page.images == []
    assert "Figure 'figures/only.pdf' is not a PNG file and is not embedded." in page.notes


def test_unparsable_config_is_a_note(tmp_path: Path) -> None:
    (tmp_path / "summary.json").write_text("{}", encoding="utf-8")
    (tmp_path / "config.toml").write_text("n = = 3", encoding="utf-8")
    notes = _Page(write_report(tmp_path).read_text(encoding="utf-8")).notes
    assert any(note.startswith("config.toml could not be parsed") for note in notes)


@pytest.mark.parametrize(
    ("summary", "error", "match"),
    [
        ("{not json", ValueError, "is not valid JSON"),
        ("[1, 2]", ValueError, "must hold a JSON object; got list"),
        ('{"statements": {"a": 1}}', ValueError, "`statements` must be a list of objects"),
        ('{"statements": [{"name": "a"}]}', ValueError, "must have the field 'kind'"),
        ('{"deviations": 3}', ValueError, "`deviations` must be a list of objects"),
        ('{"tasks": [1]}', ValueError, "`tasks` must be a list of objects"),
        ('{"figures": ["../secret.png"]}', ValueError, r"`figures\[0\]` must be a path inside"),
        ('{"figures": [{"caption": "x"}]}', ValueError, r"`figures\[0\]` must be a path string"),
        ('{"environment": [1]}', ValueError, "`environment` must be an object"),
    ],
)
def test_malformed_summary_is_rejected(
    tmp_path: Path, summary: str, error: type[Exception], match: str
) -> None:
    (tmp_path / "summary.json").write_text(summary, encoding="utf-8")
    with pytest.raises(error, match=match):
        write_report(tmp_path)
    assert not (tmp_path / "report.html").exists()


def test_bad_run_dir_is_rejected(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(FileNotFoundError, match=r"run directory .*nope' does not exist"):
        write_report(missing)
    with pytest.raises(FileNotFoundError, match=r"summary\.json' not found"):
        write_report(tmp_path)
    (tmp_path / "file.txt").write_text("x", encoding="utf-8")
    with pytest.raises(ValueError, match="`run_dir` must be a directory; got the file"):
        write_report(tmp_path / "file.txt")
    with pytest.raises(TypeError, match="`run_dir` must be a str or path; got int"):
        write_report(3)  # type: ignore[arg-type]


def test_index_lists_runs_with_links_and_verdict_counts(
    tmp_path: Path, report: tuple[Path, str]
) -> None:
    shutil.copytree(report[0].parent, tmp_path / "ling2023-fig1" / "3f2a9c")
    other = tmp_path / "kawaguchi" / "deep" / "run2"
    other.mkdir(parents=True)
    summary = {"experiment": "kawaguchi2021-fig1", "status": "finished", "started": 0.0}
    summary["statements"] = [STATEMENTS[1].as_dict()]
    (other / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "summary.json").write_text("{", encoding="utf-8")

    index = write_index(tmp_path)
    text = index.read_text(encoding="utf-8")
    rows = _Page(text).tables[0][1]
    assert [row[0] for row in rows[1:]] == [
        "ling2023-fig1/3f2a9c",
        "kawaguchi/deep/run2 (no report.html yet)",
        "broken (no report.html yet)",
    ]
    assert rows[1][4].startswith("1 FAIL paper observations: 1 of 1 reproduced")
    assert rows[2][4] == "no FAIL theorems: 1 checked (1 pass), 0 not applicable"
    assert rows[2][6] == "1970-01-01T00:00:00+00:00"
    assert rows[3][1].startswith("unreadable:")
    assert "href='ling2023-fig1/3f2a9c/report.html'" in text
    assert (index.parent / "ling2023-fig1/3f2a9c/report.html").is_file()


# ---- headless Chromium ------------------------------------------------------------------

_CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        reason = "chromium is not installed: apt-get install chromium"
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(f"{reason} (CI must render the report; .ci/run installs it)")
        pytest.skip(reason)
    return path


def _run_chromium(chromium: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    command = [chromium, *_CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def test_report_renders_in_headless_chromium(
    chromium: str, report: tuple[Path, str], tmp_path: Path
) -> None:
    shot = tmp_path / "report.png"
    url = report[0].resolve().as_uri()
    _run_chromium(chromium, tmp_path, f"--screenshot={shot}", "--window-size=1280,2000", url)
    rgb = mpimg.imread(shot)[..., :3]  # (2000, 1280, 3) in [0, 1]
    assert rgb.shape[:2] == (2000, 1280)
    not_white = (rgb < 0.9).any(axis=-1)
    assert not_white.mean() > 0.03, "screenshot is (almost) blank"
    assert rgb.std() > 0.05
    fail_red = np.abs(rgb - np.array([0xCF, 0x22, 0x2E]) / 255).max(axis=-1) < 0.08
    assert fail_red.sum() > 20, "the FAIL verdict's colour is missing: CSS not applied?"

    dom = _run_chromium(chromium, tmp_path, "--dump-dom", url).stdout
    assert '<table id="statements-paper">' in dom
    assert "<td>loss decreases</td>" in dom
    assert dom.count('<img src="data:image/png;base64,') == 2

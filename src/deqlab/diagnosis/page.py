"""The HTML of a diagnosis and of a run's diagnostics: self-contained (inline CSS, figures
embedded as PNG data), built from the run reports' primitives (:mod:`deqlab.report.html_parts`)."""

from __future__ import annotations

import base64
import io
from html import escape
from pathlib import Path

from matplotlib.figure import Figure

from deqlab._atomic import write_text_atomic
from deqlab.diagnosis.figures import ntk_figure, per_sample_figure, run_figure
from deqlab.report.html_parts import flatten_keys, html_page, html_section, kv_table


def embedded(fig: Figure, caption: str) -> str:
    """``fig`` as an inline PNG with its caption."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    uri = "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")
    return (
        f"<figure><img src='{uri}' alt='{escape(caption)}'>"
        f"<figcaption>{escape(caption)}</figcaption></figure>"
    )


def diagnosis_body(diagnosis) -> str:
    """The sections of a :class:`~deqlab.diagnosis.result.Diagnosis`: its reading, the
    numbers, the per-sample estimates and the NTK's spectrum."""
    w, n = diagnosis.wellposed, diagnosis.ntk
    summary = str(diagnosis).split("\nreading: ")[0]
    figures = "\n".join([
        embedded(per_sample_figure(w), "ρ(J_f), ‖J_f‖₂ and σ_min(I − J_f) at z*, per sample "
                 "(sorted), each with its bracket (one side by Courant–Fischer; the other exact, "
                 "or holding with probability ≥ 0.999 over the random start)"),
        "<div class='figures'>",
        embedded(ntk_figure(n.eigenvalues, n.over()), f"the NTK's {n.size} eigenvalues at z*"),
        "</div>",
    ])  # fmt: skip
    numbers = {k: v for k, v in diagnosis.to_dict().items() if k != "wellposed"}
    numbers["ntk"] = {k: v for k, v in numbers["ntk"].items() if k != "eigenvalues"}
    reading = (
        f"<p>{escape(diagnosis.reading())}</p>"
        f"<pre style='white-space: pre-wrap'>{escape(summary)}</pre>"
    )
    return "\n".join([
        html_section("Reading", reading),
        html_section("Figures", figures),
        html_section("Numbers", kv_table(flatten_keys(numbers), "numbers")),
    ])  # fmt: skip


def diagnosis_page(diagnosis) -> str:
    return html_page("deqlab diagnose", "<header><h1>deqlab diagnose</h1></header>\n"
                     + diagnosis_body(diagnosis))  # fmt: skip


def run_page(recorder) -> str:
    """The page of a :class:`~deqlab.diagnosis.along_run.DiagnosticsRecorder`: its cost, the
    curves along the run and the table."""
    table = recorder.table()
    body = "\n".join([
        "<header><h1>deqlab diagnostics along a run</h1></header>",
        html_section("Reading", f"<p>{escape(recorder.reading())}</p>"),
        html_section("Figures", embedded(run_figure(table), "along the run: ‖J_f‖₂, ρ(J_f) "
                                         "and σ_min(I − J_f) with brackets, solver steps")),
        html_section("Table", table.to_html(index=False, float_format=lambda v: f"{v:.4g}",
                                            na_rep="—", border=0)),
    ])  # fmt: skip
    return html_page("deqlab diagnostics along a run", body)


def write_page(html: str, path: str | Path) -> Path:
    """Write ``html`` to ``path`` (a file; its folder is created) atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_text_atomic(path, html)

"""The HTML page of a verification, built from the run reports' primitives
(:mod:`deqlab.report.html_parts`): self-contained, figures embedded, every text escaped.

Sections: header (data, model, paper, verdicts), the one-line answers with the certified
brackets and the stand-ins (ours), statements (the report's three groups), the numbers
(every key of ``--json``), training numbers, figures, data and settings.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

from deqlab._atomic import write_text_atomic
from deqlab.report.html_parts import (
    figures_section,
    flatten_keys,
    html_note,
    html_page,
    html_section,
    kv_table,
    statements_section,
    verdict_badge,
)
from deqlab.report.rundir import FigureEntry
from deqlab.verification.figures import draw
from deqlab.verification.precision import lines as precision_lines
from deqlab.verification.subsample import line as subsample_line

PAGE_FILE = "index.html"
FIGURES_DIR = "figures"


def write_page(verification, out: Path) -> Path:
    """Draw the figures into ``out/figures`` and write ``out/index.html``; return its path."""
    out.mkdir(parents=True, exist_ok=True)
    figures = [
        FigureEntry(f"{FIGURES_DIR}/{stem}.png", caption)
        for stem, caption in draw(verification, out / FIGURES_DIR)
    ]
    doc = verification.as_dict()
    title = f"deqlab verify: {doc['data']['name']} · {doc['model']}"
    training = doc["training"]
    body = "\n".join(
        [
            _header(doc, title, verification.counts),
            _answers(verification),
            statements_section(verification.statements),
            html_section("Numbers", kv_table(flatten_keys(doc["numbers"]), "numbers")),
            html_section(
                "Training",
                kv_table(
                    flatten_keys({k: v for k, v in training.items() if k != "records"}), "training"
                )
                if training
                else html_note("No training (run with --train STEPS)."),
            ),
            figures_section(out, figures),
            html_section("Data", kv_table(doc["data"], "data")),
            html_section("Settings", kv_table(doc["settings"], "settings")),
        ]
    )
    return write_text_atomic(out / PAGE_FILE, html_page(title, body))


def _header(doc: dict, title: str, counts) -> str:
    data = doc["data"]
    facts = [
        ("Data", escape(f"{data['name']}, n = {data['n']}, d = {data['d']}")),
        ("Model", f"<code>{escape(doc['model'])}</code>"),
        ("Verdicts", verdict_badge(counts) + " " + escape(doc["verdict_sentence"])),
        ("deqlab", escape(doc["deqlab_version"])),
    ]
    return (
        f"<header><h1>{escape(title)}</h1><p class='paper'>{escape(doc['paper'])}</p>"
        "<div class='facts'>"
        + "".join(f"<span>{escape(k)}: <b>{v}</b></span>" for k, v in facts)
        + "</div></header>"
    )


def _answers(verification) -> str:
    """One line per theorem, the certified brackets (and the subsample past memory), then
    the stand-ins (ours) where there are any."""
    items = "".join(
        f"<li><b>{escape(a.theorem)}</b>: {escape(a.status)} — {escape(a.why)}</li>"
        for a in verification.answers
    )
    numbers = verification.numbers
    notes = [line for line in (subsample_line(numbers),) if line] + precision_lines(numbers)
    items += "".join(f"<li>{escape(line.strip())}</li>" for line in notes)
    stand_ins = verification.stand_ins.lines()
    extra = "".join(f"<li>{escape(line)}</li>" for line in stand_ins)
    body = f"<ul class='answers'>{items}</ul>"
    if stand_ins:
        body += f"<p>Stand-ins (ours, measurements, not guarantees):</p><ul>{extra}</ul>"
    return html_section("Does each theorem apply?", body)

"""The statements as one table on the terminal, for ``deqlab reproduce`` and ``deqlab verify``."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

#: The colour of each verdict.
VERDICT_STYLE = {
    "PASS": "green",
    "HOLDS": "green",
    "FAIL": "bold red",
    "UNMET": "yellow",
    "NOT APPLICABLE": "dim",
    "NOT MEASURED": "dim",
}


def print_statements(statements: list[dict[str, object]], console: Console) -> None:
    """The statements (their ``as_dict()``) as one table: verdict, kind, source, measured,
    expected, what is needed."""
    if not statements:
        return
    table = Table(
        "statement",
        "kind",
        "source",
        "verdict",
        "measured",
        "expected",
        "needs",
        title="Statements",
    )
    for s in statements:
        style = VERDICT_STYLE.get(str(s["verdict"]), "")
        table.add_row(
            escape(str(s["name"])),
            str(s["kind"]),
            escape(str(s["citation"])),
            f"[{style}]{s['verdict']}[/{style}]",
            escape(str(s["measured"])),
            escape(str(s["expected"])),
            escape(str(s.get("needs", ""))),
        )
    console.print(table)

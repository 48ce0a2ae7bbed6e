"""What ``deqlab show`` prints: an experiment's config, data sets, metric columns,
deviations from the paper, estimated run time and the command that runs it."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table


def _value(value: object) -> str:
    if value is None:
        return "none"
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def print_show(info: dict[str, Any]) -> None:
    """The experiment, its config table (the preset's values in bold where they differ), its
    data sets, metric columns, deviations from the paper, run-time estimate and command."""
    console = Console(width=160)
    console.print(f"[bold]{info['name']}[/] — {escape(info['title'])}")
    console.print(f"paper: {escape(info['paper'])}")
    console.print(f"preset: {info['preset']} (presets: {', '.join(info['presets'])})")
    table = Table("key", "type", "default", info["preset"], title="Config (--set KEY=VALUE)")
    for f in info["config"]:
        changed = f["value"] != f["default"]
        value = escape(_value(f["value"]))
        table.add_row(
            f["name"], escape(f["type"]), escape(_value(f["default"])),
            f"[bold]{value}[/]" if changed else value,
        )  # fmt: skip
    console.print(table)
    if info["datasets"]:
        table = Table("data set", "status", "location / how to fetch", title="Data sets")
        for d in info["datasets"]:
            status = "[green]present[/]" if d["present"] else f"[red]{d['status']}[/]"
            where = d.get("fetch") or d.get("location") or ""
            detail = f" — {d['detail']}" if d.get("detail") else ""
            table.add_row(d["name"], status, escape(f"{where}{detail}"))
        console.print(table)
    else:
        console.print("data sets: none (the experiment generates its data)")
    if info["metric_columns"]:
        table = Table("column", "meaning", title="Metric columns (metrics.csv)")
        for column, meaning in info["metric_columns"].items():
            table.add_row(column, escape(meaning))
        console.print(table)
    else:
        console.print("metric columns: not documented by this experiment")
    if info["deviations"]:
        table = Table("setting", "paper", "this preset", "kind", "where in the paper",
                      title="Deviations from the paper")  # fmt: skip
        for d in info["deviations"]:
            table.add_row(*(escape(str(d[k])) for k in ("setting", "paper", "run", "kind",
                                                        "where")))  # fmt: skip
        console.print(table)
    console.print(f"paper setting: {escape(info['deviations_sentence'])}")
    console.print(f"estimated run time: {escape(info['run_time']['text'])}")
    console.print(f"run it: {info['command']}")

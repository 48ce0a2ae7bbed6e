"""docs/architecture.md's layout lists every module of src/deqlab, one line each, and nothing
that is not there: a module added, moved or removed without its line fails here.

The layout is a tree: an entry is a line indented by 2, 4, 6 or 8 spaces whose first field
(up to two spaces or the end) is ``name/`` (a folder, at that depth) or ``a.py`` /
``a.py, b.py`` (modules of the folder above it); deeper lines continue a description. A
package's ``__init__.py`` is not listed, except the top one."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "deqlab"
_ENTRY = re.compile(r"^(?P<indent>(?:  ){1,4})(?P<first>\S.*?)(?:\s{2,}|$)")


def layout_block(text: str) -> list[str]:
    """The lines of the ``src/deqlab/`` tree of the Layout section, up to ``tests/``."""
    section = text.split("## Layout", 1)[1]
    block = section.split("```\nsrc/deqlab/\n", 1)[1].split("\n```", 1)[0]
    return block.split("\ntests/", 1)[0].splitlines()


def documented(lines: list[str]) -> set[str]:
    """The module paths (relative to src/deqlab) the tree lists."""
    folders: list[str] = []
    found = set()
    for line in lines:
        match = _ENTRY.match(line)
        if match is None:
            continue
        depth = len(match["indent"]) // 2 - 1
        first = match["first"].strip()
        if first.endswith("/"):
            folders[depth:] = [first.rstrip("/")]
            continue
        for name in first.split(", "):
            if name.endswith(".py"):
                found.add("/".join([*folders[:depth], name]))
    return found


def modules() -> set[str]:
    """Every module of src/deqlab but the packages' ``__init__.py`` (the top one kept)."""
    paths = {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")}
    return {p for p in paths if not p.endswith("/__init__.py")}


def test_the_layout_lists_every_module_and_no_other():
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    listed = documented(layout_block(text))
    assert sorted(modules() - listed) == [], "modules missing from docs/architecture.md"
    assert sorted(listed - modules()) == [], "docs/architecture.md lists modules that are gone"


def test_the_reader_of_the_tree_follows_folders_and_lists():
    lines = [
        "  top.py           a module",
        "  pkg/             a folder",
        "    a.py, b.py     two modules of pkg",
        "                   a description going on (not an entry)",
        "    sub/",
        "      c.py         one of pkg/sub",
        "  d.py             back at the top",
    ]
    assert documented(lines) == {"top.py", "pkg/a.py", "pkg/b.py", "pkg/sub/c.py", "d.py"}

"""The documentation runs: every ```python block of the README and docs/ executes as written.

Each block runs in a fresh interpreter (``python -c``) from a temporary directory, so a block
that writes results leaves nothing behind and cannot lean on the test session's state.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def _blocks() -> list[tuple[str, str]]:
    found = []
    for path in DOCUMENTS:
        text = path.read_text(encoding="utf-8")
        for i, match in enumerate(_BLOCK.finditer(text)):
            found.append((f"{path.relative_to(ROOT)}#{i}", match.group(1)))
    return found


@pytest.mark.parametrize(("where", "code"), _blocks(), ids=[w for w, _ in _blocks()])
def test_documented_python_runs(where: str, code: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"{where} failed:\n{done.stderr[-3000:]}"


def test_the_repository_stands_alone() -> None:
    """No file points outside the repository for its design notes (docs/ holds them)."""
    outside = ("../" + "shared", "DESIGN" + ".md")  # spelled apart: this file is scanned too
    skipped = {".venv", ".git", "results", "build", "dist", "__pycache__"}
    for path in ROOT.rglob("*"):
        if skipped & set(path.relative_to(ROOT).parts) or not path.is_file():
            continue
        if path.suffix in {".py", ".md", ".toml", ".cff", ".css", ".cfg"} or path.name in {
            "Makefile",
            "run",
            "LICENSE",
        }:
            text = path.read_text(encoding="utf-8")
            assert not any(word in text for word in outside), path

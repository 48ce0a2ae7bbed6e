"""The documentation runs, and prints what it says it prints.

Every ```python block of the README and docs/ executes as written, each in a fresh
interpreter (``python -c``) from a temporary directory, so a block that writes results
leaves nothing behind and cannot lean on the test session's state. A one-line ``print(...)``
with a trailing comment states its output: ``print(x)  # 0.18 True`` must print ``0.18``
(to the digits shown) and ``True``; ``...`` in the comment stands for any text.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from deqlab.experiments.catalog import (
    BEGIN,
    END,
    builtin_names,
    markers,
    setting_block,
    statements_block,
    with_settings,
    with_statements,
    with_table,
)
from deqlab.experiments.registry import experiment_names, get_experiment
from deqlab.papers import reproduced

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
_ANNOTATED_PRINT = re.compile(r"^(?P<indent>\s*)(?P<call>print\(.*\))\s+#\s?(?P<expected>.+)$")
_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_MARK = "\x1edoc-print"


def _blocks() -> list[tuple[str, str]]:
    found = []
    for path in DOCUMENTS:
        text = path.read_text(encoding="utf-8")
        for i, match in enumerate(_BLOCK.finditer(text)):
            found.append((f"{path.relative_to(ROOT)}#{i}", match.group(1)))
    return found


def instrument(code: str) -> tuple[str, dict[int, str]]:
    """Fence every annotated print with markers; return the code and {line: expected}."""
    lines, expected = [], {}
    for number, line in enumerate(code.splitlines(), start=1):
        match = _ANNOTATED_PRINT.match(line)
        if match is None:
            lines.append(line)
            continue
        indent, call = match["indent"], match["call"]
        expected[number] = match["expected"].strip()
        lines += [
            f"{indent}print({_MARK + ' ' + str(number)!r}, flush=True)",
            f"{indent}{call}",
            f"{indent}print({_MARK + ' end'!r}, flush=True)",
        ]
    return "\n".join(lines) + "\n", expected


def printed_by(stdout: str) -> dict[int, list[str]]:
    """{line: [what each execution of that annotated print wrote]} from fenced stdout."""
    found: dict[int, list[str]] = {}
    for piece in stdout.split(_MARK + " ")[1:]:
        head, _, rest = piece.partition("\n")
        if head != "end":
            found.setdefault(int(head), []).append(rest.split(_MARK + " end")[0])
    return found


def _agrees(shown: str, printed: str) -> bool:
    """``printed`` equals ``shown`` to the digits ``shown`` gives."""
    if re.fullmatch(r"[-+]?\d+", shown):
        return re.fullmatch(r"[-+]?\d+", printed) is not None and int(shown) == int(printed)
    mantissa = shown.lower().split("e")[0]
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    exponent = int(shown.lower().split("e")[1]) if "e" in shown.lower() else 0
    half_unit = 0.5 * 10.0 ** (exponent - decimals)
    return math.isclose(float(shown), float(printed), rel_tol=1e-12, abs_tol=half_unit * 1.0001)


def matches(expected: str, printed: str) -> bool:
    """Whether ``printed`` is what the comment ``expected`` says (numbers to its digits)."""
    parts = re.split(rf"({_NUMBER}|\.\.\.|…)", " ".join(expected.split()))
    pattern, shown = "", []
    for i, part in enumerate(parts):
        if i % 2 == 0:
            pattern += r"\s+".join(re.escape(word) for word in part.split(" "))
        elif part in {"...", "…"}:
            pattern += ".*?"
        else:
            pattern += f"({_NUMBER})"
            shown.append(part)
    found = re.fullmatch(pattern, " ".join(printed.split()), re.DOTALL)
    return found is not None and all(map(_agrees, shown, found.groups()))


@pytest.mark.parametrize(("where", "code"), _blocks(), ids=[w for w, _ in _blocks()])
def test_documented_python_runs_and_prints_what_it_says(
    where: str, code: str, tmp_path: Path
) -> None:
    program, expected = instrument(code)
    done = subprocess.run(
        [sys.executable, "-c", program], cwd=tmp_path, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"{where} failed:\n{done.stderr[-3000:]}"
    printed = printed_by(done.stdout)
    for line, comment in expected.items():
        runs = printed.get(line)
        assert runs, f"{where}, line {line}: the print annotated '# {comment}' never ran"
        for output in runs:
            assert matches(comment, output), (
                f"{where}, line {line} says it prints '{comment}' but printed '{output.strip()}'"
            )


@pytest.mark.parametrize(
    ("expected", "printed", "agree"),
    [
        ("True None", "True None\n", True),
        ("True None", "False W_norm_ge_1\n", False),
        ("0.18 True", "0.1791 True", True),
        ("0.18 True", "0.1749 True", False),
        ("λ* = 0.1791, cond 84.91", "λ* = 0.17906, cond 84.9105", True),
        ("1.2e-07", "1.23e-07", True),
        ("1.2e-07", "1.26e-07", False),
        ("3 of 3 reproduced; theorems: ...", "3 of 3 reproduced; theorems: 2 pass", True),
        ("3 of 3 reproduced; theorems: ...", "2 of 3 reproduced; theorems: 2 pass", False),
        ("3", "3.0", False),
        ("19.84 → 2.976", "19.84 → 2.976", True),
    ],
)
def test_a_comment_is_compared_with_what_is_printed(expected, printed, agree) -> None:
    assert matches(expected, printed) is agree


def test_the_fences_find_each_annotated_print() -> None:
    program, expected = instrument("x = 2\nfor i in range(2):\n    print(i + x)  # 2\nprint('a')\n")
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    )
    assert expected == {3: "2"}
    assert [s.strip() for s in printed_by(done.stdout)[3]] == ["2", "3"]
    assert not matches("2", printed_by(done.stdout)[3][1])


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


def test_the_readme_lists_every_registered_experiment_and_preset() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert with_table(readme) == readme, "README.md's experiment table is stale: run `make readme`"
    for name in experiment_names():
        if get_experiment(name).paper in reproduced():
            assert f"| `{name}` |" in readme


def test_experiments_md_holds_every_experiment_s_declared_setting() -> None:
    """docs/experiments.md's heading, presets and paper setting of each experiment are
    generated from its declaration (every config field); its statements blocks are checked
    by the tiny run of each experiment (tests/test_cli_experiments.py)."""
    text = (ROOT / "docs" / "experiments.md").read_text(encoding="utf-8")
    stale = "docs/experiments.md is stale: run `make docs`"
    assert with_settings(text) == text, stale
    for name in builtin_names():
        experiment = get_experiment(name)
        assert all(
            f"| `{field}` |" in setting_block(experiment) for field in experiment.paper_setting
        )
        assert markers("statements", name)[0] in text


def test_a_stale_experiments_md_block_is_caught() -> None:
    name = builtin_names()[0]
    begin, end = markers("setting", name)
    stale = f"intro\n{begin}\n| `old` | gone | x |\n{end}\n"
    for other in builtin_names()[1:]:
        stale += "\n".join(markers("setting", other)) + "\n"
    assert with_settings(stale) != stale and "| `old` |" not in with_settings(stale)
    begin, end = markers("statements", name)
    assert "| s | theorem |" not in with_statements(f"{begin}\n| s | theorem |\n{end}", {name: []})
    assert statements_block([]).startswith("Statements, with their verdicts at the `tiny` preset")


def test_a_stale_readme_table_is_caught() -> None:
    stale = f"intro\n{BEGIN}\n| `old-experiment` | gone | `tiny` |\n{END}\nrest\n"
    assert with_table(stale) != stale
    with pytest.raises(ValueError, match="markers"):
        with_table("no markers here")


def _findings() -> list[tuple[str, str]]:
    text = (ROOT / "docs" / "findings.md").read_text(encoding="utf-8")
    # a finding ends at the next finding or at a top-level section (the errata)
    return re.findall(r"^## (.+?)\n(.*?)(?=^#{1,2} |\Z)", text, re.DOTALL | re.MULTILINE)


@pytest.mark.parametrize(("title", "body"), _findings(), ids=[t[:40] for t, _ in _findings()])
def test_each_finding_quotes_the_paper_and_is_shown_by_a_command_and_pinned_by_a_test(
    title: str, body: str
) -> None:
    assert "**The statement**" in body and "**What the runs show.**" in body, title
    commands = re.findall(r"^```bash\n(.*?)^```", body, re.DOTALL | re.MULTILINE)
    assert commands and all(line.startswith("deqlab ") for c in commands for line in c.splitlines())
    pinned = re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", body)
    assert pinned, f"{title}: no test pins this finding"
    for path, name in pinned:
        source = (ROOT / path).read_text(encoding="utf-8")
        assert re.search(rf"^def {name}\(", source, re.MULTILINE), (
            f"{title}: {path}::{name} is gone"
        )


def test_the_readme_links_the_findings_at_its_top() -> None:
    head = (ROOT / "README.md").read_text(encoding="utf-8").split("## Quick start")[0]
    assert "(docs/findings.md)" in head

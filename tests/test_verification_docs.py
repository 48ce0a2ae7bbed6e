"""docs/verify.md prints what it says: each ``$ deqlab verify …`` console block is run on the
data the page's own Python block writes, and its output is compared, line by line, with the
text block that follows (numbers to the digits shown, ``…`` for any text: the rules of
tests/test_docs.py)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deqlab.cli import app
from test_docs import matches

PAGE = Path(__file__).resolve().parents[1] / "docs" / "verify.md"
_RUN = re.compile(r"```console\n\$ deqlab (verify [^\n]+)\n```\n\n```text\n(.*?)\n```", re.DOTALL)
_PYTHON = re.compile(r"```python\n(.*?)```", re.DOTALL)


def _examples() -> list[tuple[str, str]]:
    return _RUN.findall(PAGE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """The directory where the page's Python block wrote breast_cancer.csv."""
    where = tmp_path_factory.mktemp("docs")
    (code,) = [
        c for c in _PYTHON.findall(PAGE.read_text(encoding="utf-8")) if "breast_cancer.csv" in c
    ]
    code = code.replace('"breast_cancer.csv"', repr(str(where / "breast_cancer.csv")))
    exec(compile(code, str(PAGE), "exec"), {})
    return where


def test_the_page_has_its_four_examples():
    """Raw, standardised and trained, a sweep, and past memory: a broken fence would drop one
    silently."""
    commands = [args for args, _ in _examples()]
    assert len(commands) == 4 and "--train 30" in commands[1] and "200,400" in commands[2]
    assert "--n 1000000" in commands[3]


@pytest.mark.slow
@pytest.mark.parametrize(("args", "shown"), _examples(), ids=[a for a, _ in _examples()])
def test_the_documented_output_is_what_verify_prints(data_dir, monkeypatch, args, shown):
    from deqlab.verification import subsample

    monkeypatch.chdir(data_dir)
    monkeypatch.setattr(subsample, "CAP", 1000)  # past memory: seconds (the page shows "…")
    result = CliRunner().invoke(app, shlex.split(args))
    assert result.exit_code == 0, result.output
    printed = result.stdout.splitlines()
    expected = shown.splitlines()
    assert len(printed) >= len(expected)
    for number, (want, got) in enumerate(zip(expected, printed, strict=False), start=1):
        assert matches(want, got), f"line {number}:\n  docs: {want}\n  got:  {got}"

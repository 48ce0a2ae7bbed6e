"""Every example command the user is shown runs: the ``Examples:`` of ``deqlab verify --help``
and ``deqlab kernel --help``, and each ``deqlab verify|kernel`` line of a ```bash block in
README.md and docs/ (docs/verify.md's console blocks are run, output and all, by
tests/test_verification_docs.py). Each exits 0.

Each command runs as written, with two bounds to keep the suite in seconds: ``--train`` is
capped at :data:`MAX_STEPS` steps, and a file an example reads (``--input data.csv``) is
written here with :data:`FILE_SAMPLES` samples of :data:`FILE_FEATURES` features and labels
in {0, 1} (what every model and loss accepts)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import numpy as np
import pytest
import torch
import typer.main
from typer.testing import CliRunner

from deqlab.cli import app

ROOT = Path(__file__).resolve().parents[1]
MAX_STEPS = 5
FILE_SAMPLES, FILE_FEATURES = 24, 5
_BASH = re.compile(r"^```bash\n(.*?)^```", re.DOTALL | re.MULTILINE)


def help_examples(command: str) -> list[str]:
    """The example lines of ``deqlab COMMAND --help`` (its epilog), without ``deqlab``."""
    epilog = typer.main.get_command(app).commands[command].epilog or ""
    return [line.strip()[len("deqlab ") :] for line in epilog.splitlines() if "deqlab " in line]


def document_examples(path: Path) -> list[str]:
    """The ``deqlab verify|kernel`` lines of the ```bash blocks of ``path`` (comments cut)."""
    found = []
    for block in _BASH.findall(path.read_text(encoding="utf-8")):
        for line in block.splitlines():
            command = line.split("#")[0].strip()
            if re.match(r"deqlab (verify|kernel) ", command):
                found.append(command[len("deqlab ") :])
    return found


def examples() -> list[str]:
    documents = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    found = [*help_examples("verify"), *help_examples("kernel")]
    for path in documents:
        found += document_examples(path)
    return list(dict.fromkeys(found))


def bounded(args: list[str]) -> list[str]:
    """``args`` with ``--train STEPS`` capped at :data:`MAX_STEPS`."""
    out = list(args)
    for i, arg in enumerate(out[:-1]):
        if arg == "--train":
            out[i + 1] = str(min(int(out[i + 1]), MAX_STEPS))
    return out


def write_input(path: Path, command: str) -> None:
    """A file of the kind ``path``'s suffix names, as ``deqlab COMMAND --input`` reads it."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((FILE_SAMPLES, FILE_FEATURES))
    y = (rng.standard_normal(FILE_SAMPLES) > 0).astype(float)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".csv":
        header = ",".join([*(f"f{i}" for i in range(FILE_FEATURES)), "label"])
        np.savetxt(path, np.column_stack([X, y]), delimiter=",", header=header, comments="")
    elif path.suffix == ".npz":
        np.savez(path, X=X, y=y)
    elif path.suffix == ".npy":
        np.save(path, X if command == "kernel" else np.column_stack([X, y]))
    elif path.suffix == ".pt":
        torch.save({"X": torch.from_numpy(X), "y": torch.from_numpy(y)}, path)
    else:
        raise AssertionError(f"an example reads {path.name}: no writer for {path.suffix!r}")


def test_the_examples_are_found():
    """A changed epilog or fence would drop examples silently."""
    assert len(help_examples("verify")) == 5 and len(help_examples("kernel")) == 3
    readme = document_examples(ROOT / "README.md")
    assert len(readme) >= 4 and all(c.startswith("verify ") for c in readme)
    assert bounded(["--train", "200", "--n", "9"]) == ["--train", "5", "--n", "9"]


@pytest.mark.slow
@pytest.mark.parametrize("command", examples())
def test_the_example_runs(tmp_path, monkeypatch, command):
    args = shlex.split(command)
    monkeypatch.chdir(tmp_path)
    if "--input" in args:
        write_input(tmp_path / args[args.index("--input") + 1], args[0])
    result = CliRunner().invoke(app, bounded(args))
    assert result.exit_code == 0 and result.stdout.strip(), f"deqlab {command}\n{result.output}"

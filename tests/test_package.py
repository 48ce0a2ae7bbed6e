"""The package imports and exposes its version; the CLI answers."""

import subprocess
import sys

import deqlab


def test_version_is_exposed():
    assert isinstance(deqlab.__version__, str) and deqlab.__version__.count(".") >= 2


def test_cli_version_runs():
    out = subprocess.run(
        [sys.executable, "-m", "deqlab", "version"], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == deqlab.__version__

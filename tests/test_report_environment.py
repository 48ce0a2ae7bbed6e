"""The environment record of a run: versions, device, threads, git state."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import matplotlib
import numpy
import pytest
import scipy
import torch

import deqlab
from deqlab.report import collect_environment
from deqlab.report.environment import git_state

SRC_DIR = Path(deqlab.__file__).resolve().parent
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def test_versions_threads_and_device_on_cpu() -> None:
    env = collect_environment()
    assert json.loads(json.dumps(env)) == env  # goes into summary.json as is
    assert env["deqlab"] == deqlab.__version__
    assert env["torch"] == torch.__version__
    assert env["numpy"] == numpy.__version__
    assert env["scipy"] == scipy.__version__
    assert env["matplotlib"] == matplotlib.__version__
    assert env["python"].count(".") == 2
    assert env["torch_threads"] == torch.get_num_threads()
    assert isinstance(env["cpu_count"], int) and env["cpu_count"] >= 1
    assert env["device"] == "cpu" and env["device_name"]
    assert env["cuda_available"] == torch.cuda.is_available()


def test_cuda_device_name_matches_torch() -> None:
    env = collect_environment(torch.device("cuda"))
    assert env["device"] == "cuda"
    if torch.cuda.is_available():
        assert env["device_name"] == torch.cuda.get_device_name(0)
    else:
        assert env["device_name"] is None and env["cuda_available"] is False


def test_bad_device_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"`device` must be a torch device string.*got 'gpu0'"):
        collect_environment("gpu0")
    with pytest.raises(TypeError, match=r"`device` must be a str or torch\.device; got int"):
        collect_environment(0)  # type: ignore[arg-type]


def test_git_commit_is_that_of_the_source_tree() -> None:
    env = collect_environment()
    head = (
        subprocess.run(
            ["git", "-C", str(SRC_DIR), "rev-parse", "HEAD"], capture_output=True, text=True
        )
        if shutil.which("git")
        else None
    )
    if head is None or head.returncode != 0:  # an installed copy or no git: reported as None
        assert env["git_commit"] is None and env["git_dirty"] is None
    else:
        assert env["git_commit"] == head.stdout.strip()
        assert isinstance(env["git_dirty"], bool)


def test_no_git_on_path_gives_none(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no git executable
    env = collect_environment()
    assert env["git_commit"] is None and env["git_dirty"] is None


@needs_git
def test_git_state_of_a_fresh_repository(tmp_path: Path) -> None:
    assert git_state(tmp_path) == (None, None)  # not a repository

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(tmp_path), *args], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    git("init", "-q")
    (tmp_path / "a.txt").write_text("one\n", encoding="utf-8")
    git("add", "a.txt")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "first")
    commit = git("rev-parse", "HEAD")
    assert len(commit) == 40
    assert git_state(tmp_path) == (commit, False)
    (tmp_path / "untracked.txt").write_text("x", encoding="utf-8")
    assert git_state(tmp_path) == (commit, False)  # untracked files do not count
    (tmp_path / "a.txt").write_text("two\n", encoding="utf-8")
    assert git_state(tmp_path) == (commit, True)

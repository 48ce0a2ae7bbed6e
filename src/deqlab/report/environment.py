"""The software and hardware a run used: versions, platform, device, threads, git commit."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import matplotlib
import numpy
import scipy
import torch

import deqlab

_GIT_TIMEOUT_S = 5.0


def collect_environment(device: str | torch.device = "cpu") -> dict[str, Any]:
    """Describe the environment of a run as a JSON-serializable dict.

    Keys: ``deqlab``, ``python``, ``torch``, ``numpy``, ``scipy``, ``matplotlib`` (versions),
    ``platform``, ``machine``, ``cpu_count``, ``torch_threads``, ``device`` (as requested),
    ``device_name`` (the CPU model for ``cpu``, the GPU's name for an available CUDA
    device, ``None`` otherwise), ``cuda_available``, ``cuda_version``,
    ``git_commit`` and ``git_dirty`` of the source tree deqlab is imported from (``None``
    when that is not a git checkout or git is not installed; never raises for git).
    """
    device = _parse_device(device)
    cuda_available = torch.cuda.is_available()
    device_name = _cpu_name() if device.type == "cpu" else None
    if device.type == "cuda" and cuda_available:
        index = torch.cuda.current_device() if device.index is None else device.index
        if index < torch.cuda.device_count():
            device_name = torch.cuda.get_device_name(index)
    git_commit, git_dirty = git_state(Path(deqlab.__file__).resolve().parent)
    return {
        "deqlab": deqlab.__version__,
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "scipy": scipy.__version__,
        "matplotlib": matplotlib.__version__,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "device": str(device),
        "device_name": device_name,
        "cuda_available": cuda_available,
        "cuda_version": torch.version.cuda,
        "git_commit": git_commit,
        "git_dirty": git_dirty,
        "executable": sys.executable,
    }


def git_state(directory: Path) -> tuple[str | None, bool | None]:
    """``(commit, dirty)`` of the git work tree containing ``directory``, or ``(None, None)``.

    ``dirty`` is true when tracked files differ from the commit (untracked files ignored).
    Any failure — git missing, not a repository, a timeout — gives ``(None, None)``.
    """
    commit = _git(directory, "rev-parse", "HEAD")
    if commit is None:
        return None, None
    status = _git(directory, "status", "--porcelain", "--untracked-files=no")
    return commit, (None if status is None else bool(status))


def _git(directory: Path, *args: str) -> str | None:
    """Stdout of ``git -C directory args...`` stripped, or ``None`` if the command fails."""
    try:
        done = subprocess.run(
            ["git", "-C", str(directory), *args],
            capture_output=True,
            text=True,
            timeout=_GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _cpu_name() -> str | None:
    """The CPU model ("model name" in /proc/cpuinfo on Linux), else platform's guess."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or None


def _parse_device(device: object) -> torch.device:
    """``device`` as a torch.device; TypeError/ValueError naming it otherwise."""
    if isinstance(device, torch.device):
        return device
    if not isinstance(device, str):
        raise TypeError(f"`device` must be a str or torch.device; got {type(device).__name__}")
    try:
        return torch.device(device)
    except RuntimeError as err:
        raise ValueError(
            f"`device` must be a torch device string such as 'cpu', 'cuda' or 'cuda:0'; "
            f"got {device!r}"
        ) from err

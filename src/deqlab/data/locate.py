"""Where data sets live on disk: ``data_dir``, else ``$DEQLAB_DATA``, else ``~/.cache/deqlab``.

A data set ``name`` is looked for in ``<root>/<name>/`` and in ``<root>/`` itself (so a
directory holding the files directly also works); Fashion-MNIST is also found where
Debian's ``dataset-fashion-mnist`` package installs it. ``deqlab data fetch NAME``
downloads into ``<root>/<name>/``.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "DEQLAB_DATA"
SYSTEM_DIRS: dict[str, tuple[Path, ...]] = {
    "fashion-mnist": (Path("/usr/share/datasets/fashion-mnist"),),
}


class DatasetNotFoundError(FileNotFoundError):
    """A data set that is not on disk; the message says where we looked and how to fetch it."""


def data_root(data_dir: str | os.PathLike[str] | None = None) -> Path:
    """The root: ``data_dir`` if given, else ``$DEQLAB_DATA``, else ``~/.cache/deqlab``."""
    if data_dir is not None:
        return Path(data_dir).expanduser()
    env = os.environ.get(ENV_VAR)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "deqlab"


def search_dirs(name: str, data_dir: str | os.PathLike[str] | None = None) -> list[Path]:
    """Directories searched for data set ``name``, in order.

    An explicit ``data_dir`` is searched alone (``data_dir/name``, then ``data_dir``);
    otherwise the default root, then the system locations of ``name``.
    """
    root = data_root(data_dir)
    dirs = [root / name, root]
    if data_dir is None:
        dirs.extend(SYSTEM_DIRS.get(name, ()))
    return dirs


def fetch_command(name: str, data_dir: str | os.PathLike[str] | None = None) -> str:
    """The shell command that downloads ``name`` to where it would be looked for."""
    suffix = f" --dir {data_root(data_dir)}" if data_dir is not None else ""
    return f"deqlab data fetch {name}{suffix}"


def not_found(name: str, split: str, expected: str, data_dir, problems: list[str]) -> Exception:
    """A :class:`DatasetNotFoundError` listing the searched places and the fetch command."""
    looked = "\n".join(f"  {d}" for d in search_dirs(name, data_dir))
    details = "".join(f"\n  note: {p}" for p in problems)
    return DatasetNotFoundError(
        f"data set {name!r} ({split} split) not found: expected {expected}. Looked in:\n"
        f"{looked}{details}\nFetch it with: {fetch_command(name, data_dir)}"
    )

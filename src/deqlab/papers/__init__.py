"""The papers deqlab reproduces: one package each, ``deqlab.papers.<key>``.

A paper's package holds its :class:`~deqlab.statements.Paper` record (in its
``__init__.py``: its key, which is also the folder's name and the prefix of its experiments'
names, and its short and full citations), the mathematics of the paper alone (the shared
kernels, NTK and spectra stay in :mod:`deqlab.theory`) and its claims: functions from typed
measurements to :class:`~deqlab.statements.Statement` s, below both drivers (the experiments
in ``deqlab.experiments.<key>`` and ``deqlab verify``). A paper is named by its record and
nowhere else. Adding a paper is two folders, ``papers/<key>/`` and ``experiments/<key>/``
(docs/architecture.md): :func:`reproduced` finds the first, the experiment registry the second.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable

from deqlab.papers.hieu2022 import HIEU
from deqlab.papers.kawaguchi2021 import KAWAGUCHI
from deqlab.papers.ling2023 import LING
from deqlab.statements import DEQLAB, Paper
from deqlab.statements.claims import registered


def reproduced() -> tuple[Paper, ...]:
    """The record of every paper package under ``deqlab/papers/``, by key: the one
    :class:`Paper` its ``__init__.py`` defines whose key is the folder's name."""
    found = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda info: info.name):
        if not info.ispkg:
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        records = [v for v in vars(module).values() if isinstance(v, Paper)]
        mine = [paper for paper in records if paper.key == info.name]
        if len(mine) != 1:
            raise TypeError(
                f"deqlab/papers/{info.name}/__init__.py must define one Paper record with key "
                f"{info.name!r}; found {[paper.key for paper in records]}"
            )
        found.append(mine[0])
    return tuple(found)


def claims() -> dict[str, Callable[..., object]]:
    """Every claim of every paper of :func:`reproduced`, by qualified name: the functions
    its modules declare with :func:`deqlab.statements.claim` (importing them all)."""
    keys = tuple(f"{__name__}.{paper.key}." for paper in reproduced())
    for package in keys:
        module = importlib.import_module(package[:-1])
        for info in pkgutil.walk_packages(module.__path__, package):
            importlib.import_module(info.name)
    return {name: f for name, f in registered().items() if name.startswith(keys)}


__all__ = ["DEQLAB", "HIEU", "KAWAGUCHI", "LING", "Paper", "claims", "reproduced"]

"""The registry of experiments, by name.

Each paper of :func:`deqlab.papers.reproduced` (a package ``deqlab.papers.<key>``) has its
experiments in the package ``deqlab.experiments.<key>``, imported on first lookup (so
``import deqlab`` stays light); importing it registers each experiment class with
:func:`register`. Adding a paper is its two folders.
"""

from __future__ import annotations

import importlib
import importlib.util

from deqlab import papers
from deqlab.experiments.base import Experiment
from deqlab.experiments.config import ConfigError

_REGISTRY: dict[str, type[Experiment]] = {}
_loaded: set[str] = set()


def register(cls: type[Experiment]) -> type[Experiment]:
    """Class decorator: add an :class:`Experiment` subclass to the registry under ``cls.name``."""
    if not (isinstance(cls, type) and issubclass(cls, Experiment)):
        raise TypeError(f"`cls` must be an Experiment subclass; got {cls!r}")
    existing = _REGISTRY.get(cls.name)
    if existing is not None and existing.__qualname__ != cls.__qualname__:
        raise ValueError(f"experiment name {cls.name!r} is already registered by {existing}")
    _REGISTRY[cls.name] = cls
    return cls


def experiment_packages() -> tuple[str, ...]:
    """The package of each reproduced paper: ``deqlab.experiments.<key>``."""
    return tuple(f"{__package__}.{paper.key}" for paper in papers.reproduced())


def _load_builtins() -> None:
    for package in experiment_packages():
        if package not in _loaded:
            if importlib.util.find_spec(package) is not None:  # a paper may have none
                importlib.import_module(package)
            _loaded.add(package)


def experiment_names() -> list[str]:
    """The registered experiment names, sorted."""
    _load_builtins()
    return sorted(_REGISTRY)


def get_experiment(name: str) -> Experiment:
    """A fresh instance of the experiment registered as ``name``; the error lists the known ones."""
    _load_builtins()
    if name not in _REGISTRY:
        known = ", ".join(sorted(_REGISTRY)) or "(none)"
        raise ConfigError(f"unknown experiment {name!r}; known experiments: {known}")
    return _REGISTRY[name]()

"""The registry of experiments, by name.

Built-in experiment modules are listed in ``BUILTIN_MODULES`` and imported on first lookup
(so ``import deqlab`` stays light); each registers its class with :func:`register`.
"""

from __future__ import annotations

import importlib

from deqlab.experiments.base import Experiment
from deqlab.experiments.config import ConfigError

#: One package per paper; importing it registers its experiments (``register``).
BUILTIN_MODULES: tuple[str, ...] = (
    "deqlab.experiments.ling2023",
    "deqlab.experiments.kawaguchi2021",
    "deqlab.experiments.hieu2022",
)

_REGISTRY: dict[str, type[Experiment]] = {}
_builtins_loaded = False


def register(cls: type[Experiment]) -> type[Experiment]:
    """Class decorator: add an :class:`Experiment` subclass to the registry under ``cls.name``."""
    if not (isinstance(cls, type) and issubclass(cls, Experiment)):
        raise TypeError(f"`cls` must be an Experiment subclass; got {cls!r}")
    existing = _REGISTRY.get(cls.name)
    if existing is not None and existing.__qualname__ != cls.__qualname__:
        raise ValueError(f"experiment name {cls.name!r} is already registered by {existing}")
    _REGISTRY[cls.name] = cls
    return cls


def _load_builtins() -> None:
    global _builtins_loaded
    if not _builtins_loaded:
        for module in BUILTIN_MODULES:
            importlib.import_module(module)
        _builtins_loaded = True


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

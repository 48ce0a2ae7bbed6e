"""Experiments: one package per paper, each experiment registered by name."""

from deqlab._fit import linear_fit
from deqlab.experiments.base import Experiment, Task, TaskContext
from deqlab.experiments.config import ConfigError, config_hash, resolve_config
from deqlab.experiments.registry import experiment_names, get_experiment, register

__all__ = [
    "ConfigError",
    "Experiment",
    "Task",
    "TaskContext",
    "config_hash",
    "experiment_names",
    "get_experiment",
    "linear_fit",
    "register",
    "resolve_config",
]

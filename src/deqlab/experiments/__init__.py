"""Experiments: one module per paper figure, registered by name."""

from deqlab.experiments.base import Claim, Experiment, Task, TaskContext, linear_fit
from deqlab.experiments.config import ConfigError, config_hash, resolve_config
from deqlab.experiments.registry import experiment_names, get_experiment, register

__all__ = [
    "Claim",
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

"""Trainers: full-batch gradient descent with warm starts and instrumentation."""

from deqlab.train.delm_gd import DELMGradientDescent
from deqlab.train.gd import GDConfig, GDTrainer

__all__ = ["DELMGradientDescent", "GDConfig", "GDTrainer"]

"""Trainers: full-batch gradient descent with warm starts and instrumentation."""

from deqlab.train.delm_gd import DELMGradientDescent
from deqlab.train.relu_deq import GDConfig, GDTrainer

__all__ = ["DELMGradientDescent", "GDConfig", "GDTrainer"]

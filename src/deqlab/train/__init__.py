"""Trainers: full-batch gradient descent with warm starts and instrumentation."""

from deqlab.train.delm_gd import DELMGDConfig, DELMGradientDescent
from deqlab.train.relu_deq import GDConfig, GDTrainer

__all__ = ["DELMGDConfig", "DELMGradientDescent", "GDConfig", "GDTrainer"]

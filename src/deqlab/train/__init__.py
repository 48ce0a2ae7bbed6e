"""Trainers: full-batch gradient descent with warm starts and instrumentation."""

from deqlab.train.delm_gd import DELMGradientDescent

__all__ = ["DELMGradientDescent"]

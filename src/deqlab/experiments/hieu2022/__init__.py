"""Hieu (thesis, 2022): the experiments of the monotone and convolutional DEQs."""

import deqlab.experiments.hieu2022_dynamics
import deqlab.experiments.hieu2022_landscape
import deqlab.experiments.hieu2022_mondeq_gd  # noqa: F401

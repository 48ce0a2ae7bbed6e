"""Hieu (thesis, 2022): the experiments of the monotone and convolutional DEQs."""

import deqlab.experiments.hieu2022.dynamics
import deqlab.experiments.hieu2022.gradflow
import deqlab.experiments.hieu2022.landscape
import deqlab.experiments.hieu2022.mdeq_landscape
import deqlab.experiments.hieu2022.mondeq_gd  # noqa: F401

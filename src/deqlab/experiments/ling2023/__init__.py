"""Ling et al. (AISTATS 2023): the experiments of the over-parameterized ReLU DEQ."""

import deqlab.experiments.ling2023_fig1
import deqlab.experiments.ling2023_init  # noqa: F401

"""Ling et al. (AISTATS 2023): the experiments of the over-parameterized ReLU DEQ."""

import deqlab.experiments.ling2023.fig1
import deqlab.experiments.ling2023.init  # noqa: F401

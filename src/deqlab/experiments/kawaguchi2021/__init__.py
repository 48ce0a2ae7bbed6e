"""Kawaguchi (ICLR 2021): the experiments of the deep equilibrium linear model."""

import deqlab.experiments.kawaguchi2021_fig1
import deqlab.experiments.kawaguchi2021_fig2
import deqlab.experiments.kawaguchi2021_fig3  # noqa: F401

"""Kawaguchi (ICLR 2021): the experiments of the deep equilibrium linear model."""

import deqlab.experiments.kawaguchi2021.appb
import deqlab.experiments.kawaguchi2021.fig1
import deqlab.experiments.kawaguchi2021.fig2
import deqlab.experiments.kawaguchi2021.fig3
import deqlab.experiments.kawaguchi2021.thm2  # noqa: F401

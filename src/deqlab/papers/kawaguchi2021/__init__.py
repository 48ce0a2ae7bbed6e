"""Kawaguchi (ICLR 2021), the deep equilibrium linear model: its theory and claims."""

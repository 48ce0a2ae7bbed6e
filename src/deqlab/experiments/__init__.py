"""Experiments: one module per paper figure, registered by name."""

"""Trainers: full-batch gradient descent with warm starts and instrumentation."""

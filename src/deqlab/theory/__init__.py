"""Shared mathematics of the theorems: kernels, the DEQ NTK, eigenvalues and norms.

All of them are pure functions of tensors. The mathematics of one paper (its conditions,
bounds and constants) lives with the paper, in ``deqlab.papers.<key>``.
"""

from deqlab.theory.kernels import (
    AssumptionWarning,
    LeastEigenvalue,
    arccos_q,
    arccos_q_derivative,
    least_eigenvalue,
    population_gram,
)
from deqlab.theory.ntk import deq_ntk, empirical_ntk
from deqlab.theory.spectra import gram_lambda_min, spectral_norm, spectral_norm_lanczos

__all__ = [
    "AssumptionWarning",
    "LeastEigenvalue",
    "arccos_q",
    "arccos_q_derivative",
    "deq_ntk",
    "empirical_ntk",
    "gram_lambda_min",
    "least_eigenvalue",
    "population_gram",
    "spectral_norm",
    "spectral_norm_lanczos",
]

"""Theory toolkit: kernels, eigenvalues, conditions and bounds of the theorems.

All of them are pure functions of tensors.
"""

from deqlab.theory.init_theorems import measure_initialization
from deqlab.theory.kawaguchi2021 import (
    convergence_bound,
    dynamics_matrix,
    lambda_lower_bound,
    lambda_min_dynamics,
    logistic_loss_optimum,
    square_loss_optimum,
)
from deqlab.theory.kernels import (
    AssumptionWarning,
    LeastEigenvalue,
    arccos_q,
    arccos_q_derivative,
    least_eigenvalue,
    population_gram,
)
from deqlab.theory.ling2023 import (
    Condition1,
    Theorem1Margins,
    condition1,
    learning_rate,
    lemma2_gradients,
    required_width,
    theorem1_margins,
)
from deqlab.theory.mondeq import MonDEQConstants, mondeq_constants
from deqlab.theory.ntk import deq_ntk, empirical_ntk
from deqlab.theory.spectra import gram_lambda_min, spectral_norm, spectral_norm_lanczos

__all__ = [
    "AssumptionWarning",
    "Condition1",
    "LeastEigenvalue",
    "MonDEQConstants",
    "Theorem1Margins",
    "arccos_q",
    "arccos_q_derivative",
    "condition1",
    "convergence_bound",
    "deq_ntk",
    "dynamics_matrix",
    "empirical_ntk",
    "gram_lambda_min",
    "lambda_lower_bound",
    "lambda_min_dynamics",
    "learning_rate",
    "least_eigenvalue",
    "lemma2_gradients",
    "logistic_loss_optimum",
    "measure_initialization",
    "mondeq_constants",
    "population_gram",
    "required_width",
    "spectral_norm",
    "spectral_norm_lanczos",
    "square_loss_optimum",
    "theorem1_margins",
]

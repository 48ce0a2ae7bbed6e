"""Theory toolkit: kernels, eigenvalues, conditions and bounds of the theorems.

All of them are pure functions of tensors.
"""

from deqlab.theory.kawaguchi2021 import (
    convergence_bound,
    dynamics_matrix,
    lambda_lower_bound,
    lambda_min_dynamics,
    logistic_loss_optimum,
    square_loss_optimum,
)
from deqlab.theory.ling2023 import (
    Condition1,
    Theorem1Claims,
    condition1,
    learning_rate,
    lemma2_gradients,
    theorem1_claims,
)
from deqlab.theory.mondeq import MonDEQConstants, mondeq_constants
from deqlab.theory.spectra import gram_lambda_min, spectral_norm, spectral_norm_lanczos

__all__ = [
    "Condition1",
    "MonDEQConstants",
    "Theorem1Claims",
    "condition1",
    "convergence_bound",
    "dynamics_matrix",
    "gram_lambda_min",
    "lambda_lower_bound",
    "lambda_min_dynamics",
    "learning_rate",
    "lemma2_gradients",
    "logistic_loss_optimum",
    "mondeq_constants",
    "spectral_norm",
    "spectral_norm_lanczos",
    "square_loss_optimum",
    "theorem1_claims",
]

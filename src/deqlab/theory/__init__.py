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

__all__ = [
    "convergence_bound",
    "dynamics_matrix",
    "lambda_lower_bound",
    "lambda_min_dynamics",
    "logistic_loss_optimum",
    "square_loss_optimum",
]

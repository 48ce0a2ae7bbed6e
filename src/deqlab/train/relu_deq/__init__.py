"""Full-batch GD on the ReLU DEQ of Ling et al. (2023): the plain reference step and the
fast path in layers (row-wise solves, product cache, trend, flip memory, trainer)."""

from deqlab.models.relu_deq_solve import RowSolution, solve_adjoint, solve_forward
from deqlab.train.relu_deq.reference import ReferenceStep, reference_step
from deqlab.train.relu_deq.trainer import GDConfig, GDTrainer

__all__ = [
    "GDConfig",
    "GDTrainer",
    "ReferenceStep",
    "RowSolution",
    "reference_step",
    "solve_adjoint",
    "solve_forward",
]

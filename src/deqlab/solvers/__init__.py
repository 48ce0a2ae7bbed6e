"""Fixed-point solvers: frozen dataclasses of hyper-parameters, ``solver(f, z0) -> Solution``."""

from deqlab.solvers.anderson import Anderson
from deqlab.solvers.base import Solver
from deqlab.solvers.broyden import Broyden
from deqlab.solvers.options import SolverOptions
from deqlab.solvers.picard import Picard
from deqlab.solvers.solution import (
    Solution,
    SolverError,
    Status,
    default_tol,
    get_solver,
    residual_norms,
    solver_names,
)
from deqlab.solvers.splitting import ForwardBackward, MonotoneOperator, PeacemanRachford

__all__ = [
    "Anderson",
    "Broyden",
    "ForwardBackward",
    "MonotoneOperator",
    "PeacemanRachford",
    "Picard",
    "Solution",
    "Solver",
    "SolverError",
    "SolverOptions",
    "Status",
    "default_tol",
    "get_solver",
    "residual_norms",
    "solver_names",
]

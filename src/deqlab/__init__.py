"""deqlab — a laboratory for deep equilibrium models and the theory of their training.

The public API is re-exported here explicitly; see DESIGN.md for the layout.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("deqlab")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+unknown"

from deqlab.data import LabelledData, get_dataset, synthetic_sphere, zou_synthetic
from deqlab.implicit import (
    DEQ,
    FixedPointStats,
    Implicit,
    JacobianFree,
    Unrolled,
    fixed_point,
)
from deqlab.landscape import filter_normalized_direction, loss_surface
from deqlab.models.delm import DELM
from deqlab.models.mondeq import MonDEQ
from deqlab.models.relu_deq import ReLUDEQ
from deqlab.solvers import (
    Anderson,
    Broyden,
    ForwardBackward,
    PeacemanRachford,
    Picard,
    Solution,
    SolverError,
    Status,
    get_solver,
)
from deqlab.theory import deq_ntk, least_eigenvalue, population_gram
from deqlab.train.gd import GDConfig, GDTrainer

__all__ = [
    "DELM",
    "DEQ",
    "Anderson",
    "Broyden",
    "FixedPointStats",
    "ForwardBackward",
    "GDConfig",
    "GDTrainer",
    "Implicit",
    "JacobianFree",
    "LabelledData",
    "MonDEQ",
    "PeacemanRachford",
    "Picard",
    "ReLUDEQ",
    "Solution",
    "SolverError",
    "Status",
    "Unrolled",
    "__version__",
    "deq_ntk",
    "filter_normalized_direction",
    "fixed_point",
    "get_dataset",
    "get_solver",
    "least_eigenvalue",
    "loss_surface",
    "population_gram",
    "synthetic_sphere",
    "zou_synthetic",
]

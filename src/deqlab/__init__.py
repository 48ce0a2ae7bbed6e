"""deqlab — a laboratory for deep equilibrium models and the theory of their training.

The public API is re-exported here explicitly. ``deqlab.reproduce(name, ...)`` (the
one-call way to run an experiment, returning a :class:`deqlab.runs.api.Run`) and
``deqlab.verify(X, y, check, ...)`` (the papers' hypotheses on the user's data, with the
checks :class:`ReLUDEQCheck`, :class:`MonDEQCheck`, :class:`DELMCheck`) are imported on
first use, so ``import deqlab`` does not load the run store, the experiments or verify.
``deqlab.diagnose(deq, X, y)`` and :class:`RateMonitor` read any DEQ. The functions are
named apart from their packages (:mod:`deqlab.verification`, :mod:`deqlab.diagnosis`).
"""

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

try:
    __version__ = version("deqlab")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+unknown"

import deqlab.papers  # noqa: F401  (first: registers the Paper records statements cite)
from deqlab.correction import fixed_point_correction
from deqlab.data import LabelledData, get_dataset, synthetic_sphere, zou_synthetic
from deqlab.diagnosis import Diagnosis, DiagnosticsRecorder, RateMonitor, diagnose
from deqlab.dropout import VariationalDropout, reset_dropout
from deqlab.fixed_point_diagnostics import FixedPointDiagnostics, fixed_point_diagnostics
from deqlab.fixed_point_stats import BackwardRecord, ConvergenceWarning, OnFailure
from deqlab.implicit import (
    DEQ,
    FixedPointStats,
    Implicit,
    JacobianFree,
    Phantom,
    Shine,
    Unrolled,
    fixed_point,
)
from deqlab.jacobian import jacobian_penalty
from deqlab.landscape import filter_normalized_direction, loss_surface
from deqlab.models.delm import DELM
from deqlab.models.mondeq import MonDEQ
from deqlab.models.relu_deq import ReLUDEQ
from deqlab.norm import apply_norm, remove_norm, reset_norm
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
from deqlab.train.relu_deq import GDConfig, GDTrainer

if TYPE_CHECKING:
    from deqlab.runs.api import Run, reproduce
    from deqlab.verification.api import Verification, verify
    from deqlab.verification.checks import DELMCheck, MonDEQCheck, ReLUDEQCheck

#: Imported on first use (``deqlab.reproduce(...)``, ``deqlab.verify(...)``): the run
#: store, executors, experiment registry and verify stay out of ``import deqlab``.
_LAZY = {
    "reproduce": "deqlab.runs.api",
    "Run": "deqlab.runs.api",
    "verify": "deqlab.verification.api",
    "Verification": "deqlab.verification.api",
    "ReLUDEQCheck": "deqlab.verification.checks",
    "MonDEQCheck": "deqlab.verification.checks",
    "DELMCheck": "deqlab.verification.checks",
}


def __getattr__(name: str) -> Any:
    import importlib

    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'deqlab' has no attribute {name!r}")


__all__ = [
    "DELM",
    "DEQ",
    "Anderson",
    "BackwardRecord",
    "Broyden",
    "ConvergenceWarning",
    "DELMCheck",
    "Diagnosis",
    "DiagnosticsRecorder",
    "FixedPointDiagnostics",
    "FixedPointStats",
    "ForwardBackward",
    "GDConfig",
    "GDTrainer",
    "Implicit",
    "JacobianFree",
    "LabelledData",
    "MonDEQ",
    "MonDEQCheck",
    "OnFailure",
    "PeacemanRachford",
    "Phantom",
    "Picard",
    "RateMonitor",
    "ReLUDEQ",
    "ReLUDEQCheck",
    "Run",
    "Shine",
    "Solution",
    "SolverError",
    "Status",
    "Unrolled",
    "VariationalDropout",
    "Verification",
    "__version__",
    "apply_norm",
    "deq_ntk",
    "diagnose",
    "filter_normalized_direction",
    "fixed_point",
    "fixed_point_correction",
    "fixed_point_diagnostics",
    "get_dataset",
    "get_solver",
    "jacobian_penalty",
    "least_eigenvalue",
    "loss_surface",
    "population_gram",
    "remove_norm",
    "reproduce",
    "reset_dropout",
    "reset_norm",
    "synthetic_sphere",
    "verify",
    "zou_synthetic",
]

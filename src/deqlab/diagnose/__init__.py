"""The convergence theory of DEQs measured on any DEQ (issue 23, item 5).

:func:`diagnose` reads a DEQ at its equilibrium on one batch: well-posedness per sample
(:mod:`.wellposed`, on the engine's :func:`deqlab.fixed_point_diagnostics`), the empirical NTK from
exact implicit Jacobians (:mod:`.implicit_ntk`) and the PL ratio and GD rate it predicts
(:mod:`.pl`). :class:`RateMonitor` follows a training run (:mod:`.monitor`).

The package itself is callable: ``deqlab.diagnose(deq, X, y)`` is
:func:`deqlab.diagnose.api.diagnose` (as ``deqlab.verify`` is).
"""

import sys
import types

from deqlab.diagnose.api import diagnose
from deqlab.diagnose.monitor import RateMonitor
from deqlab.diagnose.result import Diagnosis, NTKSpectrum


class _CallablePackage(types.ModuleType):
    """This package, callable as :func:`diagnose`."""

    def __call__(self, *args: object, **kwargs: object) -> Diagnosis:
        return diagnose(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage

__all__ = ["Diagnosis", "NTKSpectrum", "RateMonitor", "diagnose"]

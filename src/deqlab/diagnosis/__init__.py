"""The convergence theory of DEQs measured on any DEQ (issue 23, item 5).

:func:`diagnose` reads a DEQ at its equilibrium on one batch: well-posedness per sample
(:mod:`.wellposed`, on the engine's :func:`deqlab.fixed_point_diagnostics`), the empirical NTK from
exact implicit Jacobians (:mod:`.implicit_ntk`) and the PL ratio and GD rate it predicts
(:mod:`.pl`). :class:`RateMonitor` follows a training run (:mod:`.monitor`), and
:class:`DiagnosticsRecorder` records the diagnostics along it (:mod:`.along_run`). A diagnosis
shows itself as HTML (:mod:`.page`, :mod:`.figures`); :mod:`.paper_models` presents the papers'
models to it.

``deqlab.diagnose`` is the function :func:`diagnose` (exported by :mod:`deqlab`); this
package, named apart from it, holds the classes.
"""

from deqlab.diagnosis.along_run import DiagnosticsRecorder
from deqlab.diagnosis.api import diagnose
from deqlab.diagnosis.monitor import RateMonitor
from deqlab.diagnosis.result import Diagnosis, NTKSpectrum

__all__ = ["Diagnosis", "DiagnosticsRecorder", "NTKSpectrum", "RateMonitor", "diagnose"]

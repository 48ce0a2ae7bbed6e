"""``deqlab verify``: the hypotheses and predictions of the three papers on the user's own
data and model (:func:`verify`, :class:`Verification`), one frozen dataclass per model
(:class:`ReLUDEQCheck`, :class:`MonDEQCheck`, :class:`DELMCheck`).

The package itself is callable: ``deqlab.verify(X, y, ...)`` is :func:`verify`, whichever
of the package or the function a caller reaches (issue 25 asks to drop this module-class
swap; ``deqlab`` exporting the function instead breaks ``import deqlab.verify.inputs``
followed by the call, so it stays until that is decided).
"""

import sys
import types

from deqlab.verify.api import Verification, verify
from deqlab.verify.checks import DEFAULT_WIDTH, DELMCheck, MonDEQCheck, ReLUDEQCheck
from deqlab.verify.inputs import FORMATS, InputError, load_dataset, load_file


class _CallablePackage(types.ModuleType):
    """This package, callable as :func:`verify`."""

    def __call__(self, *args: object, **kwargs: object) -> Verification:
        return verify(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage

__all__ = [
    "DEFAULT_WIDTH",
    "FORMATS",
    "DELMCheck",
    "InputError",
    "MonDEQCheck",
    "ReLUDEQCheck",
    "Verification",
    "load_dataset",
    "load_file",
    "verify",
]

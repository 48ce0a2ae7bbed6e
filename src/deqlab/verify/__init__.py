"""``deqlab verify``: the hypotheses and predictions of the three papers on the user's own
data and model (:func:`verify`, :class:`Verification`).

The package itself is callable: ``deqlab.verify(X, y, model=...)`` is
:func:`deqlab.verify.api.verify`, so the Python API reads like the command whichever of
the package or the function a caller reaches.
"""

import sys
import types

from deqlab.verify.api import DEFAULT_WIDTH, MODELS, Verification, verify
from deqlab.verify.inputs import FORMATS, InputError, load_dataset, load_file


class _CallablePackage(types.ModuleType):
    """This package, callable as :func:`verify` (one name for the command and the call)."""

    def __call__(self, *args: object, **kwargs: object) -> Verification:
        return verify(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage

__all__ = [
    "DEFAULT_WIDTH",
    "FORMATS",
    "MODELS",
    "InputError",
    "Verification",
    "load_dataset",
    "load_file",
    "verify",
]

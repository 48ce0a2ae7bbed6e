"""``deqlab verify``: the hypotheses and predictions of the three papers on the user's own
data and model (:func:`verify`, :class:`Verification`), one frozen dataclass per model
(:class:`ReLUDEQCheck`, :class:`MonDEQCheck`, :class:`DELMCheck`).

``deqlab.verify`` is the function :func:`verify` (exported by :mod:`deqlab`); this package,
named apart from it, holds the classes and the data loaders.
"""

from deqlab.verification.api import Verification, verify
from deqlab.verification.checks import DEFAULT_WIDTH, DELMCheck, MonDEQCheck, ReLUDEQCheck
from deqlab.verification.files import FORMATS, load_file
from deqlab.verification.inputs import InputError, load_dataset

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

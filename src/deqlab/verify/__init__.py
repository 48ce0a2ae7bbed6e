"""``deqlab verify``: the hypotheses and predictions of the three papers on the user's own
data and model (:func:`verify`, :class:`Verification`).

Import submodules with ``from deqlab.verify.<module> import ...``: ``deqlab.verify`` is
also the name of the function re-exported at the package's top level.
"""

from deqlab.verify.api import DEFAULT_WIDTH, MODELS, Verification, verify
from deqlab.verify.inputs import FORMATS, InputError, load_dataset, load_file

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

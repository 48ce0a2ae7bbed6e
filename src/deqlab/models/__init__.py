"""DEQ model families.

The ReLU DEQ (Ling et al. 2023), the monotone DEQ (thesis), the DELM (Kawaguchi 2021).
"""

from deqlab.models.baselines import LinearModel, LinearResNet, ReLUMLP
from deqlab.models.delm import DELM, column_softmax
from deqlab.models.mondeq import MonDEQ, monotone_fixed_point

__all__ = [
    "DELM",
    "LinearModel",
    "LinearResNet",
    "MonDEQ",
    "ReLUMLP",
    "column_softmax",
    "monotone_fixed_point",
]

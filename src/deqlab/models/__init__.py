"""DEQ model families.

The ReLU DEQ (Ling et al. 2023), the monotone DEQ (thesis), the DELM (Kawaguchi 2021),
the multiscale DEQ (Bai et al. 2020; thesis Figures 3.1, 4.5).
"""

from deqlab.models.baselines import LinearModel, LinearResNet, ReLUMLP
from deqlab.models.conv_deq import ConvDEQ, ConvDEQCell, WeightTiedConvNet
from deqlab.models.delm import DELM, column_softmax
from deqlab.models.mdeq import MDEQ, MDEQCell
from deqlab.models.mondeq import MonDEQ, monotone_fixed_point
from deqlab.models.relu_deq import Gradients, ReLUDEQ

__all__ = [
    "DELM",
    "MDEQ",
    "ConvDEQ",
    "ConvDEQCell",
    "Gradients",
    "LinearModel",
    "LinearResNet",
    "MDEQCell",
    "MonDEQ",
    "ReLUDEQ",
    "ReLUMLP",
    "WeightTiedConvNet",
    "column_softmax",
    "monotone_fixed_point",
]

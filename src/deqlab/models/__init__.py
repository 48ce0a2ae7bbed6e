"""DEQ model families.

The ReLU DEQ (Ling et al. 2023), the monotone DEQ (thesis), the DELM (Kawaguchi 2021).
"""

from deqlab.models.mondeq import MonDEQ, monotone_fixed_point

__all__ = ["MonDEQ", "monotone_fixed_point"]

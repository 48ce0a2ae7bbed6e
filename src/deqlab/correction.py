"""The fixed-point correction loss (Bai et al. 2022, "Deep equilibrium optical flow
estimation", DEQ-Flow, Eq. 7): the loss taken on several iterates of the solve, not only on
the last, so that the gradient also reaches the path to the fixed point.

For states ``z_1, …, z_n`` of one solve (:meth:`deqlab.DEQ.states`, the last the layer's
output), ``L = Σ_k γ^(n−k) ℓ(z_k, *targets)`` with ``k = 1 … n``: the last state weighs 1 and
each earlier one ``γ`` times the next (torchdeq's ``fp_correction`` with its ``'exp'``
weights, ``γ = 0.8``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from deqlab._checks import check_real


def fixed_point_correction(
    loss: Callable[..., torch.Tensor],
    states: Sequence[Any],
    *targets: Any,
    gamma: float = 0.8,
) -> torch.Tensor:
    """``Σ_k γ^(n−k) loss(states[k−1], *targets)`` over the ``n`` states.

    Raises:
        ValueError: no states; ``gamma`` outside ``(0, 1]``.
    """
    check_real("gamma", gamma, low=0.0, high=1.0, low_inclusive=False)
    if not len(states):
        raise ValueError("`states` must hold at least one state (DEQ.states(x, n) gives n)")
    n = len(states)
    return sum(gamma ** (n - 1 - k) * loss(state, *targets) for k, state in enumerate(states))

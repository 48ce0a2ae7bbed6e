"""Whether a cell treats the samples of a batch apart: ``f(z, x)_i`` depends on
``(z_i, x_i)`` alone, so ``J_f`` is block-diagonal over the batch.

Per-sample solves and row compaction (:class:`deqlab.DEQ`) and the per-sample Jacobians and
NTK of :func:`deqlab.diagnose` rest on it. One function decides it for both: a cell module
holding a BatchNorm in training mode couples the samples (batch statistics); where the
caller can afford one more evaluation, a probe also moves sample 0 and watches the others
(attention across dim 0, any other mixing).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

#: A probe's relative change of another sample's output that counts as coupling (round-off
#: of a cell that treats samples apart stays many orders below).
PROBE_RTOL = 1e-5


def samples_coupled(
    cell: Any, probe: tuple[Callable[[torch.Tensor], torch.Tensor], torch.Tensor] | None = None
) -> str | None:
    """Why ``cell``'s output for one sample depends on the others, or None where it does not.

    Args:
        cell: the DEQ's cell (a module is searched for BatchNorms in training mode).
        probe: optional ``(f, z)``: ``f`` maps a state ``(B, ...)`` (packed, for a tuple state)
            to one of that shape, ``z`` a state with ``B ≥ 2``; then ``f`` is evaluated at
            ``z`` and at ``z`` with sample 0 moved by 1, and any other sample whose output
            moves by more than :data:`PROBE_RTOL` of the output's scale counts as coupling.

    Returns:
        A reason in words (for an error message or a fallback's note), or None.
    """
    if isinstance(cell, nn.Module) and any(
        isinstance(m, nn.modules.batchnorm._BatchNorm) and m.training for m in cell.modules()
    ):
        return "the cell holds a BatchNorm in training mode (batch statistics)"
    if probe is None:
        return None
    f, z = probe
    if z.shape[0] < 2:
        return None
    with torch.no_grad():
        moved = z.clone()
        moved[0] += 1.0
        before, after = f(z)[1:], f(moved)[1:]
    scale = float(before.abs().max())
    if float((after - before).abs().max()) > PROBE_RTOL * scale:
        return "changing sample 0 of the state changed f at other samples (acting across dim 0)"
    return None

"""Row compaction: a per-sample solve evaluates ``f`` only on the samples still to converge.

With ``per_sample=True`` every row ``i`` of the ``(B, N)`` iterates is its own problem. Once
row ``i`` meets the tolerance its best iterate is final, so it is frozen (``z_i`` kept,
``f(z_i)`` kept) and the next evaluations of ``f`` see only the pending rows. This needs a
map that can be evaluated on some of its samples: a :class:`RowMap` (``deqlab.DEQ`` builds
one when its input ``x`` has the batch as dim 0). The cost of a solve is then
``Σ_i steps_i / B`` full-batch evaluations instead of ``max_i steps_i``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


class RowMap:
    """``f`` on a batch, plus ``rows(z_sub, index) = f(z)[index]`` with ``z_sub = z[index]``
    (``index`` a 1-d long tensor of samples): valid for a map acting on each sample alone."""

    def __init__(
        self,
        f: Callable[[torch.Tensor], torch.Tensor],
        rows: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    ) -> None:
        self.f, self.rows = f, rows

    def __call__(self, z: torch.Tensor) -> torch.Tensor:
        return self.f(z)


def evaluate_pending(
    f: RowMap,
    z: torch.Tensor,
    z_next: torch.Tensor,
    fz: torch.Tensor,
    pending: torch.Tensor,
    shape: torch.Size,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The next iterate and its image ``(B, N)``: pending rows step to ``z_next`` and are
    evaluated (``f.rows``), the others keep ``z`` and ``f(z)``."""
    index = pending.nonzero()[:, 0]  # (k,)
    z_sub = z_next.index_select(0, index)  # (k, N)
    f_sub = f.rows(z_sub.reshape(len(index), *shape[1:]), index).reshape(len(index), -1)
    return z.index_copy(0, index, z_sub), fz.index_copy(0, index, f_sub)

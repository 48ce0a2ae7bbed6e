"""Variational (DEQ) dropout: one mask, drawn once per forward and held over the solver's
iterations, so that the cell the solver iterates is one fixed map (Gal & Ghahramani 2016;
Bai et al. 2019 train their DEQs with it; torchdeq's ``VariationalDropout``).

An ordinary ``nn.Dropout`` inside a cell draws a new mask at every evaluation: the map changes
under the solver and its iterates do not settle. :class:`VariationalDropout` draws its mask at
its first call after :func:`reset_dropout` (Bernoulli ``1 − p``, scaled by ``1 / (1 − p)``;
dims listed in ``shared_dims`` share one draw, e.g. ``(2, 3)`` drops whole channels of a
``(B, C, H, W)`` state) and reuses it until the next reset; in eval mode it is the identity.
:class:`deqlab.DEQ` resets the masks of its cell at every forward; where it evaluates the cell
on some samples only (row compaction), the mask's rows of those samples are used
(:func:`deqlab.solvers.rows.current_rows`).
"""

from __future__ import annotations

import torch
from torch import nn

from deqlab._checks import check_real
from deqlab.solvers.rows import current_rows


class VariationalDropout(nn.Module):
    """Dropout with one mask per forward of the DEQ (see the module docstring).

    Args:
        p: probability of zeroing an entry, in ``[0, 1)``.
        shared_dims: dims of the input (not 0, the batch) along which one draw is shared.
    """

    def __init__(self, p: float = 0.5, shared_dims: tuple[int, ...] = ()) -> None:
        super().__init__()
        self.p = check_real("p", p, low=0.0, high=1.0, high_inclusive=False)
        if any(not isinstance(d, int) or d == 0 for d in shared_dims):
            raise ValueError(
                f"`shared_dims` must be dims of the input other than 0 (the batch); "
                f"got {shared_dims!r}"
            )
        self.shared_dims = tuple(shared_dims)
        self.mask: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        rows = current_rows()
        if self.mask is None:
            if rows is not None:
                raise RuntimeError(
                    "VariationalDropout draws its mask on the whole batch: reset_dropout() "
                    "was called within a solve"
                )
            shape = [1 if d in self.shared_dims or d - x.ndim in self.shared_dims else n
                     for d, n in enumerate(x.shape)]  # fmt: skip
            keep = torch.empty(shape, dtype=x.dtype, device=x.device).bernoulli_(1 - self.p)
            self.mask = keep / (1 - self.p)
        mask = self.mask if rows is None else self.mask.index_select(0, rows)
        if mask.shape[0] not in (1, x.shape[0]):
            raise ValueError(
                f"VariationalDropout's mask was drawn for a batch of {mask.shape[0]}; got an "
                f"input of {x.shape[0]} samples (call reset_dropout() between batches)"
            )
        return x * mask

    def extra_repr(self) -> str:
        return f"p={self.p}, shared_dims={self.shared_dims}"


def reset_dropout(module: nn.Module) -> None:
    """Forget the masks of every :class:`VariationalDropout` in ``module`` (the next call
    draws a new one); :class:`deqlab.DEQ` does it for its cell at every forward."""
    for layer in module.modules():
        if isinstance(layer, VariationalDropout):
            layer.mask = None

"""A solve's warm start along GD: its product cache, trend and (adjoint) flip memory.

The start is the cached input itself (its product exact: *verified*, so a start within
tolerance costs no product) or, once a trend is known, the extrapolation x + p t + q t_prev
with its product (*unverified*: every row takes one exact product, so all returned
products are exact again); a row whose flips were undone restarts from its input of then,
moved by the trend since, with its product left to the solve (``Start.unknown``).
Why: each piece removes products; see benchmarks/README.md for their measured share.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from deqlab.models.relu_deq_solve import RowSolution
from deqlab.train.relu_deq.cost import ProductCount
from deqlab.train.relu_deq.flip_memory import FlipMemory
from deqlab.train.relu_deq.product_cache import ProductCache, mask_flips
from deqlab.train.relu_deq.trend import TrendPredictor


class Start(NamedTuple):
    """Input ``x`` (n, m) and its ``product``; ``ratio`` c of the trend (NaN without one);
    ``verified``: the product is exact; ``unknown``: rows without a product (or None)."""

    x: torch.Tensor
    product: torch.Tensor
    ratio: float
    verified: bool
    unknown: torch.Tensor | None


class WarmStart:
    """:class:`ProductCache` + :class:`TrendPredictor` (with ``extrapolate``) +
    :class:`FlipMemory` (with ``memory`` > 0, masked products only)."""

    def __init__(self, x: torch.Tensor, product: torch.Tensor, *, extrapolate: bool,
                 memory: int = 0) -> None:  # fmt: skip
        self.cache, self.trend = ProductCache(x, product), TrendPredictor()
        self.memory = FlipMemory(memory) if memory > 0 else None
        self.extrapolate = extrapolate

    def start(self, jumps: torch.Tensor | None = None, mask: torch.Tensor | None = None) -> Start:
        """The next solve's start; ``jumps`` ((n,) bool): rows whose ``mask`` just changed."""
        cache = self.cache
        predicted = self.trend.predict(cache.x, cache.product)
        if predicted is None:
            return Start(cache.x, cache.product, math.nan, True, None)
        x0, product0 = predicted
        found = None
        if self.memory is not None and jumps is not None and mask is not None:
            found = self.memory.returns(jumps, mask)
        if found is None:
            return Start(x0, product0, self.trend.ratio, False, None)
        rows, x_then, trends = found
        x0.index_copy_(0, rows, self.trend.carry(x_then, rows, trends.to(x0.dtype)[:, None]))
        return Start(x0, product0, self.trend.ratio, False, rows)

    def advance(self, solution: RowSolution, start: Start, *, jumps=None, mask=None) -> None:
        """The solve from ``start`` ended with ``solution`` (under ``mask``, if masked)."""
        x, product = solution.x_in, solution.product
        if self.extrapolate:
            self.trend.observe(x - self.cache.x, product - self.cache.product, jumps)
        self.cache.store(x, product, exact=not start.verified)
        if self.memory is not None and mask is not None:
            self.memory.remember(x, mask)

    def remask(self, W: torch.Tensor, old: torch.Tensor, new: torch.Tensor,
               count: ProductCount) -> torch.Tensor:  # fmt: skip
        """Products (old ⊙ v) W → (new ⊙ v) W of the input and the trends; returns the row
        of every flipped entry (the memory keeps its own masks)."""
        flips = mask_flips(old, new)
        self.trend.remask(W, flips)
        self.cache.remask(W, flips, count)
        return flips[0]

    def state_dict(self) -> dict:
        memory = None if self.memory is None else self.memory.state_dict()
        return {"cache": self.cache.state_dict(), "trend": self.trend.state_dict(),
                "memory": memory}  # fmt: skip

    def load_state_dict(self, state: dict) -> None:
        self.cache.load_state_dict(state["cache"])
        self.trend.load_state_dict(state["trend"])
        if self.memory is not None:
            self.memory.load_state_dict(state["memory"])

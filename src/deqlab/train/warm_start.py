"""A warm start that carries its product, for solves ``x ← h(M T(x))`` along a GD run.

``x`` (m, n) is the input of the last product and ``product = M T(x)`` (M = W or Wᵀ, T the
identity or multiplication by the ReLU mask). One step of history (``x_prev`` with its
product, and the difference before it) gives a fitted linear extrapolation
``x + c (x − x_prev)`` whose product ``product + c (product − product_prev)`` is free by
linearity. After the GD update W ← W − η L Rᵀ every stored product is corrected by thin
products only (:meth:`WarmStart.correct`). Used by :class:`deqlab.train.gd.GDTrainer`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from deqlab.models.relu_deq_solve import remask_product

_FIELDS = ("x", "product", "x_prev", "product_prev", "dx_prev", "smooth_prev")


class WarmStart:
    """Input ``x``, its ``product``, and one step of history for the extrapolation."""

    def __init__(self, x: torch.Tensor, product: torch.Tensor) -> None:
        self.x, self.product = x, product
        self.x_prev: torch.Tensor | None = None
        self.product_prev: torch.Tensor | None = None
        self.dx_prev: torch.Tensor | None = None  # x_prev − (the input before it)
        self.smooth_prev: torch.Tensor | None = None  # (n,) bool: columns dx_prev is fit on

    def start(self, smooth: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, float]:
        """(x₀, product of x₀, c): x₀ = x + c (x − x_prev) on the ``smooth`` columns.

        c minimizes ‖(x − x_prev) − c dx_prev‖ over the columns smooth in both differences
        (all columns when ``smooth`` is None), clamped to [−1, 1]; c is NaN (and x₀ = x)
        without history.
        """
        if self.dx_prev is None or self.x_prev is None or self.product_prev is None:
            return self.x, self.product, math.nan
        dx = self.x - self.x_prev  # (m, n)
        fit = smooth if self.smooth_prev is None else self.smooth_prev
        if smooth is not None and self.smooth_prev is not None:
            fit = smooth & self.smooth_prev
        cross = (dx * self.dx_prev).sum(dim=0)  # (n,) per-column sums, then over `fit`
        square = self.dx_prev.square().sum(dim=0)
        if fit is not None:
            cross, square = cross[fit], square[fit]
        denominator = float(square.sum())
        if denominator == 0.0:
            return self.x, self.product, math.nan
        c = min(max(float(cross.sum()) / denominator, -1.0), 1.0)
        weight = c if smooth is None else c * smooth.to(dx.dtype)  # scalar or (n,)
        return self.x + weight * dx, self.product + weight * (self.product - self.product_prev), c

    def advance(
        self,
        x: torch.Tensor,
        product: torch.Tensor,
        *,
        keep_history: bool,
        smooth: torch.Tensor | None = None,
    ) -> None:
        """A solve ended at input ``x`` with ``product``; the current pair becomes history.

        ``smooth`` is the column selection that was passed to :meth:`start` (it describes
        the difference that becomes ``dx_prev``).
        """
        if keep_history:
            self.dx_prev = None if self.x_prev is None else self.x - self.x_prev
            self.smooth_prev = smooth
            self.x_prev, self.product_prev = self.x, self.product
        self.x, self.product = x, product

    def correct(
        self,
        lr: float,
        left: torch.Tensor,
        right: torch.Tensor,
        transform: Callable[[torch.Tensor], torch.Tensor] = lambda x: x,
    ) -> int:
        """After M ← M − lr · left rightᵀ: product ← product − lr · left (rightᵀ T(x)).

        Applied to ``x`` and ``x_prev``; returns how many inputs were corrected (each costs
        two thin products, 2n/m of an m×m by m×n product).
        """
        self.product = torch.addmm(self.product, left, right.T @ transform(self.x), alpha=-lr)
        if self.x_prev is None or self.product_prev is None:
            return 1
        inner = right.T @ transform(self.x_prev)  # (n, n)
        self.product_prev = torch.addmm(self.product_prev, left, inner, alpha=-lr)
        return 2

    def remask(self, W: torch.Tensor, old_mask: torch.Tensor, new_mask: torch.Tensor) -> int:
        """Products Wᵀ(old ⊙ x) → Wᵀ(new ⊙ x) for x and x_prev; returns the flips of x."""
        self.product, flips = remask_product(W, self.x, old_mask, new_mask, self.product)
        if self.x_prev is not None and self.product_prev is not None:
            self.product_prev, _ = remask_product(
                W, self.x_prev, old_mask, new_mask, self.product_prev
            )
        return flips

    def refresh(self, apply: Callable[[torch.Tensor], torch.Tensor]) -> None:
        """Recompute the product exactly and drop the (drifted) history."""
        self.product = apply(self.x)
        self.x_prev = self.product_prev = self.dx_prev = self.smooth_prev = None

    def state_dict(self) -> dict:
        return {k: None if getattr(self, k) is None else getattr(self, k).clone() for k in _FIELDS}

    def load_state_dict(self, state: dict) -> None:
        for k in _FIELDS:
            setattr(self, k, None if state[k] is None else state[k].clone())

"""A warm start that carries its product, for solves ``x ← h(M T(x))`` along a GD run.

Everything is stored in rows, one per sample (the layout of
:func:`deqlab.models.relu_deq_solve.solve_forward` with ``rows=True``): ``x`` (n, m) is
the input of the last product and ``product = T(x) Mᵀ`` (M = W or Wᵀ, T the identity or
multiplication by the ReLU mask), kept exact: after the GD update W ← W − η Lᵀ R (rows
L, R) it is corrected by thin products only (:meth:`WarmStart.correct`), and after a mask
change through the flipped entries only (:meth:`WarmStart.remask`).

The extrapolated start is ``x + c t`` (order 1) or ``x + α t + β (t − t_prev)`` (order
2, (α, β) fitted to the last change from the two before it): t is the last *smooth*
change of each row, the difference of the last two inputs, except in a row whose
difference contains a jump (its mask flipped), which keeps c times its previous trend;
c is the least-squares ratio of consecutive changes. A row whose mask flips back to the
one of the input before (:meth:`WarmStart.start`'s ``returning``) starts from that input
instead, moved by two smooth changes. The products of the trends are differences of
exact products, taken when the trends were formed, and are not corrected afterwards:
after one GD step the start's product is off by the product of the parameter change
with the predicted change, a change of a change (for C in the benchmark ≈ 1e-6 relative,
several times below the start's own error). An extrapolated start is therefore not
*verified*: the solve must compute at least one exact product per row before it may stop
(``verified_start`` of :func:`deqlab.models.relu_deq_solve.solve_forward`), so every
returned solution and product is exact. Used by :class:`deqlab.train.gd.GDTrainer`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from deqlab.models.relu_deq_solve import apply_flips, mask_flips

_TENSORS = (
    "x",
    "product",
    "trend",
    "trend_product",
    "trend_prev",
    "trend_prev_product",
    "x_prev",
    "product_prev",
)


class WarmStart:
    """Input ``x`` (n, m) with its exact ``product``; a per-row trend for the extrapolation.

    Masked products (T(x) = x ⊙ D, the adjoint) also keep the input before ``x`` for the
    rows whose mask flips back (:meth:`start`'s ``returning``).
    """

    def __init__(self, x: torch.Tensor, product: torch.Tensor, order: int = 1) -> None:
        self.x, self.product, self.order = x, product, order
        self.trend: torch.Tensor | None = None  # (n, m) last smooth change per row
        self.trend_product: torch.Tensor | None = None  # its product when it was formed
        self.trend_prev: torch.Tensor | None = None  # the change before (order 2)
        self.trend_prev_product: torch.Tensor | None = None
        self.ratio = math.nan  # c: least-squares ratio of the last two changes
        self.coefficients = (1.0, 1.0)  # (α, β) of the order-2 prediction
        self.x_prev: torch.Tensor | None = None  # the input before x, and its product
        self.product_prev: torch.Tensor | None = None  # (one GD update behind)
        self.update: tuple[float, torch.Tensor, torch.Tensor] | None = None  # last correct()
        self._returned: tuple[torch.Tensor, torch.Tensor] | None = None  # rows, their product

    def _predicted_change(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The next change and its product: c t (order 1) or α t + β (t − t_prev) (order 2;
        α = β = 1 is the quadratic extrapolation 2t − t_prev)."""
        t, tp = self.trend, self.trend_product
        if t is None or tp is None or math.isnan(self.ratio):
            return None
        if self.order == 2 and self.trend_prev is not None and self.trend_prev_product is not None:
            alpha, beta = self.coefficients  # (α + β) t − β t_prev
            return (
                torch.mul(t, alpha + beta).sub_(self.trend_prev, alpha=beta),
                torch.mul(tp, alpha + beta).sub_(self.trend_prev_product, alpha=beta),
            )
        return self.ratio * t, self.ratio * tp

    def start(
        self, returning: torch.Tensor | None = None, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, float, bool]:
        """(x₀, product of x₀, c, verified): x₀ = x + predicted change, or x (verified).

        ``returning``: rows whose mask is back to the one of ``x_prev`` (a flip undone);
        they start from ``x_prev`` moved by the two smooth changes since (its product
        corrected by the last GD update, with ``mask`` as T), not from across the jump.
        """
        self._returned = None
        change = self._predicted_change()
        if change is None:
            return self.x, self.product, math.nan, True
        x0, product0 = self.x + change[0], self.product + change[1]
        if (
            returning is not None
            and returning.numel() > 0
            and self.x_prev is not None
            and self.product_prev is not None
            and self.update is not None
            and self.trend is not None
            and self.trend_product is not None
        ):
            rows = returning
            lr, left, right = self.update
            x_prev = self.x_prev.index_select(0, rows)
            inner = (x_prev if mask is None else x_prev * mask.index_select(0, rows)) @ left.T
            product_prev = torch.addmm(
                self.product_prev.index_select(0, rows), inner, right, alpha=-lr
            )
            self._returned = (rows, product_prev)
            x0.index_copy_(
                0, rows, x_prev + self.trend.index_select(0, rows) + change[0].index_select(0, rows)
            )
            product0.index_copy_(
                0,
                rows,
                product_prev
                + self.trend_product.index_select(0, rows)
                + change[1].index_select(0, rows),
            )
        return x0, product0, self.ratio, False

    def advance(
        self,
        x: torch.Tensor,
        product: torch.Tensor,
        *,
        keep_history: bool,
        jumps: torch.Tensor | None = None,
    ) -> None:
        """A solve ended at input ``x`` with ``product`` (exact, as the stored pair is).

        With ``keep_history`` the change ``x − self.x`` becomes the trend of every row
        except the ``jumps`` (n,) bool: a row that returned (see :meth:`start`) takes half
        its change over two steps, an other jump row its previous trend times c (a flip is
        a jump, not a trend); c is refitted on the rows without a jump:
        c = Σ⟨t_new, t_old⟩ / Σ‖t_old‖², clamped to [−1, 1].
        """
        if keep_history:
            change, change_product = x - self.x, product - self.product
            old, old_product = self.trend, self.trend_product
            change_prev, change_prev_product = self.trend, self.trend_product
            if old is not None and old_product is not None:
                fit = None if jumps is None else ~jumps
                cross = (change * old).sum(dim=1)  # (n,)
                square = old.square().sum(dim=1)
                if fit is not None:
                    cross, square = cross[fit], square[fit]
                denominator = float(square.sum())
                ratio = float(cross.sum()) / denominator if denominator > 0.0 else math.nan
                if self.order == 2 and self.trend_prev is not None:
                    fallback = (ratio, 0.0) if math.isfinite(ratio) else (1.0, 1.0)
                    self.coefficients = _fit_second_order(
                        change, old, self.trend_prev, fit, fallback
                    )
                if jumps is not None and not math.isnan(self.ratio) and bool(jumps.any()):
                    rows = jumps.nonzero().squeeze(1)  # their change: c times the trend
                    change.index_copy_(0, rows, self.ratio * old.index_select(0, rows))
                    change_product.index_copy_(
                        0, rows, self.ratio * old_product.index_select(0, rows)
                    )
                if self._returned is not None and self.x_prev is not None:
                    rows, product_prev = self._returned  # half the change over two steps
                    two_steps = x.index_select(0, rows) - self.x_prev.index_select(0, rows)
                    change.index_copy_(0, rows, two_steps / 2)
                    change_product.index_copy_(
                        0, rows, (product.index_select(0, rows) - product_prev) / 2
                    )
                    # no acceleration for them: the change before is the same (the old trend
                    # is only kept as trend_prev, so it may be overwritten)
                    change_prev.index_copy_(0, rows, change.index_select(0, rows))
                    change_prev_product.index_copy_(0, rows, change_product.index_select(0, rows))
                self.ratio = min(max(ratio, -1.0), 1.0) if math.isfinite(ratio) else math.nan
            self.trend_prev, self.trend_prev_product = change_prev, change_prev_product
            self.trend, self.trend_product = change, change_product
            self.x_prev, self.product_prev = self.x, self.product
        self._returned = None
        self.x, self.product = x, product

    def correct(
        self, lr: float, left: torch.Tensor, right: torch.Tensor, mask: torch.Tensor | None = None
    ) -> None:
        """After M ← M − lr · rightᵀ left (so that T(x) Mᵀ loses lr · T(x) leftᵀ right):
        product ← product − lr · (T(x) leftᵀ) right, T(x) = x or x ⊙ ``mask``.

        Two thin products, 2n/m of an m×m by m×n product.
        """
        inner = (self.x if mask is None else self.x * mask) @ left.T
        self.product = torch.addmm(self.product, inner, right, alpha=-lr)
        self.update = (lr, left, right)

    def remask(
        self, W: torch.Tensor, old_mask: torch.Tensor, new_mask: torch.Tensor
    ) -> torch.Tensor:
        """Products (old ⊙ v) W → (new ⊙ v) W of x and of what is kept with it (x_prev,
        the trends); returns the row of every flipped entry."""
        flips = mask_flips(old_mask, new_mask)
        for v, p in (("x_prev", "product_prev"), ("trend", "trend_product"),
                     ("trend_prev", "trend_prev_product")):  # fmt: skip
            vector, product = getattr(self, v), getattr(self, p)
            if vector is not None and product is not None and product is not self.product:
                apply_flips(W, vector, flips, product)
        apply_flips(W, self.x, flips, self.product)
        return flips[0]

    def refresh(self, apply: Callable[[torch.Tensor], torch.Tensor]) -> None:
        """Recompute the product exactly (the trend keeps its approximate product)."""
        self.product = apply(self.x)
        self.update = None  # product_prev is not one plain update behind any more

    def state_dict(self) -> dict:
        state = {k: getattr(self, k) for k in _TENSORS}
        state = {k: None if v is None else v.clone() for k, v in state.items()}
        update = (
            None if self.update is None else (self.update[0], *(t.clone() for t in self.update[1:]))
        )
        return state | {"ratio": self.ratio, "update": update, "coefficients": self.coefficients}

    def load_state_dict(self, state: dict) -> None:
        for k in _TENSORS:
            setattr(self, k, None if state[k] is None else state[k].clone())
        self.ratio = state["ratio"]
        self.coefficients = tuple(state["coefficients"])
        update = state["update"]
        self.update = None if update is None else (update[0], *(t.clone() for t in update[1:]))
        self._returned = None


def _fit_second_order(
    change: torch.Tensor,
    trend: torch.Tensor,
    trend_prev: torch.Tensor,
    rows: torch.Tensor | None,
    fallback: tuple[float, float],
) -> tuple[float, float]:
    """(α, β) minimizing ‖change − α t − β (t − t_prev)‖ over ``rows`` (all if None): the
    last change predicted from the two before it; ``fallback`` when the two are collinear
    (a geometric trend: (c, 0)); clamped to [0, 2] × [−1, 2]."""
    u = trend - trend_prev
    if rows is not None:
        change, trend, u = change[rows], trend[rows], u[rows]
    a, b, c = (float(torch.sum(p * q)) for p, q in ((trend, trend), (trend, u), (u, u)))
    f, g = float(torch.sum(change * trend)), float(torch.sum(change * u))
    det = a * c - b * b
    if not (det > 1e-9 * a * c) or not math.isfinite(det):
        return fallback
    alpha, beta = (f * c - g * b) / det, (g * a - f * b) / det
    if not (math.isfinite(alpha) and math.isfinite(beta)):
        return fallback
    return min(max(alpha, 0.0), 2.0), min(max(beta, -1.0), 2.0)

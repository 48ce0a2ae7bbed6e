"""A warm start that carries its product, for solves ``x ← h(M T(x))`` along a GD run.

Everything is stored in rows, one per sample (the layout of
:func:`deqlab.models.relu_deq_solve.solve_forward` with ``rows=True``): ``x`` (n, m) is
the input of the last product and ``product = T(x) Mᵀ`` (M = W or Wᵀ, T the identity or
multiplication by the ReLU mask), kept exact: after the GD update W ← W − η Lᵀ R (rows
L, R) it is corrected by thin products only (:meth:`WarmStart.correct`), and after a mask
change through the flipped entries only (:meth:`WarmStart.remask`).

The extrapolated start is ``x + α t + β (t − t_prev)``, (α, β) fitted to the last change
from the two before it (``x + c t`` while only one change is known): t is the last *smooth*
change of each row, the difference of the last two inputs, except in a row whose
difference contains a jump (its mask flipped), which keeps c times its previous trend;
c is the least-squares ratio of consecutive changes. A row whose mask returns to the one
of an input up to ``memory`` steps back (its flips undone) starts from that input
instead, moved by the smooth changes since; its product is left to the solve (the
``unknown`` rows of :meth:`WarmStart.start`). The products of the
trends are differences of exact products, taken when the trends were formed, and are not
corrected afterwards: after one GD step the start's product is off by the product of the
parameter change with the predicted change, a change of a change (for C in the benchmark
≈ 1e-6 relative, several times below the start's own error). An extrapolated start is
therefore not *verified*: the solve must compute at least one exact product per row
before it may stop (``verified_start`` of :func:`deqlab.models.relu_deq_solve.solve_forward`),
so every returned solution and product is exact. Used by :class:`deqlab.train.gd.GDTrainer`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import torch

from deqlab.models.relu_deq_solve import apply_flips, mask_flips

_TENSORS = (
    "x", "product", "trend", "trend_product", "trend_prev", "trend_prev_product", "_inner"
)  # fmt: skip


class Start(NamedTuple):
    """A start for a solve: input ``x`` (n, m) and its ``product``; ``ratio`` c of the
    trend (NaN without one); ``verified``: the product is exact (not extrapolated);
    ``unknown``: rows whose product is not known (None: none), see :meth:`WarmStart.start`."""

    x: torch.Tensor
    product: torch.Tensor
    ratio: float
    verified: bool
    unknown: torch.Tensor | None


class WarmStart:
    """Input ``x`` (n, m) with its exact ``product``; a per-row trend for the extrapolation.

    With ``memory`` > 0 (masked products T(x) = x ⊙ D, the adjoint) it also keeps the last
    ``memory`` + 1 inputs with their masks, for the rows whose mask returns to an earlier
    one (:meth:`start`).
    """

    def __init__(self, x: torch.Tensor, product: torch.Tensor, memory: int = 0) -> None:
        self.x, self.product, self.memory = x, product, memory
        self.trend: torch.Tensor | None = None  # (n, m) last smooth change per row
        self.trend_product: torch.Tensor | None = None  # its product when it was formed
        self.trend_prev: torch.Tensor | None = None  # the change before
        self.trend_prev_product: torch.Tensor | None = None
        self.ratio = math.nan  # c: least-squares ratio of the last two changes
        self.coefficients = (1.0, 1.0)  # (α, β) of the prediction
        self.past: list[tuple[torch.Tensor, torch.Tensor]] = []  # (input, mask), newest first
        self._inner: torch.Tensor | None = None
        self._inner_age = 0

    def _prediction(self) -> tuple[float, float] | None:
        """(p, q) of the predicted next change p t − q t_prev: α t + β (t − t_prev) is
        p = α + β, q = β (α = β = 1: the quadratic extrapolation 2t − t_prev), or c t
        (q = 0) while t_prev is unknown; None without a trend."""
        if self.trend is None or self.trend_product is None or math.isnan(self.ratio):
            return None
        if self.trend_prev is not None and self.trend_prev_product is not None:
            alpha, beta = self.coefficients
            return alpha + beta, beta
        return self.ratio, 0.0

    def start(self, jumps: torch.Tensor | None = None, mask: torch.Tensor | None = None) -> Start:
        """x₀ = x + predicted change with its product, or x itself (verified).

        A row among the ``jumps`` (n,) bool whose ``mask`` row equals its mask j + 1 steps
        back (its flips undone; the most recent such state, j + 1 <= ``memory``) starts
        from that state instead of from across the jump, moved by the j + 1 smooth changes
        since; its product is not known (``Start.unknown``): the solve's first product
        computes it.
        """
        prediction = self._prediction()
        if prediction is None:
            return Start(self.x, self.product, math.nan, True, None)
        p, q = prediction
        x0 = _extrapolate(self.x, self.trend, self.trend_prev, p, q)
        product0 = _extrapolate(self.product, self.trend_product, self.trend_prev_product, p, q)
        if jumps is None or mask is None or len(self.past) < 2:
            return Start(x0, product0, self.ratio, False, None)
        pending = jumps.nonzero().squeeze(1)
        if pending.numel() == 0:
            return Start(x0, product0, self.ratio, False, None)
        masks_then = torch.stack([m.index_select(0, pending) for _, m in self.past[1:]])
        same = (masks_then == mask.index_select(0, pending)).all(dim=2)  # (j, pending)
        found = same.any(dim=0)
        if not bool(found.any()):
            return Start(x0, product0, self.ratio, False, None)
        back = same.to(torch.int8).argmax(dim=0)[found]  # the most recent such state
        rows = pending[found]
        inputs_then = torch.stack([x.index_select(0, rows) for x, _ in self.past[1:]])
        x_then = inputs_then[back, torch.arange(rows.numel(), device=rows.device)]
        steps = (back + 2).to(x0.dtype)[:, None]  # (k, 1): steps from that input to this start
        # they move by the steps' smooth changes: steps − 1 trends and the predicted change
        moved = torch.addcmul(x_then, steps - 1 + p, self.trend.index_select(0, rows))
        if q != 0.0:  # q = β: only with a t_prev (see _prediction)
            moved.sub_(self.trend_prev.index_select(0, rows), alpha=q)
        x0.index_copy_(0, rows, moved)
        return Start(x0, product0, self.ratio, False, rows)

    def advance(
        self,
        x: torch.Tensor,
        product: torch.Tensor,
        *,
        keep_history: bool,
        jumps: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
    ) -> None:
        """A solve ended at input ``x`` with ``product`` (exact, as the stored pair is; its
        mask ``mask`` when the product is masked).

        With ``keep_history`` the change ``x − self.x`` becomes the trend of every row
        except the ``jumps`` (n,) bool, which keep their previous trend times c (a flip is a
        jump, not a trend; so do the rows restarted from an earlier state); c is refitted on
        the rows without a jump: c = Σ⟨t_new, t_old⟩ / Σ‖t_old‖², clamped to [−1, 1].
        """
        if keep_history:
            change, change_product = x - self.x, product - self.product
            old, old_product = self.trend, self.trend_product
            if old is not None and old_product is not None:
                vectors = [change, old, self.trend_prev] if self.trend_prev is not None else [
                    change, old
                ]  # fmt: skip
                gram = _row_gram(vectors, jumps)  # over the rows without a jump
                ratio = gram[0][1] / gram[1][1] if gram[1][1] > 0.0 else math.nan
                if self.trend_prev is not None:
                    fallback = (ratio, 0.0) if math.isfinite(ratio) else (1.0, 1.0)
                    self.coefficients = _fit_second_order(gram, fallback)
                if jumps is not None and not math.isnan(self.ratio) and bool(jumps.any()):
                    rows = jumps.nonzero().squeeze(1)  # their change: c times the trend
                    change.index_copy_(0, rows, self.ratio * old.index_select(0, rows))
                    change_product.index_copy_(
                        0, rows, self.ratio * old_product.index_select(0, rows)
                    )
                self.ratio = min(max(ratio, -1.0), 1.0) if math.isfinite(ratio) else math.nan
            self.trend_prev, self.trend_prev_product = old, old_product
            self.trend, self.trend_product = change, change_product
        self.x, self.product = x, product
        if self.memory > 0 and mask is not None:
            self.past = [(x, mask), *self.past][: self.memory + 1]

    def correct(
        self,
        lr: float,
        left: torch.Tensor,
        right: torch.Tensor,
        mask: torch.Tensor | None = None,
        *,
        reuse: int = 0,
    ) -> int:
        """After M ← M − lr · rightᵀ left (so that T(x) Mᵀ loses lr · T(x) leftᵀ right):
        product ← product − lr · (T(x) leftᵀ) right, T(x) = x or x ⊙ ``mask``.

        Two thin products, 2n/m of an m×m by m×n product. With ``reuse`` = k > 0 the inner
        product T(x) leftᵀ is recomputed only every k + 1 calls (one thin product in
        between): for Z, whose inputs move by ~1e-4 relative per GD step, the correction
        is then off by ~1e-3 of itself, far below the error of an extrapolated start, so
        only for a product that feeds an unverified start. Returns the thin products done.
        """
        fresh = self._inner is None or self._inner_age >= reuse
        if fresh:
            self._inner = (self.x if mask is None else self.x * mask) @ left.T
            self._inner_age = 0
        else:
            self._inner_age += 1
        self.product = torch.addmm(self.product, self._inner, right, alpha=-lr)
        return 2 if fresh else 1

    def remask(
        self, W: torch.Tensor, old_mask: torch.Tensor, new_mask: torch.Tensor
    ) -> torch.Tensor:
        """Products (old ⊙ v) W → (new ⊙ v) W of x and of the trends; returns the row of
        every flipped entry. (The past states keep their own masks.)"""
        flips = mask_flips(old_mask, new_mask)
        for v, p in (("trend", "trend_product"), ("trend_prev", "trend_prev_product")):
            vector, product = getattr(self, v), getattr(self, p)
            if vector is not None and product is not None and product is not self.product:
                apply_flips(W, vector, flips, product)
        apply_flips(W, self.x, flips, self.product)
        return flips[0]

    def refresh(self, apply: Callable[[torch.Tensor], torch.Tensor]) -> None:
        """Recompute the product exactly (the trend keeps its approximate product)."""
        self.product = apply(self.x)

    def state_dict(self) -> dict:
        state = {k: getattr(self, k) for k in _TENSORS}
        state = {k: None if v is None else v.clone() for k, v in state.items()}
        return state | {
            "ratio": self.ratio,
            "coefficients": self.coefficients,
            "inner_age": self._inner_age,
            "past": [tuple(t.clone() for t in entry) for entry in self.past],
        }

    def load_state_dict(self, state: dict) -> None:
        for k in _TENSORS:
            setattr(self, k, None if state[k] is None else state[k].clone())
        self.ratio = state["ratio"]
        self.coefficients = tuple(state["coefficients"])
        self._inner_age = state["inner_age"]
        self.past = [tuple(t.clone() for t in entry) for entry in state["past"]]


def _extrapolate(base, trend, prev, p: float, q: float) -> torch.Tensor:
    """base + p trend − q prev (prev is not read when q = 0)."""
    out = torch.add(base, trend, alpha=p)
    return out.sub_(prev, alpha=q) if q != 0.0 else out


def _row_gram(vectors: list[torch.Tensor], exclude: torch.Tensor | None) -> list[list[float]]:
    """G_ab = Σ_i ⟨v_a,i, v_b,i⟩ over the rows i not in ``exclude`` ((n,) bool or None),
    for a <= b except G_00 (not needed, NaN): dot products over all rows, less those over
    the excluded rows."""
    k = len(vectors)
    pairs = [(a, b) for a in range(k) for b in range(a, k) if (a, b) != (0, 0)]
    gram = [[math.nan] * k for _ in range(k)]
    for a, b in pairs:
        gram[a][b] = float(torch.dot(vectors[a].reshape(-1), vectors[b].reshape(-1)))
    rows = None if exclude is None else exclude.nonzero().squeeze(1)
    if rows is not None and rows.numel() > 0:
        excluded = [v.index_select(0, rows).reshape(-1) for v in vectors]
        for a, b in pairs:
            gram[a][b] -= float(torch.dot(excluded[a], excluded[b]))
    return gram


def _fit_second_order(
    gram: list[list[float]], fallback: tuple[float, float]
) -> tuple[float, float]:
    """(α, β) minimizing ‖change − α t − β (t − t_prev)‖, from the Gram ``gram`` of
    (change, t, t_prev) (see :func:`_row_gram`): the last change predicted from the two
    before it; ``fallback`` when the two are collinear (a geometric trend: (c, 0));
    clamped to [0, 2] × [−1, 2]."""
    (_, f, f_prev), (_, a, a_prev), (_, _, p_prev) = gram
    b = a - a_prev  # ⟨t, u⟩, u = t − t_prev
    c = a - 2.0 * a_prev + p_prev  # ⟨u, u⟩
    g = f - f_prev  # ⟨change, u⟩
    det = a * c - b * b
    if not (det > 1e-9 * a * c) or not math.isfinite(det):
        return fallback
    alpha, beta = (f * c - g * b) / det, (g * a - f * b) / det
    if not (math.isfinite(alpha) and math.isfinite(beta)):
        return fallback
    return min(max(alpha, 0.0), 2.0), min(max(beta, -1.0), 2.0)

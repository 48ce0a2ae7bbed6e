"""Per-row trend of a solve's inputs along GD, extrapolated to the next start.

With t the last change of each row's input (x_τ − x_{τ−1}, carrying its product) and t_prev
the one before, the next change is predicted as ``p t + q t_prev``: (p, q) are fitted by
least squares to the last change from the two before it; while only one change is known,
(p, q) = (c, 0) with c the least-squares ratio of consecutive changes. C moves smoothly
(mostly with a); Z with the noisy GD steps (q ≈ 0.6: near an average of the last two).
A row whose mask flipped carries a jump, not a trend: its change is taken as c t.

Why: a start one predicted change closer takes fewer products. The products of the trends
are differences of exact products, not corrected after a GD step: a start is then off by a
change of a change, which is why an extrapolated start is *unverified*
(:mod:`deqlab.models.relu_deq_solve`).
"""

from __future__ import annotations

import math

import torch

from deqlab.train.relu_deq.product_cache import Flips, apply_flips

_TENSORS = ("t", "t_product", "t_prev", "t_prev_product")


class TrendPredictor:
    """Trends t, t_prev (n, m) with their products; prediction ``p t + q t_prev``."""

    def __init__(self) -> None:
        self.t: torch.Tensor | None = None
        self.t_product: torch.Tensor | None = None
        self.t_prev: torch.Tensor | None = None
        self.t_prev_product: torch.Tensor | None = None
        self.ratio = math.nan  # c, clamped to [−1, 1]
        self.coefficients = (2.0, -1.0)  # (p, q); before the first fit: 2t − t_prev

    def _pq(self) -> tuple[float, float] | None:
        """(p, q) of the prediction, None without one."""
        if self.t is None or self.t_product is None or math.isnan(self.ratio):
            return None
        return self.coefficients if self.t_prev is not None else (self.ratio, 0.0)

    def predict(self, x: torch.Tensor, product: torch.Tensor):
        """(x + p t + q t_prev, its product), or None without a trend."""
        pq = self._pq()
        if pq is None:
            return None
        return (_combine(x, self.t, self.t_prev, *pq),
                _combine(product, self.t_product, self.t_prev_product, *pq))  # fmt: skip

    def carry(self, x: torch.Tensor, rows: torch.Tensor, trends: torch.Tensor) -> torch.Tensor:
        """Rows ``x`` (k, m) of the given ``rows`` moved by ``trends`` (k, 1) times t and by
        the predicted change: the start of a row restarted from an earlier input."""
        pq = self._pq()
        assert pq is not None and self.t is not None, "carry needs a prediction"
        moved = torch.addcmul(x, trends + pq[0], self.t.index_select(0, rows))
        if pq[1] != 0.0:
            assert self.t_prev is not None
            moved.add_(self.t_prev.index_select(0, rows), alpha=pq[1])
        return moved

    def observe(
        self, change: torch.Tensor, change_product: torch.Tensor, jumps: torch.Tensor | None
    ) -> None:
        """The inputs moved by ``change`` (n, m); the ``jumps`` rows ((n,) bool) take c t
        instead. c and (p, q) are refitted on the rows without a jump."""
        old, old_product = self.t, self.t_product
        if old is not None and old_product is not None:
            vectors = [change, old] if self.t_prev is None else [change, old, self.t_prev]
            gram = _row_gram(vectors, jumps)
            ratio = gram[0][1] / gram[1][1] if gram[1][1] > 0.0 else math.nan
            if self.t_prev is not None:
                fallback = (ratio, 0.0) if math.isfinite(ratio) else (2.0, -1.0)
                self.coefficients = _fit(gram, fallback)
            if jumps is not None and not math.isnan(self.ratio) and bool(jumps.any()):
                rows = jumps.nonzero().squeeze(1)
                change.index_copy_(0, rows, self.ratio * old.index_select(0, rows))
                change_product.index_copy_(0, rows, self.ratio * old_product.index_select(0, rows))
            self.ratio = min(max(ratio, -1.0), 1.0) if math.isfinite(ratio) else math.nan
        self.t_prev, self.t_prev_product = old, old_product
        self.t, self.t_product = change, change_product

    def remask(self, W: torch.Tensor, flips: Flips) -> None:
        """The trends' products (old ⊙ t) W → (new ⊙ t) W (masked products only)."""
        for t, product in ((self.t, self.t_product), (self.t_prev, self.t_prev_product)):
            if t is not None and product is not None:
                apply_flips(W, t, flips, product)

    def state_dict(self) -> dict:
        tensors = {k: getattr(self, k) for k in _TENSORS}
        tensors = {k: None if v is None else v.clone() for k, v in tensors.items()}
        return tensors | {"ratio": self.ratio, "coefficients": self.coefficients}

    def load_state_dict(self, state: dict) -> None:
        for k in _TENSORS:
            setattr(self, k, None if state[k] is None else state[k].clone())
        self.ratio, self.coefficients = state["ratio"], tuple(state["coefficients"])


def _combine(base, t, t_prev, p: float, q: float) -> torch.Tensor:
    """base + p t + q t_prev (t_prev is not read when q = 0)."""
    out = torch.add(base, t, alpha=p)
    return out.add_(t_prev, alpha=q) if q != 0.0 else out


def _row_gram(vectors: list[torch.Tensor], exclude: torch.Tensor | None) -> list[list[float]]:
    """G_ab = Σ_i ⟨v_a,i, v_b,i⟩ over the rows i not in ``exclude`` ((n,) bool or None),
    for a <= b except G_00 (not needed, NaN): over all rows, less the excluded rows."""
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


def _fit(gram: list[list[float]], fallback: tuple[float, float]) -> tuple[float, float]:
    """(p, q) minimizing ‖change − p t − q t_prev‖ from the Gram of (change, t, t_prev);
    ``fallback`` when t and t − t_prev are collinear (a geometric trend). Clamped to
    q ∈ [−2, 1] and p + q ∈ [0, 2] (the factor applied to a steady trend t = t_prev)."""
    (_, f, g), (_, a, b), (_, _, c) = gram  # f = ⟨change, t⟩, g = ⟨change, t_prev⟩, …
    det = a * c - b * b
    if not (det > 1e-9 * a * (a - 2.0 * b + c)) or not math.isfinite(det):
        return fallback
    p, q = (f * c - g * b) / det, (g * a - f * b) / det
    if not (math.isfinite(p) and math.isfinite(q)):
        return fallback
    steady, q = min(max(p + q, 0.0), 2.0), min(max(q, -2.0), 1.0)
    return steady - q, q

"""A solve's last input with its exact product, kept exact along GD by thin corrections.

The solves of :mod:`deqlab.models.relu_deq_solve` iterate ``x ← h(T(x) Mᵀ)`` in rows
(M = W forward, Wᵀ adjoint; T(x) = x, or x ⊙ D for the adjoint). The cache holds an input
x (n, m) and
``product = T(x) Mᵀ``:

* after the GD update W ← W − η Gᵀ Z (rows; the paper's −η G Zᵀ, Lemma 2) the product
  loses η (T(x) leftᵀ) right, two n-thin products (left, right = Z, G forward; G, Z
  adjoint): ``W' Z_in = P − η G (Zᵀ Z_in)``, ``W'ᵀ(D ⊙ C_in) = Q − η Z (Gᵀ(D ⊙ C_in))``;
* after a mask change D → D' only the flipped entries move it (:func:`apply_flips`).

Why: a warm start already within tolerance then costs no m×m by m×n product.
"""

from __future__ import annotations

import torch

from deqlab.train.relu_deq.cost import ProductCount

Flips = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def mask_flips(old_mask: torch.Tensor, new_mask: torch.Tensor) -> Flips:
    """The entries (i, j) where two (n, m) bool masks differ, and +1 where switched on,
    −1 where switched off."""
    rows, units = torch.nonzero(old_mask != new_mask, as_tuple=True)
    return rows, units, new_mask[rows, units].to(torch.int8) * 2 - 1


def apply_flips(W: torch.Tensor, x: torch.Tensor, flips: Flips, product: torch.Tensor) -> None:
    """``(old ⊙ x) W`` → ``(new ⊙ x) W`` in place: ``±x_ij W_j`` (row j of W) is added to
    row i of the product for each flipped entry, O(k m) for k flips instead of O(m² n)."""
    rows, units, sign = flips
    contributions = W.index_select(0, units) * (sign * x[rows, units])[:, None]  # (k, m)
    product.index_add_(0, rows, contributions)


class ProductCache:
    """Input ``x`` (n, m) and its exact ``product``; ``corrections`` counts the rank-n
    corrections since the product was last computed exactly (round-off accumulates)."""

    def __init__(self, x: torch.Tensor, product: torch.Tensor) -> None:
        self.x, self.product = x, product
        self.corrections = 0
        self._inner: torch.Tensor | None = None  # T(x) leftᵀ (n, n), possibly reused
        self._inner_age = 0

    def store(self, x: torch.Tensor, product: torch.Tensor, *, exact: bool) -> None:
        """A solve ended at ``x`` with ``product``; ``exact``: every row's product was
        computed by the solve (no correction is pending in it)."""
        self.x, self.product = x, product
        if exact:
            self.corrections = 0

    def correct(
        self,
        lr: float,
        left: torch.Tensor,
        right: torch.Tensor,
        count: ProductCount,
        mask: torch.Tensor | None = None,
        *,
        reuse: int = 0,
    ) -> None:
        """After M ← M − lr · rightᵀ left: product ← product − lr · (T(x) leftᵀ) right.

        With ``reuse`` = k > 0 the inner T(x) leftᵀ is recomputed every k + 1 calls only:
        for Z, which moves ~1e-4 relative per GD step, the correction is then off by ~1e-3
        of itself, far below the error of an extrapolated (unverified) start it feeds.
        """
        fresh = self._inner is None or self._inner_age >= reuse
        if fresh:
            self._inner = (self.x if mask is None else self.x * mask) @ left.T
        self._inner_age = 0 if fresh else self._inner_age + 1
        self.product = torch.addmm(self.product, self._inner, right, alpha=-lr)
        self.corrections += 1
        thin = self.x.shape[0] / self.x.shape[1]  # one n-thin product, in units of m·m·n
        count.add_thin(2 * thin if fresh else thin)

    def remask(self, W: torch.Tensor, flips: Flips, count: ProductCount) -> None:
        """Product (old ⊙ x) W → (new ⊙ x) W through the flipped entries."""
        apply_flips(W, self.x, flips, self.product)
        count.add_thin(2 * flips[0].numel() / self.x.numel())

    def refresh(self, product: torch.Tensor, count: ProductCount) -> None:
        """The product recomputed exactly (one full product)."""
        self.product, self.corrections = product, 0
        count.add(1.0)

    def state_dict(self) -> dict:
        inner = None if self._inner is None else self._inner.clone()
        return {
            "x": self.x.clone(),
            "product": self.product.clone(),
            "corrections": self.corrections,
            "inner": inner,
            "inner_age": self._inner_age,
        }

    def load_state_dict(self, state: dict) -> None:
        self.x, self.product = state["x"].clone(), state["product"].clone()
        self.corrections, self._inner_age = state["corrections"], state["inner_age"]
        self._inner = None if state["inner"] is None else state["inner"].clone()

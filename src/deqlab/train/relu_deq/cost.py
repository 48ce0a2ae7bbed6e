"""The cost of a GD step in m×m by m×n products: one counter, added to where work happens.

``products`` counts full products (solver iterations, the W update G Zᵀ, refreshes);
``thin`` all other matrix multiply-adds in units of m·m·n (rank-n corrections, B = U X,
mask flips). Why: products are the step's cost model, the benchmark's second column.
"""

from __future__ import annotations


class ProductCount:
    """Products (full) and thin work of one GD step, in units of m·m·n multiply-adds."""

    def __init__(self) -> None:
        self.products = 0.0
        self.thin = 0.0

    def add(self, products: float) -> None:
        """Full m×m by m×n products (a product over k of n rows counts k/n)."""
        self.products += products

    def add_thin(self, units: float) -> None:
        """Other multiply-adds, in units of m·m·n."""
        self.thin += units

    @property
    def equivalents(self) -> float:
        """All matrix work of the step, in units of one product."""
        return self.products + self.thin

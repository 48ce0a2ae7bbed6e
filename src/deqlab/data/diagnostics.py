"""How far a data set is from Assumption 2 of Ling et al. (2023), and whether λ* can be > 0.

Assumption 2 asks for x_i ⊥ x_j (i ≠ j). Real images are far from orthogonal — what the
proofs need is only ``max_{i≠j} |cos θ_ij| < 1`` (proof of Theorem 3 (ii), supplement),
which fails exactly when two inputs are parallel. Duplicate inputs make two columns of
every feature matrix equal, so the limiting Gram matrix is singular and λ* = 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from deqlab._checks import check_int, check_tensor

#: Entries of one block of cosines (8 MB in float64) when no ``block_size`` is given.
BLOCK_ENTRIES = 1 << 20


@dataclass(frozen=True)
class InputDiagnostics:
    """Summary of the inputs X (d, n) against Assumption 2.

    ``max_abs_cos`` = max_{i≠j} |⟨x_i, x_j⟩| / (‖x_i‖ ‖x_j‖) (0 for orthogonal data,
    1 for parallel or duplicate inputs), attained at ``closest_pair``; ``n_duplicates`` =
    n − (number of distinct columns); ``max_norm_error`` = max_i |‖x_i‖ − √d| / √d.
    """

    n: int
    d: int
    max_abs_cos: float
    closest_pair: tuple[int, int]
    n_duplicates: int
    max_norm_error: float

    def warnings(self) -> list[str]:
        """Human-readable departures from Assumption 2 (empty when there are none)."""
        notes = []
        if self.n_duplicates:
            notes.append(
                f"{self.n_duplicates} duplicate input(s): the Gram matrix is singular (λ* = 0)"
            )
        if self.max_abs_cos > 0:
            i, j = self.closest_pair
            notes.append(
                f"inputs are not orthogonal (Assumption 2): max |cos| = {self.max_abs_cos:.4f} "
                f"between columns {i} and {j}"
            )
        if self.max_norm_error > 1e-9:
            notes.append(
                f"column norms differ from √d by up to {self.max_norm_error:.2e} (relative)"
            )
        return notes


def input_diagnostics(X: torch.Tensor, *, block_size: int | None = None) -> InputDiagnostics:
    """Compute :class:`InputDiagnostics` of ``X`` (d, n), columns are samples.

    The Gram matrix of the unit columns is formed ``block_size`` rows at a time (default:
    as many as make :data:`BLOCK_ENTRIES` entries, 8 MB, at least one), so memory stays
    O(block_size · n) — at n = 10⁶ a fixed 1024 rows took 8.2 GB — and time O(d n²). Zero
    columns count as orthogonal to everything.
    """
    check_tensor("X", X, ndim=2)
    d, n = X.shape
    if block_size is None:
        block_size = max(1, BLOCK_ENTRIES // max(n, 1))
    block_size = check_int("block_size", block_size, min_value=1)
    norms = torch.linalg.vector_norm(X, dim=0)  # (n,)
    unit = X / torch.where(norms > 0, norms, torch.ones_like(norms))  # (d, n)
    best, pair = 0.0, (0, 0)
    for start in range(0, n, block_size):
        stop = min(start + block_size, n)
        cos = (unit[:, start:stop].T @ unit).abs()  # (b, n)
        rows = torch.arange(stop - start, device=X.device)
        cos[rows, rows + start] = 0.0  # drop i == j
        value, flat = cos.flatten().max(dim=0)
        if float(value) > best:
            best = float(value)
            i, j = divmod(int(flat), n)
            pair = (start + i, j)
    n_distinct = torch.unique(X.T, dim=0).shape[0] if n else 0
    norm_error = (norms - math.sqrt(d)).abs().max() / math.sqrt(d) if n else torch.tensor(0.0)
    return InputDiagnostics(
        n=n,
        d=d,
        max_abs_cos=min(best, 1.0),
        closest_pair=pair,
        n_duplicates=n - n_distinct,
        max_norm_error=float(norm_error),
    )

"""Anderson's small systems, every sample's in one compiled loop (``Anderson(fused=True)``).

For each sample ``b`` with Gram matrix ``H_b = G_b G_bᵀ`` of its ``n`` stored residuals, the
weights of :mod:`deqlab.solvers.anderson`,

    λ = tikhonov · tr(H_b) / n,   (H_b + λ I) y = 1,   α_b = y / 1ᵀy,

by Gaussian elimination with partial pivoting in float64, and ``α_b = e_slot`` (the plain
step) where a pivot is exactly zero or ``α_b`` is not finite: the safeguard of the batched
torch path, whose LU stops at the same zero pivots. Why: in eager torch these are six batched
operations and a host check; one loop instead takes ~0.07 ms off each iteration of a solve of
64 samples with history 5 (``benchmarks/bench_solver_overhead.py --fused``), a third of the
solver's own work beside a cheap cell. Its iterates differ from the torch path's by rounding
(float64 here), so it is an option: the experiments keep the LAPACK path bit for bit.

numba compiles the loop on first use (about a second, cached on disk after that, or kept in
memory where no cache directory is writable); this module is imported only by a fused solve
(importing numba takes a fraction of a second). Arithmetic follows numpy's error model: a
division by zero gives inf/NaN (then the safeguard), never an exception.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numba
import numpy as np


def _compiled(function: Callable) -> Callable:
    """``function`` compiled by numba, its machine code cached on disk where it can be."""
    options = {"nogil": True, "error_model": "numpy"}
    try:
        return numba.njit(cache=True, **options)(function)
    except RuntimeError:  # "cannot cache function ...: no locator available" (read-only)
        return numba.njit(**options)(function)


def _fused_weights(H, n, slot, tikhonov, alpha):  # pragma: no cover (runs compiled)
    """Write each sample's weights ``α_b`` into ``alpha[b, :n]`` from ``H[b, :n, :n]``
    (``H`` ``(B, m, m)``, ``alpha`` ``(B, m)``, both float32 or float64 host arrays)."""
    A, y = np.empty((n, n)), np.empty(n)
    for b in range(H.shape[0]):
        lam = 0.0
        for i in range(n):
            lam += H[b, i, i]
        lam = tikhonov * lam / n
        for i in range(n):
            for j in range(n):
                A[i, j] = H[b, i, j]
            A[i, i] += lam
            y[i] = 1.0
        usable = _eliminate(A, y, n)
        if usable:
            total = 0.0
            for i in range(n):
                total += y[i]
            for i in range(n):
                alpha[b, i] = y[i] / total
                usable = usable and math.isfinite(alpha[b, i])  # as stored (float32: overflow)
        if not usable:
            for i in range(n):
                alpha[b, i] = 0.0
            alpha[b, slot] = 1.0


def _eliminate(A, y, n):  # pragma: no cover (runs compiled)
    """``y ← A⁻¹ y`` in place by elimination with partial pivoting; False at a zero pivot."""
    for k in range(n):
        pivot, row = abs(A[k, k]), k
        for i in range(k + 1, n):
            if abs(A[i, k]) > pivot:
                pivot, row = abs(A[i, k]), i
        if not pivot > 0.0:  # zero (or NaN): LAPACK's info > 0
            return False
        if row != k:
            for j in range(n):
                A[k, j], A[row, j] = A[row, j], A[k, j]
            y[k], y[row] = y[row], y[k]
        for i in range(k + 1, n):
            factor = A[i, k] / A[k, k]
            for j in range(k + 1, n):
                A[i, j] -= factor * A[k, j]
            y[i] -= factor * y[k]
    for i in range(n - 1, -1, -1):
        s = y[i]
        for j in range(i + 1, n):
            s -= A[i, j] * y[j]
        y[i] = s / A[i, i]
    return True


_eliminate = _compiled(_eliminate)
fused_weights = _compiled(_fused_weights)

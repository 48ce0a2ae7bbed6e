"""Diagnostics of a fixed point ``z* = f(z*)``: how contractive and how well posed the
equilibrium and its implicit gradient are, from Jacobian products only, each estimate with
its bracket and whether it converged.

With ``J = J_f(z*)`` (per row of a ``(R, N)`` layout: per sample when ``f`` acts on each
sample alone, so that ``J`` is block diagonal), by the Krylov methods of
:mod:`deqlab.krylov_bounds` on the products of :mod:`deqlab.linearization`:

* ``‖J‖₂``: Golub–Kahan on ``J``, iterated until its bracket is within ``rtol``;
* ``σ_min(I − J)`` and ``σ_max(I − J)``: Golub–Kahan on ``I − J``, iterated until the
  bracket of σ_min is within ``rtol``. ``σ_min(I − J) > 0`` is the implicit function
  theorem's hypothesis (Hieu 2022, Eq. 2.3); ``1 / σ_min`` bounds how much the adjoint solve
  ``(I − J)ᵀu = g`` amplifies ``g``. Its lower bound is also at least ``1 − ‖J‖₂``'s upper
  bound (Weyl: ``σ_min(I − J) ≥ 1 − σ_max(J)``);
* ``ρ(J)``: Arnoldi, converged when the dominant Ritz pair's backward error is within
  ``rtol / 10`` (ours: one product per step, and a backward error bounds the forward error
  only for a normal ``J``); bounded above by ``‖J‖₂``'s upper bound. ``ρ(J) < 1`` is what
  makes Picard converge locally (Hieu 2022, §2.1.2).

Every Krylov run stops at ``min(max_iter, N)`` steps; at ``N`` (the state's size per row) it
is exact. Near a singular ``I − J`` the lower side of σ_min tightens only there (the worst case
needs about ``σ_max/σ_min`` steps, :mod:`deqlab.krylov_bounds`). So where σ_min's bracket is
still wider than ``rtol`` at the cap and ``N ≤ dense_up_to`` (:data:`DENSE_UP_TO`), the per-row
Jacobians are formed (``N`` VJPs) and ``σ_min``, ``σ_max`` of ``I − J`` taken from their SVD in
float64: exact up to the round-off ``N · eps · σ_max`` of the products. (Ours, measured by
benchmarks/bench_sigma_min.py on 32 samples: 1.1–3.6× the time of the Krylov estimate at the
cap on near-singular tanh cells of 128–512 and a conv cell of 512 per sample, 1.2–30× faster
than Golub–Kahan continued to ``N``; at 1024 per sample the SVD's ``N³`` makes it 6×.)

A bracket's side is certain (up to round-off) where it comes from Courant–Fischer (the upper
side of σ_min, the lower sides of ``‖J‖₂`` and σ_max), an exhausted Krylov space or the dense
SVD; elsewhere from Kuczyński & Woźniakowski's bound, and those sides of all rows hold together
with probability ≥ 1 − :data:`FAILURE` over the random start vectors: three uses per row (σ_max
of ``J`` and of ``I − J``, σ_min of ``I − J``), each at ``FAILURE / (3 R)``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import torch

from deqlab._checks import check_int, check_real, check_tensor
from deqlab._memory import MemoryRefusal, available_bytes, nbytes
from deqlab.krylov_bounds import Estimate, singular_extremes, spectral_radius
from deqlab.linearization import ROUTES, Linearization
from deqlab.solvers import Solution

Map = Callable[[torch.Tensor], torch.Tensor]

#: Probability that some bracket of one call fails (over the random start vectors).
FAILURE = 1e-3
#: The largest state per row whose unconverged σ_min is taken from the dense SVD.
DENSE_UP_TO = 512


@dataclass(frozen=True, eq=False)
class FixedPointDiagnostics:
    """Estimates at ``z*``, one entry per row (sample), with brackets, and the solve's work.

    Attributes:
        spectral_radius: ``ρ(J_f)`` (lower bound 0, upper ``‖J_f‖₂``'s upper bound).
        jacobian_norm: ``‖J_f‖₂``.
        sigma_min, sigma_max: ``σ_min(I − J_f)``, ``σ_max(I − J_f)`` (one Golub–Kahan run),
            so ``sigma_max.value / sigma_min.value`` estimates the condition of ``I − J_f``.
        route: how ``J_f v`` was computed (:data:`deqlab.linearization.ROUTES`).
        rtol, max_iter: the requested bracket width and the cap of Krylov steps.
        dense: whether ``sigma_min`` and ``sigma_max`` are the dense SVD's of the per-row
            Jacobians (Golub–Kahan's bracket of σ_min was wider than ``rtol`` at the cap).
        sample_steps, sample_residuals: the forward solve's per-row steps and residuals
            (None when no Solution was given).
        products: JVPs + VJPs spent.
    """

    spectral_radius: Estimate
    jacobian_norm: Estimate
    sigma_min: Estimate
    sigma_max: Estimate
    route: str
    rtol: float
    max_iter: int
    dense: bool
    sample_steps: torch.Tensor | None
    sample_residuals: torch.Tensor | None
    products: int

    @property
    def converged(self) -> bool:
        """Whether ρ, ``‖J_f‖₂`` and σ_min converged on every row."""
        return all(
            bool(e.converged.all())
            for e in (self.spectral_radius, self.jacobian_norm, self.sigma_min)
        )

    def summary(self) -> str:
        """One line: the worst row of each estimate with its bracket or status."""
        worst_norm = int(self.jacobian_norm.value.argmax())
        worst_sigma = int(self.sigma_min.value.argmin())
        text = (
            f"{_radius(self.spectral_radius, self.rtol)}, ‖J_f‖₂ max "
            f"{_bracket(self.jacobian_norm.rows(worst_norm))}, σ_min(I − J_f) min "
            f"{_bracket(self.sigma_min.rows(worst_sigma))}"
            + (" by dense SVD" if self.dense else "")
        )
        if self.sample_steps is not None and self.sample_residuals is not None:
            text += (
                f"; solver steps max {int(self.sample_steps.max())}, residual max "
                f"{float(self.sample_residuals.max()):.2e}"
            )
        return text


def _bracket(e: Estimate) -> str:
    """One row's estimate in words: ``0.2 (exact)``, ``1.1 ∈ [1.08, 1.13]`` or, not converged,
    ``in [0.05, 0.2] (not converged after 100 steps)``."""
    value, lower, upper = float(e.value), float(e.lower), float(e.upper)
    if bool(e.exact):
        return f"{value:.3g} (exact)"
    if bool(e.converged):
        return f"{value:.3g} ∈ [{lower:.3g}, {upper:.3g}]"
    return f"in [{lower:.3g}, {upper:.3g}] (not converged after {e.steps} steps)"


def _radius(e: Estimate, rtol: float) -> str:
    worst = int(e.value.argmax())
    value = float(e.value[worst])
    if bool(e.converged.all()):
        return f"ρ(J_f) max {value:.3g} (Arnoldi, backward error ≤ {rtol / 10:g})"
    return f"ρ(J_f) max estimate {value:.3g} (not converged after {e.steps} steps)"


def fixed_point_diagnostics(
    f: Map,
    z: torch.Tensor,
    rows: int = 1,
    *,
    rtol: float = 0.1,
    max_iter: int = 100,
    dense_up_to: int = DENSE_UP_TO,
    forward: Solution | None = None,
    generator: torch.Generator | None = None,
    route: str | None = None,
) -> FixedPointDiagnostics:
    """``ρ(J_f)``, ``‖J_f‖₂``, ``σ_min(I − J_f)`` and ``σ_max(I − J_f)`` at ``z`` with brackets
    (module docstring).

    Args:
        f: map of tensors shaped like ``z``.
        z: the fixed point (detached here).
        rows: ``z.shape[0]`` for per-sample estimates (``f`` acting on each sample
            alone), 1 for the whole tensor as one problem.
        rtol: the relative width of bracket each Krylov run iterates to
            (``upper ≤ (1 + rtol) lower``).
        max_iter: the cap of each Krylov run (reached: the estimate says it did not converge;
            exact once it reaches the state's size per row).
        dense_up_to: where σ_min's bracket is wider than ``rtol`` at the cap and the state's
            size per row is at most this, σ_min and σ_max from the dense SVD of the per-row
            Jacobians (module docstring) if they fit in memory; 0: Krylov only.
        forward: the solve's Solution, whose per-row steps and residuals are copied.
        generator: random generator of the start vectors.
        route: force a route of ``J_f v`` (:data:`deqlab.linearization.ROUTES`); None: the
            first that runs.

    Raises:
        deqlab._memory.MemoryRefusal (a ValueError): the Krylov bases would not fit in memory.
    """
    z = check_tensor("z", z).detach()
    max_iter = check_int("max_iter", max_iter, min_value=2)
    dense_up_to = check_int("dense_up_to", dense_up_to, min_value=0)
    rtol = check_real("rtol", rtol, low=0.0, low_inclusive=False)
    rows = check_int("rows", rows, min_value=1)
    if route is not None and route not in ROUTES:
        raise ValueError(f"`route` must be one of {ROUTES} or None; got {route!r}")
    if z.numel() % rows or (rows > 1 and z.shape[0] != rows):
        raise ValueError(f"`rows` must be 1 or z.shape[0] = {z.shape[0]}; got {rows}")
    size = z.numel() // rows
    _check_memory(rows, size, min(max_iter, size), z)
    lin = Linearization(f, z, route)
    shape = z.shape

    def jvp(v: torch.Tensor) -> torch.Tensor:
        return lin.jvp(v.reshape(shape)).reshape(rows, -1)

    def vjp(u: torch.Tensor) -> torch.Tensor:
        return lin.vjp(u.reshape(shape)).reshape(rows, -1)

    def start() -> torch.Tensor:
        return torch.randn((rows, size), generator=generator, dtype=z.dtype, device=z.device)

    krylov = {"rtol": rtol, "max_steps": max_iter, "delta": FAILURE / (3 * rows)}
    norm = singular_extremes(jvp, vjp, start(), target="max", **krylov)
    shifted = singular_extremes(
        lambda v: v - jvp(v), lambda u: u - vjp(u), start(), target="min", **krylov
    )
    radius = spectral_radius(jvp, start(), rtol=rtol / 10, max_steps=max_iter)
    jacobian_norm = norm.largest
    sigma_min, sigma_max = _weyl(shifted.smallest, jacobian_norm, rtol), shifted.largest
    dense = (
        not bool(sigma_min.converged.all()) and size <= dense_up_to and _dense_fits(rows, size, z)
    )
    if dense:
        sigma_min, sigma_max = _dense_extremes(lin.row_jacobians(rows), sigma_min.steps)
    return FixedPointDiagnostics(
        spectral_radius=_capped(radius, jacobian_norm.upper),
        jacobian_norm=jacobian_norm,
        sigma_min=sigma_min,
        sigma_max=sigma_max,
        route=lin.route or ROUTES[0],
        rtol=rtol,
        max_iter=max_iter,
        dense=dense,
        sample_steps=None if forward is None else forward.sample_steps,
        sample_residuals=None if forward is None else forward.sample_residuals,
        products=lin.count,
    )


def _capped(radius: Estimate, norm_upper: torch.Tensor) -> Estimate:
    """ρ with its upper bound ``ρ ≤ ‖J‖₂ ≤ norm_upper``."""
    upper = norm_upper.to(radius.value)
    return dataclasses.replace(radius, value=radius.value.minimum(upper), upper=upper)


def _weyl(sigma: Estimate, norm: Estimate, rtol: float) -> Estimate:
    """σ_min(I − J) with the lower bound ``1 − ‖J‖₂`` where that is higher (module docstring)."""
    lower = torch.maximum(sigma.lower, (1 - norm.upper).to(sigma.lower))
    converged = sigma.converged | (sigma.upper <= (1 + rtol) * lower) & (lower > 0)
    return dataclasses.replace(sigma, lower=lower, converged=converged)


def _dense_extremes(blocks: torch.Tensor, steps: int) -> tuple[Estimate, Estimate]:
    """σ_min and σ_max of ``I − J_r`` from the SVD (float64) of each row's Jacobian ``blocks``
    (R, n, n), exact up to the round-off ``n · eps · σ_max`` of the products (eps of their
    dtype); ``steps`` are the Krylov steps taken before."""
    n, eps = blocks.shape[1], torch.finfo(blocks.dtype).eps
    eye = torch.eye(n, dtype=torch.float64, device=blocks.device)
    sv = torch.linalg.svdvals(eye - blocks.to(torch.float64))  # (R, n) descending
    top, bottom = sv[:, 0], sv[:, -1]
    margin = n * eps * top
    exact = torch.ones_like(top, dtype=torch.bool)

    def estimate(value: torch.Tensor) -> Estimate:
        lower = (value - margin).clamp_min(0)
        return Estimate(value, lower, value + margin, margin, exact, exact, steps)

    return estimate(bottom), estimate(top)


def _dense_fits(rows: int, size: int, z: torch.Tensor) -> bool:
    """Whether the per-row Jacobians (``rows × size²`` in z's dtype) and the SVD's two float64
    copies fit in the available memory (unknown: yes)."""
    need = rows * size * size * (z.element_size() + 2 * 8)
    available = available_bytes(z.device)
    return available is None or need <= available


def _check_memory(rows: int, size: int, steps: int, z: torch.Tensor) -> None:
    """Refuse, before any product, Krylov bases (two of ``rows × (steps + 1) × size``) that
    would not fit."""
    need = 2 * rows * (steps + 1) * size * z.element_size()
    available = available_bytes(z.device)
    if available is not None and need > available:
        fits = max(1, available // (2 * rows * size * z.element_size()) - 1)
        raise MemoryRefusal(
            f"`max_iter`: {steps} Krylov steps on {rows} rows of size {size} need "
            f"{nbytes(need)} for their bases, but {nbytes(available)} of memory is available; "
            f"pass max_iter <= {fits} or fewer samples"
        )

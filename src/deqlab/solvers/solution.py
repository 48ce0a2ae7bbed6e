"""What a fixed-point solve returns, how it stops, how it fails, and the solver registry.

A solver looks for ``z*`` with ``g(z*) = f(z*) - z* = 0`` (Hieu 2022, Eq. 2.2). Its
answer is a :class:`Solution`; a solve that does not converge has a :class:`Status`
other than ``CONVERGED`` and, with ``throw=True``, raises :class:`SolverError`.

Stopping rules (``stop=``), with ``‖·‖`` the Euclidean (Frobenius) norm:

* ``"abs"``: ``r(z) = ‖f(z) - z‖``
* ``"rel"``: ``r(z) = ‖f(z) - z‖ / (‖f(z)‖ + 1e-12)`` (the ``1e-12`` keeps ``r`` finite
  at a fixed point ``z* = 0``).

Tolerance: a solver built with ``tol=None`` (the default) stops at :func:`default_tol` of
the iterates' dtype, ``max(8 eps, 1e-8)``: float64 ``1e-8``, float32 ``9.5e-7``, float16
``7.8e-3``, bfloat16 ``6.3e-2``. An explicit ``tol`` always wins.

With ``per_sample=False`` the norm runs over the whole tensor (one problem, e.g. the full
batch matrix ``Z`` of the theory experiments). With ``per_sample=True`` dim 0 is the
batch: ``r_i`` is the norm over all other dims of sample ``i``, and the solve stops when
every ``r_i <= tol``; the reported residual is then ``max_i r_i``.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from typing import TYPE_CHECKING, TypeVar

import torch

from deqlab._checks import check_positive

if TYPE_CHECKING:
    from deqlab.solvers.base import Solver
    from deqlab.solvers.broyden import BroydenInverse

STOP_RULES = ("abs", "rel")
_REL_FLOOR = 1e-12  # added to ‖f(z)‖ in the relative residual
_TOL_EPS = 8  # default tol in units of the dtype's eps ...
_TOL_FLOOR = 1e-8  # ... but never below this (float64's default)


class Status(enum.Enum):
    """Outcome of a solve."""

    CONVERGED = "converged"
    MAX_STEPS = "max_steps"  # max_iter evaluations of f without meeting the tolerance
    DIVERGED = "diverged"  # non-finite values, or the residual grew by orders of magnitude
    STALLED = "stalled"  # every unconverged sample stopped improving (stall detection)


@dataclass(frozen=True, eq=False)
class Solution:
    """Result of a fixed-point solve.

    Attributes:
        z: the returned point, shaped like ``z0`` (the best iterate seen).
        status: :class:`Status` of the solve.
        n_steps: number of evaluations of ``f`` (each followed by a residual check).
        residuals: residual after each evaluation, ``len(residuals) == n_steps``;
            ``residuals[0]`` is the residual at ``z0``.
        residual: residual at the returned ``z`` (max over samples when per-sample).
        sample_residuals: ``(B,)`` residual of each row at the returned ``z``: one per
            sample with ``per_sample=True``, else ``B = 1`` (the whole tensor).
        sample_steps: ``(B,)`` evaluations of ``f`` each row needed to meet ``tol`` or to
            stall (``n_steps`` for a row that did neither).
        sample_stalled: ``(B,)`` rows that stalled without meeting ``tol`` (with stall
            detection, :class:`~deqlab.solvers.options.SolverOptions`), else None.
        sample_trace: with ``trace_samples=True``, ``{"abs": ..., "rel": ...}``: each row's
            absolute and relative residual after each evaluation, ``(n_steps, B)`` (a row
            frozen by row compaction keeps its last values); else None.
        evaluations: evaluations of ``f`` in full batches: ``n_steps``, or with row
            compaction (:mod:`deqlab.solvers.rows`) the rows evaluated over ``B``.
        inverse_jacobian: Broyden's final estimate ``B ≈ (J_f − I)⁻¹`` at ``z``
            (:class:`~deqlab.solvers.broyden.BroydenInverse`); None for other solvers.
        non_finite: where the solve met NaN/Inf (status DIVERGED; :class:`NonFinite`, e.g.
            "f(z) returned 32 NaN entries at evaluation 4, from a finite z"); None when it
            did not. A NaN the map returns says nothing of contraction: it is named as NaN.
        solver, tolerance, stop: who solved, to which tolerance and rule (for
            :meth:`raise_if_failed`'s message).
    """

    z: torch.Tensor
    status: Status
    n_steps: int
    residuals: list[float]
    residual: float
    _: KW_ONLY  # optional fields, keyword-only (subclasses may add positional fields)
    sample_residuals: torch.Tensor | None = None
    sample_steps: torch.Tensor | None = None
    evaluations: float | None = None
    inverse_jacobian: BroydenInverse | None = None
    non_finite: NonFinite | None = None
    sample_stalled: torch.Tensor | None = None
    sample_trace: dict[str, torch.Tensor] | None = None
    solver: str = "solver"
    tolerance: float = math.nan
    stop: str = "rel"

    @property
    def converged(self) -> bool:
        """True when the tolerance was met."""
        return self.status is Status.CONVERGED

    def raise_if_failed(self, what: str | None = None) -> Solution:
        """``self`` if it converged, else raise :class:`SolverError` (status, residual,
        tolerance, a hint), with ``what`` (e.g. ``"forward solve"``) as its context."""
        if not self.converged:
            raise SolverError(self.solver, self, tol=self.tolerance, stop=self.stop, context=what)
        return self

    def __repr__(self) -> str:
        return (
            f"Solution(status={self.status.value}, n_steps={self.n_steps}, "
            f"residual={self.residual:.3e}, z: {tuple(self.z.shape)} {self.z.dtype})"
        )


_DEFAULT_HINTS = {
    Status.MAX_STEPS: (
        "raise max_iter, loosen tol, or try Anderson/Broyden; if the residual stalls, "
        "the map may not be contractive near the fixed point"
    ),
    Status.DIVERGED: (
        "the iterates blew up: the map may not be contractive (e.g. ‖J_f‖ >= 1); "
        "try damping < 1 or Anderson, or check the model's weights"
    ),
    Status.STALLED: (
        "the residual stopped falling before the tolerance: the map may not be contractive "
        "near the fixed point (e.g. ρ(J_f) close to 1); loosen tol, regularise the Jacobian, "
        "or raise stall_window to give the solver more time"
    ),
}


#: The hint of a solve whose map returned NaN, in place of "may not be contractive".
NAN_HINT = (
    "a NaN is not a sign of a non-contractive map: find what makes it (a log, sqrt or "
    "division at values out of its domain, an inf − inf; the map's inputs)"
)


@dataclass(frozen=True)
class NonFinite:
    """Where a solve met NaN/Inf: at evaluation ``step``, ``nan`` and ``inf`` entries of
    ``f(z)`` from a finite iterate ``z`` (the map made them), or ``in_iterate``: the
    solver's own step made ``z`` non-finite."""

    step: int
    nan: int
    inf: int
    in_iterate: bool

    @property
    def map_made_nan(self) -> bool:
        """The map returned NaN at a finite point: named as NaN, not as divergence."""
        return self.nan > 0 and not self.in_iterate

    def __str__(self) -> str:
        if self.in_iterate:
            return f"the step before evaluation {self.step} made the iterate z non-finite"
        counts = [f"{k} {what}" for k, what in ((self.nan, "NaN"), (self.inf, "Inf")) if k]
        overflow = "" if self.nan else " (an overflow)"
        return (
            f"f(z) returned {' and '.join(counts)} entries{overflow} at evaluation {self.step}, "
            "from a finite z"
        )


def non_finite_reason(z: torch.Tensor, fz: torch.Tensor, step: int) -> NonFinite:
    """Where a solve met NaN/Inf at evaluation ``step`` (``z``, ``fz``: the last iterate and
    its image; counted once, when the solve has stopped)."""
    if not bool(torch.isfinite(z).all()):
        return NonFinite(step, 0, 0, in_iterate=True)
    return NonFinite(step, int(torch.isnan(fz).sum()), int(torch.isinf(fz).sum()), False)


class SolverError(RuntimeError):
    """A solve that did not converge, raised when the solver has ``throw=True``.

    Attributes:
        solver: the solver's name, e.g. ``"Anderson"``.
        solution: the :class:`Solution` (best iterate, status, residual trace).
        tol, stop: the tolerance and stopping rule that were not met.
        context: extra caller context (e.g. ``"‖W‖₂ = 1.3 >= 1"``), or None.
    """

    def __init__(
        self,
        solver: str,
        solution: Solution,
        *,
        tol: float,
        stop: str,
        context: str | None = None,
    ) -> None:
        self.solver = solver
        self.solution = solution
        self.tol = tol
        self.stop = stop
        self.context = context
        nan = solution.non_finite is not None and solution.non_finite.map_made_nan
        hint = NAN_HINT if nan else _DEFAULT_HINTS[solution.status]
        if context:
            hint = f"{context}; {hint}"
        word = "stopped at NaN" if nan else solution.status.value
        outcome = f"{word} after {solution.n_steps} steps: final {stop} residual"
        if solution.non_finite is not None:
            outcome = (
                f"{word} after {solution.n_steps} steps: {solution.non_finite}; best {stop} "
                "residual"
            )
        super().__init__(
            f"{solver} {outcome} {solution.residual:.3e} (tol {tol:.1e}). Hint: {hint}"
        )

    def __reduce__(self) -> tuple:  # picklable (e.g. across Ray workers)
        return (_rebuild_error, (self.solver, self.solution, self.tol, self.stop, self.context))

    def with_context(self, context: str) -> SolverError:
        """The same error with ``context`` prepended to the hint."""
        joined = context if not self.context else f"{context}; {self.context}"
        return SolverError(self.solver, self.solution, tol=self.tol, stop=self.stop, context=joined)


def _rebuild_error(
    solver: str, solution: Solution, tol: float, stop: str, context: str | None
) -> SolverError:
    return SolverError(solver, solution, tol=tol, stop=stop, context=context)


def residual_norms(z: torch.Tensor, fz: torch.Tensor, stop: str) -> torch.Tensor:
    """Residual of each row of ``z``, ``fz`` (both ``(B, N)``) under rule ``stop``; ``(B,)``."""
    r_abs = torch.linalg.vector_norm(fz - z, dim=1)  # (B,)
    return relative_residual(r_abs, fz) if stop == "rel" else r_abs


def relative_residual(r_abs, fz: torch.Tensor | None = None, *, size=None):
    """``‖f(z) - z‖ / (‖f(z)‖ + 1e-12)`` per row, from the absolute residuals ``(B,)`` and
    ``f(z)`` ``(B, N)``, or its norms ``size`` (a tensor or numpy array like ``r_abs``)."""
    if size is None:
        size = torch.linalg.vector_norm(fz, dim=1)
    return r_abs / (size + _REL_FLOOR)


def default_tol(dtype: torch.dtype) -> float:
    """The tolerance of a solver built with ``tol=None``, for iterates of ``dtype``.

    ``max(8 eps, 1e-8)``: rounding in ``f`` stalls the relative residual at ``eps / 2`` to
    ``eps`` (measured with Picard, Anderson and Broyden on tanh cells of width 8 to 2048),
    so ``8 eps`` is reachable with an 8x margin; ``1e-8`` keeps float64's historical default.
    Sized for the default ``"rel"`` rule: the ``"abs"`` floor grows with ``‖f(z)‖``, so give
    ``stop="abs"`` an explicit ``tol``.
    """
    return max(_TOL_EPS * torch.finfo(dtype).eps, _TOL_FLOOR)


#: The DEQ layer's training tolerance in float32 and float64 (ours, after the field's practice).
TRAINING_TOL = 1e-3
#: The training tolerance in units of the dtype's eps, where that is larger than 1e-3.
_TRAINING_EPS = 2


def training_tol(dtype: torch.dtype) -> float:
    """The default tolerance of the :class:`~deqlab.DEQ` layer's solver for states of ``dtype``.

    ``max(1e-3, 2 eps)``: float32 and float64 ``1e-3`` (the field's training tolerance),
    float16 ``2.0e-3``, bfloat16 ``1.6e-2``. Reason: rounding stalls the best iterate's
    relative residual at 0.05–0.38 eps (measured: Anderson per sample, 60 evaluations, 36
    solves of tanh cells of width 16–256 and of a conv + GroupNorm cell, in bfloat16 and
    float16), so ``2 eps`` is met with a 5× margin, while 1e-3 (0.13 eps in bfloat16) failed
    in about half of the bfloat16 solves: a warning on every forward.
    """
    return max(TRAINING_TOL, _TRAINING_EPS * torch.finfo(dtype).eps)


def resolve_tol(tol: float | None, dtype: torch.dtype) -> float:
    """``tol``, or :func:`default_tol` of ``dtype`` when ``tol`` is None (the one rule)."""
    return default_tol(dtype) if tol is None else tol


def check_tol(tol: object) -> None:
    """``tol`` must be None (per-dtype default) or a real number > 0."""
    if tol is not None:
        check_positive("tol", tol)


# ---- registry ----------------------------------------------------------------------

_REGISTRY: dict[str, type[Solver]] = {}
S = TypeVar("S", bound="type[Solver]")


def register(name: str) -> Callable[[S], S]:
    """Class decorator: make a solver class available as ``get_solver(name)``."""

    def add(cls: S) -> S:
        _REGISTRY[name] = cls
        return cls

    return add


def registered_name(solver: Solver) -> str:
    """The name ``solver``'s class is registered under (``get_solver(name)`` builds it)."""
    return next(key for key, cls in _REGISTRY.items() if cls is type(solver))


def solver_names() -> list[str]:
    """Names accepted by :func:`get_solver`, sorted."""
    return sorted(_REGISTRY)


def get_solver(name: str, **options: object) -> Solver:
    """Build a solver by name, e.g. ``get_solver("anderson", tol=1e-10, history=6)``.

    Raises:
        ValueError: unknown ``name`` (the message lists the valid names).
        TypeError: an option the solver does not have (named; never silently dropped).
    """
    if not isinstance(name, str):
        raise TypeError(f"`name` must be a str; got {type(name).__name__}")
    key = name.lower()
    if key not in _REGISTRY:
        valid = ", ".join(repr(n) for n in solver_names())
        raise ValueError(f"unknown solver {name!r}; valid names: {valid}")
    cls = _REGISTRY[key]
    fields = cls.option_names()
    unknown = [k for k in options if k not in fields]
    if unknown:
        raise TypeError(
            f"unknown option(s) {', '.join(map(repr, unknown))} for solver {name!r}; "
            f"valid options: {', '.join(fields)}"
        )
    return cls(**options)

"""The options every solver shares (generic fixed-point solvers and the splitting solvers):
tolerance, iteration budget, stopping rule, whether to raise, and the divergence test.

One frozen dataclass, validated once, so that a solver's own fields are only what makes it
different (:class:`deqlab.solvers.base.Solver`, :mod:`deqlab.solvers.splitting`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from deqlab._checks import check_bool, check_choice, check_int, check_real
from deqlab.solvers.solution import STOP_RULES, check_tol


@dataclass(frozen=True, kw_only=True)
class SolverOptions:
    """Options shared by every solver.

    Args:
        tol: stop when the residual (rule ``stop``) is ``<= tol``; None (default) takes
            :func:`~deqlab.solvers.solution.default_tol` of ``z0``'s dtype, ``max(8 eps,
            1e-8)`` (float64 ``1e-8``, float32 ``9.5e-7``), a residual rounding can reach.
        max_iter: maximum number of evaluations of ``f``.
        stop: ``"rel"`` or ``"abs"`` residual (see :mod:`deqlab.solvers.solution`).
        throw: raise :class:`~deqlab.solvers.solution.SolverError` when the solve does not
            converge.
        divergence_factor: an absolute residual larger than this times the least one
            seen (for a sample that has not yet met ``tol``) is divergence.
        stall_window: None (default: off) or ``w >= 1``: a sample whose best residual,
            extrapolated at its rate over its last ``w`` evaluations, would still miss ``tol``
            after ``max_iter`` evaluations has stalled; it stops with its best iterate, and a
            solve whose unconverged samples have all stalled ends with status ``STALLED``
            (:mod:`deqlab.solvers.trace`).
        trace_samples: keep every row's absolute and relative residual after each evaluation
            (``Solution.sample_trace``; off by default: two ``(B,)`` vectors a step).
    """

    tol: float | None = None
    max_iter: int = 500
    stop: str = "rel"
    throw: bool = True
    divergence_factor: float = 1e6
    stall_window: int | None = None
    trace_samples: bool = False

    def __post_init__(self) -> None:
        check_tol(self.tol)
        check_int("max_iter", self.max_iter, min_value=1)
        check_choice("stop", self.stop, STOP_RULES)
        check_bool("throw", self.throw)
        check_real("divergence_factor", self.divergence_factor, low=1.0, low_inclusive=False)
        if self.stall_window is not None:
            check_int("stall_window", self.stall_window, min_value=1)
        check_bool("trace_samples", self.trace_samples)

    @classmethod
    def option_names(cls) -> list[str]:
        """The options this solver accepts."""
        return [f.name for f in dataclasses.fields(cls)]

    @property
    def name(self) -> str:
        """The solver's name in messages: its class name."""
        return type(self).__name__

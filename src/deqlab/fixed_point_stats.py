"""What a fixed-point layer records about its solves, and what it does when one fails.

A solve that does not meet its tolerance ends with a :class:`~deqlab.solvers.Status` other
than ``CONVERGED``; the solver's best iterate (lowest residual per row) is still there.
What to do then is a *policy* (``on_failure``):

* ``"warn"`` — return the best iterate, count the failure, warn once per layer and kind of
  solve (forward, adjoint) (the :class:`deqlab.DEQ` default: a training loop is never
  killed, never silent);
* ``"raise"`` — raise :class:`~deqlab.solvers.SolverError` (strict: experiments);
* ``"record"`` — return the best iterate and count the failure, without a warning (for
  callers that read ``status`` themselves, e.g. the papers' conv DEQ tables).

A gradient is *exact* when it is the implicit gradient of ``ℓ(z*)`` up to the adjoint
solve's tolerance: method :class:`~deqlab.backward.Implicit`, forward and adjoint solves
converged. :class:`BackwardRecord` says which gradient was computed and whether it is.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from deqlab._checks import NonFiniteError
from deqlab.solvers import Solution, Solver, SolverError, Status
from deqlab.solvers.solution import NAN_HINT, resolve_tol

ON_FAILURE = ("warn", "raise", "record")
Hint = str | Callable[[], str] | None


class ConvergenceWarning(UserWarning):
    """A DEQ layer's solve did not converge; the layer returned its best iterate."""


@dataclass(frozen=True, eq=False)
class BackwardRecord:
    """How the last gradient through a fixed point was computed.

    Attributes:
        method: ``"implicit"``, ``"phantom"``, ``"jacobian_free"``, ``"shine"`` or
            ``"unrolled"``.
        exact: the implicit gradient up to the adjoint tolerance (see module docstring).
        reason: why it is not exact (``""`` when exact).
        vjps: vector-Jacobian products ``J_fᵀu`` the backward pass evaluated, in full
            batches (rows backpropagated / batch size; :mod:`deqlab.vjp`).
        evaluations: evaluations of ``f`` it spent (the graph at ``z*``), in full batches.
        solution: the adjoint solve's Solution (``Implicit``), else None.
    """

    method: str
    exact: bool
    reason: str
    vjps: float
    evaluations: float = 0.0
    solution: Solution | None = None

    @property
    def status(self) -> Status | None:
        """The adjoint solve's status (None without one)."""
        return None if self.solution is None else self.solution.status

    @property
    def converged(self) -> bool:
        """The adjoint solve converged (True for methods without one)."""
        return self.solution is None or self.solution.converged

    @property
    def n_steps(self) -> int:
        """Steps of the adjoint solve (``Solution.n_steps``); the VJPs without one."""
        return round(self.vjps) if self.solution is None else self.solution.n_steps

    @property
    def residual(self) -> float | None:
        return None if self.solution is None else self.solution.residual

    def __repr__(self) -> str:
        tail = "" if self.exact else f", not exact: {self.reason}"
        solve = "" if self.solution is None else f", adjoint {self.solution!r}"
        return f"BackwardRecord({self.method}, vjps={self.vjps:.3g}{solve}{tail})"


@dataclass
class FixedPointStats:
    """Solver statistics of a layer's solves, filled in by :func:`deqlab.fixed_point`.

    Last solves: ``forward`` (Solution of the last forward solve, with per-row
    ``sample_residuals`` and ``sample_steps``); ``backward`` (Solution of the last adjoint
    solve, ``Implicit`` only; its ``z`` is the adjoint ``u`` that
    ``Implicit(warm_start=True)`` starts from); ``gradient`` (:class:`BackwardRecord` of
    the last backward pass).

    Running counts, for a training loop to read (``reset_counts()`` zeroes them):
    ``forward_solves`` / ``unconverged_forward``, ``backward_passes`` /
    ``unconverged_backward`` (adjoint solves that failed), ``inexact_gradients``
    (backward passes whose gradient is not exact, approximate methods included), and
    the work done: ``forward_evaluations`` (evaluations of ``f`` by the solver, in full
    batches: rows evaluated / batch size), ``backward_vjps`` and ``backward_evaluations``
    (also in full batches).
    """

    forward: Solution | None = None
    backward: Solution | None = None
    gradient: BackwardRecord | None = None
    forward_solves: int = 0
    unconverged_forward: int = 0
    backward_passes: int = 0
    unconverged_backward: int = 0
    inexact_gradients: int = 0
    forward_evaluations: float = 0
    backward_vjps: float = 0
    backward_evaluations: float = 0
    warned: set[str] = field(default_factory=set)

    def reset_counts(self) -> None:
        """Zero the running counts (the last Solutions and the warned-once flags stay)."""
        for name in self.counts():
            setattr(self, name, 0)

    def counts(self) -> dict[str, float]:
        """The running counts as a dict (e.g. for a training log)."""
        names = ("forward_solves", "unconverged_forward", "backward_passes")
        names += ("unconverged_backward", "inexact_gradients", "forward_evaluations")
        names += ("backward_vjps", "backward_evaluations")
        return {name: getattr(self, name) for name in names}

    def record_forward(self, solution: Solution) -> None:
        self.forward = solution
        self.forward_solves += 1
        evaluations = solution.evaluations
        self.forward_evaluations += solution.n_steps if evaluations is None else evaluations
        self.unconverged_forward += not solution.converged

    def record_gradient(self, record: BackwardRecord) -> None:
        self.gradient = record
        self.backward_passes += 1
        self.backward_vjps += record.vjps
        self.backward_evaluations += record.evaluations
        self.unconverged_backward += not record.converged
        self.inexact_gradients += not record.exact


@dataclass(frozen=True)
class Failure:
    """One unconverged solve: which (``"forward"``/``"adjoint"``), by whom, to what tol."""

    which: str
    solver: str
    solution: Solution
    tol: float
    stop: str


def solve(
    solver: Solver,
    f: Callable[[torch.Tensor], torch.Tensor],
    z0: torch.Tensor,
    which: str,
    stats: FixedPointStats,
    on_failure: str | None,
    hint: Hint,
) -> Solution:
    """``solver(f, z0)`` without raising inside the solver, recorded in ``stats`` as the
    ``which`` (``"forward"`` / ``"adjoint"``) solve; then the policy on failure (None: the
    solver's own ``throw`` decides, ``"raise"`` if set else ``"record"``)."""
    quiet = dataclasses.replace(solver, throw=False) if solver.throw else solver
    try:
        solution = quiet(f, z0)
    except NonFiniteError as err:
        if which == "forward" or err.name not in _ADJOINT_START:
            raise
        raise NonFiniteError(err.name, err.count, _ADJOINT_START[err.name]) from None
    if which == "forward":
        stats.record_forward(solution)
    else:
        stats.backward = solution
    if not solution.converged:
        policy = on_failure or ("raise" if solver.throw else "record")
        tol = resolve_tol(solver.tol, z0.dtype)
        handle_failure(Failure(which, solver.name, solution, tol, solver.stop), policy, stats, hint)
    return solution


#: The adjoint solve, named as the backward pass it is.
_ADJOINT = "backward pass: adjoint solve u = g + J_fᵀu"
#: What a NaN/Inf at the start of the adjoint solve (the backward pass) means, by the argument
#: the solver named.
_ADJOINT_START = {
    "z0": (
        "backward pass: the adjoint solve u = g + J_f(z*)ᵀu starts from a u₀ with {count} "
        "NaN/Inf entries (a warm start from an earlier adjoint that was not finite)"
    ),
    "f(z0)": (
        "backward pass: the adjoint solve u = g + J_f(z*)ᵀu met {count} NaN/Inf entries at "
        "its first step, g + J_fᵀu₀; the gradient g reaching z* is finite, so the cell's "
        "vector-Jacobian product at z* is not (a derivative that is infinite there: sqrt or "
        "log at 0, a division)"
    ),
}


def handle_failure(failure: Failure, on_failure: str, stats: FixedPointStats, hint: Hint) -> None:
    """Apply the policy to an unconverged solve: raise, warn once per ``stats``, or pass.

    ``hint``: the caller's context (a string, or a zero-argument callable evaluated only
    when it is shown), put in the error / warning.
    """
    if on_failure == "raise":
        what = "forward solve" if failure.which == "forward" else _ADJOINT
        text = _text(hint)
        context = f"{text}; {what}" if text else what
        raise SolverError(
            failure.solver, failure.solution, tol=failure.tol, stop=failure.stop, context=context
        )
    if on_failure == "warn" and failure.which not in stats.warned:
        stats.warned.add(failure.which)
        text = _warning_text(failure, _text(hint))
        warnings.warn(text, ConvergenceWarning, stacklevel=_caller_level())


def _caller_level() -> int:
    """``stacklevel`` for a warning from :func:`handle_failure` that points at the first
    caller outside deqlab and torch (the user's line)."""
    frame, level = sys._getframe(2), 2  # 1: handle_failure
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_PACKAGES):
        frame, level = frame.f_back, level + 1
    return level


#: The directories of deqlab's and torch's own files (not any path with a "deqlab" part:
#: a user's clone ~/deqlab/ holds the user's scripts).
_PACKAGES = tuple(os.path.dirname(path) + os.sep for path in (__file__, torch.__file__))


def _text(hint: Hint) -> str:
    return (hint() if callable(hint) else hint) or ""


def _warning_text(failure: Failure, hint: str) -> str:
    solution = failure.solution
    rows = solution.sample_residuals
    share = ""
    if rows is not None and rows.numel() > 1:
        share = f" for {int((rows > failure.tol).sum())} of {rows.numel()} samples"
    counter = "unconverged_forward" if failure.which == "forward" else "unconverged_backward"
    effect = "the best iterate" if failure.which == "forward" else "the best adjoint"
    gradient = "" if failure.which == "forward" else " (the gradient is marked not exact)"
    advice = (
        "a larger max_iter, Anderson/Broyden, or Jacobian regularisation "
        "(deq.jacobian_penalty()); on_failure='raise' makes it an error"
    )
    solve = "forward solve" if failure.which == "forward" else "backward pass: adjoint solve"
    steps = f"{solution.status.value} after {solution.n_steps} steps"
    outcome = f"did not converge ({failure.solver} {steps})"
    if solution.non_finite is not None:
        outcome = f"did not converge ({failure.solver} {steps}: {solution.non_finite})"
    if solution.non_finite is not None and solution.non_finite.map_made_nan:
        outcome = (  # a NaN is named, not taken for a lack of contraction
            f"stopped at NaN ({failure.solver} after {solution.n_steps} steps: "
            f"{solution.non_finite})"
        )
        advice = NAN_HINT + "; on_failure='raise' makes it an error"
    context = f" Context: {hint}." if hint else ""
    return (
        f"DEQ {solve} {outcome}: {failure.stop} residual "
        f"{solution.residual:.2e} > tol {failure.tol:.1e}{share}. Using {effect}"
        f"{gradient}; counted in stats.{counter}; shown once per layer.{context} "
        f"What to try: {advice}."
    )

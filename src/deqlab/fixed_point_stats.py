"""What a fixed-point layer records about its solves, and what it does when one fails.

A solve that does not meet its tolerance ends with a :class:`~deqlab.solvers.Status` other
than ``CONVERGED`` (capped at ``max_iter``, stalled, diverged); the solver's best iterate
(lowest residual per row) is still there. What to do then is a *policy*, one
:class:`OnFailure` decided at the call:

* ``WARN`` (``"warn"``) — return the best iterate, count the failure, and warn at the 1st,
  2nd, 4th, 8th, … failure of a layer's kind of solve (forward, adjoint), each warning with
  the counts so far (the :class:`deqlab.DEQ` default: a training loop is never killed,
  never silent, and a run with many unconverged steps says so more than once);
* ``RAISE`` (``"raise"``) — raise :class:`~deqlab.solvers.SolverError` (strict: experiments);
* ``RECORD`` (``"record"``) — return the best iterate and count the failure, without a
  warning (for callers that read ``status`` themselves, e.g. the papers' conv DEQ tables).

:meth:`FixedPointStats.summary` is the run-level picture in one line (solves by outcome,
unconverged samples, the worst residual).

A gradient is *exact* when it is the implicit gradient of ``ℓ(z*)`` up to the adjoint
solve's tolerance: method :class:`~deqlab.backward.Implicit`, forward and adjoint solves
converged. :class:`BackwardRecord` says which gradient was computed and whether it is.
"""

from __future__ import annotations

import enum
import os
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from deqlab._checks import NonFiniteError, check_choice
from deqlab.solvers import Picard, Solution, Solver, SolverError, Status
from deqlab.solvers.solution import NAN_HINT

Hint = str | Callable[[], str] | None


class OnFailure(str, enum.Enum):
    """What an unconverged solve does (see the module docstring)."""

    WARN = "warn"
    RAISE = "raise"
    RECORD = "record"

    @classmethod
    def parse(cls, value: object, solver: Solver | None = None) -> OnFailure:
        """The policy named by ``value`` (a member or its string); None: ``RAISE`` if
        ``solver.throw`` else ``RECORD`` (the solver's own flag decides)."""
        if value is None:
            return cls.RAISE if solver is not None and solver.throw else cls.RECORD
        if isinstance(value, cls):
            return value
        return cls(check_choice("on_failure", value, [member.value for member in cls]))


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

    Running counts, for a training loop to read (``reset_counts()`` zeroes them;
    :meth:`summary` says them in one line): ``forward_solves`` / ``unconverged_forward``,
    of which ``stalled_forward`` (the residual stopped falling), ``capped_forward`` (at
    ``max_iter``), ``diverged_forward`` and ``nan_forward`` (the cell returned NaN);
    ``forward_samples`` / ``unconverged_samples`` (rows solved and rows that missed the
    tolerance, summed over the solves) and
    ``worst_residual`` (the largest final forward residual); ``backward_passes`` /
    ``unconverged_backward`` (adjoint solves that failed), ``inexact_gradients`` (backward
    passes whose gradient is not exact, approximate methods included), and the work done:
    ``forward_evaluations`` (evaluations of ``f`` by the solver, in full batches: rows
    evaluated / batch size), ``backward_vjps`` and ``backward_evaluations`` (also in full
    batches). ``failures`` counts each kind of failed solve over the layer's life (it sets
    when the next warning is due) and stays through ``reset_counts()``.
    """

    forward: Solution | None = None
    backward: Solution | None = None
    gradient: BackwardRecord | None = None
    forward_solves: int = 0
    unconverged_forward: int = 0
    stalled_forward: int = 0
    capped_forward: int = 0
    diverged_forward: int = 0
    nan_forward: int = 0
    forward_samples: int = 0
    unconverged_samples: int = 0
    worst_residual: float = 0.0
    backward_passes: int = 0
    unconverged_backward: int = 0
    inexact_gradients: int = 0
    forward_evaluations: float = 0
    backward_vjps: float = 0
    backward_evaluations: float = 0
    failures: dict[str, int] = field(default_factory=dict)

    def reset_counts(self) -> None:
        """Zero the running counts (the last Solutions and ``failures`` stay)."""
        for name in self.counts():
            setattr(self, name, 0)

    def counts(self) -> dict[str, float]:
        """The running counts as a dict (e.g. for a training log)."""
        names = ("forward_solves", "unconverged_forward", "stalled_forward", "capped_forward")
        names += ("diverged_forward", "nan_forward", "forward_samples", "unconverged_samples")
        names += ("worst_residual", "backward_passes", "unconverged_backward")
        names += ("inexact_gradients", "forward_evaluations", "backward_vjps")
        names += ("backward_evaluations",)
        return {name: getattr(self, name) for name in names}

    def record_forward(self, solution: Solution, tol: float) -> None:
        self.forward = solution
        self.forward_solves += 1
        evaluations = solution.evaluations
        self.forward_evaluations += solution.n_steps if evaluations is None else evaluations
        rows = solution.sample_residuals
        self.forward_samples += 1 if rows is None else rows.numel()
        if solution.converged:
            return
        self.unconverged_forward += 1
        self.stalled_forward += solution.status is Status.STALLED
        self.capped_forward += solution.status is Status.MAX_STEPS
        nan = solution.non_finite is not None and solution.non_finite.map_made_nan
        self.nan_forward += nan
        self.diverged_forward += solution.status is Status.DIVERGED and not nan
        self.unconverged_samples += 1 if rows is None else int((rows > tol).sum())
        if not solution.residual <= self.worst_residual:  # NaN counts as worst
            self.worst_residual = solution.residual

    def summary(self) -> str:
        """The run-level picture of the solves since the last ``reset_counts()``, one line."""
        n, bad = self.forward_solves, self.unconverged_forward
        line = f"{n} forward solves: {n - bad} converged"
        if bad:
            outcomes = (
                (self.stalled_forward, "stalled"),
                (self.capped_forward, "at max_iter"),
                (self.diverged_forward, "diverged"),
                (self.nan_forward, "stopped at NaN"),
            )
            line += "".join(f", {count} {what}" for count, what in outcomes if count)
            line += (
                f"; {self.unconverged_samples} of {self.forward_samples} samples unconverged, "
                f"worst residual {self.worst_residual:.2e}"
            )
        line += f"; {self.backward_passes} backward passes"
        if self.backward_passes:
            line += (
                f" ({self.unconverged_backward} adjoint solves unconverged, "
                f"{self.inexact_gradients} gradients not exact)"
            )
        per_solve = self.forward_evaluations / n if n else 0.0
        return line + f"; {per_solve:.1f} evaluations per forward solve"

    def record_gradient(self, record: BackwardRecord) -> None:
        self.gradient = record
        self.backward_passes += 1
        self.backward_vjps += record.vjps
        self.backward_evaluations += record.evaluations
        self.unconverged_backward += not record.converged
        self.inexact_gradients += not record.exact


@dataclass(frozen=True)
class Failure:
    """One unconverged solve: which (``"forward"``/``"adjoint"``), by which solver, to what
    tol (resolved for the iterates' dtype)."""

    which: str
    solver: Solver
    solution: Solution
    tol: float


def solve(
    solver: Solver,
    f: Callable[[torch.Tensor], torch.Tensor],
    z0: torch.Tensor,
    which: str,
    stats: FixedPointStats,
    on_failure: OnFailure,
    hint: Hint,
) -> Solution:
    """``solver(f, z0)`` without raising inside the solver, recorded in ``stats`` as the
    ``which`` (``"forward"`` / ``"adjoint"``) solve; then the policy on failure."""
    try:
        solution = solver.run(f, z0)
    except NonFiniteError as err:
        if which == "forward" or err.name not in _ADJOINT_START:
            raise
        raise NonFiniteError(err.name, err.count, _ADJOINT_START[err.name]) from None
    tol = solution.tolerance
    if which == "forward":
        stats.record_forward(solution, tol)
    else:
        stats.backward = solution
    if not solution.converged:
        handle_failure(Failure(which, solver, solution, tol), on_failure, stats, hint)
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


def handle_failure(
    failure: Failure, on_failure: OnFailure, stats: FixedPointStats, hint: Hint
) -> None:
    """Apply the policy to an unconverged solve: raise; or warn at the 1st, 2nd, 4th, …
    failure of this kind for ``stats`` (with the counts so far); or pass.

    ``hint``: the caller's context (a string, or a zero-argument callable evaluated only
    when it is shown), put in the error / warning.
    """
    if on_failure is OnFailure.RAISE:
        what = "forward solve" if failure.which == "forward" else _ADJOINT
        text = _text(hint)
        context = f"{text}; {what}" if text else what
        solution, solver = failure.solution, failure.solver
        raise SolverError(solver.name, solution, tol=failure.tol, stop=solver.stop, context=context)
    seen = stats.failures.get(failure.which, 0) + 1
    stats.failures[failure.which] = seen
    if on_failure is OnFailure.WARN and seen & (seen - 1) == 0:  # 1, 2, 4, 8, ...
        text = _warning_text(failure, _text(hint), stats, seen)
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


def _warning_text(failure: Failure, hint: str, stats: FixedPointStats, seen: int) -> str:
    solution, solver = failure.solution, failure.solver
    rows = solution.sample_residuals
    share = ""
    if rows is not None and rows.numel() > 1:
        share = f" for {int((rows > failure.tol).sum())} of {rows.numel()} samples"
    counter = "unconverged_forward" if failure.which == "forward" else "unconverged_backward"
    effect = "the best iterate" if failure.which == "forward" else "the best adjoint"
    gradient = "" if failure.which == "forward" else " (the gradient is marked not exact)"
    solve = "forward solve" if failure.which == "forward" else "backward pass: adjoint solve"
    steps = f"{solution.status.value} after {solution.n_steps} steps"
    outcome = f"did not converge ({solver.name} {steps})"
    if solution.non_finite is not None:
        outcome = f"did not converge ({solver.name} {steps}: {solution.non_finite})"
    nan = solution.non_finite is not None and solution.non_finite.map_made_nan
    if nan:  # a NaN is named, not taken for a lack of contraction
        outcome = (
            f"stopped at NaN ({solver.name} after {solution.n_steps} steps: {solution.non_finite})"
        )
    tries = NAN_HINT + "; on_failure='raise' makes it an error" if nan else advice(failure)
    context = f" Context: {hint}." if hint else ""
    return (
        f"DEQ {solve} {outcome}: {solver.stop} residual "
        f"{solution.residual:.2e} > tol {failure.tol:.1e}{share}. Using {effect}"
        f"{gradient}. This layer's {failure.which} solves have failed {seen} times "
        f"(counted in stats.{counter}; the next warning at {2 * seen}); "
        f"{stats.summary()}.{context} What to try: {tries}."
    )


def advice(failure: Failure) -> str:
    """What to try for this failure, fitted to the solver that failed and how it failed."""
    solver, status = failure.solver, failure.solution.status
    regularise = "Jacobian regularisation (deq.jacobian_penalty()) to make the cell contract"
    faster = "Anderson or Broyden" if isinstance(solver, Picard) else None
    if status is Status.DIVERGED:
        tries = ["damping < 1", regularise]
    elif status is Status.STALLED:
        tries = [regularise, f"a looser tol (now {failure.tol:.1e})"]
    else:  # capped at max_iter
        tries = [f"a larger max_iter (now {solver.max_iter})", regularise]
    if faster is not None:
        tries.insert(1, faster)
    if failure.which == "adjoint":
        tries.append("an approximate backward (Phantom()) where the exact gradient is not needed")
    return "; ".join(tries) + "; on_failure='raise' makes it an error"

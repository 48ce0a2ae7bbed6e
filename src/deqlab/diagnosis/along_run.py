"""The theory along a training run: a DEQ's diagnostics every k steps, in one table.

:class:`DiagnosticsRecorder` is a training callback. Called once per step, after
``loss.backward()`` and before ``optimizer.step()``, it records for every step the forward
solve (steps, converged, unconverged samples, the layer's running count of failed solves)
and whether the gradient was exact; every ``every`` steps it adds :meth:`deqlab.DEQ.diagnostics`
at that step's ``z*`` (ρ(J_f), ‖J_f‖₂ and σ_min(I − J_f) over the batch, each with its
bracket and convergence); with ``lr`` it follows the PL ratio and the predicted and measured
loss factor of plain GD (:class:`~deqlab.diagnosis.monitor.RateMonitor`) at the steps whose
gradient is exact (``backward=Implicit()``).

**Cost, stated and bounded** (ours): the recorder times its own work and the training
between its calls (wall clock), and postpones a due recording while its total would exceed
``max_fraction`` of the training time (the first recording always runs): after the first
recording the overhead stays below ``max_fraction`` plus one recording's share. Each
recording costs at most ``3 · 2 · max_iter`` Jacobian products (three Krylov runs of JVPs and
VJPs on the batch), and where σ_min's bracket stays wider than ``rtol`` on a state of at most
:data:`~deqlab.fixed_point_diagnostics.DENSE_UP_TO` per sample, ``N`` more VJPs and an SVD of
each sample's ``N × N`` Jacobian. :meth:`overhead` reports the measured fraction.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from pathlib import Path

import torch

from deqlab._checks import check_bool, check_int, check_positive, check_real
from deqlab.diagnosis.monitor import RateMonitor
from deqlab.fixed_point_diagnostics import FixedPointDiagnostics
from deqlab.implicit import DEQ
from deqlab.solvers.solution import resolve_tol

#: The columns of :meth:`DiagnosticsRecorder.table`, in order.
COLUMNS = (
    "step", "loss", "solver_steps", "forward_converged", "unconverged_samples",
    "unconverged_forward", "exact_gradient", "rho_max", "rho_converged", "norm_max",
    "norm_lower", "norm_upper", "norm_median", "norm_converged", "sigma_min", "sigma_min_lower",
    "sigma_min_upper", "sigma_min_converged", "pl_ratio", "predicted", "measured",
    "diagnostics_seconds",
)  # fmt: skip


def _diagnostics_row(d: FixedPointDiagnostics) -> dict:
    """The batch's worst rows: max ρ, ‖J_f‖₂ (its largest lower and upper bounds bracket the
    max over samples), min σ_min (the least lower and upper bounds bracket the min)."""
    rho, norm, sigma = d.spectral_radius, d.jacobian_norm, d.sigma_min
    return {
        "rho_max": float(rho.value.max()),
        "rho_converged": bool(rho.converged.all()),
        "norm_max": float(norm.value.max()),
        "norm_lower": float(norm.lower.max()),
        "norm_upper": float(norm.upper.max()),
        "norm_median": float(norm.value.to(torch.float64).median()),
        "norm_converged": bool(norm.converged.all()),
        "sigma_min": float(sigma.value.min()),
        "sigma_min_lower": float(sigma.lower.min()),
        "sigma_min_upper": float(sigma.upper.min()),
        "sigma_min_converged": bool(sigma.converged.all()),
    }


class DiagnosticsRecorder:
    """Record a DEQ's diagnostics along a training run (module docstring).

    Args:
        deq: the :class:`deqlab.DEQ` being trained.
        every: record the diagnostics every this many steps (0: never, the solver only).
        max_fraction: postpone a due recording while the recorder's time would exceed this
            fraction of the training time; None: never postpone (every ``every`` steps
            exactly, e.g. for a reproducible table; the cost is then only measured).
        rtol, max_iter: of :meth:`deqlab.DEQ.diagnostics` (a cap sized for training).
        lr: the run's step size for the PL ratio and the GD prediction (None: not followed).
        gd: whether the run is plain GD (False: Adam, momentum; no prediction).
        seed: seed of the Krylov start vectors (each recording its own draw).

    Usage::

        recorder = DiagnosticsRecorder(net.deq, every=20)
        for step in range(steps):
            loss = criterion(net(x), y)
            optimizer.zero_grad()
            loss.backward()
            recorder.observe(loss, net.parameters())
            optimizer.step()
        recorder.table()  # a pandas DataFrame, one row per step
    """

    def __init__(
        self,
        deq: DEQ,
        *,
        every: int = 10,
        max_fraction: float | None = 0.1,
        rtol: float = 0.1,
        max_iter: int = 30,
        lr: float | None = None,
        gd: bool = True,
        seed: int = 0,
    ) -> None:
        if not isinstance(deq, DEQ):
            raise TypeError(f"`deq` must be a deqlab.DEQ layer; got {type(deq).__name__}")
        self.deq = deq
        self.every = check_int("every", every, min_value=0)
        self.max_fraction = (
            None
            if max_fraction is None
            else check_real("max_fraction", max_fraction, low=0.0, low_inclusive=False)
        )
        self.rtol = check_positive("rtol", rtol)
        self.max_iter = check_int("max_iter", max_iter, min_value=2)
        self.monitor = None if lr is None else RateMonitor(lr, gd=check_bool("gd", gd))
        self.seed = check_int("seed", seed, min_value=0)
        self.rows: list[dict] = []
        self.own_seconds = 0.0
        self.training_seconds = 0.0
        self.postponed = 0
        self._last_call: float | None = None
        self._due = 0

    def observe(
        self, loss: torch.Tensor | float, params: Iterable[torch.Tensor] | None = None
    ) -> dict:
        """Record this step (after ``loss.backward()``, before ``optimizer.step()``): ``loss``
        and, with ``lr``, the ``.grad`` of ``params``. Returns the step's row."""
        start = time.perf_counter()
        if self._last_call is not None:
            self.training_seconds += start - self._last_call
        forward = self.deq.last_forward
        if forward is None:
            raise RuntimeError(
                "DiagnosticsRecorder.observe() reads the last forward: call deq(x) first"
            )
        value = float(loss.detach()) if isinstance(loss, torch.Tensor) else float(loss)
        gradient = self.deq.last_backward
        exact = None if gradient is None else gradient.exact
        row = dict.fromkeys(COLUMNS, math.nan) | {
            "step": len(self.rows),
            "loss": value,
            "solver_steps": forward.n_steps,
            "forward_converged": forward.converged,
            "unconverged_samples": self._unconverged_samples(forward),
            "unconverged_forward": self.deq.stats.unconverged_forward,
            "exact_gradient": exact,
        }
        self._follow_rate(row, value, params, exact)
        if self._recording_due(row["step"]):
            row |= self._record()
        self.rows.append(row)
        self._last_call = time.perf_counter()
        self.own_seconds += self._last_call - start
        return row

    def _unconverged_samples(self, forward) -> int | None:
        if forward.sample_residuals is None:
            return None
        tol = resolve_tol(self.deq.solver.tol, forward.z.dtype)
        return int((forward.sample_residuals > tol).sum())

    def _follow_rate(self, row: dict, loss: float, params, exact: bool | None) -> None:
        if self.monitor is None:
            return
        if params is None:
            raise ValueError("`params` must be given when the recorder follows the rate (`lr`)")
        record = self.monitor.observe(loss, params, exact=exact)
        if len(self.rows) and self.monitor.records[-2]["measured"] is not None:
            self.rows[-1]["measured"] = self.monitor.records[-2]["measured"]
        if exact is not False:
            row["pl_ratio"] = record["pl_ratio"]
        row["predicted"] = math.nan if record["predicted"] is None else record["predicted"]

    def _recording_due(self, step: int) -> bool:
        if not self.every or step < self._due:
            return False
        last = self._last_recording_seconds()
        over = (
            self.max_fraction is not None
            and last > 0  # the first recording always runs
            and self.own_seconds + last > self.max_fraction * self.training_seconds
        )
        if over:
            self.postponed += 1
            return False
        self._due = step + self.every
        return True

    def _last_recording_seconds(self) -> float:
        recorded = [
            r["diagnostics_seconds"] for r in self.rows if not math.isnan(r["diagnostics_seconds"])
        ]
        return recorded[-1] if recorded else 0.0

    def _record(self) -> dict:
        start = time.perf_counter()
        gen = torch.Generator(device=self.deq.last_forward.z.device)
        gen.manual_seed(self.seed + len(self.rows))
        found = self.deq.diagnostics(rtol=self.rtol, max_iter=self.max_iter, generator=gen)
        return _diagnostics_row(found) | {"diagnostics_seconds": time.perf_counter() - start}

    def overhead(self) -> float:
        """The recorder's time as a fraction of the training time between its calls."""
        return self.own_seconds / self.training_seconds if self.training_seconds > 0 else math.nan

    def table(self):
        """One row per step (:data:`COLUMNS`); the diagnostics' columns are NaN between
        recordings, the rate's where it was not followed or the gradient was not exact."""
        import pandas as pd

        return pd.DataFrame(self.rows, columns=list(COLUMNS))

    def reading(self) -> str:
        """The run in one sentence: the span of each recorded quantity, its convergence, the
        solver's steps and the recorder's measured cost."""
        table = self.table()
        recorded = table.dropna(subset=["norm_max"])
        failed = int((~table["forward_converged"].astype(bool)).sum())
        solver = table["solver_steps"]
        said = (
            f"{len(table)} steps, forward solver steps {solver.iloc[0]} → {solver.iloc[-1]} "
            f"({failed} unconverged solves)"
        )
        if len(recorded):
            first, last = recorded.iloc[0], recorded.iloc[-1]
            said += (
                f"; at {len(recorded)} recordings ‖J_f‖₂ max {first['norm_max']:.3g} → "
                f"{last['norm_max']:.3g}, ρ(J_f) max {first['rho_max']:.3g} → "
                f"{last['rho_max']:.3g}, "
                f"σ_min(I − J_f) min {first['sigma_min']:.3g} → {last['sigma_min']:.3g}"
            )
            unconverged = int((~recorded["sigma_min_converged"].astype(bool)).sum())
            if unconverged:
                said += (
                    f" (σ_min not converged at {unconverged} of {len(recorded)} recordings: "
                    "an upper estimate there)"
                )
        said += f"; the recorder cost {100 * self.overhead():.1f}% of the training time"
        return said + "."

    def figure(self):
        """The curves along the run (a matplotlib Figure): ‖J_f‖₂, ρ(J_f), σ_min(I − J_f) with
        brackets at the recordings, and the solver's steps at every step."""
        from deqlab.diagnosis.figures import run_figure

        return run_figure(self.table())

    def _repr_html_(self) -> str:
        from deqlab.diagnosis.page import run_page

        return run_page(self)

    def to_html(self, path: str | Path) -> Path:
        """Write the page (curves and table, figures embedded) to ``path`` atomically."""
        from deqlab.diagnosis.page import write_page

        return write_page(self._repr_html_(), path)

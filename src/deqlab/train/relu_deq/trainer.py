"""Full-batch GD on the ReLU DEQ, instrumented for Theorem 1 of Ling et al. (2023).

θ_{τ+1} = θ_τ − η ∇Φ(θ_τ) (Section 2.1, after Eq. (2)), Φ = ½‖ŷ − y‖², with the exact
implicit gradient of Lemma 2 / Eq. (3): ∇W = G Zᵀ, ∇U = G Xᵀ, ∇a = Z r, G = D ⊙ V. A step
is evaluate (forward and adjoint solves of :mod:`deqlab.models.relu_deq_solve` from warm
starts) → update → prepare the next starts (:mod:`.warm_start`) → record;
:func:`.reference.reference_step` is the same step written plainly, and the tests' oracle.
All (m, n) state is kept in rows (n, m), one per sample. Why this trainer: it takes ~8
products per step where the plain step takes ~17 (benchmarks/README.md).

Record fields (NaN where not measured at that step):
    step, loss Φ(τ), lambda_min λ_τ (every ``metrics_every`` steps and at step 0),
    grad_norm ‖∇Φ‖, dist_from_init ‖θ(τ) − θ(0)‖ (every ``metrics_every`` steps),
    W_norm ‖W(τ)‖₂ and U_norm ‖U(τ)‖₂ (every ``spectral_every`` steps, at step 0 and
    whenever W_norm_bound reaches 1), W_norm_bound (every step, :mod:`.norm_bound`),
    a_norm, forward_/adjoint_ steps/products/residual, mask_flips, adjoint_restarts (rows
    whose flips were undone, restarted from :mod:`.flip_memory`), extrapolation and
    adjoint_extrapolation (the trends' ratio c), products (m×m by m×n products of the
    step, :mod:`.cost`), product_equivalents (all its matrix work in those units),
    wall_time_s, elapsed_s, status ("ok", or the stop reason of the step that ended the run).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import torch

from deqlab._checks import check_choice, check_int, check_positive
from deqlab.models.relu_deq import ReLUDEQ
from deqlab.models.relu_deq_solve import DEFAULT_MAX_ITER, RowSolution, solve_adjoint, solve_forward
from deqlab.papers.ling2023.margins import Theorem1Margins, theorem1_margins
from deqlab.statements import Run
from deqlab.theory.spectra import gram_lambda_min
from deqlab.train.divergence import check_parameters, describe_parameter, non_finite_parameter
from deqlab.train.protocol import Record, Trainer
from deqlab.train.relu_deq.cost import ProductCount
from deqlab.train.relu_deq.norm_bound import NormBound
from deqlab.train.relu_deq.product_cache import ProductCache
from deqlab.train.relu_deq.warm_start import Start, WarmStart

#: Version of :meth:`GDTrainer.state_dict`'s layout.
STATE_FORMAT = 5

#: Past adjoint inputs kept for the samples whose ReLU flips are undone (:mod:`.flip_memory`).
ADJOINT_MEMORY = 6

#: Steps a forward correction may reuse its inner product (ProductCache.correct); 9
#: measured the same products per step as 0 in the benchmark.
FORWARD_GRAM_REUSE = 9


@dataclass(frozen=True)
class GDConfig:
    """Hyper-parameters of full-batch GD.

    ``tol``/``max_iter``: per-sample relative tolerance and iteration cap of both solves;
    ``metrics_every``/``spectral_every``: steps between λ_τ, ‖∇Φ‖ and between Lanczos
    norms (0: step 0 only); ``rank_n_updates``: keep the cached products exact by thin
    corrections, recomputing them every ``refresh_every`` steps (else every step);
    ``extrapolate``: start from the trends' prediction; ``adjoint``: solve for C
    (independent of r) or for V.
    """

    lr: float
    tol: float = 1e-6
    max_iter: int = DEFAULT_MAX_ITER
    metrics_every: int = 1
    spectral_every: int = 10
    spectral_tol: float = 1e-10
    rank_n_updates: bool = True
    extrapolate: bool = True
    refresh_every: int = 20
    adjoint: str = "C"

    def __post_init__(self) -> None:
        check_positive("lr", self.lr)
        check_positive("tol", self.tol)
        check_int("max_iter", self.max_iter, min_value=1)
        check_int("metrics_every", self.metrics_every, min_value=0)
        check_int("spectral_every", self.spectral_every, min_value=0)
        check_positive("spectral_tol", self.spectral_tol)
        for name in ("rank_n_updates", "extrapolate"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"`{name}` must be a bool; got {getattr(self, name)!r}")
        check_int("refresh_every", self.refresh_every, min_value=1)
        check_choice("adjoint", self.adjoint, ("C", "V"))


@dataclass(frozen=True)
class Evaluation:
    """Everything a step computes at θ_τ (rows (n, m)): Z, the mask D, G = D ⊙ V, ∇a, the
    two solves with their starts, and the rows whose mask changed (``jumps``)."""

    Z: torch.Tensor
    mask: torch.Tensor
    G: torch.Tensor
    grad_a: torch.Tensor
    forward: RowSolution
    forward_start: Start
    adjoint: RowSolution
    adjoint_start: Start
    jumps: torch.Tensor | None


def _due(step: int, every: int) -> bool:
    """Measured at step 0 and every ``every`` steps (never after step 0 if every == 0)."""
    return step == 0 or (every > 0 and step % every == 0)


def _failure(name: str, solve: RowSolution) -> str:
    return (f"{name} solve {solve.status.value} after {solve.n_steps} steps "
            f"(residual {solve.residual:.3g})")  # fmt: skip


class GDTrainer(Trainer):
    """Full-batch GD on ``model`` (a ReLUDEQ) for data ``X`` (d, n) and labels ``y`` (n,).

    The model's parameters are updated in place. A run stops (``stop_reason``, ``message``)
    when ‖W‖₂ >= 1 (``"W_norm_ge_1"``), a solve fails (``"forward_failed"``,
    ``"adjoint_failed"``), the loss is not finite (``"loss_not_finite"``) or a parameter is
    not (``"parameter_not_finite"``: GD diverged); the failing step's record is kept.
    ``state_dict`` resumes a run with identical numbers (same device, dtype and threads).
    """

    def __init__(self, model: ReLUDEQ, X: torch.Tensor, y: torch.Tensor, config: GDConfig) -> None:
        super().__init__()
        if not isinstance(model, ReLUDEQ):
            raise TypeError(f"`model` must be a ReLUDEQ; got {type(model).__name__}")
        if not isinstance(config, GDConfig):
            raise TypeError(f"`config` must be a GDConfig; got {type(config).__name__}")
        self.model, self.config = model, config
        check_parameters(model.named_parameters(), "ReLUDEQ")
        self.X, self.y = model.check_data(X, y)
        W, U, a = self._parameters()
        zeros = torch.zeros(self.X.shape[1], model.m, dtype=W.dtype, device=W.device)
        # Z = 0 and C = 0 have the product 0 for free
        self.forward = WarmStart(zeros, zeros.clone(), extrapolate=config.extrapolate)
        self.adjoint = WarmStart(zeros.clone(), zeros.clone(), extrapolate=config.extrapolate,
                                 memory=ADJOINT_MEMORY)  # fmt: skip
        self.Q_mask: torch.Tensor | None = None  # mask of the adjoint's product; None: C = 0
        self.W0, self.U0, self.a0 = W.clone(), U.clone(), a.clone()
        self.norm = NormBound(W)
        self.step_count, self.elapsed_s = 0, 0.0

    def _parameters(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return self.model.W.detach(), self.model.U.detach(), self.model.a.detach()

    # ------------------------------------------------------------------ the step
    def step(self) -> Record:
        """Evaluate at θ_τ, update to θ_{τ+1}, prepare the next starts; return the record."""
        self.check_running()
        clock = time.perf_counter()
        rec, count = _empty_record(self.step_count), ProductCount()
        point = self._evaluate(rec, count)
        if point is not None:
            self._update(point, count)
            self._prepare_starts(point, count)
        return self._record(rec, count, clock)

    def _evaluate(self, rec: Record, count: ProductCount) -> Evaluation | None:
        """Z, r, G, ∇a at θ_τ (None if the run stops)."""
        W, U, a = self._parameters()
        if not self._may_step(W, U, a, rec):
            return None
        B = self.X.T @ U.T  # (n, m): rows of U X
        count.add_thin(self.X.shape[0] / W.shape[0])
        fwd_start = self.forward.start()
        fwd = self._solve("forward", fwd_start, rec, count, solve_forward, W, B)
        if fwd is None:
            return None
        Z, mask = fwd.x, fwd.mask
        assert mask is not None
        r = Z @ a - self.y
        rec["loss"] = 0.5 * float(r @ r)
        if not math.isfinite(rec["loss"]):
            return self._halt("loss_not_finite", f"loss is {rec['loss']}")
        jumps, adj_start = self._adjoint_start(W, mask, rec, count)
        source = a[None, :] if self.config.adjoint == "C" else r[:, None] * a
        adj = self._solve("adjoint", adj_start, rec, count, solve_adjoint, W, mask, source,
                          unknown=adj_start.unknown)  # fmt: skip
        if adj is None:
            return None
        G = adj.x * mask * r[:, None] if self.config.adjoint == "C" else adj.x * mask
        point = Evaluation(Z, mask, G, r @ Z, fwd, fwd_start, adj, adj_start, jumps)
        if _due(self.step_count, self.config.metrics_every):
            self._measure_metrics(point, rec)
        return point

    def _may_step(self, W: torch.Tensor, U: torch.Tensor, a: torch.Tensor, rec: Record) -> bool:
        """Parameters finite and ‖W‖₂ < 1 (bounded, or measured when due or needed)."""
        found = non_finite_parameter(self.model.named_parameters())
        if found is not None:  # GD diverged (the norm, the loss or a solve may not see it)
            what = describe_parameter(found, "ReLUDEQ")
            why = "before any GD step" if self.step_count == 0 else (
                f"GD with lr = {self.config.lr:g} diverged")  # fmt: skip
            self._halt("parameter_not_finite", f"{what}: {why}")
            return False
        rec["W_norm_bound"] = self.norm.bound(W)
        if _due(self.step_count, self.config.spectral_every) or not rec["W_norm_bound"] < 1.0:
            rec["W_norm"], rec["U_norm"] = self.norm.measure(W, U, self.config.spectral_tol)
            rec["W_norm_bound"] = rec["W_norm"]
        rec["a_norm"] = float(a.norm())
        if rec["W_norm"] >= 1.0:
            self._halt("W_norm_ge_1", f"‖W‖₂ = {rec['W_norm']:.6g} >= 1")
            return False
        return True

    def _adjoint_start(self, W, mask, rec: Record, count: ProductCount):
        """Move the adjoint's products to the new mask (flipped entries only) and start."""
        if self.Q_mask is None:
            return None, self.adjoint.start()
        flipped = self.adjoint.remask(W, self.Q_mask, mask, count)
        rec["mask_flips"] = flipped.numel()
        jumps = torch.zeros(mask.shape[0], dtype=torch.bool, device=W.device)
        jumps.index_fill_(0, flipped, True)  # rows whose mask changed: their C jumps
        start = self.adjoint.start(jumps, mask)
        rec["adjoint_restarts"] = 0 if start.unknown is None else start.unknown.numel()
        return jumps, start

    def _solve(self, name: str, start: Start, rec: Record, count: ProductCount, solve, *args,
               **kwargs) -> RowSolution | None:  # fmt: skip
        """One solve from ``start``, recorded and counted (None if it failed: stopped)."""
        solution = solve(*args, start.x, start.product, tol=self.config.tol,
                         max_iter=self.config.max_iter, verified_start=start.verified,
                         rows=True, **kwargs)  # fmt: skip
        rec[_EXTRAPOLATION[name]] = start.ratio
        rec.update({f"{name}_steps": solution.n_steps, f"{name}_products": solution.n_products,
                    f"{name}_residual": solution.residual})  # fmt: skip
        count.add(solution.n_products)
        if not solution.converged:
            return self._halt(f"{name}_failed", _failure(name, solution))
        return solution

    def _halt(self, reason: str, message: str) -> None:
        """Stop the run at this step (returns None for the caller to pass on)."""
        self.stop(reason, f"step {self.step_count}: {message}")

    def _update(self, point: Evaluation, count: ProductCount) -> None:
        """θ ← θ − η ∇Φ: W by G Zᵀ (one full product), U by G Xᵀ, a by Z r."""
        lr, Z, G = self.config.lr, point.Z, point.G
        with torch.no_grad():
            self.model.W.addmm_(G.T, Z, alpha=-lr)
            self.model.U.addmm_(G.T, self.X.T, alpha=-lr)
            self.model.a.add_(point.grad_a, alpha=-lr)
        count.add(1.0)
        count.add_thin(self.X.shape[0] / Z.shape[1])
        self.norm.moved(lr * float(G.norm()) * float(Z.norm()))  # >= ‖η G Zᵀ‖_F

    def _prepare_starts(self, point: Evaluation, count: ProductCount) -> None:
        """Store the solves' ends as the next starts, with products exact under θ_{τ+1}."""
        cfg, W, Z, G, mask = self.config, self.model.W.detach(), point.Z, point.G, point.mask
        self.forward.advance(point.forward, point.forward_start)
        self.adjoint.advance(point.adjoint, point.adjoint_start, jumps=point.jumps, mask=mask)
        self.Q_mask = mask
        # an extrapolated forward start is unverified: a reused inner product is accurate enough
        reuse = FORWARD_GRAM_REUSE if cfg.extrapolate else 0
        self._keep_exact(self.forward.cache, count, lambda x: x @ W.T, Z, G, reuse=reuse)
        self._keep_exact(self.adjoint.cache, count, lambda x: (x * mask) @ W, G, Z, mask=mask)

    def _keep_exact(self, cache: ProductCache, count: ProductCount, apply, left, right,
                    mask=None, reuse: int = 0) -> None:  # fmt: skip
        """Correct the cached product for W − η Gᵀ Z (thin), or recompute it when due."""
        if self.config.rank_n_updates and cache.corrections < self.config.refresh_every:
            cache.correct(self.config.lr, left, right, count, mask, reuse=reuse)
        else:
            cache.refresh(apply(cache.x), count)

    def _record(self, rec: Record, count: ProductCount, clock: float) -> Record:
        rec["products"], rec["product_equivalents"] = count.products, count.equivalents
        rec["wall_time_s"] = time.perf_counter() - clock
        self.elapsed_s += rec["wall_time_s"]
        rec["elapsed_s"] = self.elapsed_s
        rec["status"] = self.stop_reason or "ok"
        self.records.append(rec)
        if not self.stopped:
            self.step_count += 1
        return rec

    # ------------------------------------------------------------------ measurements
    def theorem1(self) -> Theorem1Margins:
        """Theorem 1's quantities (i)–(iii) at their worst over the steps τ >= 1 recorded so
        far (see ``theorem1_margins``)."""
        return theorem1_margins(Run.from_rows("run", self.records), self.config.lr)

    def _measure_metrics(self, point: Evaluation, rec: Record) -> None:
        """λ_τ = λ_min(Zᵀ Z), ‖∇Φ‖ and ‖θ − θ(0)‖, in float64."""
        W, U, a = self._parameters()
        rec["lambda_min"] = gram_lambda_min(point.Z.T)
        f64 = torch.float64
        Z64, G64, X64 = point.Z.to(f64), point.G.to(f64), self.X.to(f64)
        # ‖G Zᵀ‖_F² = ⟨GᵀG, ZᵀZ⟩ and ‖G Xᵀ‖_F² = ⟨GᵀG, XᵀX⟩ (paper layout) without m×m matrices
        GtG = G64 @ G64.T
        grad_sq = (GtG * (Z64 @ Z64.T)).sum() + (GtG * (X64.T @ X64)).sum()
        rec["grad_norm"] = float(grad_sq + point.grad_a.to(f64).square().sum()) ** 0.5
        dist_sq = sum(
            float(torch.dist(p.to(f64), p0.to(f64))) ** 2
            for p, p0 in ((W, self.W0), (U, self.U0), (a, self.a0))
        )
        rec["dist_from_init"] = dist_sq**0.5

    # ------------------------------------------------------------------ checkpointing
    def state_dict(self) -> dict:
        """Everything the next step depends on (tensors cloned), the records included."""
        return {
            "format": STATE_FORMAT,
            "config": asdict(self.config),
            "protocol": self.protocol_state(),
            "model": {k: v.detach().clone() for k, v in self.model.state_dict().items()},
            "forward": self.forward.state_dict(),
            "adjoint": self.adjoint.state_dict(),
            "Q_mask": None if self.Q_mask is None else self.Q_mask.clone(),
            "initial": [t.clone() for t in (self.W0, self.U0, self.a0)],
            "norm": self.norm.state_dict(),
            "step_count": self.step_count,
            "elapsed_s": self.elapsed_s,
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore a :meth:`state_dict`; the trainer's config must equal the saved one."""
        _check_state(state, asdict(self.config))
        self.model.load_state_dict(state["model"])
        self.load_protocol_state(state["protocol"])
        self.forward.load_state_dict(state["forward"])
        self.adjoint.load_state_dict(state["adjoint"])
        self.Q_mask = None if state["Q_mask"] is None else state["Q_mask"].clone()
        self.W0, self.U0, self.a0 = (t.clone() for t in state["initial"])
        self.norm.load_state_dict(state["norm"])
        self.step_count, self.elapsed_s = state["step_count"], state["elapsed_s"]


_EXTRAPOLATION = {"forward": "extrapolation", "adjoint": "adjoint_extrapolation"}
_STATE_KEYS = ("config", "protocol", "model", "forward", "adjoint", "Q_mask", "initial", "norm")


def _check_state(state: object, config: dict) -> None:
    """A state of this format, saved with ``config``; else one line saying what differs."""
    if not isinstance(state, dict):
        raise TypeError(f"`state` must be a dict; got {type(state).__name__}")
    missing = sorted(set(_STATE_KEYS) - state.keys())
    if missing:
        raise ValueError(f"`state` is missing keys {missing}")
    if state.get("format") != STATE_FORMAT:
        raise ValueError(
            f"`state` has format {state.get('format')!r}, this deqlab reads format "
            f"{STATE_FORMAT}; a checkpoint from an older version cannot be resumed: start "
            "the run afresh"
        )
    if state["config"] != config:
        raise ValueError(
            f"`state` was saved with config {state['config']}; this trainer has {config}"
        )


def _empty_record(step: int) -> Record:
    nan = math.nan
    return {
        "step": step, "loss": nan, "lambda_min": nan, "grad_norm": nan,
        "dist_from_init": nan, "W_norm": nan, "W_norm_bound": nan, "U_norm": nan,
        "a_norm": nan, "forward_steps": 0, "forward_products": 0.0,
        "forward_residual": nan, "adjoint_steps": 0, "adjoint_products": 0.0,
        "adjoint_residual": nan, "mask_flips": 0, "adjoint_restarts": 0, "extrapolation": nan,
        "adjoint_extrapolation": nan, "products": 0.0, "product_equivalents": nan,
        "wall_time_s": nan, "elapsed_s": nan, "status": "ok",
    }  # fmt: skip

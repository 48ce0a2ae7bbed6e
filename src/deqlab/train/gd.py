"""Full-batch gradient descent on the ReLU DEQ, instrumented for Theorem 1 of Ling et al.

θ_{τ+1} = θ_τ − η ∇Φ(θ_τ) (Section 2.1, after Eq. (2)), Φ = ½‖ŷ − y‖², with the exact
implicit gradient of Lemma 2 from the structured solves of
:mod:`deqlab.models.relu_deq_solve`. Each call of :meth:`GDTrainer.step` evaluates
everything at θ_τ, appends one tidy record (a dict of plain floats/ints/str) and then
moves to θ_{τ+1}.

Warm starts and the rank-n trick (:class:`deqlab.train.warm_start.WarmStart`). One GD
step changes W by ``−η G Zᵀ`` (G = D⊙V, m×n). For both solves the state keeps the last
input and its product (``P = W Z_in``, ``Q = Wᵀ (D ⊙ C_in)``); after the update they are
corrected by thin products only, ``W' Z_in = P − η G (Zᵀ Z_in)`` and
``W'ᵀ (D⊙C_in) = Q − η Z (Gᵀ (D⊙C_in))`` (≈ 2n/m of an m×m by m×n product each), so a
warm start already within tolerance costs no full product. After ``refresh_every``
corrections with no exact product in between, the products are recomputed exactly,
bounding round-off drift. The adjoint is solved for C, c_i = (I − WᵀD_i)⁻¹a
(``adjoint="C"``, independent of r) by default, or for V (``adjoint="V"``). When the new
mask D' differs from D, Q is moved to Wᵀ(D' ⊙ C_in) through the flipped entries only
(``mask_flips``). With ``extrapolate`` each solve starts from a prediction: the last
change t of each column carried on as ``α t + β (t − t_prev)``, (α, β) fitted by least
squares to the last change from the two before it (C moves smoothly, mostly with a:
β > 0 early, an acceleration; Z moves with the noisy GD steps: β ≈ −0.6, an average of
the last two changes). A column whose mask flipped keeps the change predicted for it (a
flip is a jump, not a trend; ``extrapolation``/``adjoint_extrapolation`` in the record are
the fitted ratios c of consecutive changes), and a column whose new mask equals the one
up to ``ADJOINT_MEMORY`` steps back (its flips undone: ReLU units that GD moves back and
forth across zero) starts from its C of then, moved by the trends since (its product is
left to the solve's first product). Such a start is not verified, so every column takes
at least one exact product (see the warm-start module): all stored products are then
fresh. The forward correction reuses the Gram Z_in Zᵀ for up to ``FORWARD_GRAM_REUSE``
steps (enough for an extrapolated start; see ``WarmStart.correct``).

All (m, n) state is kept transposed, in rows (n, m), one per sample, which makes the
per-sample operations contiguous (``rows=True`` of the solves).

Stopping: per column (sample), ``‖x_{k+1,i} − x_{k,i}‖ <= tol ‖x_{k+1,i}‖`` for every i
(torchdeq's 'rel' mode); converged columns soon drop out of the iteration, so product
counts are fractional (see :mod:`deqlab.models.relu_deq_solve`).

Record fields (NaN where not measured at that step):
    step, loss Φ(τ), lambda_min λ_τ (every ``metrics_every`` steps and at step 0),
    grad_norm ‖∇Φ‖, dist_from_init ‖θ(τ) − θ(0)‖ (every ``metrics_every`` steps),
    W_norm ‖W(τ)‖₂ and U_norm ‖U(τ)‖₂ (every ``spectral_every`` steps, at step 0, and
    whenever W_norm_bound reaches 1; warm-started Lanczos, see :mod:`deqlab.theory.spectra`),
    W_norm_bound = ‖W(s)‖₂ + δ (Weyl, s = last measurement; every step), δ >= ‖W(τ) − W(s)‖_F:
    the sum of η‖G‖_F‖Z‖_F over the steps since δ was last set to the exact distance, which
    happens whenever the bound reaches 1 (a cheap bound, tightened only when it matters),
    a_norm, forward_/adjoint_ steps/products/residual, mask_flips, extrapolation,
    adjoint_extrapolation, products (m×m by m×n products of this step, including the W
    update G Zᵀ and any refresh), product_equivalents (all matrix products
    of the step in units of m·m·n multiply-adds), wall_time_s, elapsed_s, status.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch

from deqlab._checks import check_choice, check_int, check_positive
from deqlab.models.relu_deq import ReLUDEQ
from deqlab.models.relu_deq_solve import DEFAULT_MAX_ITER, solve_adjoint, solve_forward
from deqlab.theory.ling2023 import Theorem1Margins, theorem1_margins
from deqlab.theory.spectra import gram_lambda_min, spectral_norm_lanczos
from deqlab.train.divergence import check_parameters, describe_parameter, non_finite_parameter
from deqlab.train.warm_start import WarmStart

#: Version of :meth:`GDTrainer.state_dict`'s layout (3: rows, per-sample trends, past
#: states; 4: the reused forward Gram).
STATE_FORMAT = 4

#: Past adjoint states kept for the samples whose ReLU flips are undone (their mask returns
#: to one of up to this many steps back; half of all flips late in the benchmark's run).
ADJOINT_MEMORY = 6

#: Steps a forward correction may reuse the Gram Z_in Zᵀ of an earlier step (see
#: WarmStart.correct); 9 measured the same products per step as 0 in the benchmark.
FORWARD_GRAM_REUSE = 9

#: Values of ``GDTrainer.status``; anything but "ok" means the run has stopped.
STATUSES = (
    "ok",
    "W_norm_ge_1",
    "forward_failed",
    "adjoint_failed",
    "loss_not_finite",
    "parameter_not_finite",
)

_STATE_TENSORS = (
    "Q_mask",
    "W_ref",
    "v_W",
    "v_U",
    "W0",
    "U0",
    "a0",
)


@dataclass(frozen=True)
class GDConfig:
    """Hyper-parameters of full-batch GD; see the module docstring for the fields' effects."""

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


def _due(step: int, every: int) -> bool:
    """Measured at step 0 and every ``every`` steps (never after step 0 if every == 0)."""
    return step == 0 or (every > 0 and step % every == 0)


class GDTrainer:
    """Full-batch GD on ``model`` for data ``X`` (d, n) and labels ``y`` (n,).

    The model's parameters are updated in place. ``step()`` returns the record of step τ;
    ``run(steps)`` repeats it. ``state_dict()``/``load_state_dict()`` capture everything
    the next step depends on, so a resumed run reproduces an uninterrupted one exactly
    (same device, dtype and thread count). A run stops (``status`` != "ok", ``message``
    says why) when ‖W‖₂ >= 1, a solve fails, the loss is not finite, or a parameter is not
    (GD diverged); the records up to and including the failing step are kept. A model whose
    parameters are not finite to begin with is a ValueError naming the parameter.
    """

    def __init__(self, model: ReLUDEQ, X: torch.Tensor, y: torch.Tensor, config: GDConfig) -> None:
        if not isinstance(model, ReLUDEQ):
            raise TypeError(f"`model` must be a ReLUDEQ; got {type(model).__name__}")
        if not isinstance(config, GDConfig):
            raise TypeError(f"`config` must be a GDConfig; got {type(config).__name__}")
        self.model, self.config = model, config
        check_parameters(model.named_parameters(), "ReLUDEQ")
        self.X, self.y = model.check_data(X, y)
        W, U, a = (p.detach() for p in (model.W, model.U, model.a))
        # All (m, n) state is kept in rows (n, m), one per sample (see relu_deq_solve).
        zeros = torch.zeros(self.X.shape[1], model.m, dtype=W.dtype, device=W.device)
        # Warm starts with their products; Z = 0 and C = 0 have zero products for free.
        self.forward_start = WarmStart(zeros, zeros.clone())  # product P = Z_in Wᵀ
        self.adjoint_start = WarmStart(  # product Q = (Q_mask ⊙ C_in) W
            zeros.clone(), zeros.clone(), memory=ADJOINT_MEMORY
        )
        self.Q_mask: torch.Tensor | None = None  # (n, m); None: C_in = 0, any mask
        self.W0, self.U0, self.a0 = W.clone(), U.clone(), a.clone()
        self.W_ref, self.W_ref_norm = W.clone(), math.nan
        self.W_drift = 0.0  # >= ‖W − W_ref‖_F
        self.v_W: torch.Tensor | None = None
        self.v_U: torch.Tensor | None = None
        self.n_corrections = (0, 0)  # consecutive rank-n corrections of P and Q
        self.step_count = 0
        self.elapsed_s = 0.0
        self.status, self.message = "ok", ""
        self.records: list[dict] = []

    # ------------------------------------------------------------------ stepping
    def step(self) -> dict:
        """Evaluate at θ_τ, record, and take one GD step to θ_{τ+1}. Returns the record."""
        if self.status != "ok":
            raise RuntimeError(f"the run has stopped ({self.status}): {self.message}")
        start = time.perf_counter()
        cfg, X, y = self.config, self.X, self.y
        W, U, a = (p.detach() for p in (self.model.W, self.model.U, self.model.a))
        m, n, d = W.shape[0], X.shape[1], X.shape[0]
        tau = self.step_count
        rec = self._empty_record(tau)
        thin = 0.0  # multiply-adds of thin products, in units of m·m·n
        found = non_finite_parameter(self.model.named_parameters())
        if found is not None:  # GD diverged (W_norm_bound, a loss or a solve may not see it)
            what = describe_parameter(found, "ReLUDEQ")
            why = "before any GD step" if tau == 0 else f"GD with lr = {cfg.lr:g} diverged"
            return self._stop(rec, start, "parameter_not_finite", f"{what}: {why}")

        W_norm_bound = self.W_ref_norm + self.W_drift
        if not W_norm_bound < 1.0:  # tighten the drift to the exact distance before Lanczos
            self.W_drift = float(torch.dist(W, self.W_ref))
            W_norm_bound = self.W_ref_norm + self.W_drift
        if _due(tau, cfg.spectral_every) or not W_norm_bound < 1.0:
            self._measure_spectra(W, U, rec)
            W_norm_bound = self.W_ref_norm
        rec["W_norm_bound"] = W_norm_bound
        rec["a_norm"] = float(a.norm())
        if not rec["W_norm"] < 1.0 and not math.isnan(rec["W_norm"]):
            return self._stop(rec, start, "W_norm_ge_1", f"‖W‖₂ = {rec['W_norm']:.6g} >= 1")

        B = X.T @ U.T  # (n, m): rows of U X
        thin += d / m
        Z_start, P_start, rec["extrapolation"], verified_fwd, _ = self.forward_start.start()
        fwd = solve_forward(
            W, B, Z_start, P_start, tol=cfg.tol, max_iter=cfg.max_iter,
            verified_start=verified_fwd, rows=True,
        )  # fmt: skip
        rec.update(forward_steps=fwd.n_steps, forward_products=fwd.n_products,
                   forward_residual=fwd.residual)  # fmt: skip
        if not fwd.converged:
            return self._stop(rec, start, "forward_failed", f"forward solve {fwd.message}")
        Z, mask = fwd.Z, fwd.mask  # rows (n, m): Zᵀ and Dᵀ
        r = Z @ a - y  # (n,)
        rec["loss"] = 0.5 * float(r @ r)
        if not math.isfinite(rec["loss"]):
            return self._stop(rec, start, "loss_not_finite", f"loss is {rec['loss']}")

        source = a[None, :] if cfg.adjoint == "C" else r[:, None] * a  # (1, m) | (n, m)
        jumps = None  # rows whose mask changed: their C jumps (V too)
        if self.Q_mask is not None:  # (Q_mask ⊙ C) W → (D ⊙ C) W: flipped entries only
            flipped = self.adjoint_start.remask(W, self.Q_mask, mask)
            rec["mask_flips"] = flipped.numel()
            thin += 2 * rec["mask_flips"] / (m * n)
            jumps = torch.zeros(n, dtype=torch.bool, device=W.device).index_fill_(0, flipped, True)
        adj_start = self.adjoint_start.start(jumps, mask)
        rec["adjoint_extrapolation"], verified_adj = adj_start.ratio, adj_start.verified
        adj = solve_adjoint(
            W, mask, source, adj_start.x, adj_start.product, tol=cfg.tol,
            max_iter=cfg.max_iter, verified_start=verified_adj, unknown=adj_start.unknown,
            rows=True,
        )  # fmt: skip
        rec.update(adjoint_steps=adj.n_steps, adjoint_products=adj.n_products,
                   adjoint_residual=adj.residual)  # fmt: skip
        if not adj.converged:
            return self._stop(rec, start, "adjoint_failed", f"adjoint solve {adj.message}")
        DC = adj.x * mask  # (n, m) rows of D ⊙ C, or of D ⊙ V
        G = DC * r[:, None] if cfg.adjoint == "C" else DC  # (n, m) rows of G = D ⊙ V
        grad_a = r @ Z  # (m,)

        if _due(tau, cfg.metrics_every):
            self._measure_metrics(W, U, a, Z.T, G.T, grad_a, rec)

        # Warm starts for θ_{τ+1}: corrected products (thin) or recomputed exactly. After an
        # unverified start every row took an exact product: no correction is pending.
        keep = cfg.extrapolate
        self.forward_start.advance(fwd.x_in, fwd.product, keep_history=keep)
        self.adjoint_start.advance(adj.x_in, adj.product, keep_history=keep, jumps=jumps, mask=mask)
        self.Q_mask = mask
        n_P = self.n_corrections[0] if verified_fwd else 0  # corrections since an exact product
        n_Q = self.n_corrections[1] if verified_adj else 0
        correct_P = cfg.rank_n_updates and n_P < cfg.refresh_every
        correct_Q = cfg.rank_n_updates and n_Q < cfg.refresh_every
        if correct_P:  # (W' Z_in)ᵀ = P − η (Z_inᵀ Z) Gᵀ, in rows
            # the next start is extrapolated (unverified): a Gram Z_in Zᵀ of up to
            # FORWARD_GRAM_REUSE steps ago is accurate enough (adjoint: no, C jumps at flips)
            done = self.forward_start.correct(cfg.lr, Z, G, reuse=FORWARD_GRAM_REUSE if keep else 0)
            thin += done * n / m
        if correct_Q:  # (W'ᵀ(D ⊙ C_in))ᵀ = Q − η ((D ⊙ C_in)ᵀ G) Zᵀ, in rows
            thin += self.adjoint_start.correct(cfg.lr, G, Z, mask) * n / m
        self.n_corrections = (n_P + 1 if correct_P else 0, n_Q + 1 if correct_Q else 0)
        with torch.no_grad():
            self.model.W.addmm_(G.T, Z, alpha=-cfg.lr)  # the W update G Zᵀ: one m·m·n product
            self.W_drift += cfg.lr * float(G.norm()) * float(Z.norm())  # >= ‖η G Zᵀ‖_F
            self.model.U.addmm_(G.T, X.T, alpha=-cfg.lr)
            self.model.a.add_(grad_a, alpha=-cfg.lr)
        thin += d / m
        W_new = self.model.W.detach()
        if not correct_P:
            self.forward_start.refresh(lambda Z_in: Z_in @ W_new.T)
        if not correct_Q:
            self.adjoint_start.refresh(lambda C_in: (C_in * mask) @ W_new)
        extra = (not correct_P) + (not correct_Q)
        rec["products"] = fwd.n_products + adj.n_products + 1 + extra
        rec["product_equivalents"] = rec["products"] + thin
        return self._finish(rec, start)

    def run(self, steps: int, callback: Callable[[dict], object] | None = None) -> list[dict]:
        """Take up to ``steps`` steps (fewer if the run stops); return their records."""
        steps = check_int("steps", steps, min_value=0)
        out = []
        for _ in range(steps):
            if self.status != "ok":
                break
            out.append(self.step())
            if callback is not None:
                callback(out[-1])
        return out

    def theorem1(self) -> Theorem1Margins:
        """Theorem 1's quantities (i)–(iii) at their worst over the steps τ >= 1 recorded so
        far (see ``theorem1_margins``)."""
        return theorem1_margins(self.records, self.config.lr)

    # ------------------------------------------------------------------ measurements
    def _measure_spectra(self, W: torch.Tensor, U: torch.Tensor, rec: dict) -> None:
        tol = self.config.spectral_tol
        rec["W_norm"], self.v_W = spectral_norm_lanczos(W, self.v_W, tol=tol, max_iter=300)
        rec["U_norm"], self.v_U = spectral_norm_lanczos(U, self.v_U, tol=tol, max_iter=300)
        self.W_ref, self.W_ref_norm, self.W_drift = W.clone(), rec["W_norm"], 0.0

    def _measure_metrics(self, W, U, a, Z, G, grad_a, rec: dict) -> None:
        rec["lambda_min"] = gram_lambda_min(Z)
        f64 = torch.float64
        Z64, G64, X64 = Z.to(f64), G.to(f64), self.X.to(f64)
        # ‖G Zᵀ‖_F² = ⟨GᵀG, ZᵀZ⟩ and ‖G Xᵀ‖_F² = ⟨GᵀG, XᵀX⟩ without forming m×m matrices.
        GtG = G64.T @ G64
        grad_sq = (GtG * (Z64.T @ Z64)).sum() + (GtG * (X64.T @ X64)).sum()
        rec["grad_norm"] = float(grad_sq + grad_a.to(f64).square().sum()) ** 0.5
        dist_sq = sum(
            float(torch.dist(p.to(f64), p0.to(f64))) ** 2
            for p, p0 in ((W, self.W0), (U, self.U0), (a, self.a0))
        )
        rec["dist_from_init"] = dist_sq**0.5

    # ------------------------------------------------------------------ bookkeeping
    @staticmethod
    def _empty_record(step: int) -> dict:
        nan = math.nan
        return {
            "step": step, "loss": nan, "lambda_min": nan, "grad_norm": nan,
            "dist_from_init": nan, "W_norm": nan, "W_norm_bound": nan, "U_norm": nan,
            "a_norm": nan, "forward_steps": 0, "forward_products": 0.0,
            "forward_residual": nan, "adjoint_steps": 0, "adjoint_products": 0.0,
            "adjoint_residual": nan, "mask_flips": 0, "extrapolation": nan,
            "adjoint_extrapolation": nan, "products": 0.0,
            "product_equivalents": nan,
            "wall_time_s": nan, "elapsed_s": nan, "status": "ok",
        }  # fmt: skip

    def _finish(self, rec: dict, start: float) -> dict:
        rec["wall_time_s"] = time.perf_counter() - start
        self.elapsed_s += rec["wall_time_s"]
        rec["elapsed_s"] = self.elapsed_s
        rec["status"] = self.status
        self.records.append(rec)
        if self.status == "ok":
            self.step_count += 1
        return rec

    def _stop(self, rec: dict, start: float, status: str, message: str) -> dict:
        self.status, self.message = status, f"step {rec['step']}: {message}"
        return self._finish(rec, start)

    # ------------------------------------------------------------------ checkpointing
    def state_dict(self) -> dict:
        """Everything the next step depends on (tensors cloned), plus the records."""
        tensors = {k: None if getattr(self, k) is None else getattr(self, k).clone()
                   for k in _STATE_TENSORS}  # fmt: skip
        return {
            "format": STATE_FORMAT,
            "config": asdict(self.config),
            "forward_start": self.forward_start.state_dict(),
            "adjoint_start": self.adjoint_start.state_dict(),
            "model": {k: v.detach().clone() for k, v in self.model.state_dict().items()},
            **tensors,
            "W_ref_norm": self.W_ref_norm,
            "W_drift": self.W_drift,
            "n_corrections": self.n_corrections,
            "step_count": self.step_count,
            "elapsed_s": self.elapsed_s,
            "status": self.status,
            "message": self.message,
            "records": [dict(r) for r in self.records],
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore a :meth:`state_dict`; the trainer's config must equal the saved one."""
        if not isinstance(state, dict):
            raise TypeError(f"`state` must be a dict; got {type(state).__name__}")
        missing = {"config", "model", "forward_start", "adjoint_start", *_STATE_TENSORS}
        missing -= state.keys()
        if missing:
            raise ValueError(f"`state` is missing keys {sorted(missing)}")
        if state.get("format") != STATE_FORMAT:
            raise ValueError(
                f"`state` has format {state.get('format')!r}, this deqlab reads format "
                f"{STATE_FORMAT} (warm starts kept in rows with per-sample trends); a "
                "checkpoint from an older version cannot be resumed: start the run afresh"
            )
        if state["config"] != asdict(self.config):
            raise ValueError(
                f"`state` was saved with config {state['config']}; this trainer has "
                f"{asdict(self.config)}"
            )
        self.model.load_state_dict(state["model"])
        self.forward_start.load_state_dict(state["forward_start"])
        self.adjoint_start.load_state_dict(state["adjoint_start"])
        for k in _STATE_TENSORS:
            setattr(self, k, None if state[k] is None else state[k].clone())
        for k in ("W_ref_norm", "W_drift", "n_corrections", "step_count", "elapsed_s", "status",
                  "message"):  # fmt: skip
            setattr(self, k, state[k])
        self.records = [dict(r) for r in state["records"]]

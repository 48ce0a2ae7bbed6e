"""A training callback: the PL ratio, the rate it predicts, the rate measured, the step-size limit.

At step t with loss ``L_t`` and gradient ``g_t`` (as the training loop computed them):

* PL ratio ``μ_t = ‖g_t‖² / (2 L_t)`` (Polyak–Łojasiewicz; Ling et al. 2023, Eq. (5));
* predicted factor of one GD step of size η: ``1 − 2ημ_t(1 − β_t η/2)``, an upper bound of
  ``L_{t+1}/L_t`` when β_t bounds the Hessian along the step (Karimi, Nutini & Schmidt
  2016, proof of Theorem 1); without a measured β, the first-order ``1 − 2ημ_t``;
* measured factor ``L_{t+1} / L_t`` (filled in at the next observation);
* curvature ``β_t = λ_max(∇²L(θ_t))`` of the loss Hessian by power iteration on
  Hessian-vector products, and the step-size limit ``2/β_t`` (GD on the local quadratic
  model decreases the loss iff ``η < 2/β``).

The Hessian-vector products are central differences of exact gradients,
``H v ≈ (∇L(θ + εv) − ∇L(θ − εv)) / (2ε)`` (error O(ε²) plus the gradient's own error
over ε; ours): a DEQ's implicit backward is first order only, so the products cannot come
from double backpropagation. Each one costs two calls of the user's ``closure``. The PL ratio,
the prediction and the curvature all assume exact gradients, in the training loop and in the
closure: a :class:`deqlab.DEQ` with ``backward=Implicit()`` (the layer's default phantom
gradient is an approximation; pass ``exact=deq.last_backward.exact`` to :meth:`observe`
and such steps get no prediction).
The prediction is for plain GD; with another optimiser (Adam, momentum) it is NOT
APPLICABLE and the monitor records the ratio and the measured factor only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import torch

from deqlab._checks import check_bool, check_int, check_positive
from deqlab.diagnosis.pl import predicted_factor

Closure = Callable[[], torch.Tensor]


def _flat_grad(params: list[torch.Tensor]) -> torch.Tensor:
    return torch.cat([
        (torch.zeros_like(p) if p.grad is None else p.grad).reshape(-1).to(torch.float64)
        for p in params
    ])  # fmt: skip


def _shift_params(params: list[torch.Tensor], step: torch.Tensor) -> None:
    """θ ← θ + step (flat float64 ``step``), in place."""
    start = 0
    with torch.no_grad():
        for p in params:
            p.add_(step[start : start + p.numel()].reshape(p.shape).to(p))
            start += p.numel()


def hessian_lambda_max(
    closure: Closure, params: list[torch.Tensor], *, iters: int, tol: float, eps: float, seed: int
) -> float:
    """λ_max of the loss Hessian at θ by power iteration on central-difference HVPs.

    ``closure()`` must zero the gradients, compute the loss, call ``backward()`` and return
    the loss. θ and the ``.grad`` of ``params`` are restored afterwards. The dominant
    eigenvalue is found first; if it is negative, the iteration is repeated on
    ``H − λ_dom I`` to reach the top of the spectrum.
    """
    saved = [None if p.grad is None else p.grad.clone() for p in params]
    norm = math.sqrt(sum(float(p.detach().to(torch.float64).square().sum()) for p in params))
    h = eps * (1.0 + norm)

    def hvp(v: torch.Tensor) -> torch.Tensor:
        grads = []
        for sign in (1.0, -1.0):
            _shift_params(params, sign * h * v)
            closure()
            grads.append(_flat_grad(params))
            _shift_params(params, -sign * h * v)
        return (grads[0] - grads[1]) / (2.0 * h)

    gen = torch.Generator(device="cpu").manual_seed(seed)
    size = sum(p.numel() for p in params)
    v0 = torch.randn(size, generator=gen, dtype=torch.float64).to(params[0].device)
    try:
        top = _power(hvp, v0, iters, tol, shift=0.0)
        if top < 0:
            top = _power(hvp, v0, iters, tol, shift=-top) + top
    finally:
        with torch.no_grad():
            for p, g in zip(params, saved, strict=True):
                p.grad = g
    return top


def _power(op: Callable, v: torch.Tensor, iters: int, tol: float, shift: float) -> float:
    """Dominant eigenvalue of ``op + shift I`` (symmetric) by power iteration."""
    v = v / v.norm()
    value = 0.0
    for _ in range(iters):
        w = op(v) + shift * v
        new = float(v @ w)
        v = w / w.norm().clamp_min(1e-300)
        if abs(new - value) <= tol * abs(new):
            return new - shift
        value = new
    return value - shift


class RateMonitor:
    """Follow a training run: PL ratio, predicted and measured rate, curvature (module docstring).

    Args:
        lr: the run's step size η (the prediction is for plain GD with this η).
        gd: whether the run is plain GD; False (Adam, momentum) records no prediction.
        curvature_every: measure β every this many observations when a ``closure`` is
            passed (0: never); the last β is used in between.
        power_iters, power_tol, eps: the Hessian power iteration (relative step ``eps``).

    Call :meth:`observe` after ``loss.backward()`` and before ``optimizer.step()``.
    """

    def __init__(
        self,
        lr: float,
        *,
        gd: bool = True,
        curvature_every: int = 0,
        power_iters: int = 30,
        power_tol: float = 1e-4,
        eps: float = 1e-4,
    ) -> None:
        self.lr = check_positive("lr", lr)
        self.gd = check_bool("gd", gd)
        self.curvature_every = check_int("curvature_every", curvature_every, min_value=0)
        self.power_iters = check_int("power_iters", power_iters, min_value=1)
        self.power_tol = check_positive("power_tol", power_tol)
        self.eps = check_positive("eps", eps)
        self.records: list[dict] = []
        self._beta: float | None = None

    def observe(
        self,
        loss: torch.Tensor | float,
        params: Iterable[torch.Tensor],
        closure: Closure | None = None,
        *,
        exact: bool | None = None,
    ) -> dict:
        """Record step t from its loss and the ``.grad`` of ``params``; returns the record.

        ``exact``: whether those gradients are exact (for a DEQ, ``deq.last_backward.exact``;
        None: not said). With False (the DEQ layer's default phantom gradient) the step is
        recorded, but the PL ratio is that of an approximate gradient: no rate is predicted
        from it, and :meth:`reading` says so.
        """
        if exact is not None:
            check_bool("exact", exact)
        params = [p for p in params if p.requires_grad]
        if not params:
            raise ValueError("`params` must hold at least one tensor that requires grad")
        value = float(loss.detach()) if isinstance(loss, torch.Tensor) else float(loss)
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"`loss` must be a finite non-negative number; got {value}")
        step = len(self.records)
        grad_sq = float(_flat_grad(params).square().sum())
        if closure is not None and self.curvature_every and step % self.curvature_every == 0:
            self._beta = self._curvature(closure, params, step)
        if self.records and self.records[-1]["loss"] > 0:
            self.records[-1]["measured"] = value / self.records[-1]["loss"]
        ratio = grad_sq / (2.0 * value) if value > 0 else math.inf
        predicted = None if exact is False else self._predicted(ratio)
        record = {"step": step, "loss": value, "grad_sq": grad_sq, "pl_ratio": ratio,
                  "curvature": self._beta, "eta_max": self._eta_max(), "exact": exact,
                  "predicted": predicted, "measured": None}  # fmt: skip
        self.records.append(record)
        return record

    def _curvature(self, closure: Closure, params: list[torch.Tensor], step: int) -> float:
        return hessian_lambda_max(
            closure, params, iters=self.power_iters, tol=self.power_tol, eps=self.eps, seed=step
        )

    def _eta_max(self) -> float | None:
        if self._beta is None:
            return None
        return 2.0 / self._beta if self._beta > 0 else math.inf

    def _predicted(self, ratio: float) -> float | None:
        if not self.gd:
            return None
        if self._beta is None:
            return 1.0 - 2.0 * self.lr * ratio
        return predicted_factor(self.lr, ratio, self._beta)

    def summary(self) -> dict:
        """Over the steps with both: geometric-mean predicted and measured factors."""
        pairs = [(r["predicted"], r["measured"]) for r in self.records
                 if r["predicted"] is not None and r["measured"] is not None]  # fmt: skip
        ratios = [r["pl_ratio"] for r in self.records]

        def geo(values: list[float]) -> float | None:
            if not values or min(values) <= 0:
                return None
            return math.exp(sum(math.log(v) for v in values) / len(values))

        return {
            "steps": len(self.records),
            "pl_ratio_min": min(ratios, default=None),
            "predicted_rate": geo([p for p, _ in pairs]),
            "measured_rate": geo([m for _, m in pairs]),
            "eta_max": self._eta_max(),
            "lr": self.lr,
        }

    def reading(self) -> str:
        """The run in one sentence of plain words."""
        s = self.summary()
        said = f"over {s['steps']} steps the PL ratio stayed ≥ {s['pl_ratio_min']:.2g}"
        if s["predicted_rate"] is not None and s["measured_rate"] is not None:
            said += (
                f"; at η = {self.lr:.2g} GD was predicted to multiply the loss by "
                f"{s['predicted_rate']:.3g} per step, measured {s['measured_rate']:.3g}"
            )
        if s["eta_max"] is not None:
            said += f"; the measured curvature allows η < {s['eta_max']:.2g}"
        approximate = sum(r["exact"] is False for r in self.records)
        if approximate:
            said += (
                f"; {approximate} of {s['steps']} steps had approximate gradients, for which "
                "nothing was predicted (backward=Implicit() gives exact ones)"
            )
        return said + "."

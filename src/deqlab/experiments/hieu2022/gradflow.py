"""Thesis (Hieu 2022), Section 3.3.1: the gradient flow of monotone DEQs of several widths
against Theorem 3.3.1, with Proposition 4 and Lemmas 3.3.2–3.3.4 measured along the way.

Setting as ``hieu2022-mondeq-gd`` (Section 3.2.1, Eq. 3.3, ``L = ½‖ŷ − y‖²`` Eq. 3.4,
sphere data, float64). The flow ``dθ/dt = −∇L(θ)`` is integrated by explicit Euler
(:class:`deqlab.train.mondeq_flow.MonDEQFlow`) with step ``h = h_fraction/λ_max(K(0))``
(``K`` of Eq. 3.7: the stiffest mode of the linearised flow decays by the factor
``1 − h λ_max`` per step) for ``steps`` steps, and again with ``h/2`` for ``2·steps``
steps over the same times: the difference of the two losses is Euler's error, reported
and bounded (ours: ``flow_rtol``).

Every ``probe_every`` steps (``2·probe_every`` at ``h/2``) a probe records Proposition 4's
discrepancy, ``λ_min(K)`` and ``σ_min(Z)`` (Eq. 3.14), the distances from the start and
both sides of Lemmas 3.3.2–3.3.4 (see :mod:`deqlab.train.mondeq_flow`).

The ``theorem`` preset meets Condition 1 (Eqs. 3.8–3.9): N = 2 points, small A, B, u and a
large U (``σ_U = 100``), radius 0.1 — chosen from the constants at initialisation: at
m = 0.2 the margins lhs/rhs of (3.8)/(3.9) are 28.8/4.97 at n = 200 and 58.5/11.2 at
n = 400; at m = 0.05 (``hieu2022-mondeq-gd``'s theorem preset) (3.9) fails at n = 200
(0.65), as its right side grows like 1/m⁴.

The ``theorem-features`` preset meets Condition 1 with one radius per parameter (R_A, R_B,
R_U, R_u = 0.85, 0.018, 0.037, 0.05; d = 30, m = 0.222, σ_U = 1286, σ_u = 0.034, σ_A = σ_B
= 0.005) and A, B and U carry 2.6% (n = 200) and 2.7% (n = 400) of λ_min(K(0)) beyond
σ_min(Z(0))²: the margins of (3.8)/(3.9) are 3.62/1.82 and 2.38/1.32. Its seed, 148, was
chosen as one of the 2 of seeds 0–149 whose draws at both widths meet Condition 1 (about
one draw in four does at each width).

Metrics: the probe columns, ``width``, ``refine`` (0: step h, 1: h/2), ``h``, ``step``,
``t``, ``loss``, ``bound`` ``exp(−λ₀²t/2)L(0)``, ``lambda0``, ``kernel_lambda_max0``
``λ_max(K(0))`` and both sides of Condition 1, ``eq3_8_lhs`` … ``eq3_9_rhs``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar

import torch

from deqlab.data import get_dataset
from deqlab.experiments.base import Experiment, Row, Task, TaskContext
from deqlab.experiments.constraints import POSITIVE, Interval
from deqlab.experiments.deviations import PaperValue, measurement, not_given
from deqlab.experiments.hieu2022 import gradflow_report
from deqlab.experiments.hieu2022.mondeq_gd import PAPER_SETTING as GD_SETTING
from deqlab.experiments.hieu2022.setting import CONDITION_1_KEYS, MonDEQSetting, build_model
from deqlab.experiments.registry import register
from deqlab.papers import HIEU
from deqlab.papers.hieu2022.mondeq import condition_1, gradient_flow_bound, mondeq_constants
from deqlab.papers.hieu2022.mondeq_kernel import prediction_kernel
from deqlab.train.mondeq_flow import MonDEQFlow


@dataclass(frozen=True)
class GradFlowConfig(MonDEQSetting):
    """Defaults of our synthetic setting (see the module docstring)."""

    steps: int = 1000  # Euler steps of size h (2·steps of size h/2)
    h_fraction: float = 0.1  # h = h_fraction / λ_max(K(0))
    probe_every: int = 100
    tol: float = 1e-11  # relative residual of the forward and adjoint splitting solves
    prop4_rtol: float = 1e-2  # ours: Eq. (3.7)'s residual once the O(h) error is removed
    flow_rtol: float = 5e-2  # ours: largest Euler error accepted (step_error_check)

    constraints: ClassVar = {
        "steps": Interval(1),
        "h_fraction": Interval(0.0, 1.0, "right"),
        "probe_every": Interval(1),
        "prop4_rtol": POSITIVE,
        "flow_rtol": POSITIVE,
    }


_FLOW = "Section 3.3.1 analyses the exact flow; Euler with steps h and h/2 stands in (ours)"

#: What the thesis says about each field (Chapter 3 has no experiment).
PAPER_SETTING: dict[str, PaperValue] = {
    **{k: v for k, v in GD_SETTING.items() if k in {f.name for f in fields(GradFlowConfig)}},
    "widths": not_given("Theorem 3.3.1: 'the width of hidden layer is O(N)'"),
    "m": not_given("Eq. (3.3): any m > 0; the right side of Eq. (3.9) grows like 1/m⁴"),
    "steps": not_given(_FLOW),
    "h_fraction": not_given(_FLOW),
    "probe_every": measurement(),
    "prop4_rtol": measurement(),
    "flow_rtol": measurement(),
}


def _initial_kernel_max(config: GradFlowConfig, width: int, X: torch.Tensor) -> float:
    """``λ_max(K(0))`` of Eq. (3.7) at initialisation (sets the step ``h``)."""
    model = build_model(config, width, X.device)
    with torch.no_grad():
        Z = model.equilibrium(X)
    params = {k: p.detach() for k, p in model.named_parameters()}
    return float(torch.linalg.eigvalsh(prediction_kernel(**params, Z=Z, X=X, m=config.m)["K"])[-1])


@register
class Hieu2022GradFlow(Experiment):
    """The gradient flow of monotone DEQs against Theorem 3.3.1 (module docstring)."""

    slug = "gradflow"
    title = "Gradient flow on monotone DEQs vs Theorem 3.3.1, Proposition 4, Lemmas 3.3.2–3.3.4"
    paper = HIEU
    report = gradflow_report
    where = (
        "Section 3.3.1: Proposition 4, Condition 1 and Theorem 3.3.1; no experiment in the thesis"
    )
    Config = GradFlowConfig
    presets: ClassVar = {
        "tiny": {"n_samples": 4, "d": 3, "widths": (8, 16), "steps": 16, "probe_every": 8},
        "quick": {"n_samples": 20, "widths": (40, 80, 160), "steps": 400, "probe_every": 40},
        "theorem": {
            "n_samples": 2,
            "widths": (200, 400),
            "steps": 200,
            "probe_every": 20,
            "radius": 0.1,
            "sigma_A": 1e-3,
            "sigma_B": 1e-3,
            "sigma_U": 100.0,
            "sigma_u": 1e-3,
        },
        "theorem-features": {
            "n_samples": 2,
            "d": 30,
            "widths": (200, 400),
            "m": 0.222,
            "steps": 200,
            "probe_every": 20,
            "radius_A": 0.85,
            "radius_B": 0.018,
            "radius_U": 0.037,
            "radius_u": 0.05,
            "sigma_A": 0.005,
            "sigma_B": 0.005,
            "sigma_U": 1286.0,
            "sigma_u": 0.034,
            "seed": 148,
        },
        "paper": {},
    }
    paper_setting: ClassVar = PAPER_SETTING
    figure_captions: ClassVar = {
        "gradflow": (
            "Left: the loss of the flow at each width (solid: step h/2; dotted: step h) and "
            "Theorem 3.3.1's bound exp(−λ₀²t/2)L(0) (dashed) against λ₀²t/2; middle: "
            "Proposition 4's residual ‖D − (−K r)‖/‖K r‖ at the probes, raw (step h) and "
            "after removing the O(h) term; right: the margin lhs/rhs of Condition 1, Eqs. "
            "(3.8)–(3.9), and of Lemmas 3.3.2–3.3.4 (worst probe) against the width."
        ),
    }
    metric_columns: ClassVar = {
        "width": "hidden width n",
        "refine": "0: Euler step h; 1: step h/2 (twice the steps, same times)",
        "h": "Euler step h = h_fraction/λ_max(K(0)) (halved when refine = 1)",
        "t": "flow time t = step·h",
        "loss": "L(θ(t)) = ½‖ŷ − y‖²",
        "bound": "exp(−λ₀²t/2)·L(θ(0)), Theorem 3.3.1",
        "lambda0": "λ₀ = σ_min(Z(0))",
        "kernel_lambda_max0": "λ_max(K(0)), Eq. (3.7)",
        "prop4_err_h": "‖D_s + K r‖/‖K r‖, D_s = (ŷ(θ − s∇L) − ŷ(θ))/s (_h2: s/2), s = h "
        "unless it crosses a kink",
        "prop4_err_extrap": "‖2D_(s/2) − D_s + K r‖/‖K r‖ (Richardson: O(s²))",
        "prop4_step": "the probe's step s/h (below 1 where the run's step h crosses a kink)",
        "prop4_flips": "ReLU derivatives that change within the probe's steps s and s/2",
        "kernel_lambda_min": "λ_min(K(t))",
        "sigma_min": "σ_min(Z(t))",
        "dist_A": "‖A(t) − A(0)‖_F (likewise dist_B, dist_U, dist_u)",
        "lemma3_3_2_lhs": "left side of Lemma 3.3.2 (likewise _rhs; lemma3_3_3, lemma3_3_4, "
        "lemma3_3_4_output for Eq. C.6)",
        "eq3_8_lhs": "left side of Eq. (3.8) at initialisation (likewise _rhs; eq3_9)",
    }
    default_checkpoint_every = 50

    def tasks(self, config: GradFlowConfig) -> list[Task]:
        return [
            Task(f"width{n}_h{2**j}", {"width": n, "refine": j})
            for n in config.widths
            for j in (0, 1)
        ]

    def run_task(self, config: GradFlowConfig, task: Task, ctx: TaskContext) -> list[Row]:
        data = get_dataset(
            "sphere", n=config.n_samples, d=config.d, seed=config.data_seed, dtype=torch.float64
        )
        X, y = data.X.to(ctx.device), data.y.to(ctx.device)
        width, refine = int(task.params["width"]), int(task.params["refine"])
        kernel_max = _initial_kernel_max(config, width, X)
        h = config.h_fraction / kernel_max / 2**refine
        flow = MonDEQFlow(build_model(config, width, ctx.device), X, y, h=h)
        steps, every = config.steps * 2**refine, config.probe_every * 2**refine
        resumed = ctx.resume()
        if resumed is not None:
            flow.load_state_dict(resumed[0])
        while flow.step_count <= steps:
            k = flow.step_count
            flow.step(probe=k % every == 0 or k == steps)
            if flow.step_count % ctx.checkpoint_every == 0:
                ctx.checkpoint(flow.state_dict(), [])
            ctx.progress(min(flow.step_count, steps), steps)
        c = mondeq_constants(**flow.initial, Z=flow.Z0, X=X, y=y, m=config.m, radius=config.radii)
        constant: Row = {
            "width": width,
            "refine": refine,
            "h": h,
            "lambda0": c.lambda0,
            "kernel_lambda_max0": kernel_max,
        }
        for key, row in zip(CONDITION_1_KEYS, condition_1(c), strict=True):
            constant.update({f"{key}_lhs": row["lhs"], f"{key}_rhs": row["rhs"]})
        return [
            {**constant, **r, "bound": float(gradient_flow_bound(c, r["t"]))} for r in flow.records
        ]

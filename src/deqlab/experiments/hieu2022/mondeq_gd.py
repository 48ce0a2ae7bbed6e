"""Thesis (Hieu 2022), Chapter 3: full-batch GD on monotone DEQs of several widths.

Setting (Section 3.2.1): ``z* = relu(W z* + U x)``, ``W = (1 − m) I − AᵀA + B − Bᵀ``
(Eq. 3.3), ``ŷ = uᵀz*``, ``L = ½‖ŷ − y‖²`` (Eq. 3.4), GD on θ = (A, B, U, u) with the exact
gradient of the Peaceman–Rachford adjoint, in float64. The thesis has no experiment for
Chapter 3; ours: N points uniform on the sphere of radius √d with N(0, 1) labels
(``deqlab.data``), widths n ≥ N, entries ``A ~ N(0, σ_A²/n)``, ``B ~ N(0, σ_B²/n)``,
``U ~ N(0, σ_U²/d)``, ``u ~ N(0, σ_u²/n)``.

Learning rate (``eta_rule``):

- ``"theorem"``: ``eta_fraction`` times Theorem 3.3.5's bound ``η_max`` at each width;
- ``"stability"``: one η for every width, ``eta_fraction · 2/λ_max(Z(0)ᵀZ(0))`` of the
  widest model (the stability limit of GD on the output layer), as for Ling et al.'s
  Figure 1 — at the defaults hundreds of times ``η_max``, so the theorem does not apply.

The ``theorem`` preset runs inside the theorem's hypotheses: N = 2 points, m = 0.05
(Eq. 3.18 needs m²N < 1/20, here m < 0.158), small A, B, u and a large U (so that ``λ_0``
dominates the ``λ̄``'s), radius 0.1, and ``η = η_max``. It was chosen from the constants
measured at initialisation (its Condition 2 statements show the margins): ``σ_U = 1000``,
``σ_u = 10⁻⁵`` meet Eq. (3.17) also as Proposition 6's proof needs it (ours; its margin
grows like ``σ_U`` and like the width; at ``σ_U = 10`` it needs n ≈ 3·10³).

Metrics: every record of :class:`deqlab.train.mondeq_gd.MonDEQGD` plus ``width``, ``eta``,
``eta_max`` (Theorem 3.3.5), ``lambda0`` and, constant over a task, both sides of each
condition: ``eq3_8_lhs``, ``eq3_8_rhs``, … ``eq3_18_rhs``, and ``kernel_lambda_max0`` /
``gram_lambda_max0``, λ_max of K(0) (Eq. 3.7) and of Z(0)ᵀZ(0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from deqlab.data import get_dataset
from deqlab.experiments.base import Experiment, Row, Task, TaskContext
from deqlab.experiments.constraints import POSITIVE, Interval, OneOf
from deqlab.experiments.deviations import PaperValue, measurement, not_given, paper
from deqlab.experiments.hieu2022 import mondeq_gd_report
from deqlab.experiments.hieu2022.setting import (
    AS_PROVED_KEY,
    CONDITION_KEYS,
    RADII,
    MonDEQSetting,
    build_model,
)
from deqlab.experiments.registry import register
from deqlab.papers import HIEU
from deqlab.papers.hieu2022.mondeq import eq_3_17_as_proved, mondeq_constants, step_size_bound
from deqlab.papers.hieu2022.mondeq_kernel import prediction_kernel
from deqlab.papers.hieu2022.mondeq_lemmas import lemma_columns
from deqlab.papers.hieu2022.mondeq_step import proposition_3
from deqlab.solvers.splitting import ForwardBackward, MonotoneOperator
from deqlab.train.mondeq_gd import MonDEQGD
from deqlab.train.resumable import run_resumable

ETA_RULES = ("theorem", "stability")
_NO_EXPERIMENT = "Chapter 3 has no experiment"
_INIT = (
    "not given: 'concrete discussion on the satisfiability of initial conditions on λ_0 "
    "… under different initialization schemes' is future work (Chapter 5)"
)


@dataclass(frozen=True)
class MonDEQGDConfig(MonDEQSetting):
    """Defaults of our synthetic setting (see the module docstring)."""

    steps: int = 500
    eta_rule: str = "stability"
    eta_fraction: float = 0.5
    loss_rtol: float = 1e-2  # claim: final loss <= loss_rtol · L(0)
    lemma_every: int = 10  # Lemmas 3.3.2–3.3.4 measured every so many steps

    constraints: ClassVar = {
        "steps": Interval(1),
        "eta_rule": OneOf(ETA_RULES),
        "eta_fraction": Interval(0.0, 1.0, "right"),
        "loss_rtol": POSITIVE,
        "lemma_every": Interval(1),
    }


def _lemma_columns(trainer: MonDEQGD, W0: torch.Tensor, Z0: torch.Tensor) -> Row:
    """Both sides of Lemmas 3.3.2–3.3.4 at θ(k) against θ(0) (one more forward solve)."""
    with torch.no_grad():
        Z = trainer.model.equilibrium(trainer.X, trainer.Z)
        W = trainer.model.weight()
    current = {k: p.detach() for k, p in trainer.params.items()}
    return lemma_columns(
        trainer.X, m=trainer.model.m, current=current, initial=trainer.initial, W=(W, W0), Z=(Z, Z0)
    )


def _proposition_3(W: torch.Tensor, m: float) -> Row:
    """Both sides of Proposition 3 at ``W(0)``, at forward-backward's default α = m/L²."""
    alpha = ForwardBackward().step_size(MonotoneOperator(W, m))
    row = proposition_3(W, alpha=alpha, m=m)
    return {"prop3_alpha": alpha, "prop3_lhs": row["lhs"], "prop3_rhs": row["rhs"]}


def _curvature(trainer: MonDEQGD, Z0: torch.Tensor) -> Row:
    """``λ_max(K(0))`` (Eq. 3.7, closed form) and ``λ_max(Z(0)ᵀZ(0))`` (its block of u) at
    initialisation: the step size is stable for the linearised model when ``η·λ_max(K(0)) < 2``
    (Conjecture 1's statement)."""
    K = prediction_kernel(**trainer.initial, Z=Z0, X=trainer.X, m=trainer.model.m)
    return {
        "kernel_lambda_max0": float(torch.linalg.eigvalsh(K["K"])[-1]),
        "gram_lambda_max0": float(torch.linalg.eigvalsh(K["u"])[-1]),
    }


def _learning_rate(config: MonDEQGDConfig, width: int, X: torch.Tensor, y: torch.Tensor) -> float:
    """``eta_fraction`` times Theorem 3.3.5's bound at ``width`` (rule "theorem") or
    times ``2/λ_max(Z(0)ᵀZ(0))`` of the widest model (rule "stability")."""
    model = build_model(
        config, width if config.eta_rule == "theorem" else config.widths[-1], X.device
    )
    with torch.no_grad():
        Z = model.equilibrium(X)
        if config.eta_rule == "stability":
            return config.eta_fraction * 2.0 / float(torch.linalg.eigvalsh(Z.T @ Z)[-1])
        params = dict(model.named_parameters())
        c = mondeq_constants(**params, Z=Z, X=X, y=y, m=config.m, radius=config.radii)
    return config.eta_fraction * step_size_bound(c)


#: What the thesis says about each config field (Chapter 3 has no experiment).
PAPER_SETTING: dict[str, PaperValue] = {
    "n_samples": not_given(f"{_NO_EXPERIMENT}; Lemma 3.3.10 needs n ≥ N"),
    "d": not_given(_NO_EXPERIMENT),
    "widths": not_given("Theorems 3.3.1 and 3.3.5: 'the width of hidden layer is O(N)'"),
    "m": not_given("Eq. (3.3): any m > 0; Eq. (3.18) needs m²N < 1/20 (Lemma 3.3.3)"),
    "steps": not_given(_NO_EXPERIMENT),
    "eta_rule": paper("theorem", "Theorem 3.3.5: η ≤ min{4/λ₀², …}"),
    "eta_fraction": not_given("Theorem 3.3.5 allows any η up to its bound"),
    "radius": not_given("Section 3.3: the radii R_A, R_B, R_U, R_u are free"),
    **dict.fromkeys(
        RADII, not_given("Section 3.3: a ball B(·(0), R_·) per parameter; unset: `radius`")
    ),
    "sigma_A": not_given(_INIT),
    "sigma_B": not_given(_INIT),
    "sigma_U": not_given(_INIT),
    "sigma_u": not_given(_INIT),
    "tol": measurement(),
    "loss_rtol": measurement(),
    "lemma_every": measurement(),
    "seed": measurement(),
    "data_seed": measurement(),
}


@register
class Hieu2022MonDEQGD(Experiment):
    """GD on monotone DEQs against Theorem 3.3.5 (see the module docstring)."""

    slug = "mondeq-gd"
    title = "GD on monotone DEQs of several widths vs Theorem 3.3.5"
    paper = HIEU
    report = mondeq_gd_report
    where = (
        "Chapter 3: Condition 2, Theorem 3.3.5 and Propositions 5–6; no experiment in the thesis"
    )
    Config = MonDEQGDConfig
    presets: ClassVar = {
        "tiny": {"n_samples": 6, "d": 3, "widths": (12, 48), "steps": 25, "loss_rtol": 0.5},
        "quick": {"n_samples": 30, "widths": (30, 60, 120, 240), "steps": 200},
        "theorem": {
            "n_samples": 2,
            "widths": (200, 400),
            "m": 0.05,
            "steps": 10,
            "eta_rule": "theorem",
            "eta_fraction": 1.0,
            "radius": 0.1,
            "sigma_A": 1e-3,
            "sigma_B": 1e-3,
            "sigma_U": 1000.0,
            "sigma_u": 1e-5,
        },
        "theorem-half": {
            "n_samples": 2,
            "widths": (200, 400),
            "m": 0.05,
            "steps": 10,
            "eta_rule": "theorem",
            "eta_fraction": 0.5,
            "radius": 0.1,
            "sigma_A": 1e-3,
            "sigma_B": 1e-3,
            "sigma_U": 1000.0,
            "sigma_u": 1e-5,
        },
        "paper": {},
    }
    paper_setting: ClassVar = PAPER_SETTING
    figure_captions: ClassVar = {
        "mondeq_gd": (
            "Left: the training loss of full-batch GD at each width (solid) and the curve "
            "(1 − ηλ₀²/4)^k L(0) of Theorem 3.3.5, Eq. (3.20) (dashed); middle: σ_min(Z(k))/λ₀ "
            "against Hypothesis 2's 1/2; right: the margin lhs/rhs of Conditions 1–2 at "
            "initialisation against the width (the condition holds above 1)."
        ),
    }
    metric_columns: ClassVar = {
        "width": "hidden width n",
        "eta": "learning rate η (eta_rule)",
        "eta_max": "the step-size bound of Theorem 3.3.5",
        "lambda0": "λ_0 = σ_min(Z(0))",
        "step": "GD step k",
        "loss": "L(θ(k)) = ½‖ŷ − y‖²",
        "loss_bound": "(1 − ηλ_0²/4)^k L(θ(0)), Eq. (3.20)",
        "sigma_min": "σ_min(Z(k))",
        "dist_A": "‖A(k) − A(0)‖_F (likewise dist_B, dist_U, dist_u)",
        "in_balls": "every parameter within radius R of its start (Hypothesis 1 at step k)",
        "sigma_ok": "σ_min(Z(k)) ≥ λ_0/2 (Hypothesis 2 at step k)",
        "loss_ok": "loss <= loss_bound (Hypothesis 3 at step k)",
        "eq3_8_lhs": "left side of Eq. (3.8) at initialisation (likewise _rhs; eq3_9 … eq3_18; "
        "eq3_17_proof: Eq. (3.17) as Proposition 6's proof needs, ours)",
        "kernel_lambda_max0": "λ_max(K(0)), K of Eq. (3.7) at initialisation (gram_lambda_max0: "
        "λ_max(Z(0)ᵀZ(0)), its block of u); η·λ_max(K(0)) < 2 is Conjecture 1's stable step",
        "prop3_lhs": "‖I − α(I − W(0))‖₂ at α = prop3_alpha = m/‖I − W(0)‖₂² (Proposition 3; "
        "prop3_rhs: its bound √(1 − 2αm + α²‖I − W‖₂²))",
        "lemma3_3_8_lhs": "I₁ = ½‖ŷ(k+1) − ŷ(k)‖² of the step k → k+1 (likewise _rhs, its printed "
        "bound; lemma3_3_6, lemma3_3_7_<p>, lemma3_3_9 (I₂), lemma3_3_10 (I₃))",
        "lemma3_3_2_lhs": "left side of Lemma 3.3.2 at every lemma_every-th step (likewise _rhs; "
        "lemma3_3_3, lemma3_3_4 against step 0, lemma3_3_4_output for Eq. C.6)",
    }
    default_checkpoint_every = 50

    def tasks(self, config: MonDEQGDConfig) -> list[Task]:
        return [Task(f"width{n}", {"width": n}) for n in config.widths]

    def run_task(self, config: MonDEQGDConfig, task: Task, ctx: TaskContext) -> list[Row]:
        data = get_dataset(
            "sphere", n=config.n_samples, d=config.d, seed=config.data_seed, dtype=torch.float64
        )
        X, y = data.X.to(ctx.device), data.y.to(ctx.device)
        width = int(task.params["width"])
        eta = _learning_rate(config, width, X, y)
        trainer = MonDEQGD(
            build_model(config, width, ctx.device), X, y, lr=eta, radius=config.radii
        )
        start = (trainer.model.weight().detach(), trainer.Z.clone())  # W(0), Z(0)
        lemmas: list[Row] = []

        def measure_lemmas(k: int) -> None:
            if k % config.lemma_every == 0:
                lemmas.append({"step": k, **_lemma_columns(trainer, *start)})

        run_resumable(trainer, config.steps, ctx, before_step=measure_lemmas, rows=lemmas)
        if not trainer.stopped:
            measure_lemmas(config.steps)
            trainer.evaluate()  # the record of θ(steps)
        constant: Row = {
            "width": width,
            "eta": eta,
            "eta_max": trainer.eta_max,
            "lambda0": trainer.constants.lambda0,
        }
        rows = [*trainer.conditions, eq_3_17_as_proved(trainer.constants)]
        for key, row in zip((*CONDITION_KEYS, AS_PROVED_KEY), rows, strict=True):
            constant.update({f"{key}_lhs": row["lhs"], f"{key}_rhs": row["rhs"]})
        constant.update(_proposition_3(start[0], config.m))
        constant.update(_curvature(trainer, start[1]))
        at_step = {int(r["step"]): r for r in lemmas}
        return [{**constant, **at_step.get(int(r["step"]), {}), **r} for r in trainer.records]

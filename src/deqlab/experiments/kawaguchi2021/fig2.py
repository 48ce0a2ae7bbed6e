"""Kawaguchi (2021), Figure 2 (Section 4): global convergence of DELMs and Corollary 1's bounds.

Data (Section 4, after Zou et al. 2020b): x_i ∈ R^10 standard normal (panel a) or uniform
on [−1, 1] (panel b), y_i = −x_i + 0.1 ς_i, n = 1000; φ(x) = x; square loss
L = Σ_i ‖f(x_i) − y_i‖² (Eq. 5).  Models: DELMs from the identity initialization (A = 0,
B = U₀, so f₀(x) = x) and from three N(0, 1/m) initializations (Appendix D.1's); a linear
ResNet with identity initialization.  All are trained by full-batch GD with the same
step η, the Euler discretization of the gradient flow (Eq. 6).

Panel (c): the trajectory of a random-initialized DELM on the Gaussian data against
Corollary 1's two bounds, with λ_T = 1/(m(1+γ)²) (initialization-independent) and
λ_T = inf_{t≤T} λ_min(D_t) (initialization-dependent), over ``bound_steps`` steps.

The linear ResNet is Zou et al.'s (2020b): f(x) = B(I + W_L)⋯(I + W_1)Ax with fixed input
and output transformations A, B and residual blocks W_l = 0 at the start, trained by the
same full-batch GD (:class:`~deqlab.models.baselines.LinearResNet`).  ``resnet_io`` picks
the transformations: Zou et al.'s modified identity of width d + k (the default), their
Gaussian random transformations, or identity layers (Bartlett et al.'s residual network,
the stand-in of earlier runs).  Kawaguchi does not say which of Zou et al.'s he used.
Each ResNet run records η·λ_max(∇²L(W₀)) at its start: above 2, GD on the loss's
quadratic model at W₀ is unstable, which tells a stall from an unstable step.

The sweep (ours; preset ``sweep``): Section 4 gives no step size, and the ResNet's stall
depends on it.  ``sweep_lrs`` × ``sweep_gammas`` repeats panels (a)–(b) at each η (the
ResNet, which has no γ) and each (η, γ) (the DELMs), ``steps`` steps each; a DELM that
diverges records its step with a non-finite loss.  The statements are in
:mod:`.fig2_report`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from deqlab.data import zou_synthetic
from deqlab.experiments.base import Experiment, Row, Task, TaskContext
from deqlab.experiments.blocks import DELMSynthetic
from deqlab.experiments.constraints import (
    DISTINCT,
    FRACTION,
    NONNEGATIVE,
    POSITIVE,
    Interval,
    OneOf,
    Rule,
)
from deqlab.experiments.deviations import measurement, not_given, paper
from deqlab.experiments.kawaguchi2021 import fig2_report
from deqlab.experiments.kawaguchi2021.fig2_report import sweep_key
from deqlab.experiments.kawaguchi2021.trajectory import (
    log_spaced_steps,
    run_trajectory,
    train_delm_with_bounds,
)
from deqlab.experiments.registry import register
from deqlab.models.baselines import RESNET_IO, LinearResNet
from deqlab.models.delm import DELM
from deqlab.papers import KAWAGUCHI
from deqlab.papers.kawaguchi2021.theory import square_loss, square_loss_optimum
from deqlab.theory.spectra import lanczos_largest
from deqlab.train.delm_gd import DELMGDConfig, DELMGradientDescent
from deqlab.train.divergence import DivergenceError
from deqlab.train.resumable import run_resumable
from deqlab.train.sgd import FullBatchGD

DATA_OF_PANEL = {"a": "gaussian", "b": "uniform", "c": "gaussian"}


@dataclass(frozen=True)
class Fig2Config(DELMSynthetic):
    noise: float = 0.1
    record_every: int = 10
    n_random: int = 3
    resnet_depth: int = 10
    resnet_io: str = "modified_identity"
    resnet_width: int = 0
    bound_steps: int = 100_000
    bound_records: int = 200
    optimum_rtol: float = 1e-4
    epsilon: float = 1e-3
    sweep_lrs: tuple[float, ...] = ()
    sweep_gammas: tuple[float, ...] = ()

    constraints: ClassVar = {
        "noise": NONNEGATIVE,
        "record_every": Interval(1),
        "n_random": Interval(0),
        "resnet_depth": Interval(1),
        "resnet_io": OneOf(RESNET_IO),
        "resnet_width": (
            Interval(0),
            Rule(
                lambda c: c.resnet_io != "modified_identity" or not 0 < c.resnet_width < 2 * c.d,
                lambda c: f"be 0 or >= d + k = {2 * c.d} for the modified identity",
            ),
        ),
        "bound_steps": Interval(1),
        "bound_records": Interval(1),
        "optimum_rtol": POSITIVE,
        "epsilon": FRACTION,
        "sweep_lrs": (
            POSITIVE,
            DISTINCT,
            Rule(
                lambda c: bool(c.sweep_lrs) == bool(c.sweep_gammas),
                "be empty exactly when `sweep_gammas` is (both or neither)",
            ),
        ),
        "sweep_gammas": (FRACTION, DISTINCT),
    }


def _data(config: Fig2Config, panel: str, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    data = zou_synthetic(
        config.n, config.d, inputs=DATA_OF_PANEL[panel], noise=config.noise, seed=config.seed
    )
    return data.X.to(device), data.y.to(device)


def resnet_model(config: Fig2Config, X: torch.Tensor) -> LinearResNet:
    """The linear ResNet of ``config`` (``resnet_width`` 0: the construction's own width)."""
    generator = torch.Generator().manual_seed(config.seed * 1000 + 999)
    return LinearResNet(
        config.d,
        config.d,
        depth=config.resnet_depth,
        io=config.resnet_io,
        width=config.resnet_width or None,
        generator=generator,
        dtype=X.dtype,
    ).to(X.device)


def resnet_sharpness(model: LinearResNet, X: torch.Tensor, Y: torch.Tensor) -> float:
    """λ_max(∇²L) over the blocks at the current W, L = Σ_i ‖f(x_i) − y_i‖².

    Lanczos on exact Hessian-vector products (double backward), so no Hessian is formed.
    """
    params = list(model.parameters())
    grads = torch.autograd.grad(square_loss(model(X), Y), params, create_graph=True)
    flat = torch.cat([g.reshape(-1) for g in grads])

    def hvp(v: np.ndarray) -> np.ndarray:
        u = torch.as_tensor(v, dtype=flat.dtype, device=flat.device)
        parts = torch.autograd.grad(flat, params, grad_outputs=u, retain_graph=True)
        return torch.cat([p.reshape(-1) for p in parts]).detach().cpu().numpy()

    return lanczos_largest(hvp, flat.numel())[0]


def _train_resnet(
    config: Fig2Config, X: torch.Tensor, Y: torch.Tensor, ctx: TaskContext
) -> tuple[list[tuple[int, float]], float]:
    """Full-batch GD on the linear ResNet from W_l = 0: the (step, loss) records and
    η·λ_max(∇²L(W₀)).  A run whose loss becomes non-finite stops there (its last record)."""
    model = resnet_model(config, X)
    step_ratio = config.lr * resnet_sharpness(model, X, Y)
    # square_loss, without its finiteness check (the trainer stops on a non-finite loss)
    trainer = FullBatchGD(model, lambda: ((model(X) - Y) ** 2).sum(), lr=config.lr)
    run_resumable(trainer, config.steps, ctx)
    if not trainer.stopped:
        trainer.evaluate()  # the record of step `steps`
    records = [
        (r["step"], r["loss"])
        for r in trainer.records
        if r["step"] % config.record_every == 0
        or r["step"] == config.steps
        or not math.isfinite(r["loss"])
    ]
    return records, step_ratio


#: What Section 4 and Figure 2 use, field by field (the ResNet construction a substitute).
PAPER_SETTING = {
    "n": paper(1000, "Section 4"),
    "d": paper(10, "Section 4: x_i ∈ R^10, m = 10"),
    "noise": paper(0.1, "Section 4: y_i = −x_i + 0.1ς_i"),
    "gamma": not_given("Section 4 gives none; 0.8 is Appendix D.1's value for Figure 1"),
    "lr": not_given("Section 4 gives no step size (Corollary 1 is for the gradient flow)"),
    "steps": paper(2000, "Figure 2 (a)–(b): 2000 iterations"),
    "record_every": measurement(),
    "n_random": paper(3, "Figure 2 caption: three random trials"),
    "resnet_depth": not_given("Section 4 gives no depth of the linear ResNet"),
    "resnet_io": paper(
        "modified_identity",
        "Section 4 (after Zou et al. 2020b); Section 5: their input and output layers "
        "represent special transformations fixed during training (which of Zou et al.'s "
        "is not said: modified identity or Gaussian; identity layers are not theirs)",
        substitute=True,
    ),
    "resnet_width": not_given(
        "neither paper gives Figure 2's width; 0 = the construction's own: d + k (Zou et "
        "al.: sufficient for the modified identity), d for identity layers"
    ),
    "bound_steps": paper(100_000, "Figure 2 (c): 10⁵ iterations"),
    "bound_records": measurement(),
    "optimum_rtol": not_given("no tolerance for reaching the global minimum (ours)"),
    "epsilon": not_given("Eq. (10) holds for every ε > 0; ours: ε as a fraction of L₀ − L*"),
    "seed": not_given(),
    "sweep_lrs": measurement(),
    "sweep_gammas": measurement(),
}

#: The tests' preset: seconds on one core.
TINY = {
    "n": 40,
    "d": 3,
    "gamma": 0.5,
    "lr": 2.5e-3,
    "steps": 150,
    "n_random": 1,
    "resnet_depth": 3,
    "bound_steps": 60,
    "bound_records": 12,
    "optimum_rtol": 1e-3,
}
#: The sweep of ``sweep`` (ours): η around the ResNet's window (≈ 9e-5 to 1.2e-4 on these
#: data), at Appendix D.1's γ = 0.8 and at 0.5.
SWEEP = {"sweep_lrs": (1e-5, 3e-5, 6e-5, 9e-5, 1.2e-4, 1.5e-4), "sweep_gammas": (0.5, 0.8)}


@register
class Kawaguchi2021Fig2(Experiment):
    """DELMs vs a linear ResNet (panels a, b) and Corollary 1 on every DELM trajectory (c)."""

    slug = "fig2"
    title = "DELM vs linear ResNet: global convergence and Corollary 1's bounds (Figure 2)"
    paper = KAWAGUCHI
    report = fig2_report
    where = "Figure 2"
    Config = Fig2Config
    presets: ClassVar = {
        "tiny": TINY,
        "quick": {"bound_steps": 10_000, "bound_records": 60},
        "paper": {},
        "sweep": {"bound_steps": 10_000, "bound_records": 60, **SWEEP},
        "tiny-sweep": {**TINY, "sweep_lrs": (2.5e-3, 0.2), "sweep_gammas": (0.5,)},
    }
    paper_setting: ClassVar = PAPER_SETTING
    figure_captions: ClassVar = {
        "fig2_sweep": "Final relative gap (L − L*)/L* after the configured steps against the "
        "step size η, for the linear ResNet and the worst DELM at each γ, on Gaussian (a) and "
        "uniform (b) inputs; a diverged run is drawn at the top with a cross.",
        "fig2": "Training loss of DELMs (identity and three random initializations) and of "
        "Zou et al.'s linear ResNet on Gaussian (a) and uniform (b) inputs, and (c) a "
        "random-initialized DELM's trajectory on the Gaussian data under Corollary 1's "
        "bounds with the initialization-independent and -dependent λ_T; the subtitle "
        "gives n, d, γ, η and the ResNet's construction.",
    }
    metric_columns: ClassVar = {
        "panel": "a: Gaussian inputs, b: uniform inputs, c: trajectory with bounds",
        "model": "DELM or LinearResNet",
        "init": "identity or randomK",
        "step": "GD iteration (flow time = step · lr)",
        "loss": "training loss Σ_i ‖f(x_i) − y_i‖²",
        "loss_star": "global minimum value L* (least squares, Corollary 1)",
        "lambda_min": "λ_min(D_t) (Eq. 8)",
        "lambda_T": "min over the steps so far of λ_min(D_t)",
        "bound_independent": "Corollary 1 with λ_T = 1/(m(1+γ)²)",
        "bound_dependent": "Corollary 1 with λ_T = min_t λ_min(D_t)",
        "b_norm1": "‖B_t‖₁ (largest column 1-norm of B)",
        "rank_ratio": "σ_min(n,m)(Φ)/σ_1(Φ) (Corollary 1's rank hypothesis)",
        "rank_tol": "max(n, m)·ε, below which the ratio counts as rank-deficient",
        "pl_ratio": "½‖∇L₀(Z₀)‖²/(κ(L₀(Z₀) − L*)) at the initial predictor (Definition 1)",
        "sharpness_start": "λ_max(∇²L) at the first parameters",
        "sharpness_end": "λ_max(∇²L) at the last parameters",
        "kappa": "Corollary 1's PL constant κ = 2σ_min(Φ)²",
        "step_sharpness": "η·λ_max(∇²L(W₀)) of the linear ResNet at its start (> 2: GD "
        "unstable there)",
        "sweep_lr": "the sweep's step size η (sweep rows only)",
        "sweep_gamma": "the sweep's γ (sweep rows of DELMs only)",
    }
    default_checkpoint_every = 500

    def tasks(self, config: Fig2Config) -> list[Task]:
        inits = ["identity"] + [f"random{k}" for k in range(1, config.n_random + 1)]
        tasks = [
            Task(f"{panel}-delm-{init}", {"panel": panel, "model": "DELM", "init": init})
            for panel in ("a", "b")
            for init in inits
        ]
        tasks += [
            Task(f"{panel}-resnet", {"panel": panel, "model": "LinearResNet", "init": "identity"})
            for panel in ("a", "b")
        ]
        tasks.append(Task("c-delm-random1", {"panel": "c", "model": "DELM", "init": "random1"}))
        return tasks + self._sweep_tasks(config, inits)

    def _sweep_tasks(self, config: Fig2Config, inits: list[str]) -> list[Task]:
        tasks = []
        for lr in config.sweep_lrs:
            tasks += [
                Task(
                    f"{sweep_key(lr)}-{panel}-resnet",
                    {"panel": panel, "model": "LinearResNet", "init": "identity", "sweep_lr": lr},
                )
                for panel in ("a", "b")
            ]
            tasks += [
                Task(
                    f"{sweep_key(lr, gamma)}-{panel}-delm-{init}",
                    {
                        "panel": panel,
                        "model": "DELM",
                        "init": init,
                        "sweep_lr": lr,
                        "sweep_gamma": gamma,
                    },
                )
                for gamma in config.sweep_gammas
                for panel in ("a", "b")
                for init in inits
            ]
        return tasks

    def run_task(self, config: Fig2Config, task: Task, ctx: TaskContext) -> list[Row]:
        panel, model_name, init = (str(task.params[k]) for k in ("panel", "model", "init"))
        X, Y = _data(config, panel, ctx.device)
        base: Row = {"task": task.key, "panel": panel, "model": model_name, "init": init}
        if "sweep_lr" in task.params:
            return _sweep_task(config, task, X, Y, ctx, base)
        if model_name == "LinearResNet":
            return _resnet_rows(config, X, Y, ctx, base)
        model = _delm(config, init, X)
        if panel == "c":
            gd = DELMGDConfig(lr=config.lr, record_every=10**12)
            trainer = DELMGradientDescent(model, X, Y, gd)
            targets = log_spaced_steps(config.bound_steps, config.bound_records)
        else:
            gd = DELMGDConfig(lr=config.lr, record_every=config.record_every)
            trainer = DELMGradientDescent(model, X, Y, gd)
            targets = _chunks(config.steps, ctx)
        return run_trajectory(trainer, targets, ctx, base)


def _loss_star(X: torch.Tensor, Y: torch.Tensor) -> float:
    return float(square_loss_optimum(X, Y)[1])


def _resnet_rows(
    config: Fig2Config, X: torch.Tensor, Y: torch.Tensor, ctx: TaskContext, base: Row
) -> list[Row]:
    """The linear ResNet trained at ``config.lr`` (:func:`_train_resnet`): one row per
    recorded step, with L* and the step's η·λ_max."""
    loss_star = _loss_star(X, Y)
    records, step_ratio = _train_resnet(config, X, Y, ctx)
    return [
        {**base, "step": step, "loss": loss, "loss_star": loss_star, "step_sharpness": step_ratio}
        for step, loss in records
    ]


def _delm(config: Fig2Config, init: str, X: torch.Tensor) -> DELM:
    """The DELM of ``init``: identity (A = 0, B = U₀) or randomK (seeded by K)."""
    trial = 0 if init == "identity" else int(init.removeprefix("random"))
    generator = torch.Generator().manual_seed(config.seed * 1000 + trial)
    return DELM(
        config.d,
        config.d,
        gamma=config.gamma,
        generator=generator,
        dtype=X.dtype,
        init="identity" if init == "identity" else "normal",
    ).to(X.device)


def _chunks(steps: int, ctx: TaskContext) -> list[int]:
    """0, the checkpoint steps, and ``steps``: the recorded steps of a panel (a)–(b) run."""
    chunk = max(ctx.checkpoint_every, 1)
    return [0, *range(chunk, steps, chunk), steps]


def _sweep_task(
    config: Fig2Config, task: Task, X: torch.Tensor, Y: torch.Tensor, ctx: TaskContext, base: Row
) -> list[Row]:
    """One sweep point: the panel's ResNet at η, or a DELM at (η, γ) recorded at the chunk
    steps; a DELM that diverges ends with a row of its step and a non-finite loss."""
    lr = float(task.params["sweep_lr"])
    base = {**base, "sweep_lr": lr}
    if base["model"] == "LinearResNet":
        return _resnet_rows(dataclasses.replace(config, lr=lr), X, Y, ctx, base)
    gamma = float(task.params["sweep_gamma"])
    model = _delm(dataclasses.replace(config, gamma=gamma), str(base["init"]), X)
    trainer = DELMGradientDescent(model, X, Y, DELMGDConfig(lr=lr, record_every=10**12))
    records = []
    try:
        train_delm_with_bounds(trainer, _chunks(config.steps, ctx), ctx)
    except DivergenceError:
        records = [{"step": trainer.step_count, "loss": math.inf}]
    return [
        {
            **base,
            "sweep_gamma": gamma,
            "step": r["step"],
            "loss": r["loss"],
            "loss_star": trainer.loss_star,
        }
        for r in [*trainer.records, *records]
    ]

"""Figure 1 of Ling et al. (2023): full-batch GD on the ReLU DEQ for several widths m.

Setting (Section 5): ``Z = relu(W Z + U X)``, ``ŷ = aᵀZ``, Φ = ½‖ŷ − y‖² (Eq. (2)),
Assumption 1 initialization with σ_w² = 0.08, inputs scaled to ‖x_i‖ = √d (Assumption 2);
data: n points uniform on the sphere of radius √d with N(0, 1) labels, and 500 + 500
images of classes 0/1 of MNIST and CIFAR-10 (any data set of ``deqlab.data.get_dataset``
may be named).  Image labels: the text gives none; ``image_labels`` = ``"class"`` (ours,
the default: ±1 by class) or ``"uniform"`` (U[0, 1), the authors' official code), a
deviation the report lists.

Learning rate. Eq. (10) bounds η by a quantity of order 1/(m n) that leaves the loss
unchanged for thousands of steps, so — like the paper's experiments, which do not use it —
the default ``eta_rule = "curvature"`` takes one η for every width of a data set:
``η = eta_fraction · 2 / λ_max(G_w(0))`` with ``G_w(0) = Z(0)ᵀZ(0)`` of the *widest* model
at initialization. ``G`` is the first of the three terms of the NTK Gram ``H`` (Section
2.3), so this is the classical stability limit 2/λ_max of GD on the linearized model up
to ``eta_fraction``; a fixed η across widths is what makes "wider is faster" a statement
about m alone. ``eta_rule = "theorem1"`` uses, for each width, the theory helper's η
(:func:`deqlab.papers.ling2023.theory.learning_rate`, ``eta_fraction`` × Eq. (10)); ``eta`` sets
η directly. Condition 1 and Eq. (10) are evaluated at initialization either way
(:func:`deqlab.papers.ling2023.theory.condition1`, with the δ that makes Condition 1 easiest).

The PL Gram of Section 2.3. At the steps where both λ_τ (``metrics_every``) and ‖W(τ)‖₂
(``spectral_every``) are measured — every lcm of the two, and step 0 — the run also forms
H(τ) = H1 + H2 + H3 of Eq. (4) from the exact implicit Jacobian at θ_τ
(:func:`deqlab.theory.ntk.pl_gram`, solved from zero to ``tol``) and records λ_min(H(τ));
at the quick preset these cold solves add 15–21 % to the GD loop of the widest width. The
trainer's ‖∇_θΦ(τ)‖ and λ_τ come from its own solves, so Eqs. (4)–(5) compare two
computations.

Tasks: one per (data set, width). Metrics (``metrics.csv``): every record of
:class:`deqlab.train.relu_deq.GDTrainer` (step, loss, lambda_min, grad_norm, W_norm, W_norm_bound,
…), ``H_lambda_min`` = λ_min(H(τ)) (NaN where not formed), plus ``dataset``, ``n``, ``d``,
``m``, ``eta`` and, constant over a task, every field of
:meth:`deqlab.papers.ling2023.theory.Condition1.as_dict` prefixed ``cond1_`` (``cond1_holds``,
``cond1_eq7_lhs``, …, ``cond1_lr_bound`` = Eq. (10)). Statements and figures:
:mod:`~deqlab.experiments.ling2023.fig1_report`.

Fixed by construction, not by the config (as in the paper): Assumption 1 initialization
(:meth:`deqlab.models.relu_deq.ReLUDEQ.init`), the quadratic loss Φ = ½‖ŷ − y‖² and
full-batch GD (:class:`deqlab.train.relu_deq.GDTrainer`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch

from deqlab.data import get_dataset
from deqlab.data.registry import DATASETS
from deqlab.experiments.base import Experiment, Row, Task, TaskContext
from deqlab.experiments.constraints import (
    DISTINCT,
    FRACTION,
    INCREASING,
    NONEMPTY,
    NONNEGATIVE,
    POSITIVE,
    SEED,
    Config,
    Interval,
    OneOf,
)
from deqlab.experiments.deviations import measurement, not_given
from deqlab.experiments.deviations import paper as paper_value
from deqlab.experiments.ling2023 import fig1_report
from deqlab.experiments.registry import register
from deqlab.models.relu_deq import ReLUDEQ
from deqlab.papers import LING
from deqlab.papers.ling2023.theory import Condition1, condition1, learning_rate, pl_gram_lambda_min
from deqlab.train.relu_deq import GDConfig, GDTrainer
from deqlab.train.resumable import run_resumable

DTYPES = {"float64": torch.float64, "float32": torch.float32}
ETA_RULES = ("curvature", "theorem1")
IMAGE_LABELS = ("class", "uniform", "gaussian")


@dataclass(frozen=True)
class Fig1Config(Config):
    """Defaults: the paper's Section 5 (n = d = 1000, σ_w² = 0.08, three data sets)."""

    datasets: tuple[str, ...] = ("sphere", "mnist", "cifar10")
    n: int = 1000
    d: int = 1000  # input dimension of the synthetic sphere (image data sets fix their own)
    widths: tuple[int, ...] = (1000, 2000, 4000, 8000)  # the text gives none; m ≥ n for λ_0 > 0
    sigma_w2: float = 0.08
    steps: int = 1000  # not given in the text either
    eta_rule: str = "curvature"
    eta_fraction: float = 0.5
    eta: float | None = None
    seed: int = 0  # initialization (Assumption 1)
    data_seed: int = 0  # sphere points and labels; image subset
    tol: float = 1e-6  # relative residual of the forward and adjoint solves
    metrics_every: int = 1  # λ_τ, ‖∇Φ‖, ‖θ − θ(0)‖ every k steps
    spectral_every: int = 10  # ‖W‖₂ by Lanczos every k steps (a certified bound between)
    dtype: str = "float64"
    image_labels: str = "class"  # ±1 by class; "uniform": U[0, 1), the authors' code

    constraints: ClassVar = {
        "datasets": (NONEMPTY, OneOf(DATASETS), DISTINCT),
        "n": Interval(2),
        "d": Interval(1),
        "widths": (NONEMPTY, Interval(1), INCREASING),
        "sigma_w2": Interval(0.0, 1.0, "left"),
        "steps": Interval(1),
        "eta_rule": OneOf(ETA_RULES),
        "eta_fraction": FRACTION,
        "eta": POSITIVE,
        "seed": SEED,
        "data_seed": SEED,
        "tol": POSITIVE,
        "metrics_every": NONNEGATIVE,
        "spectral_every": NONNEGATIVE,
        "dtype": OneOf(DTYPES),
        "image_labels": OneOf(IMAGE_LABELS),
    }


@register
class Ling2023Fig1(Experiment):
    """Width sweep of Figure 1 with the Theorem 1 checks (see the module docstring)."""

    slug = "fig1"
    title = "Figure 1: GD on over-parameterized ReLU DEQs of several widths"
    paper = LING
    report = fig1_report
    where = "Figure 1, Theorem 1"
    Config = Fig1Config
    presets: ClassVar = {
        "tiny": {
            "datasets": ("sphere",),
            "n": 8,
            "d": 8,
            "widths": (32, 128),
            "steps": 30,
            "spectral_every": 5,
        },
        # ~2 min on 2 cores: panel (a) and, for the image panels, the bundled digits 0/1
        "quick": {
            "datasets": ("sphere", "digits"),
            "n": 100,
            "d": 100,
            "widths": (200, 400, 800, 1600),
            "steps": 300,
            "metrics_every": 2,
        },
        "paper": {},
    }
    metric_columns: ClassVar = {
        "dataset": "data set name",
        "n": "number of training points",
        "d": "input dimension",
        "m": "width",
        "eta": "learning rate η",
        "step": "GD step τ",
        "loss": "Φ(τ) = ½‖ŷ − y‖²",
        "lambda_min": "λ_τ = λ_min(Z(τ)ᵀZ(τ))",
        "grad_norm": "‖∇_θΦ(τ)‖ (the trainer's exact implicit gradient, with λ_τ)",
        "H_lambda_min": "λ_min(H(τ)), H = H1 + H2 + H3 of Eq. (4) (at step 0 and every lcm of "
        "metrics_every and spectral_every steps)",
        "W_norm": "‖W(τ)‖₂ (Lanczos, every spectral_every steps)",
        "W_norm_bound": "upper bound of ‖W(τ)‖₂ at every step (Weyl)",
        "cond1_holds": "Condition 1 (Eqs. 7–9) holds at initialization",
        "cond1_eq7_lhs": "λ_0, left side of Eq. (7) (likewise eq8/eq9, _lhs/_rhs/_holds)",
        "cond1_delta": "the δ that makes Condition 1 easiest (deqlab.papers.ling2023.theory)",
        "cond1_lambda0": "λ_0 (likewise cond1_W_norm, _U_norm, _a_norm, _X_fro, _residual_norm)",
        "cond1_lr_bound": "the learning-rate bound of Eq. (10)",
    }
    paper_setting: ClassVar = {
        "datasets": paper_value(
            ("sphere", "mnist", "cifar10"),
            "Section 5, Figure 1 (a)–(c); MNIST and CIFAR-10: 500 images each of classes 0, 1",
            substitute=True,
        ),
        "n": paper_value(1000, "Section 5"),
        "d": paper_value(1000, "Section 5 (synthetic data: the sphere of radius √d in R^d)"),
        "widths": not_given("Figure 1 compares 'different widths' without their values"),
        "sigma_w2": paper_value(0.08, "Section 5 (Assumption 1: σ_w² < 1/8)"),
        "steps": not_given("Figure 1"),
        "eta_rule": not_given("Section 5 gives no learning rate (Theorem 1 asks for Eq. (10))"),
        "eta_fraction": not_given("Section 5"),
        "eta": not_given("Section 5"),
        "seed": not_given("Assumption 1 gives the distribution, not the draw"),
        "data_seed": not_given("Section 5 samples the data at random"),
        "tol": measurement(),
        "metrics_every": measurement(),
        "spectral_every": measurement(),
        "dtype": measurement(),
        "image_labels": paper_value(
            "uniform",
            "not in the text (Section 5: 500 images each of classes 0 and 1; Assumption 2 "
            "(ii): |y_i| = O(1)); the authors' official code draws y_i ~ U[0, 1); ours: ±1 by "
            "class (image data sets only; the sphere's labels are N(0, 1) as Section 5 says)",
        ),
    }
    figure_captions: ClassVar = {
        "loss": "Training loss Φ(τ) of full-batch gradient descent against the step τ, one "
        "line per width m and one panel per data set, as in Figure 1 of Ling et al. (2023); "
        "the subtitles give n, d, σ_w² and the learning rate η.",
        "w_norm": "Distance 1 − ‖W(τ)‖₂ of the weight matrix's spectral norm from 1 on a log "
        "axis (the equilibrium is unique while it is positive, Theorem 1 (i)), one line per "
        "width; the subtitles give the setting.",
        "lambda_ratio": "Least eigenvalue λ_τ of the Gram matrix Z(τ)ᵀZ(τ) relative to its "
        "initial value λ_0, one line per width, with Theorem 1 (ii)'s floor 1/2 dashed; the "
        "subtitles give the setting.",
    }
    default_checkpoint_every = 100  # a checkpoint holds ~3 m×m matrices: 1.5 GB at m = 8000

    def tasks(self, config: Fig1Config) -> list[Task]:
        return [
            Task(f"{name}-m{m}", {"dataset": name, "m": m})
            for name in config.datasets
            for m in config.widths
        ]

    def run_task(self, config: Fig1Config, task: Task, ctx: TaskContext) -> list[Row]:
        dtype, device = DTYPES[config.dtype], torch.device(ctx.device)
        name, m = str(task.params["dataset"]), int(task.params["m"])
        data = _load(config, name, dtype, device)
        model = ReLUDEQ.init(
            data.d, m, sigma_w2=config.sigma_w2, seed=config.seed, dtype=dtype, device=device
        )
        cond = condition1(model, data.X, data.y, tol=config.tol)
        eta = _learning_rate(config, data, cond, dtype, device)
        trainer = GDTrainer(
            model,
            data.X,
            data.y,
            GDConfig(
                lr=eta,
                tol=config.tol,
                metrics_every=config.metrics_every,
                spectral_every=config.spectral_every,
            ),
        )
        measured: list[Row] = []  # λ_min(H(τ)) at θ_τ, kept in the checkpoints' rows
        every = pl_gram_every(config)

        def before_step(tau: int) -> None:
            if tau == 0 or (every > 0 and tau % every == 0):
                value = pl_gram_lambda_min(model, data.X, config.tol)
                measured.append({"step": tau, "H_lambda_min": value})

        run_resumable(trainer, config.steps, ctx, before_step=before_step, rows=measured)
        gram = {int(r["step"]): float(r["H_lambda_min"]) for r in measured}
        initial = {f"cond1_{key}": value for key, value in cond.as_dict().items()}
        constant = {
            "dataset": name,
            "n": data.X.shape[1],
            "d": data.d,
            "m": m,
            "eta": eta,
            **initial,
        }
        return [
            {**constant, **record, "H_lambda_min": gram.get(record["step"], math.nan)}
            for record in trainer.records
        ]


def pl_gram_every(config: Fig1Config) -> int:
    """Steps between two H(τ): the lcm of ``metrics_every`` and ``spectral_every`` (0: step 0
    only, as either cadence then measures nothing after the start)."""
    if config.metrics_every == 0 or config.spectral_every == 0:
        return 0
    return math.lcm(config.metrics_every, config.spectral_every)


def _load(config: Fig1Config, name: str, dtype: torch.dtype, device: torch.device):
    sizes = {"n": config.n, "d": config.d} if name == "sphere" else {"n": config.n}
    labels = {} if name == "sphere" else {"labels": config.image_labels}
    return get_dataset(name, **sizes, **labels, seed=config.data_seed, dtype=dtype, device=device)


def _learning_rate(config, data, cond: Condition1, dtype, device) -> float:
    """η of the module docstring: ``eta``, else the curvature or the Theorem 1 rule."""
    if config.eta is not None:
        return config.eta
    if config.eta_rule == "theorem1":
        return learning_rate(cond, config.eta_fraction)
    widest = ReLUDEQ.init(
        data.d,
        config.widths[-1],
        sigma_w2=config.sigma_w2,
        seed=config.seed,
        dtype=dtype,
        device=device,
    )
    Z = widest.equilibrium(data.X, tol=config.tol).raise_if_failed("forward").Z  # (m, n)
    Z64 = Z.to(torch.float64)
    lambda_max = float(torch.linalg.eigvalsh(Z64.T @ Z64)[-1])
    return config.eta_fraction * 2.0 / lambda_max

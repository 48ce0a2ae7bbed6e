"""The initialization theorems of Ling et al. (2023) measured next to the theory.

For inputs X (d, n) of a data set (default: n = 200 points on the sphere of radius √d in
R^200) and ReLU DEQs ``Z = relu(W Z + U X)`` drawn by Assumption 1 with σ_w² = 0.08 over
widths m and seeds, :mod:`deqlab.papers.ling2023.init_theorems` measures

* Assumption 2 (i) on the inputs: ‖x_i‖₂ = √d and no two inputs parallel;
* Lemma 1: ‖W(0)‖₂ against 2√2 σ_w;
* Theorem 3: ‖K − K^(l)‖_F against the depth l (rate σ_w^{2l}; deterministic), and
  λ* = λ_min(K) > 0 (part (ii));
* Theorem 4: ‖G − G^(l)‖_F / m against l (rate (2√2 σ_w)^l), G^(l) from l weight-tied layers;
* Theorem 5: ‖G^(l)/m − K^(l)‖_F against n (2√2 σ_w)^l, and ‖G/m − K‖_F against m (the
  concentration of the proof of Theorem 2; fitted log-log slope ≈ −1/2);
* Theorem 2: λ_0 = λ_min(G) against m λ*/2, as the fraction of seeds where it holds;
* Section 3.2: ‖U(0)‖₂ against √(m/d) and the initial loss Φ(0)/n (the data set's labels),
  the bounds that feed the width Condition 1 needs.

Tasks: ``theorem3`` (the inputs and the population kernels alone) and one per (width, seed),
``m<m>-s<seed>``, each drawing its own network (seed = the Assumption 1 seed). Every
quantity is computed in float64: in float32, round-off would floor the depth decays of
Theorems 3 and 4 after a few layers. Metrics (``metrics.csv``): the tidy rows of
:data:`deqlab.papers.ling2023.init_theorems.ROW_KEYS`; statements:
:mod:`deqlab.experiments.ling2023.init_report`, the figure: :mod:`.init_figure`.

The paper runs no experiment at initialization: its setting here is that of Section 5's
synthetic data (the sphere, n = d = 1000, σ_w² = 0.08), the preset ``paper``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from deqlab.data import get_dataset
from deqlab.data.registry import DATASETS
from deqlab.experiments.base import Experiment, Row, Task, TaskContext
from deqlab.experiments.constraints import (
    FRACTION,
    INCREASING,
    NONEMPTY,
    POSITIVE,
    SEED,
    Config,
    Interval,
    OneOf,
)
from deqlab.experiments.deviations import measurement, not_given
from deqlab.experiments.deviations import paper as paper_value
from deqlab.experiments.ling2023 import init_report
from deqlab.experiments.registry import register
from deqlab.papers import LING
from deqlab.papers.ling2023.init_theorems import (
    measure_assumption2,
    measure_theorem3,
    measure_width_sweep,
)

THEOREM3_TASK = "theorem3"


@dataclass(frozen=True)
class InitConfig(Config):
    """Defaults: issue #5's setting (sphere, n = d = 200, σ_w² = 0.08, m = 256 … 8192)."""

    dataset: str = "sphere"
    n: int = 200
    d: int = 200  # input dimension of the synthetic sphere (image data sets fix their own)
    sigma_w2: float = 0.08
    widths: tuple[int, ...] = (256, 512, 1024, 2048, 4096, 8192)
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)  # Assumption 1 draws, one network each
    depths: tuple[int, ...] = tuple(range(1, 13))  # l of K^(l) and of G^(l)
    data_seed: int = 0
    tol: float = 1e-12  # relative residual of the equilibrium solve

    constraints: ClassVar = {
        "dataset": OneOf(DATASETS),
        "n": Interval(2),
        "d": Interval(1),
        "sigma_w2": FRACTION,
        "widths": (NONEMPTY, Interval(1), INCREASING),
        "seeds": (NONEMPTY, SEED, INCREASING),
        "depths": (NONEMPTY, Interval(1), INCREASING),
        "data_seed": SEED,
        "tol": POSITIVE,
    }


@register
class Ling2023Init(Experiment):
    """Lemma 1 and Theorems 2–5 at initialization (see the module docstring)."""

    slug = "init"
    title = "Initialization theorems: ‖W(0)‖₂, K^(l) → K, G^(l) → G, G/m → K, λ_0 ≥ mλ*/2"
    paper = LING
    report = init_report
    where = "Lemma 1, Theorems 2–5"
    Config = InitConfig
    presets: ClassVar = {
        "tiny": {
            "n": 12,
            "d": 12,
            "widths": (64, 128, 256),
            "seeds": (0, 1),
            "depths": (1, 2, 3, 4, 5, 6),
        },
        "quick": {"seeds": (0, 1, 2)},  # ~2.5 min with --workers 2 on 2 CPU cores
        "paper": {"n": 1000, "d": 1000},
    }
    metric_columns: ClassVar = {
        "theorem": "lemma1, theorem2, theorem3, theorem4 or theorem5",
        "quantity": "W_spectral_norm, K_minus_Kl_fro, G_minus_Gl_fro_over_m, "
        "Gl_over_m_minus_Kl_fro, G_over_m_minus_K_fro or lambda0",
        "m": "width (empty for Theorem 3, which has no network)",
        "seed": "Assumption 1 seed (empty for Theorem 3)",
        "depth": "l of K^(l) / G^(l) (empty where no depth applies)",
        "measured": "the measured value",
        "theory": "the theory's value: bound, rate or threshold (module docstring)",
    }
    paper_setting: ClassVar = {
        "dataset": paper_value(
            "sphere",
            "Section 5 (synthetic data); no experiment of the paper measures initialization",
        ),
        "n": paper_value(1000, "Section 5"),
        "d": paper_value(1000, "Section 5"),
        "sigma_w2": paper_value(0.08, "Section 5 (Assumption 1: σ_w² < 1/8)"),
        "widths": not_given("Theorems 2–5 hold for m large enough"),
        "seeds": not_given("Assumption 1 gives the distribution, not the draws"),
        "depths": not_given("Theorems 3–5 hold for every depth l"),
        "data_seed": not_given("Section 5 samples the sphere at random"),
        "tol": measurement(),
    }
    figure_captions: ClassVar = {
        "init_theorems": "Lemma 1 and Theorems 2–5 at initialization: ‖W(0)‖₂ against its "
        "bound, the depth decays of ‖K − K^(l)‖_F, ‖G − G^(l)‖_F/m and ‖G^(l)/m − K^(l)‖_F "
        "against the theorems' rates, the concentration of G/m around K and λ_0 against "
        "mλ*/2 over the widths; the subtitle gives the data set, n, d and σ_w².",
    }

    def tasks(self, config: InitConfig) -> list[Task]:
        return [Task(THEOREM3_TASK, {})] + [
            Task(f"m{m}-s{seed}", {"m": m, "seed": seed})
            for m in config.widths
            for seed in config.seeds
        ]

    def run_task(self, config: InitConfig, task: Task, ctx: TaskContext) -> list[Row]:
        X, y = _data(config, torch.device(ctx.device))  # (d, n), (n,)
        if task.key == THEOREM3_TASK:
            rows = measure_assumption2(X) + measure_theorem3(X, config.sigma_w2, config.depths)
        else:
            m, seed = int(task.params["m"]), int(task.params["seed"])
            rows = measure_width_sweep(
                X, config.sigma_w2, [m], [seed], config.depths, y=y, tol=config.tol
            )
        ctx.progress(1, 1)  # one indivisible measurement: the executor checkpoints its rows
        return rows


def _data(config: InitConfig, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The data set's inputs X (d, n) and labels y (n,) in float64 on ``device``."""
    sizes = {"n": config.n, "d": config.d} if config.dataset == "sphere" else {"n": config.n}
    data = get_dataset(config.dataset, **sizes, seed=config.data_seed, device=device)
    return data.X, data.y

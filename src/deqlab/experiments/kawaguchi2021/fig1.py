"""Kawaguchi (2021), Figure 1 (Section 2.2, Appendix D.1) and Figures 4–8 (Appendix D.2):
DELMs vs linear models vs DNNs on teacher-generated targets.  The paper's observations,
not theorems.

Presets ``fig4``–``fig8`` repeat Figure 1 as Appendix D.2 does (``figure`` says which
figure the statements and the deviations refer to): Figure 4 on MNIST, SVHN, SEMEION and
Fashion-MNIST; Figure 5 with DNNs without bias terms; Figures 6 (no bias) and 7 (bias) with
deeper DNNs, H = 10, 100, 200; Figure 8 on every image of each data set (``n_train =
n_test = 0``) for 100 epochs and three trials; Figures 5–8 on all seven data sets.

Data (Appendix D.1): 100 training images (train split) and 100 test images (test split; a
disjoint half of one draw for the single-split ``digits`` and ``semeion``), projected to
m_x = 150 by a fixed R with entries N(0, 1/m_x): x = R x_pre (pixels in [0, 1]).  Targets
come from a teacher DELM: y = B* z*(x; A*) + δ, γ = 0.8, entries of A* (m×m) and B* (1×m)
N(0, 1), δ ~ N(0, 1).  φ(x) = x, so m = m_x.

Models: DELM (γ = 0.8, A and B entries N(0, 1/m)); the linear model W₀ = B₀ U₀⁻¹ equal to
that DELM at initialization; ReLU DNNs of depth H ∈ {2, 3, 4} (entries N(0, 1/m), with
bias terms unless ``dnn_bias=false``, Appendix D.2).  Training: SGD, minibatch 64,
momentum 0.8, square loss (minibatch mean of (q − y)²; the reported losses are the mean
over the train / test set), for every learning rate of
S_LR = {0.01, 0.005, 0.001, 0.0005, 0.0001, 0.00005}, over several trials (initialization
and minibatch order).  A run whose loss becomes non-finite is stopped and counted as
diverged.

Each row records rank(Φ_train).  The data (the paper's data sets, the stand-in for those
not on this machine, the projected images and teacher targets) are in :mod:`.fig1_data`;
the statements and the figure in :mod:`.fig1_report`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import ClassVar

import torch

from deqlab.experiments.base import Experiment, Row, Task, TaskContext
from deqlab.experiments.constraints import (
    DISTINCT,
    FRACTION,
    NONEMPTY,
    POSITIVE,
    SEED,
    Config,
    Interval,
    OneOf,
    Rule,
)
from deqlab.experiments.deviations import Deviation, deviations, measurement, not_given, paper
from deqlab.experiments.kawaguchi2021 import fig1_report
from deqlab.experiments.kawaguchi2021.fig1_data import (
    ALL_DATASETS,
    FIG1_DATASETS,
    FIG4_DATASETS,
    FIGURE_DATASETS,
    PAPER_DATASETS,
    STANDIN,
    paper_datasets,
    teacher_data,
)
from deqlab.experiments.registry import register
from deqlab.models.baselines import LinearModel, ReLUMLP
from deqlab.models.delm import DELM
from deqlab.papers import KAWAGUCHI
from deqlab.train.sgd import HeavyBall, MinibatchTrainer


@dataclass(frozen=True)
class Fig1Config(Config):
    datasets: tuple[str, ...] = PAPER_DATASETS
    n_train: int = 100
    n_test: int = 100
    m_x: int = 150
    gamma: float = 0.8
    epochs: int = 5000
    batch_size: int = 64
    momentum: float = 0.8
    lrs: tuple[float, ...] = (0.01, 0.005, 0.001, 0.0005, 0.0001, 0.00005)
    trials: int = 5
    depths: tuple[int, ...] = (2, 3, 4)
    dnn_bias: bool = True
    record_every: int = 50
    figure: int = 1
    seed: int = 0

    constraints: ClassVar = {
        "datasets": (NONEMPTY, OneOf(FIG1_DATASETS), DISTINCT),
        "n_train": (
            Interval(0),
            Rule(
                lambda c: (c.n_train == 0) == (c.n_test == 0),
                "be 0 exactly when `n_test` is 0 (0: every image)",
            ),
        ),
        "n_test": Interval(0),
        "m_x": Interval(1),
        "gamma": FRACTION,
        "epochs": Interval(1),
        "batch_size": Interval(1),
        "momentum": Interval(0.0, 1.0, "left"),
        "lrs": (NONEMPTY, POSITIVE, DISTINCT),
        "trials": Interval(1),
        "depths": (Interval(1), DISTINCT),
        "record_every": Interval(1),
        "figure": OneOf(FIGURE_DATASETS),
        "seed": SEED,
    }


def make_model(config: Fig1Config, model: str, trial: int, device: str) -> torch.nn.Module:
    """The model ``model`` ("DELM", "Linear" or "DNN-H<k>") of trial ``trial`` at init (float64)."""
    generator = torch.Generator().manual_seed(config.seed * 1000 + trial)
    if model in ("DELM", "Linear"):
        delm = DELM(config.m_x, 1, gamma=config.gamma, generator=generator, dtype=torch.float64)
        built = delm if model == "DELM" else LinearModel.from_delm(delm)
    else:
        depth = int(model.removeprefix("DNN-H"))
        built = ReLUMLP(
            config.m_x,
            1,
            depth=depth,
            bias=config.dnn_bias,
            generator=generator,
            dtype=torch.float64,
        )
    return built.to(device)


def _mean_square(model: torch.nn.Module, X: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return ((model(X) - y) ** 2).mean()


def train_sgd(
    config: Fig1Config, model: torch.nn.Module, data: dict[str, torch.Tensor], lr: float, seed: int
) -> list[tuple[int, float, float]]:
    """SGD with heavy-ball momentum μ (:class:`~deqlab.train.sgd.HeavyBall`, torch.optim.SGD's
    rule v ← μv + g, θ ← θ − lr·v, v₀ = g₀), one epoch per step of a MinibatchTrainer.

    Returns (epoch, train loss, test loss) every ``record_every`` epochs; stops early (the
    last record non-finite) when the loss becomes non-finite.
    """
    X, y = data["X_train"], data["y_train"]
    optimizer = HeavyBall(model.parameters(), lr=lr, momentum=config.momentum)
    trainer = MinibatchTrainer(
        model,
        lambda batch: _mean_square(model, X[:, batch], y[:, batch]),  # batch: (b,)
        optimizer,
        n=X.shape[1],
        batch_size=config.batch_size,
        seed=seed,
    )
    records = []
    for epoch in range(config.epochs + 1):
        if epoch % config.record_every == 0 or epoch == config.epochs:
            with torch.no_grad():
                train = _mean_square(model, X, y).item()
                test = _mean_square(model, data["X_test"], data["y_test"]).item()
            records.append((epoch, train, test))
            if not (math.isfinite(train) and math.isfinite(test)):
                break
        if epoch < config.epochs:
            trainer.step()
    return records


#: What Section 2.2 and Appendix D use for Figure 1, field by field (stand-ins substitute).
PAPER_SETTING = {
    "datasets": paper(
        PAPER_DATASETS,
        "Section 2.2, Appendix D.1, Figure 1: CIFAR-10, CIFAR-100, Kuzushiji-MNIST; sphere: our "
        "stand-in for those not on this machine (rank(Φ) = n_train)",
        substitute=True,
    ),
    "n_train": paper(100, "Appendix D.1: 100 images drawn from the train split"),
    "n_test": paper(100, "Appendix D.1: 100 images drawn from the test split"),
    "m_x": paper(150, "Appendix D.1: x_i = R x_pre_i with m_x = 150"),
    "gamma": paper(0.8, "Appendix D.1 (teacher and DELMs)"),
    "epochs": paper(5000, "Section 2.2: final test errors at epoch = 5000"),
    "batch_size": paper(64, "Appendix D.1"),
    "momentum": paper(0.8, "Appendix D.1"),
    "lrs": paper((0.01, 0.005, 0.001, 0.0005, 0.0001, 0.00005), "Section 2.2: S_LR"),
    "trials": paper(5, "Section 2.2: mean over five random trials"),
    "depths": paper((2, 3, 4), "Figure 1: DNN (H = 2, 3, 4)"),
    "dnn_bias": paper(True, "Appendix D.2: Figures 1–4 report DNNs with bias terms"),
    "record_every": measurement(),
    "figure": measurement(),  # which figure the statements cite; the other fields set the run
    "seed": not_given(),
}
STAND_IN_NOTE = "; sphere: our stand-in for those not on this machine"
D2 = "Appendix D.2"
_ALL = paper(
    ALL_DATASETS,
    f"{D2}, Figures 5–8 (a)–(g): Kuzushiji-MNIST, CIFAR-10, CIFAR-100, "
    f"Fashion-MNIST, MNIST, SEMEION, SVHN{STAND_IN_NOTE}",
    substitute=True,
)
_NO_BIAS = paper(False, f"{D2}, 'DNNs without bias terms': Figures 5 and 6 (DNN-NB)")
_DEEP = paper((10, 100, 200), f"{D2}, 'DNNs with deeper networks': H = 10, 100, 200")
#: Each figure's paper setting: Figure 1's with what Appendix D.2 changes.
FIGURE_SETTINGS = {
    1: PAPER_SETTING,
    4: PAPER_SETTING
    | {
        "datasets": paper(
            FIG4_DATASETS,
            f"{D2}, 'Additional datasets', Figure 4: MNIST, SVHN, SEMEION, "
            f"Fashion-MNIST{STAND_IN_NOTE}",
            substitute=True,
        )
    },
    5: PAPER_SETTING | {"datasets": _ALL, "dnn_bias": _NO_BIAS},
    6: PAPER_SETTING | {"datasets": _ALL, "dnn_bias": _NO_BIAS, "depths": _DEEP},
    7: PAPER_SETTING
    | {
        "datasets": _ALL,
        "depths": _DEEP,
        "dnn_bias": paper(True, f"{D2}, Figure 7: DNNs with ReLU (bias)"),
    },
    8: PAPER_SETTING
    | {
        "datasets": _ALL,
        "n_train": paper(
            0,
            f"{D2}, 'Larger datasets': all data points of each data set, e.g. "
            "60000 for MNIST (0 = every image of the split)",
        ),
        "n_test": paper(0, f"{D2}, 'Larger datasets': e.g. 10000 test points for MNIST"),
        "epochs": paper(100, f"{D2}, Figure 8: best learning rates at epoch = 100"),
        "trials": paper(3, "Figure 8 caption: three random trials"),
    },
}


@register
class Kawaguchi2021Fig1(Experiment):
    """DELMs vs linear models and DNNs on DELM-teacher targets (an empirical observation)."""

    slug = "fig1"
    title = "DELM vs linear models vs ReLU DNNs on teacher targets (Figure 1, observation)"
    paper = KAWAGUCHI
    report = fig1_report
    where = "Figure 1, App. D"
    Config = Fig1Config
    presets: ClassVar = {
        "tiny": {
            "datasets": ("digits",),
            "n_train": 20,
            "n_test": 20,
            "m_x": 24,
            "epochs": 6,
            "batch_size": 8,
            "lrs": (0.001, 0.0001),
            "trials": 1,
            "depths": (2,),
            "record_every": 2,
        },
        "quick": {"epochs": 300, "trials": 2, "record_every": 10},
        "paper": {},
        "fig4": {"figure": 4, "datasets": FIG4_DATASETS},
        "fig5": {"figure": 5, "datasets": ALL_DATASETS, "dnn_bias": False},
        "fig6": {
            "figure": 6,
            "datasets": ALL_DATASETS,
            "dnn_bias": False,
            "depths": (10, 100, 200),
        },
        "fig7": {"figure": 7, "datasets": ALL_DATASETS, "depths": (10, 100, 200)},
        "fig8": {
            "figure": 8,
            "datasets": ALL_DATASETS,
            "n_train": 0,
            "n_test": 0,
            "epochs": 100,
            "trials": 3,
        },
    }
    paper_setting: ClassVar = PAPER_SETTING
    figure_captions: ClassVar = {
        f"fig1-{dataset}": f"Test and train loss (mean ± one standard deviation over trials) "
        f"on {dataset} images with DELM-teacher targets: the linear model (top) and the ReLU "
        "DNNs (bottom) against the DELM, at each model's best (and, for the linear model and "
        "the DELM, worst) learning rate of S_LR; the subtitle gives n, m_x, γ and the SGD "
        "setting."
        for dataset in FIG1_DATASETS
    }
    metric_columns: ClassVar = {
        "dataset": "image set the inputs were drawn from",
        "model": "DELM, Linear, or DNN-H<depth>",
        "trial": "trial index (initialization and minibatch order)",
        "lr": "SGD learning rate",
        "epoch": "epoch",
        "train_loss": "mean square loss on the 100 training points",
        "test_loss": "mean square loss on the 100 test points",
        "train_rank": "rank(Φ_train) of the n_train projected training inputs",
    }
    default_checkpoint_every = 1  # in learning rates: one checkpoint per finished lr

    def resolve(self, preset: str = "quick", **kwargs: object) -> Fig1Config:
        """As :meth:`Experiment.resolve`; in every preset but ``tiny``, when the data sets
        are still those of the figure, the ones missing here give way to the stand-in
        (:func:`paper_datasets`; fetch them to run on the paper's own)."""
        config = super().resolve(preset, **kwargs)
        wanted = FIGURE_DATASETS[config.figure]
        if preset != "tiny" and config.datasets == wanted:
            config = dataclasses.replace(config, datasets=paper_datasets(wanted))
        return config

    def deviations(self, config: Fig1Config) -> list[Deviation]:
        """Against the paper setting of ``config.figure`` (:data:`FIGURE_SETTINGS`)."""
        return deviations(config, FIGURE_SETTINGS[config.figure])

    def datasets(self, config: Fig1Config) -> tuple[str, ...]:
        """The stored image sets the run reads (the generated stand-in is not one)."""
        return tuple(name for name in config.datasets if name != STANDIN)

    def tasks(self, config: Fig1Config) -> list[Task]:
        models = ["DELM", "Linear", *(f"DNN-H{h}" for h in config.depths)]
        return [
            Task(
                f"{dataset}-{model}-t{trial}", {"dataset": dataset, "model": model, "trial": trial}
            )
            for dataset in config.datasets
            for trial in range(config.trials)
            for model in models
        ]

    def run_task(self, config: Fig1Config, task: Task, ctx: TaskContext) -> list[Row]:
        dataset, model_name = str(task.params["dataset"]), str(task.params["model"])
        trial = int(task.params["trial"])
        data = teacher_data(config, dataset, ctx.device)
        rank = int(torch.linalg.matrix_rank(data["X_train"]))
        resumed = ctx.resume()
        done, rows = (0, []) if resumed is None else (resumed[0]["lrs_done"], list(resumed[1]))
        for index in range(done, len(config.lrs)):
            lr = config.lrs[index]
            model = make_model(config, model_name, trial, ctx.device)
            seed = (config.seed * 1000 + trial) * 100 + index
            base = {
                "task": task.key,
                "dataset": dataset,
                "model": model_name,
                "trial": trial,
                "train_rank": rank,
            }
            rows += [
                {**base, "lr": lr, "epoch": epoch, "train_loss": train, "test_loss": test}
                for epoch, train, test in train_sgd(config, model, data, lr, seed)
            ]
            ctx.checkpoint({"lrs_done": index + 1}, rows)
            ctx.progress(index + 1, len(config.lrs))
        return rows

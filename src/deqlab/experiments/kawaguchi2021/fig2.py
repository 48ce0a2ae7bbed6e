"""Kawaguchi (2021), Figure 2: global convergence of DELMs and the bounds of Corollary 1.

Data (Section 4, Zou et al. 2020): x_i ∈ R^10 standard normal (panel a) or uniform on
[−1, 1] (panel b), y_i = −x_i + 0.1 ς_i, n = 1000; φ(x) = x; square loss
L = Σ_i ‖f(x_i) − y_i‖² (Eq. 5).  Models: DELMs (γ = 0.8, Appendix D.1) from the identity
initialization (A = 0, B = U₀, so f₀(x) = x) and from three N(0, 1/m) initializations; a
linear ResNet with identity initialization (W_l = 0, fixed identity input/output layers).
All are trained by full-batch GD with the same step, the Euler discretization of the
gradient flow (Eq. 6) with time step ``lr``.

Panel (c): the trajectory of a random-initialized DELM on the Gaussian data against the
two upper bounds of Corollary 1, with λ_T = 1/(m(1+γ)²) (initialization-independent) and
λ_T = min_{t≤T} λ_min(D_t) (initialization-dependent), over ``bound_steps`` steps.

Choices the paper leaves open (ours): γ = 0.8 (Appendix D's value), the ResNet depth,
the step size and the meaning of the DELM's identity initialization (the DELM starts at
the identity function, like the ResNet).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import torch

from deqlab._checks import check_int, check_positive, check_real
from deqlab.data import zou_synthetic
from deqlab.experiments.base import Claim, Experiment, Task, TaskContext
from deqlab.experiments.registry import register
from deqlab.models.baselines import LinearResNet
from deqlab.models.delm import DELM, check_gamma
from deqlab.theory.kawaguchi2021 import lambda_lower_bound, square_loss, square_loss_optimum
from deqlab.train.delm_gd import DELMGradientDescent

if TYPE_CHECKING:
    from matplotlib.axes import Axes

Row = dict[str, object]
DATA_OF_PANEL = {"a": "gaussian", "b": "uniform", "c": "gaussian"}
#: Relative slack for "loss ≤ bound" (float64 rounding of sums of ~1e4-sized losses).
BOUND_RTOL = 1e-9


@dataclass(frozen=True)
class Fig2Config:
    n: int = 1000
    d: int = 10
    noise: float = 0.1
    gamma: float = 0.8
    lr: float = 1e-5
    steps: int = 2000
    record_every: int = 10
    n_random: int = 3
    resnet_depth: int = 10
    bound_steps: int = 100_000
    bound_records: int = 200
    optimum_rtol: float = 1e-4
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("n", "d", "steps", "record_every", "resnet_depth", "bound_steps",
                     "bound_records"):  # fmt: skip
            check_int(name, getattr(self, name), min_value=1)
        check_int("n_random", self.n_random, min_value=0)
        check_int("seed", self.seed, min_value=0)
        check_real("noise", self.noise, low=0.0)
        check_gamma(self.gamma)
        check_positive("lr", self.lr)
        check_positive("optimum_rtol", self.optimum_rtol)


def log_spaced_steps(total: int, count: int) -> list[int]:
    """0 and about ``count`` distinct integers log-spaced in [1, total], ending at ``total``."""
    if total < 1:
        return [0]
    steps = {round(math.exp(math.log(total) * i / max(count - 1, 1))) for i in range(count)}
    return sorted({0, total} | steps)


def train_delm_with_bounds(
    trainer: DELMGradientDescent, targets: list[int], ctx: TaskContext
) -> dict[str, torch.Tensor]:
    """Run ``trainer`` through the step ``targets`` (each recorded), checkpointing at each.

    Resumes from ``ctx`` when a checkpoint exists; the history lives in the trainer state.
    """
    resumed = ctx.resume()
    if resumed is not None:
        trainer.load_state_dict(resumed[0])
    for target in targets:
        if target < trainer.step_count or (target == trainer.step_count and target > 0):
            continue
        trainer.run(target - trainer.step_count)
        ctx.checkpoint(trainer.state_dict(), [])
        ctx.progress(target, targets[-1])
    return trainer.history_tensors()


def history_rows(history: dict[str, torch.Tensor], base: Row, loss_star: float) -> list[Row]:
    """One tidy row per recorded step of a DELM run."""
    columns = ("step", "loss", "lambda_min", "lambda_T", "bound_independent", "bound_dependent")
    return [
        {**base, **{c: history[c][i].item() for c in columns}, "loss_star": loss_star}
        for i in range(len(history["step"]))
    ]


def _data(config: Fig2Config, panel: str, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    data = zou_synthetic(
        config.n, config.d, inputs=DATA_OF_PANEL[panel], noise=config.noise, seed=config.seed
    )
    return data.X.to(device), data.y.to(device)


def _train_resnet(
    config: Fig2Config, X: torch.Tensor, Y: torch.Tensor, ctx: TaskContext
) -> list[tuple[int, float]]:
    """Full-batch GD on the linear ResNet (identity init); returns (step, loss) records."""
    model = LinearResNet(config.d, config.d, depth=config.resnet_depth, dtype=X.dtype)
    model.to(X.device)
    resumed = ctx.resume()
    step, records = 0, []
    if resumed is not None:
        state, _ = resumed
        model.load_state_dict(state["model"])
        step, records = state["step"], list(state["records"])
    params = list(model.parameters())
    while step <= config.steps:
        loss = square_loss(model(X), Y)
        if step % config.record_every == 0 or step == config.steps:
            records.append((step, loss.item()))
        if step == config.steps:
            break
        grads = torch.autograd.grad(loss, params)
        with torch.no_grad():
            for p, g in zip(params, grads, strict=True):
                p.sub_(config.lr * g)
        step += 1
        if step % ctx.checkpoint_every == 0:
            ctx.checkpoint({"model": model.state_dict(), "step": step, "records": records}, [])
            ctx.progress(step, config.steps)
    return records


@register
class Kawaguchi2021Fig2(Experiment):
    """DELMs reach the global minimum from every initialization; Corollary 1's bounds hold."""

    name = "kawaguchi2021-fig2"
    title = "DELM vs linear ResNet: global convergence and Corollary 1's bounds (Figure 2)"
    paper = "Kawaguchi, On the theory of implicit deep learning, ICLR 2021 (Figure 2)"
    Config = Fig2Config
    presets: ClassVar = {
        "tiny": {
            "n": 40, "d": 3, "gamma": 0.5, "lr": 2.5e-3, "steps": 150, "n_random": 1,
            "resnet_depth": 3, "bound_steps": 60, "bound_records": 12, "optimum_rtol": 1e-3,
        },
        "quick": {"bound_steps": 10_000, "bound_records": 60},
        "paper": {},
    }  # fmt: skip
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
        return tasks

    def run_task(self, config: Fig2Config, task: Task, ctx: TaskContext) -> list[Row]:
        panel, model_name, init = (str(task.params[k]) for k in ("panel", "model", "init"))
        X, Y = _data(config, panel, ctx.device)
        base: Row = {"task": task.key, "panel": panel, "model": model_name, "init": init}
        if model_name == "LinearResNet":
            loss_star = _loss_star(X, Y)
            return [
                {**base, "step": step, "loss": loss, "loss_star": loss_star}
                for step, loss in _train_resnet(config, X, Y, ctx)
            ]
        trial = 0 if init == "identity" else int(init.removeprefix("random"))
        generator = torch.Generator().manual_seed(config.seed * 1000 + trial)
        model = DELM(
            config.d, config.d, gamma=config.gamma, generator=generator, dtype=X.dtype,
            init="identity" if init == "identity" else "normal",
        ).to(ctx.device)  # fmt: skip
        if panel == "c":
            trainer = DELMGradientDescent(model, X, Y, lr=config.lr, record_every=10**12)
            targets = log_spaced_steps(config.bound_steps, config.bound_records)
        else:
            trainer = DELMGradientDescent(
                model, X, Y, lr=config.lr, record_every=config.record_every
            )
            chunk = max(ctx.checkpoint_every, 1)
            targets = [0, *range(chunk, config.steps, chunk), config.steps]
        history = train_delm_with_bounds(trainer, targets, ctx)
        return history_rows(history, base, trainer.loss_star)

    def claims(self, config: Fig2Config, rows: list[Row]) -> list[Claim]:
        final = {r["task"]: r for r in rows}  # the last row of each task
        delm_ab = [r for r in final.values() if r["model"] == "DELM" and r["panel"] != "c"]
        gaps = {k: _relative_gap(r) for k, r in final.items()}
        worst = max(delm_ab, key=lambda r: gaps[r["task"]])
        claims = [
            Claim(
                "every DELM run reaches the global minimum value",
                gaps[worst["task"]] <= config.optimum_rtol,
                f"worst final (L − L*)/L* = {gaps[worst['task']]:.3g} ({worst['task']})",
                f"<= {config.optimum_rtol:g} for all {len(delm_ab)} runs (panels a, b)",
            )
        ]
        lam = lambda_lower_bound(config.d, config.gamma)
        claims += bound_claims([r for r in rows if r["panel"] == "c"], "Corollary 1", lam)
        for panel, data in (("a", "Gaussian"), ("b", "uniform")):
            resnet = final.get(f"{panel}-resnet")
            if resnet is None:
                continue
            stalls = panel == "a"
            gap = gaps[resnet["task"]]
            claims.append(
                Claim(
                    f"linear ResNet (identity init) {'stays above' if stalls else 'reaches'} "
                    f"the global minimum on {data} data (paper's observation)",
                    (gap > config.optimum_rtol) if stalls else (gap <= config.optimum_rtol),
                    f"final (L − L*)/L* = {gap:.3g}",
                    f"{'>' if stalls else '<='} {config.optimum_rtol:g}",
                )
            )
        return claims

    def plot(self, config: Fig2Config, rows: list[Row], directory: Path) -> list[Path]:
        import matplotlib.pyplot as plt  # imported here: spawned workers never plot

        from deqlab.report import add_reference_line, figure_style, save_figure

        with figure_style():
            fig, axes = plt.subplots(1, 3, figsize=(14.0, 3.8))
            for ax, (panel, data) in zip(axes, (("a", "Gaussian"), ("b", "uniform")), strict=False):
                mine = [r for r in rows if r["panel"] == panel]
                for task in dict.fromkeys(r["task"] for r in mine):
                    run = [r for r in mine if r["task"] == task]
                    label = f"{run[0]['model']}: {run[0]['init']}"
                    ax.semilogy([r["step"] for r in run], [r["loss"] for r in run], label=label)
                add_reference_line(ax, mine[0]["loss_star"], "global optimum L*")
                ax.set(
                    xlabel="# of iterations", ylabel="train loss", title=f"({panel}) {data} data"
                )
                ax.legend()
            plot_bounds(axes[2], [r for r in rows if r["panel"] == "c"])
            axes[2].set_title("(c) theoretical bounds (Corollary 1)")
            return save_figure(fig, directory, "fig2")


def _loss_star(X: torch.Tensor, Y: torch.Tensor) -> float:
    return float(square_loss_optimum(X, Y)[1])


def _relative_gap(row: Row) -> float:
    return (float(row["loss"]) - float(row["loss_star"])) / abs(float(row["loss_star"]))


def bound_claims(rows: list[Row], corollary: str, lambda_independent: float) -> list[Claim]:
    """The trajectory stays under both bounds; the initialization-dependent one is tighter."""
    if not rows:
        return []
    excess = max(float(r["loss"]) / float(r["bound_dependent"]) - 1 for r in rows)
    excess_ind = max(float(r["loss"]) / float(r["bound_independent"]) - 1 for r in rows)
    last = rows[-1]
    gap_dependent = float(last["bound_dependent"]) - float(last["loss_star"])
    gap_independent = float(last["bound_independent"]) - float(last["loss_star"])
    tighter = all(float(r["bound_dependent"]) <= float(r["bound_independent"]) for r in rows)
    return [
        Claim(
            f"the training trajectory stays under both bounds of {corollary}",
            max(excess, excess_ind) <= BOUND_RTOL,
            f"max loss/bound − 1 = {excess:.3g} (init-dependent), {excess_ind:.3g} (independent)",
            f"<= {BOUND_RTOL:g} at all {len(rows)} recorded steps",
        ),
        Claim(
            "the initialization-dependent bound is the tighter one",
            tighter and float(last["bound_dependent"]) < float(last["bound_independent"]),
            f"final gaps to L*: {gap_dependent:.3g} (init-dependent) vs {gap_independent:.3g}",
            "init-dependent <= independent at every step, strictly at the end",
            f"λ_T = {float(last['lambda_T']):.4g} vs 1/(m(1+γ)²) = {lambda_independent:.4g}",
        ),
    ]


def plot_bounds(ax: Axes, rows: list[Row]) -> None:
    """Log-log trajectory with the two bounds and L* on ``ax`` (Figure 2c / Figure 3)."""
    from deqlab.report import add_reference_line

    rows = [r for r in rows if int(r["step"]) >= 1]  # the log axis starts at iteration 1
    steps = [r["step"] for r in rows]
    ax.loglog(steps, [r["loss"] for r in rows], label="training trajectory")
    ax.loglog(steps, [r["bound_independent"] for r in rows], "--", label="bound: init-ind λ_T")
    ax.loglog(steps, [r["bound_dependent"] for r in rows], "-.", label="bound: init-dep λ_T")
    add_reference_line(ax, rows[0]["loss_star"], "global optimum L*")
    ax.set(xlabel="# of iterations", ylabel="train loss")
    ax.legend()

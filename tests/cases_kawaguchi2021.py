"""The pass and fail cases of Kawaguchi (2021)'s claims (tests/test_papers_claims.py)."""

from __future__ import annotations

import math

from cases import Case, call
from deqlab.papers.kawaguchi2021.figure1 import OBSERVATIONS, TrainingGrid, deep_sources
from deqlab.papers.kawaguchi2021.figure2 import FASTER, Reach
from deqlab.papers.kawaguchi2021.hypotheses import COROLLARY_1, COROLLARY_2
from deqlab.papers.kawaguchi2021.theory import lambda_lower_bound
from deqlab.statements import Run, Source, Statement, Verdict, runs_from_rows
from deqlab.statements.statement import Kind

M, GAMMA, LR = 1, 0.5, 0.01
HOLDING = {
    "rank_ratio": 0.5,
    "rank_tol": 1e-13,
    "pl_ratio": 2.0,
    "sharpness_start": 10.0,
    "sharpness_end": 10.0,
    "kappa": 56.25,
    "b_norm1": 0.1,
}


def trajectory(rate: float, bound_rate: float, *, key: str = "t", **constants: float) -> Run:
    """L_τ = 1 + 10e^{−rate·τ} under the bounds 1 + 10e^{−bound_rate·τ} (dependent) and
    1 + 10e^{−bound_rate·τ/2} (independent), τ = 0..10, hypotheses holding."""
    base = {"task": key, "loss_star": 1.0, "lambda_T": 1.0, **HOLDING, **constants}
    rows = [
        {
            **base,
            "step": s,
            "loss": 1 + 10 * math.exp(-rate * s),
            "bound_dependent": 1 + 10 * math.exp(-bound_rate * s),
            "bound_independent": 1 + 10 * math.exp(-bound_rate * s / 2),
        }
        for s in range(11)
    ]
    return runs_from_rows(rows)[key]


def runs(*found: Run) -> dict[str, Run]:
    return {r.key: r for r in found}


GOOD, SLOW = runs(trajectory(1.0, 0.5)), runs(trajectory(0.1, 0.5))
LAM = lambda_lower_bound(4, GAMMA)


def _accuracy(trajectories: dict[str, Run]):
    return call(
        trajectories, [], equation="Eq. (10)", lr=LR, m=M, gamma=GAMMA, eps_rel=math.exp(-2.5)
    )


def fig1_run(model: str, losses: dict[int, tuple[float, float]], *, lr=0.01, trial=0, rank=20):
    """One Figure 1 run of ``model``: epoch -> (train loss, test loss)."""
    rows = [
        {
            "run": f"{model}-{lr}-{trial}",
            "epoch": e,
            "train_loss": tr,
            "test_loss": te,
            "model": model,
            "dataset": "digits",
            "lr": lr,
            "trial": trial,
            "train_rank": rank,
        }
        for e, (tr, te) in losses.items()
    ]
    return runs_from_rows(
        rows,
        key="run",
        constants=("lr", "trial", "train_rank"),
        labels=("model", "dataset"),
        step="epoch",
    )[f"{model}-{lr}-{trial}"]


GRID = TrainingGrid(lrs=(0.01,), trials=1, epochs=2, record_every=1, depths=(100,))


def fig1(delm: float, linear: float, *, start=(1.0, 1.0), rank=20):
    """DELM and Linear ending at the test losses ``delm``, ``linear`` (starting at ``start``)."""
    return [
        fig1_run("DELM", {0: (1.0, start[0]), 1: (0.5, 0.7), 2: (0.1, delm)}, rank=rank),
        fig1_run("Linear", {0: (1.0, start[1]), 1: (0.6, 0.8), 2: (0.2, linear)}, rank=rank),
    ]


def deep(dnn_train_end: float, dnn_first: float = 0.5):
    """A DELM and a DNN of depth 100: the DNN's train loss at epoch 1 and at the end."""
    return [
        fig1_run("DELM", {0: (1.0, 1.0), 1: (1.0, 0.9), 2: (0.5, 0.5)}),
        fig1_run("DNN-H100", {0: (1.0, 1.0), 1: (dnn_first, 0.9), 2: (dnn_train_end, 0.9)}),
    ]


def reach_run(key: str, gap: float, *, steps: int = 10, sharpness: float = 0.5) -> Run:
    """A run from L = 2 to L* (1 + gap) at ``steps`` (L* = 1)."""
    rows = [
        {"task": key, "step": s, "loss": loss, "loss_star": 1.0, "step_sharpness": sharpness}
        for s, loss in ((0, 2.0), (steps, 1.0 + gap))
    ]
    return runs_from_rows(rows)[key]


REACH = Reach(steps=10, optimum_rtol=1e-3)


def statement(verdict: Verdict) -> Statement:
    return Statement("o", Kind.OBSERVATION, Source("kawaguchi2021", "x"), verdict, "m", "e")


def state(key: str, along: tuple[float, float], **more: tuple[float, float]) -> Run:
    """An Appendix B state: its sweep at γ = 0.9, 0.99 (1/(1 − γ) grows tenfold)."""
    columns = {
        "sweep_gamma": (0.9, 0.99),
        "along": along,
        "rest": (1.0, 1.0),
        "paper_rest": (1.0, 1.0),
        "perron_gap": (1e-5, 1e-5),
        "eq37_error": (1e-12, 1e-12),
        **more,
    }
    return Run(key, (0, 1), columns, {"step": 3.0}, {"task": "random"})


def trust(gap: float) -> dict[str, Run]:
    columns = dict.fromkeys(
        ("velocity_error", "multiplier_error", "closed_form_error"), (1e-12, gap)
    )
    run = Run("square-0.5", (0, 10), columns, {"delta_fraction": 0.5}, {"task": "square-delm"})
    return {run.key: run}


CASES = {
    "deqlab.papers.kawaguchi2021.hypotheses.gamma_hypothesis": Case(call(0.5), call(1.5)),
    "deqlab.papers.kawaguchi2021.hypotheses.hypotheses": Case(
        call(COROLLARY_2, GOOD, lr=LR, gamma=GAMMA, radius=10.0),
        call(COROLLARY_2, runs(trajectory(1.0, 0.5, b_norm1=9.0)), lr=LR, gamma=GAMMA, radius=10.0),
    ),
    "deqlab.papers.kawaguchi2021.hypotheses.kappa_hypothesis": Case(
        call(GOOD, tau=0.1, radius=math.inf),
        call(runs(trajectory(1.0, 0.5, kappa=0.0)), tau=0.0, radius=math.inf),
    ),
    "deqlab.papers.kawaguchi2021.corollaries.bound_checks": Case(
        call(COROLLARY_1, GOOD, [], lr=LR), call(COROLLARY_1, SLOW, [], lr=LR)
    ),
    "deqlab.papers.kawaguchi2021.corollaries.lambda_bound_check": Case(
        call(runs(trajectory(1.0, 0.5, lambda_T=3 * LAM)), [], m=4, gamma=GAMMA),
        call(runs(trajectory(1.0, 0.5, lambda_T=0.5 * LAM)), [], m=4, gamma=GAMMA),
    ),
    "deqlab.papers.kawaguchi2021.corollaries.accuracy_time_check": Case(
        _accuracy(GOOD), _accuracy(SLOW)
    ),
    "deqlab.papers.kawaguchi2021.corollaries.faster_rate_observation": Case(
        call(trajectory(1.0, 0.5, lambda_T=3 * LAM), FASTER, m=4, gamma=GAMMA),
        call(trajectory(1.0, 0.5, lambda_T=0.5 * LAM), FASTER, m=4, gamma=GAMMA),
    ),
    "deqlab.papers.kawaguchi2021.figure1.same_start": Case(
        call("digits", fig1(0.5, 1.0, start=(1.0, 1.5)), OBSERVATIONS[1].start, lr=0.01),
        call("digits", fig1(0.5, 1.0, start=(1.0, 3.0)), OBSERVATIONS[1].start, lr=0.01),
    ),
    "deqlab.papers.kawaguchi2021.figure1.outperforms": Case(
        call("digits", fig1(0.5, 1.0), "Linear", OBSERVATIONS[1].outperform, GRID),
        call("digits", fig1(1.0, 0.5), "Linear", OBSERVATIONS[1].outperform, GRID),
    ),
    "deqlab.papers.kawaguchi2021.figure1.trains_faster": Case(
        call("digits", deep(0.9, dnn_first=0.5), deep_sources(6)[0], GRID),
        call("digits", deep(0.9, dnn_first=2.0), deep_sources(6)[0], GRID),
    ),
    "deqlab.papers.kawaguchi2021.figure1.deep_do_not_train": Case(
        call("digits", deep(1.0), deep_sources(6)[1], GRID),
        call("digits", deep(0.5), deep_sources(6)[1], GRID),
    ),
    "deqlab.papers.kawaguchi2021.figure1.full_rank": Case(
        call(["digits"], fig1(0.5, 1.0), n_train=20),
        call(["digits"], fig1(0.5, 1.0, rank=10), n_train=20),
    ),
    "deqlab.papers.kawaguchi2021.figure2.delm_reach": Case(
        call(
            "a",
            runs(reach_run("a-delm-identity", 0.0), reach_run("a-delm-random1", 1e-4)),
            REACH,
            n_random=1,
        ),
        call(
            "a",
            runs(reach_run("a-delm-identity", 0.0), reach_run("a-delm-random1", 0.1)),
            REACH,
            n_random=1,
        ),
    ),
    "deqlab.papers.kawaguchi2021.figure2.resnet": Case(
        call("a", reach_run("a-resnet", 0.5), REACH, setting="a ResNet"),
        call("a", reach_run("a-resnet", 0.0), REACH, setting="a ResNet"),
    ),
    "deqlab.papers.kawaguchi2021.figure2.sweep_reach": Case(
        call(
            "b",
            runs(reach_run("s-b-delm-identity", 0.0), reach_run("s-b-delm-random1", 0.0)),
            REACH,
            lr=0.1,
            gamma=0.5,
            expected=2,
        ),
        call(
            "b",
            runs(reach_run("s-b-delm-identity", 0.0), reach_run("s-b-delm-random1", 0.5)),
            REACH,
            lr=0.1,
            gamma=0.5,
            expected=2,
        ),
    ),
    "deqlab.papers.kawaguchi2021.figure2.reproduces": Case(
        call(0.1, 0.5, [statement(Verdict.PASS)] * 4),
        call(0.1, 0.5, [*[statement(Verdict.PASS)] * 3, statement(Verdict.FAIL)]),
    ),
    "deqlab.papers.kawaguchi2021.figure2.reaches": Case(
        call(reach_run("logistic", 0.0), REACH), call(reach_run("logistic", 0.2), REACH)
    ),
    "deqlab.papers.kawaguchi2021.theorem2.trust_region_check": Case(
        call("velocity_error", trust(1e-10), tolerance=1e-8),
        call("velocity_error", trust(1e-3), tolerance=1e-8),
    ),
    "deqlab.papers.kawaguchi2021.appendix_b.growth": Case(
        call(runs(state("s1", (10.0, 100.0))), "along", "grows", ">=", 0.9),
        call(runs(state("s1", (10.0, 10.0))), "along", "grows", ">=", 0.9),
    ),
    "deqlab.papers.kawaguchi2021.appendix_b.eq37": Case(
        call(runs(state("s1", (10.0, 100.0))), tolerance=1e-8),
        call(runs(state("s1", (10.0, 100.0), eq37_error=(1e-12, 1e-3))), tolerance=1e-8),
    ),
    "deqlab.papers.kawaguchi2021.appendix_b.perron": Case(
        call(runs(state("s1", (10.0, 100.0)))),
        call(runs(state("s1", (10.0, 100.0), perron_gap=(1e-5, 0.5)))),
    ),
}

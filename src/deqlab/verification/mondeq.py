"""The thesis (Hieu 2022, Chapter 3) on the user's data and a monotone DEQ of width n.

The network: ``W = (1 − m) I − AᵀA + B − Bᵀ`` (Eq. 3.3), entries of A, B, U, u drawn
N(0, 1/fan-in) from ``seed``, one radius R for the four balls of Section 3.3. Measured at
initialization:

- λ_0 = σ_min(Z(0)) (Section 3.3; 0 when n < N, as Z(0) then has rank ≤ n);
- Condition 1, (3.8)–(3.9) (Theorem 3.3.1, gradient flow) and Condition 2, (3.16)–(3.18)
  (Theorem 3.3.5, GD), each a hypothesis lhs/rhs ≥ 1 built by the thesis' experiments'
  :func:`~deqlab.papers.hieu2022.claims.condition_hypothesis`; the width that
  would satisfy each — and Eq. (3.17) as Proposition 6's proof needs it (ours, a hypothesis
  of the training statements) — comes from lhs/rhs ∝ n^s fitted over the widths
  :data:`FIT_FACTORS` × max(n, 4N) (same seed), the scaling assumption its ``needs`` states;
  Eq. (3.18) holds at no width when m²N ≥ 1/20 (the thesis' experiments' ``n_samples`` rule);
- Lemma 3.3.3, ‖Z(0)‖_F ≤ ‖X‖_F‖U(0)‖₂/m (a theorem: it holds for every parameter);
- Theorem 3.3.5's step-size bound η_max and rate 1 − η_maxλ_0²/4, and the rate
  exp(−λ_0²/2) per unit time of Theorem 3.3.1's flow.

With ``train``: GD with η_max (or the given η) and Theorem 3.3.5 with Propositions 5–6 and
Lemmas 3.3.6–3.3.10 as implications, each checked only on the steps where its premise held
and NOT APPLICABLE from the step where it fails
(:func:`~deqlab.papers.hieu2022.gd_proof.theorem_3_3_5` on
:func:`~deqlab.papers.hieu2022.gd_proof.trace_from_records`).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace

import torch

from deqlab.models.mondeq import MonDEQ
from deqlab.papers import HIEU
from deqlab.papers.hieu2022.claims import condition_hypothesis, step_size_hypothesis
from deqlab.papers.hieu2022.gd_proof import theorem_3_3_5, trace_from_records
from deqlab.papers.hieu2022.mondeq import (
    PARAMETERS,
    Inequality,
    MonDEQConstants,
    condition_1,
    condition_2,
    eq_3_17_as_proved,
    gd_rate,
    mondeq_constants,
    step_size_bound,
)
from deqlab.papers.hieu2022.mondeq_lemmas import lemma_3_3_3
from deqlab.papers.hieu2022.width_fit import FIT_WIDTH_FACTOR, WidthFit
from deqlab.solvers.splitting import PeacemanRachford
from deqlab.statements import Statement
from deqlab.theory.brackets import Bracket
from deqlab.theory.gauss_newton import GaussNewton, gauss_newton
from deqlab.theory.spectra import least_eigenvalue_large
from deqlab.train.mondeq_gd import MonDEQGD
from deqlab.verification.equilibrium_error import mondeq_error, sigma_min_of_equilibrium
from deqlab.verification.inputs import Inputs
from deqlab.verification.progress import Progress, silent
from deqlab.verification.stand_ins import measured_rate

#: The widths, as multiples of max(width, FIT_WIDTH_FACTOR·N), over which lhs/rhs ∝ n^s is
#: fitted (the thesis' experiments fit only widths n ≥ FIT_WIDTH_FACTOR·N: near n = N,
#: λ_0 = σ_min(Z(0)) grows much faster than any power law).
FIT_FACTORS = (1.0, 1.5, 2.0)
#: Up to this width × N the stand-ins' Gauss–Newton curvature is measured (3 solves a step).
STANDIN_LIMIT = 10**6
#: Relative residual of the splitting solves.
SOLVE_TOL = 1e-10


@dataclass(frozen=True, eq=False)
class MonDEQInit:
    """The network at the given width, its constants and conditions, and the fits."""

    inputs: Inputs
    width: int
    monotonicity: float
    radius: float
    seed: int
    model: MonDEQ
    constants: MonDEQConstants
    lemma: Inequality
    conditions: dict[str, list[Inequality]]  # "Condition 1", "Condition 2"
    fits: dict[str, WidthFit | None]  # by equation name, e.g. "Eq. (3.16)"
    fit_widths: tuple[int, ...]
    gauss_newton: GaussNewton | None = None  # the stand-ins' curvature and PL ratio (ours)
    lambda0_bracket: Bracket | None = None

    @property
    def eta_max(self) -> float:
        return step_size_bound(self.constants)

    def brackets(self) -> dict[str, Bracket]:
        """The certified bracket of λ_0 = σ_min(Z(0)) (JSON ``lambda0_bounds``)."""
        found = self.lambda0_bracket
        return {} if found is None else {"lambda0": found}

    def at(self, values: dict[str, float]) -> MonDEQInit:
        """These measurements with λ_0 set to ``values["lambda0"]`` (a corner of its bracket:
        :mod:`deqlab.verification.precision`), Conditions 1–2 evaluated there."""
        if "lambda0" not in values:
            return self
        c = replace(self.constants, lambda0=values["lambda0"])
        return replace(self, constants=c, conditions=_conditions(c))


def sigma_min_bracket(model: MonDEQ, X: torch.Tensor, Z: torch.Tensor) -> Bracket:
    """A certified bracket of λ_0 = σ_min(Z*) of the exact equilibrium Z* (n, N) from the
    computed Z: [0, 0] when n < N (rank); else from λ_min(fl(ZᵀZ))'s bracket
    (:mod:`deqlab.theory.brackets`) widened by the product's rounding and the solve's error
    (:mod:`deqlab.verification.equilibrium_error`)."""
    n, N = Z.shape
    if n < N:
        proof = f"rank(Z(0)) ≤ n = {n} < N = {N}: σ_min = 0 exactly"
        return Bracket(0.0, 0.0, proof, proof)
    found = least_eigenvalue_large(Z.T @ Z).bracket
    return sigma_min_of_equilibrium(found, Z, *mondeq_error(model, X, Z))


def _model(d: int, width: int, monotonicity: float, seed: int) -> MonDEQ:
    generator = torch.Generator().manual_seed(seed)
    solver = PeacemanRachford(tol=SOLVE_TOL, max_iter=20_000)
    return MonDEQ(d, width, m=monotonicity, solver=solver, generator=generator, dtype=torch.float64)


def constants_at(
    model: MonDEQ, inputs: Inputs, radius: float
) -> tuple[MonDEQConstants, torch.Tensor]:
    """(:func:`~deqlab.papers.hieu2022.mondeq.mondeq_constants`, Z(0)) at the model's initial θ;
    a width n < N is allowed (λ_0 = σ_min(Z(0)) = 0 there: Z(0) has rank ≤ n)."""
    X, y = inputs.X, inputs.y
    theta = {k: p.detach() for k, p in model.named_parameters()}
    with torch.no_grad():
        Z = model.equilibrium(X)  # (n, N)
    c = mondeq_constants(**theta, Z=Z, X=X, y=y, m=model.m, radius=radius, allow_narrow=True)
    return c, Z


def _conditions(c: MonDEQConstants) -> dict[str, list[Inequality]]:
    return {"Condition 1": condition_1(c), "Condition 2": condition_2(c)}


def _fitted(c: MonDEQConstants) -> list[Inequality]:
    """The inequalities whose width the fit gives: Conditions 1–2 and Eq. (3.17) as
    Proposition 6's proof needs it (ours: :func:`train_statements` states it)."""
    return [*condition_1(c), *condition_2(c), eq_3_17_as_proved(c)]


def initialize(
    inputs: Inputs,
    *,
    width: int,
    monotonicity: float,
    radius: float,
    seed: int,
    progress: Progress = silent,
) -> MonDEQInit:
    """Measure everything of the module docstring at ``width`` and the fit widths."""
    base = max(width, FIT_WIDTH_FACTOR * inputs.n)
    fit_widths = tuple(sorted({round(f * base) for f in FIT_FACTORS}))
    widths = sorted({*fit_widths, width})
    ratios: dict[str, list[float]] = {}
    chosen = None
    for i, w in enumerate(widths):
        progress(f"monotone DEQ at width {w}", i, len(widths))
        model = _model(inputs.d, w, monotonicity, seed)
        c, Z = constants_at(model, inputs, radius)
        if w == width:
            chosen = (model, c, Z)
        if w in fit_widths:
            for row in _fitted(c):
                ratios.setdefault(row["name"], []).append(_ratio(row))
    model, c, Z = chosen
    lemma = lemma_3_3_3(Z, inputs.X, model.U, monotonicity)
    fits = {name: WidthFit.of(fit_widths, rs, n_samples=inputs.n) for name, rs in ratios.items()}
    progress(f"Gauss–Newton curvature at width {width} (stand-ins, ours)", len(widths), len(widths))
    curvature = _gauss_newton(model, inputs) if width * inputs.n <= STANDIN_LIMIT else None
    return MonDEQInit(
        inputs, width, monotonicity, radius, seed, model, c, lemma, _conditions(c), fits,
        fit_widths, curvature, sigma_min_bracket(model, inputs.X, Z.detach()),
    )  # fmt: skip


def _gauss_newton(model: MonDEQ, inputs: Inputs) -> GaussNewton | None:
    """λ_max(JJᵀ) and ‖Jᵀr‖²/‖r‖² of L = ½‖Z*ᵀu − y‖² at θ(0), J = ∂ŷ/∂(A, B, U, u)
    (:func:`deqlab.theory.gauss_newton.gauss_newton`); None when r = 0."""
    names, shapes = zip(*[(n, p.shape) for n, p in model.named_parameters()], strict=True)
    theta = torch.cat([p.detach().reshape(-1) for p in model.parameters()])

    def predict(t: torch.Tensor) -> torch.Tensor:
        parts = t.split([s.numel() for s in shapes])
        params = {n: p.view(s) for n, p, s in zip(names, parts, shapes, strict=True)}
        return torch.func.functional_call(model, params, (inputs.X,))  # (N,)

    with torch.no_grad():
        if not float((model(inputs.X) - inputs.y).norm()) > 0:
            return None
    return gauss_newton(predict, theta, inputs.y)


def _ratio(row: Inequality) -> float:
    return row["lhs"] / row["rhs"] if row["rhs"] > 0 else math.inf


def numbers(init: MonDEQInit, eta: float | None) -> dict[str, object]:
    """Every number of the module docstring under stable keys."""
    c = init.constants
    eta_max = init.eta_max
    conditions = {
        row["name"]: {
            "lhs": row["lhs"],
            "rhs": row["rhs"],
            "margin": _ratio(row),
            "holds": row["holds"],
        }
        for rows in init.conditions.values()
        for row in rows
    }
    return {
        "width": init.width,
        "monotonicity": init.monotonicity,
        "radius": init.radius,
        "seed": init.seed,
        "lambda0": c.lambda0,
        "lambda0_bounds": None
        if init.lambda0_bracket is None
        else [init.lambda0_bracket.lower, init.lambda0_bracket.upper],
        "x_norm": c.x_norm,
        "loss0": c.loss0,
        "norms": c.norms,
        "bars": c.bars,
        "conditions": conditions,
        "condition1_holds": all(r["holds"] for r in init.conditions["Condition 1"]),
        "condition2_holds": all(r["holds"] for r in init.conditions["Condition 2"]),
        "required_width": {name: _fit_width(fit) for name, fit in init.fits.items()},
        "fit_widths": list(init.fit_widths),
        "lemma_3_3_3": {"lhs": init.lemma["lhs"], "rhs": init.lemma["rhs"]},
        "eta_max": eta_max,
        "rate_at_eta_max": gd_rate(c.lambda0, eta_max) if eta_max else None,
        "eta": eta,
        "rate": None if not eta or eta > eta_max else gd_rate(c.lambda0, eta),
        "flow_rate": math.exp(-(c.lambda0**2) / 2),
        "curvature": None if init.gauss_newton is None else init.gauss_newton.curvature,
        "pl_ratio0": None if init.gauss_newton is None else init.gauss_newton.pl_ratio,
    }


def _fit_width(fit: WidthFit | None) -> dict[str, object] | None:
    """The width at which the fitted lhs/rhs reaches 1 (inf when it does not grow)."""
    if fit is None:
        return None
    log_n = -fit.intercept / fit.slope if fit.slope > 0 else math.inf
    return {
        "width": math.exp(min(log_n, 700.0)) if log_n < math.inf else math.inf,
        "log10_width": log_n / math.log(10),
        "slope": fit.slope,
    }


def statements(init: MonDEQInit, eta: float | None) -> list[Statement]:
    """The width hypothesis, Conditions 1–2, Lemma 3.3.3 and, with ``eta``, the step size."""
    n = init.inputs.n
    out = [
        HIEU.hypothesis(
            "Section 3.3 (n ≥ N, Eq. (3.14)); Theorems 3.3.1, 3.3.5: width O(N)",
            name="the width n ≥ N (λ_0 = σ_min(Z(0)) > 0 needs it)",
            value=init.width / n,
            relation=">=",
            threshold=1.0,
            measured=f"n/N = {init.width}/{n}",
            expected="≥ 1",
            needs=f"width n ≥ N = {n}",
        )
    ]
    for condition, rows in init.conditions.items():
        out += [
            condition_hypothesis(
                row,
                width=init.width,
                condition=condition,
                fit=init.fits.get(row["name"]),
                m=init.monotonicity,
                n_samples=n,
            )
            for row in rows
        ]
    lemma = init.lemma
    out.append(
        HIEU.theorem(
            "Lemma 3.3.3",
            name="Lemma 3.3.3: ‖Z(0)‖_F ≤ ‖X‖_F‖U(0)‖₂/m",
            value=lemma["lhs"] / lemma["rhs"],
            relation="<=",
            threshold=1.0,
            measured=f"‖Z(0)‖_F = {lemma['lhs']:.6g}, ‖X‖_F‖U(0)‖₂/m = {lemma['rhs']:.6g}",
            expected="ratio ≤ 1 (for every parameter value: W ⪯ (1 − m)I)",
        )
    )
    if eta is not None:
        out.append(step_size_hypothesis(eta, init.eta_max, width=init.width))
    return out


@dataclass(frozen=True)
class MonDEQTraining:
    """A GD run: η, the records of steps 0..T (:mod:`deqlab.train.mondeq_gd`) and why it
    stopped before its last step ("" when it did not)."""

    eta: float
    records: list[dict]
    message: str = ""


def train(init: MonDEQInit, *, steps: int, eta: float, progress: Progress = silent):
    """GD with step ``eta`` for ``steps`` steps from a copy of the initial network.

    Needs λ_0 > 0 (so n ≥ N): the trainer measures σ_min(Z(k)) against λ_0/2, which the
    thesis defines for n ≥ N only (Eq. 3.14).
    """
    if not init.constants.lambda0 > 0:
        raise ValueError(
            f"training the monotone DEQ needs λ_0 = σ_min(Z(0)) > 0, i.e. width ≥ N = "
            f"{init.inputs.n} (Eq. 3.14); got width {init.width}"
        )
    model = _model(init.inputs.d, init.width, init.monotonicity, init.seed)
    model.load_state_dict(init.model.state_dict())
    progress("gradient descent (monotone DEQ)", 0, steps)
    trainer = MonDEQGD(model, init.inputs.X, init.inputs.y, lr=eta, radius=init.radius)
    trainer.run(steps)
    if not trainer.stopped:
        trainer.evaluate()  # the record of θ(steps)
    progress("gradient descent (monotone DEQ)", steps, steps)
    return MonDEQTraining(eta, trainer.records, trainer.message)


def train_statements(init: MonDEQInit, run: MonDEQTraining) -> list[Statement]:
    """Condition 2 and η ≤ η_max as hypotheses, Theorem 3.3.5 and Propositions 5–6; Theorem
    3.3.5 also under Eq. (3.17) as Proposition 6's proof needs it (ours,
    :func:`~deqlab.papers.hieu2022.mondeq.eq_3_17_as_proved`)."""
    trace = trace_from_records(
        run.records,
        width=init.width,
        eta=run.eta,
        eta_max=init.eta_max,
        lambda0=init.constants.lambda0,
        radii=init.constants.radii,
    )
    return theorem_3_3_5(
        trace,
        init.conditions["Condition 2"],
        fits=init.fits,
        m=init.monotonicity,
        n_samples=init.inputs.n,
        as_proved=eq_3_17_as_proved(init.constants),
    )


def train_numbers(init: MonDEQInit, run: MonDEQTraining) -> dict[str, object]:
    """Predicted against measured: the rate per step and the final loss, and the records."""
    losses = [float(r["loss"]) for r in run.records]
    steps = len(losses) - 1
    predicted = gd_rate(init.constants.lambda0, run.eta) if run.eta <= init.eta_max else None
    ratios = [b / a for a, b in itertools.pairwise(losses) if a > 0]
    keys = ("step", "loss", "loss_bound", "sigma_min", *(f"dist_{p}" for p in PARAMETERS))
    return {
        "steps": steps,
        "eta": run.eta,
        "message": run.message,
        "loss0": losses[0],
        "loss_final": losses[-1],
        "rate_predicted": predicted,
        "rate_measured": measured_rate(losses[0], losses[-1], steps),
        "max_step_ratio": max(ratios, default=None),
        "records": [{k: r.get(k) for k in keys} for r in run.records],
    }

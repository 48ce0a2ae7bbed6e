"""``verify(X, y, model=...)``: every hypothesis and prediction of one paper on given data.

One call validates the data (:mod:`deqlab.verify.inputs`), measures what the paper's
theorems read at initialization (:mod:`~deqlab.verify.relu_deq` for Ling et al. 2023,
:mod:`~deqlab.verify.mondeq` for the thesis, :mod:`~deqlab.verify.delm` for Kawaguchi
2021), optionally trains with the theorem's step size, and returns a :class:`Verification`:
the statements (the same :class:`~deqlab.statements.Statement` objects the experiments
report) and every number under a stable key. ``deqlab verify`` prints it, as a table or
as JSON, and writes it as an HTML page with figures.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import deqlab
from deqlab._checks import check_choice, check_int, check_positive, check_real
from deqlab.statements import Counts, Statement
from deqlab.theory.kawaguchi2021 import check_radius
from deqlab.verify import delm, mondeq, relu_deq, relu_deq_train
from deqlab.verify.inputs import Inputs, prepare
from deqlab.verify.progress import Progress, silent

#: The models verify knows, and the paper each one checks.
MODELS = {
    "relu-deq": "Ling et al. (2023): ReLU DEQ, Condition 1, Theorems 1–3",
    "mondeq": "Hieu (2022), Chapter 3: monotone DEQ, Conditions 1–2, Theorem 3.3.5",
    "delm": "Kawaguchi (2021): deep equilibrium linear model, Theorem 1, Corollaries 1–2",
}
#: Width of the ReLU DEQ and of the monotone DEQ when none is given.
DEFAULT_WIDTH = 1000


@dataclass(frozen=True, eq=False)
class Verification:
    """What :func:`verify` found: ``statements`` and ``numbers`` (stable keys, see
    :meth:`as_dict`), ``training`` (None without ``train``), and the measured objects
    (``initial``, ``run``) the figures are drawn from."""

    model: str
    data: dict[str, Any]
    settings: dict[str, Any]
    numbers: dict[str, Any]
    training: dict[str, Any] | None
    statements: list[Statement]
    initial: Any = field(repr=False)
    run: Any = field(repr=False, default=None)

    @property
    def counts(self) -> Counts:
        return Counts.of(self.statements)

    def as_dict(self) -> dict[str, Any]:
        """The JSON document: model, data, settings, numbers, training, statements, verdicts."""
        counts = self.counts
        return {
            "deqlab_version": deqlab.__version__,
            "model": self.model,
            "paper": MODELS[self.model],
            "data": self.data,
            "settings": self.settings,
            "numbers": self.numbers,
            "training": self.training,
            "statements": [s.as_dict() for s in self.statements],
            "verdicts": counts.as_dict(),
            "verdict_sentence": counts.sentence(),
        }

    def write_html(self, out: str | os.PathLike[str]) -> Path:
        """Write the page (``<out>/index.html``) with its figures; return its path."""
        from deqlab.verify.page import write_page

        return write_page(self, Path(out))


def verify(
    X: object,
    y: object,
    model: str = "relu-deq",
    *,
    width: int | None = None,
    sigma_w2: float = 0.08,
    gamma: float = 0.8,
    seed: int = 0,
    train: int = 0,
    eta: float | None = None,
    normalize: bool = False,
    monotonicity: float = 0.2,
    radius: float = 1.0,
    epsilon: float | None = None,
    loss: str = "square",
    tau: float = 0.01,
    logistic_radius: float = math.inf,
    name: str = "data",
    progress: Progress = silent,
) -> Verification:
    """Check one paper's hypotheses and predictions on ``X`` (n, d) and ``y`` (n,).

    Args:
        model: ``"relu-deq"`` (Ling et al. 2023), ``"mondeq"`` (the thesis, Chapter 3) or
            ``"delm"`` (Kawaguchi 2021; its width is d, as φ(x) = x).
        width: hidden width m (default :data:`DEFAULT_WIDTH`; the DELM's is d).
        sigma_w2: σ_w² of Assumption 1 (ReLU DEQ); gamma: γ of the DELM.
        seed: the draw of the network at initialization.
        train: GD steps (0: none) with ``eta``, by default the theorem's step size.
        normalize: scale every input to norm √d (Assumption 2) before anything else.
        monotonicity, radius: m and R of the monotone DEQ (Section 3.3).
        epsilon: the accuracy ε of the DELM's time to ε (default: 10⁻³ of L_0 − L*).
        loss: the DELM's loss, ``"square"`` (Corollary 1) or ``"logistic"`` (Corollary 2,
            labels in {0, 1} or two classes), with ``tau`` (τ ≥ 0 of its τq² term; ours: 0.01
            by default, Figure 3's preset) and ``logistic_radius`` (R ∈ (0, ∞] of Corollary 2).
        name: what the data are called in the output.

    Raises :class:`~deqlab.verify.inputs.InputError` (a ValueError) for unusable data and
    ValueError/TypeError for a bad argument, each naming it.
    """
    check_choice("model", model, MODELS)
    settings = _settings(model, width, sigma_w2, gamma, seed, train, eta, monotonicity,
                         radius, epsilon)  # fmt: skip
    settings.update(_loss_settings(model, loss, tau, logistic_radius))
    inputs = prepare(X, y, name=name, normalize=normalize)
    if model == "delm" and width is not None and width != inputs.d:
        raise ValueError(f"`width` of the DELM is d = {inputs.d} (φ(x) = x); got {width}")
    settings["width"] = inputs.d if model == "delm" else settings["width"]
    run_model = {"relu-deq": _relu_deq, "mondeq": _mondeq, "delm": _delm}[model]
    return run_model(inputs, settings, progress)


def _settings(model, width, sigma_w2, gamma, seed, train, eta, monotonicity, radius, epsilon):
    """The arguments, checked, as the JSON ``settings``."""
    return {
        "model": model,
        "width": DEFAULT_WIDTH if width is None else check_int("width", width, min_value=1),
        "sigma_w2": check_real("sigma_w2", sigma_w2, low=0.0, high=1.0, low_inclusive=False,
                               high_inclusive=False),
        "gamma": check_real("gamma", gamma, low=0.0, high=1.0, low_inclusive=False,
                            high_inclusive=False),
        "seed": check_int("seed", seed, min_value=0),
        "train": check_int("train", train, min_value=0),
        "eta": None if eta is None else check_positive("eta", eta),
        "monotonicity": check_positive("monotonicity", monotonicity),
        "radius": check_positive("radius", radius),
        "epsilon": None if epsilon is None else check_positive("epsilon", epsilon),
    }  # fmt: skip


def _loss_settings(model: str, loss: str, tau: float, radius: float) -> dict[str, Any]:
    """The DELM's loss, τ and R, checked (the other models fit the square loss)."""
    check_choice("loss", loss, delm.LOSSES)
    if model != "delm" and loss != "square":
        raise ValueError(f"`loss` {loss!r} applies to the DELM (model='delm') only")
    return {"loss": loss, "tau": check_real("tau", tau, low=0.0),
            "logistic_radius": check_radius(radius)}  # fmt: skip


def _unique(statements: list[Statement]) -> list[Statement]:
    """One statement per name, the last one measured (training supersedes initialization),
    in the order names first appear."""
    latest = {s.name: s for s in statements}
    seen: list[str] = []
    for s in statements:
        if s.name not in seen:
            seen.append(s.name)
    return [latest[name] for name in seen]


def _no_eta(what: str) -> ValueError:
    return ValueError(f"{what}: give the step size with `eta` (--eta)")


def _relu_deq(inputs: Inputs, settings: dict, progress: Progress) -> Verification:
    init = relu_deq.initialize(inputs, width=settings["width"], sigma_w2=settings["sigma_w2"],
                               seed=settings["seed"], progress=progress)  # fmt: skip
    steps, eta = settings["train"], settings["eta"]
    if steps and eta is None:
        eta = relu_deq.theorem_eta(init)
        if eta is None:
            raise _no_eta("‖W(0)‖₂ ≥ 1: Eq. (10) gives no step size")
    found = relu_deq.statements(init, eta)
    training, run = None, None
    if steps:
        run = relu_deq_train.train(init, steps=steps, eta=eta, progress=progress)
        found += relu_deq_train.statements(init, run, relu_deq.guards(init, eta))
        training = relu_deq_train.numbers(init, run)
    numbers = relu_deq.numbers(init, eta)
    return Verification("relu-deq", inputs.summary(), settings, numbers, training,
                        _unique(found), init, run)  # fmt: skip


def _mondeq(inputs: Inputs, settings: dict, progress: Progress) -> Verification:
    init = mondeq.initialize(inputs, width=settings["width"],
                             monotonicity=settings["monotonicity"], radius=settings["radius"],
                             seed=settings["seed"], progress=progress)  # fmt: skip
    steps, eta = settings["train"], settings["eta"]
    if steps and eta is None:
        eta = init.eta_max
    found = mondeq.statements(init, eta)
    training, run = None, None
    if steps:
        run = mondeq.train(init, steps=steps, eta=eta, progress=progress)
        found += mondeq.train_statements(init, run)
        training = mondeq.train_numbers(init, run)
    return Verification("mondeq", inputs.summary(), settings, mondeq.numbers(init, eta),
                        training, _unique(found), init, run)  # fmt: skip


def _delm(inputs: Inputs, settings: dict, progress: Progress) -> Verification:
    loss = delm.Loss(settings["loss"], settings["tau"], settings["logistic_radius"])
    label_map = None
    if loss.name == "logistic":
        inputs, label_map = delm.binary_labels(inputs)
    init = delm.initialize(inputs, gamma=settings["gamma"], seed=settings["seed"], loss=loss,
                           progress=progress)  # fmt: skip
    steps, eta = settings["train"], settings["eta"]
    if steps and eta is None:
        eta = init.eta_theorem
    found = delm.statements(init, eta)
    training, run = None, None
    if steps:
        run = delm.train(init, steps=steps, eta=eta, progress=progress)
        found += delm.train_statements(init, run, settings["epsilon"])
        training = delm.train_numbers(init, run, settings["epsilon"])
    numbers = {**delm.numbers(init, eta, settings["epsilon"]), "label_map": label_map}
    return Verification("delm", inputs.summary(), settings, numbers, training, _unique(found),
                        init, run)  # fmt: skip

"""What verify needs of a model, one :class:`Check` protocol, implemented by one frozen
dataclass per model holding only the model's own settings (the way solvers hold only their
hyper-parameters); the flow they share is :mod:`deqlab.verification.flow`, what their
n×n work needs of memory :mod:`deqlab.verification.memory`.

- :class:`ReLUDEQCheck` (``width``, ``sigma_w2``): Ling et al. (2023), Condition 1,
  Theorems 1–3 (:mod:`deqlab.verification.relu_deq`); its ``refine`` measures again with
  narrower brackets where an answer needs them;
- :class:`MonDEQCheck` (``width``, ``monotonicity``, ``radius``): the thesis, Chapter 3
  (:mod:`deqlab.verification.mondeq`);
- :class:`DELMCheck` (``gamma``, ``loss``, ``tau``, ``logistic_radius``, ``epsilon``):
  Kawaguchi (2021) (:mod:`deqlab.verification.delm`; its width is d, as φ(x) = x).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Protocol, runtime_checkable

from deqlab._checks import check_choice, check_int, check_positive, check_real
from deqlab._memory import MemoryRefusal
from deqlab.papers import HIEU, KAWAGUCHI, LING
from deqlab.papers.kawaguchi2021.theory import check_radius
from deqlab.statements import Paper, Statement
from deqlab.verification import (
    answers,
    delm,
    delm_train,
    mondeq,
    relu_deq,
    relu_deq_numbers,
    relu_deq_statements,
    relu_deq_train,
    subsample,
)
from deqlab.verification.inputs import InputError, Inputs
from deqlab.verification.memory import Square, check_width_fits
from deqlab.verification.progress import Progress

#: Width of the ReLU DEQ and of the monotone DEQ when none is given.
DEFAULT_WIDTH = 1000
#: The widest network verify draws: W alone is m² float64 numbers (8·10¹⁰ bytes at 10⁵).
MAX_WIDTH = 100_000


def check_width(width: object) -> int:
    """``width`` as an int in [1, :data:`MAX_WIDTH`], naming the argument."""
    width = check_int("width", width, min_value=1)
    if width > MAX_WIDTH:
        raise ValueError(
            f"`width` must be <= {MAX_WIDTH} (W alone would take {8 * width**2:.2g} bytes, "
            f"m² float64 numbers); got {width}"
        )
    return width


def _open_unit(name: str, value: float) -> float:
    return check_real(name, value, low=0.0, high=1.0, low_inclusive=False, high_inclusive=False)


@runtime_checkable
class Check(Protocol):
    """What verify needs of a model: its name (``--model``), paper and what it covers, the
    memory its n×n work needs (or the subsample it answers from past memory), the network
    at initialization and what is measured there — an object with ``brackets()`` and
    ``at(corner)`` (:mod:`deqlab.verification.precision`) —, narrower brackets where an
    answer needs them, the step size to train with and why, the paper's claims, training,
    the numbers and the answers."""

    model: ClassVar[str]
    paper: ClassVar[Paper]
    covers: ClassVar[str]

    def memory_need(self, n: int, d: int, *, train: int, device: str) -> list[Square]:
        """The n×n computations on n points of dimension d (refused before any runs)."""

    def sample_size(self, n: int, d: int, device: str) -> int | None:
        """The subsample answered from where the n×n work does not fit (None: the whole
        data, or a refusal by :meth:`memory_need`)."""

    def initialize(self, inputs: Inputs, seed: int, progress: Progress, device: str) -> Any:
        """The network drawn from ``seed`` and what is measured on it at initialization."""

    def refine(self, init: Any, precision: float, progress: Progress, device: str) -> Any:
        """``init`` measured again with brackets ``precision`` wide; None where its brackets
        are as narrow as they go already."""

    def default_eta(self, init: Any) -> tuple[float, str]:
        """The step size to train with when none is given, and why (the theorem's where it
        applies)."""

    def statements(self, init: Any, eta: float | None) -> list[Statement]:
        """The paper's claims at initialization."""

    def train(self, init: Any, steps: int, eta: float, progress: Progress) -> Any:
        """The run of ``steps`` GD steps of size ``eta`` from ``init``'s network."""

    def on_run(self, init: Any, run: Any, eta: float) -> tuple[list[Statement], dict[str, Any]]:
        """(the claims on ``run``, its numbers), with ``init`` at its estimates or at a corner
        of its brackets."""

    def numbers(self, init: Any, eta: float | None) -> dict[str, Any]:
        """Every number measured at initialization, under stable keys."""

    def answers(
        self, init: Any, numbers: dict, training: dict | None, statements: list[Statement]
    ) -> list[answers.Answer]:
        """One line per theorem, read off the ``statements``: it applies, at a larger width,
        at none, or undecided."""


@dataclass(frozen=True)
class ReLUDEQCheck:
    """Ling et al. (2023) on a ReLU DEQ of width ``width`` drawn with Assumption 1's σ_w²."""

    width: int = DEFAULT_WIDTH
    sigma_w2: float = 0.08
    model: ClassVar[str] = "relu-deq"
    paper: ClassVar[Paper] = LING
    covers: ClassVar[str] = "ReLU DEQ, Condition 1, Theorems 1–3"

    def __post_init__(self) -> None:
        object.__setattr__(self, "width", check_width(self.width))
        object.__setattr__(self, "sigma_w2", _open_unit("sigma_w2", self.sigma_w2))

    def memory_need(self, n: int, d: int, *, train: int, device: str) -> list[Square]:
        """K, the DEQ NTK and a work array (on ``device``), H(0) of Eq. (4) where the
        stand-ins or training need it, and W(0) with the m×m work of its solves; nothing
        n×n past memory without training (a subsample answers: :meth:`sample_size`)."""
        m = self.width
        check_width_fits(m, 3, "W(0) and the m×m work of its solves and norms")
        if not train and self.sample_size(n, d, device) is not None:
            if m >= n:
                raise MemoryRefusal(
                    f"`width`: K of n = {n:,} points does not fit in memory, and a subsample "
                    f"answers only widths m < n, where λ_0 = 0 by rank; at m = {m:,} ≥ n, λ_0 "
                    f"would need Z(0)ᵀZ(0) on every point (n×n): give a width below {n:,}"
                )
            return []
        stand_ins = n <= relu_deq.STANDIN_LIMIT or train
        what = "K, the DEQ NTK over it and a work array"
        per_point = 8 * (d + 4 * m)  # X, Z(0), the adjoint and gradients (m each)
        if device == "cpu":
            buffers = relu_deq.STANDIN_BUFFERS if stand_ins else relu_deq.KERNEL_BUFFERS
            return [
                Square(what + (", then H(0) of Eq. (4)" if stand_ins else ""), buffers, per_point)
            ]
        on_device = Square(what, relu_deq.KERNEL_BUFFERS, 8 * d, device)
        # K and the NTK on the device; H(0) and the network on the CPU
        cpu = relu_deq.STANDIN_BUFFERS if stand_ins else 0
        return [
            on_device,
            Square(what + (", then H(0) of Eq. (4)" if stand_ins else ""), cpu, per_point),
        ]

    def sample_size(self, n: int, d: int, device: str = "cpu") -> int | None:
        """The size of the subsample verify answers from where K does not fit
        (:func:`deqlab.verification.subsample.size_for`); None where it fits."""
        per_point = 8 * (d + 4 * self.width)  # X, Z(0), the adjoint and gradients (m each)
        return subsample.size_for(
            n, d, buffers=relu_deq.KERNEL_BUFFERS, per_point=per_point, device=device
        )

    def initialize(
        self,
        inputs: Inputs,
        seed: int,
        progress: Progress,
        device: str = "cpu",
        precision: float = relu_deq.PRECISION,
    ):
        return relu_deq.initialize(
            inputs,
            width=self.width,
            sigma_w2=self.sigma_w2,
            seed=seed,
            progress=progress,
            device=device,
            precision=precision,
        )

    def default_eta(self, init) -> tuple[float, str]:
        return relu_deq.default_step(init)

    def statements(self, init, eta: float | None) -> list[Statement]:
        found = relu_deq_statements.statements(init, eta)
        sample = init.inputs.sample
        return found if sample is None else subsample.one_sided(found, sample)

    def train(self, init, steps: int, eta: float, progress: Progress):
        return relu_deq_train.train(init, steps=steps, eta=eta, progress=progress)

    def on_run(self, init, run, eta: float):
        found = relu_deq_train.statements(init, run, relu_deq_statements.guards(init, eta))
        return found, relu_deq_train.numbers(init, run)

    def numbers(self, init, eta: float | None) -> dict[str, Any]:
        return relu_deq_numbers.numbers(init, eta)

    def answers(self, init, numbers: dict, training: dict | None, statements: list[Statement]):
        return answers.relu_deq(init, numbers, training, statements)

    def refine(self, init, precision: float, progress: Progress, device: str):
        """``init`` measured again with brackets ``precision`` wide (the same network)."""
        return self.initialize(init.inputs, init.seed, progress, device, precision)


@dataclass(frozen=True)
class MonDEQCheck:
    """The thesis (Chapter 3) on a monotone DEQ of width ``width`` (the thesis' n),
    W = (1 − m)I − AᵀA + B − Bᵀ with m = ``monotonicity``, balls of radius ``radius``."""

    width: int = DEFAULT_WIDTH
    monotonicity: float = 0.2
    radius: float = 1.0
    model: ClassVar[str] = "mondeq"
    paper: ClassVar[Paper] = HIEU
    covers: ClassVar[str] = "Chapter 3, monotone DEQ, Conditions 1–2, Theorems 3.3.1, 3.3.5"

    def __post_init__(self) -> None:
        object.__setattr__(self, "width", check_width(self.width))
        object.__setattr__(self, "monotonicity", check_positive("monotonicity", self.monotonicity))
        object.__setattr__(self, "radius", check_positive("radius", self.radius))

    def memory_need(self, n: int, d: int, *, train: int, device: str) -> list[Square]:
        """The monotone DEQs up to the widest of the width fits (2·max(width, 4n))."""
        if self.width >= mondeq.FIT_WIDTH_FACTOR * n:  # the fits go to 2·width
            check_width_fits(2 * self.width, 6, "the monotone DEQ at the widest fit width")
        top = 2 * max(self.width, mondeq.FIT_WIDTH_FACTOR * n)  # the widest fit network
        what = f"the monotone DEQs up to width {top} (W, A, B, the splitting's inverse)"
        return [Square(what, 6 * (top / n) ** 2, 8 * (d + 4 * top))]

    def sample_size(self, n: int, d: int, device: str = "cpu") -> int | None:
        return None  # the fits need every sample: past memory, refused

    def refine(self, init, precision: float, progress: Progress, device: str) -> None:
        return None  # λ_0's bracket is dense: as narrow as rounding lets it be

    def initialize(self, inputs: Inputs, seed: int, progress: Progress, device: str = "cpu"):
        _cpu_only(self, device)
        return mondeq.initialize(
            inputs,
            width=self.width,
            monotonicity=self.monotonicity,
            radius=self.radius,
            seed=seed,
            progress=progress,
        )

    def default_eta(self, init) -> tuple[float, str]:
        return init.eta_max, "the theorem's: Theorem 3.3.5's η_max"

    def statements(self, init, eta: float | None) -> list[Statement]:
        return mondeq.statements(init, eta)

    def train(self, init, steps: int, eta: float, progress: Progress):
        return mondeq.train(init, steps=steps, eta=eta, progress=progress)

    def on_run(self, init, run, eta: float):
        return mondeq.train_statements(init, run), mondeq.train_numbers(init, run)

    def numbers(self, init, eta: float | None) -> dict[str, Any]:
        return mondeq.numbers(init, eta)

    def answers(self, init, numbers: dict, training: dict | None, statements: list[Statement]):
        return answers.mondeq(init, numbers, training)


@dataclass(frozen=True)
class DELMCheck:
    """Kawaguchi (2021) on a DELM (width d) with γ = ``gamma`` and the ``loss`` of
    Corollary 1 (``"square"``) or 2 (``"logistic"`` + τq², ``tau``, radius
    ``logistic_radius``); ``epsilon``: the ε of the time to ε (default 10⁻³ of L₀ − L*)."""

    gamma: float = 0.8
    loss: str = "square"
    tau: float = 0.01
    logistic_radius: float = math.inf
    epsilon: float | None = None
    model: ClassVar[str] = "delm"
    paper: ClassVar[Paper] = KAWAGUCHI
    covers: ClassVar[str] = "deep equilibrium linear model, Theorem 1, Corollaries 1–2"

    def __post_init__(self) -> None:
        object.__setattr__(self, "gamma", _open_unit("gamma", self.gamma))
        check_choice("loss", self.loss, delm.LOSSES)
        object.__setattr__(self, "tau", check_real("tau", self.tau, low=0.0))
        object.__setattr__(self, "logistic_radius", check_radius(self.logistic_radius))
        if self.epsilon is not None:
            object.__setattr__(self, "epsilon", check_positive("epsilon", self.epsilon))

    def memory_need(self, n: int, d: int, *, train: int, device: str) -> list[Square]:
        """The DELM's inputs and equilibria: no n×n array."""
        return [Square("the DELM's inputs and equilibria", 0, 8 * 4 * d)]

    def sample_size(self, n: int, d: int, device: str = "cpu") -> int | None:
        return None  # no n×n work

    def refine(self, init, precision: float, progress: Progress, device: str) -> None:
        return None  # λ_min(D_0)'s bracket is dense (m×m): as narrow as rounding lets it be

    def initialize(self, inputs: Inputs, seed: int, progress: Progress, device: str = "cpu"):
        _cpu_only(self, device)
        if inputs.d > MAX_WIDTH:
            raise InputError(f"the DELM's width is d = {inputs.d}; at most {MAX_WIDTH} is drawn")
        loss = delm.Loss(self.loss, self.tau, self.logistic_radius)
        label_map = None
        if loss.name == "logistic":
            inputs, label_map = delm.binary_labels(inputs)
        init = delm.initialize(inputs, gamma=self.gamma, seed=seed, loss=loss, progress=progress)
        return replace(init, label_map=label_map)

    def default_eta(self, init) -> tuple[float, str]:
        return init.eta_theorem, "the theorem's: half of 1/λ_max(∇²L), where GD follows the flow"

    def statements(self, init, eta: float | None) -> list[Statement]:
        return delm.statements(init, eta)

    def train(self, init, steps: int, eta: float, progress: Progress):
        return delm_train.train(init, steps=steps, eta=eta, progress=progress)

    def on_run(self, init, run, eta: float):
        found = delm_train.train_statements(init, run, self.epsilon)
        return found, delm_train.train_numbers(init, run, self.epsilon)

    def numbers(self, init, eta: float | None) -> dict[str, Any]:
        return {**delm.numbers(init, eta, self.epsilon), "label_map": init.label_map}

    def answers(self, init, numbers: dict, training: dict | None, statements: list[Statement]):
        return answers.delm(init, numbers, training)


#: The checks by the name ``--model`` takes.
CHECKS: dict[str, type] = {c.model: c for c in (ReLUDEQCheck, MonDEQCheck, DELMCheck)}


def check_for(model: str | Check) -> Check:
    """``model`` as a check: a check as given, a name of :data:`CHECKS` with its defaults."""
    if isinstance(model, Check):
        return model
    return CHECKS[check_choice("model", model, CHECKS)]()


def check_model(model: str, settings: dict[str, Any]) -> Check:
    """The check ``model`` names, built from the command line's ``settings``: the fields
    it has (None: its default); a DELM option given to another model is refused."""
    cls = CHECKS[check_choice("model", model, CHECKS)]
    check_choice("loss", settings.get("loss", "square"), delm.LOSSES)
    if cls is not DELMCheck and settings.get("loss", "square") != "square":
        raise ValueError(f"`loss` {settings['loss']!r} applies to the DELM (--model delm) only")
    names = cls.__dataclass_fields__
    return cls(**{k: v for k, v in settings.items() if k in names and v is not None})


def _cpu_only(check: Check, device: str) -> None:
    if device != "cpu":
        raise ValueError(
            f"`device` {device!r} applies to --model relu-deq (its n×n kernels); the "
            f"{check.model} check runs on the CPU"
        )

"""Ling et al. (2023) on the user's data and a ReLU DEQ of width m: what is measured at
initialization (the statements built from it: :mod:`deqlab.verification.relu_deq_statements`).

- λ* = λ_min(K) (Eq. 14), cond(K), and the DEQ NTK's λ_min beside it (that of
  :func:`deqlab.theory.ntk.deq_ntk`, standard parameterization: lim Θ/m = K + P⊙K, read
  off K with its ``gram`` option), each with a certified bracket
  (:mod:`deqlab.theory.brackets`) at most ``precision`` wide; K does not depend on the
  width (:func:`kernels`, reused by a width sweep);
- a network drawn from Assumption 1 (``seed``): λ_0 = λ_min(Z(0)ᵀZ(0)) with a bracket of
  the exact equilibrium's λ_0 (the solve's error and the product's rounding included:
  :mod:`deqlab.verification.equilibrium_error`) and Theorem 2's mλ*/2 beside it (λ_0 = 0
  exactly when m < n: Z(0)ᵀZ(0) has rank ≤ m);
- Condition 1, Eqs. (7)–(9), each with its margin lhs/rhs, at the δ that maximizes the
  smallest margin (:func:`deqlab.papers.ling2023.theory.best_delta`);
- the smallest width at which Condition 1 would hold (:func:`widths_needed`), under
  :data:`SCALING`: λ_0 = mλ*/2 as Theorem 2 gives, ‖U(0)‖₂ ∝ √m, the other constants as
  measured (Section 3.2); where Eq. (9) never holds, its margin's limit and the bound
  :func:`deqlab.papers.ling2023.theory.eq9_margin_bound` it stays under;
- Eq. (10)'s bound on η and the rate 1 − ηλ_0/2 it implies (Theorem 1 (iii));
- Theorem 2's width n²λ*⁻² log(n/(λ*t)) without its constant: the proof (Section 4.4)
  makes explicit the accuracy λ*/2 that ‖G/m − K‖_F must reach (Weyl) and the per-layer
  factor 2√2σ_w, but its Ω and O hide the absolute constants of Bernstein's inequality and
  of an ε-net argument (Theorems 4–5), which the paper does not give: Theorem 2 is then
  NOT APPLICABLE, never FAIL;
- for the stand-ins (ours, :mod:`deqlab.verification.stand_ins`): λ_max(H(0)) and the PL
  ratio ‖∇Φ(0)‖²/(2Φ(0)) = rᵀH(0)r/rᵀr of Eq. (4)'s H (n ≤ :data:`STANDIN_LIMIT`).

Every number under a stable key: :mod:`deqlab.verification.relu_deq_numbers`.
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass, replace

import numpy as np
import torch

from deqlab.models.relu_deq import ReLUDEQ
from deqlab.papers.ling2023 import theory as ling2023
from deqlab.papers.ling2023.init_theorems import lemma1_bound
from deqlab.papers.ling2023.theory import (
    EQUATIONS,
    Condition1,
    Constants,
    best_delta,
    condition1_width,
    learning_rate,
    required_width,
)
from deqlab.theory.brackets import Bracket
from deqlab.theory.kernels import LeastEigenvalue, population_gram
from deqlab.theory.ntk import deq_ntk, pl_gram
from deqlab.theory.spectra import (
    PRECISION,
    Reuse,
    least_eigenvalue_large,
    spectral_norm,
    spectral_norm_lanczos,
)
from deqlab.verification import subsample
from deqlab.verification.equilibrium_error import (
    relu_deq_error,
    sigma_min_of_equilibrium,
    squared,
)
from deqlab.verification.inputs import Inputs
from deqlab.verification.progress import Progress, silent

#: The scaling under which the width Condition 1 needs is solved (Theorem 2, Section 3.2).
SCALING = "λ_0 = mλ*/2 (Theorem 2), ‖U(0)‖₂ ∝ √m, ‖W(0)‖₂, ‖a(0)‖₂, ‖ŷ(0) − y‖₂ as measured"
#: What the one "width needed" number is (the statements' ``needs`` use the same scaling).
WIDTH_NEEDED = (
    "the smallest width ≥ the given one at which Condition 1 holds (Eqs. (7)–(9) at one δ; "
    "each equation alone, δ free, beside it), under the scaling above"
)
#: Theorem 2 holds with probability ≥ 1 − t; the width scale is quoted at this t.
THEOREM2_T = 0.01
#: "The theorem's η" of Theorem 1: Eq. (10) is strict, so half of its bound.
ETA_FRACTION = 0.5
#: Lemma 1's finite-m bound may fail with this probability per draw.
LEMMA1_P = 1e-6
#: Equilibria at initialization are solved to this relative residual.
SOLVE_TOL = 1e-10
#: Above this width ‖W(0)‖₂ and ‖U(0)‖₂ come from Lanczos instead of an exact SVD.
EXACT_NORM_LIMIT = 2000
#: Up to this n, H(0) of Eq. (4) is formed for the stand-ins (ours: its n×n blocks).
STANDIN_LIMIT = 5000
#: n×n float64 arrays held at once at initialization: K (then the NTK over it) and the work
#: array of the eigenvalue solves and their proofs (later Z(0)ᵀZ(0) and its).
KERNEL_BUFFERS = 2
#: n×n arrays of H(0) = H1 + H2 + H3 of the stand-ins (its blocks and their sum).
STANDIN_BUFFERS = 4


@dataclass(frozen=True, eq=False)
class ReLUDEQInit:
    """Everything measured at initialization (module docstring); ``cond`` is None when
    ‖W(0)‖₂ ≥ 1 (no δ exists, nothing is solved)."""

    inputs: Inputs
    width: int
    sigma_w2: float
    seed: int
    K: LeastEigenvalue
    ntk: LeastEigenvalue
    model: ReLUDEQ
    W_norm: float
    cond: Condition1 | None
    curvature: float | None = None
    pl_ratio0: float | None = None
    h_lambda_min0: float | None = None
    gram0: LeastEigenvalue | None = None
    precision: float = PRECISION

    @property
    def lambda_star(self) -> float:
        return self.K.value

    def bounds(self) -> dict[str, Bracket]:
        """The certified brackets of the least eigenvalues measured (JSON ``<name>_bounds``);
        one-sided ([0, an upper bound]) from a subsample."""
        found = {"lambda_star": self.K.bracket, "ntk_lambda_min": self.ntk.bracket}
        if self.gram0 is not None:
            found["lambda0"] = self.gram0.bracket
        return {name: b for name, b in found.items() if b is not None}

    def brackets(self) -> dict[str, Bracket]:
        """The two-sided brackets the answers are settled at
        (:mod:`deqlab.verification.precision`); none from a subsample, whose statements and
        answers are one-sided (:func:`deqlab.verification.subsample.one_sided`)."""
        return {} if self.inputs.sample is not None else self.bounds()

    def at(self, values: dict[str, float]) -> ReLUDEQInit:
        """These measurements with the bracketed ones set to ``values`` (a corner of the
        brackets: :mod:`deqlab.verification.precision`); Condition 1 re-evaluated at λ_0."""
        K = replace(self.K, value=values.get("lambda_star", self.K.value))
        ntk = replace(self.ntk, value=values.get("ntk_lambda_min", self.ntk.value))
        cond = self.cond
        if cond is not None and "lambda0" in values:
            cond = _condition_at(replace(cond.constants, lambda0=values["lambda0"]))
        return replace(self, K=K, ntk=ntk, cond=cond)

    @property
    def lambda0(self) -> float | None:
        return None if self.cond is None else float(self.cond.lambda0)

    @property
    def predicted_lambda0(self) -> float:
        """Theorem 2's mλ*/2."""
        return self.width * self.lambda_star / 2

    def scaled_constants(self) -> Constants | None:
        """The measured constants with λ_0 replaced by Theorem 2's mλ*/2 (:data:`SCALING`)."""
        if self.cond is None:
            return None
        return replace(self.cond.constants, lambda0=self.predicted_lambda0)


@dataclass(frozen=True, eq=False)
class Kernels:
    """What does not depend on the width: λ* = λ_min(K) and λ_min of the DEQ NTK, their
    brackets asked ``precision`` wide."""

    K: LeastEigenvalue
    ntk: LeastEigenvalue
    precision: float = PRECISION


def kernels(
    inputs: Inputs,
    sigma_w2: float,
    progress: Progress = silent,
    *,
    device: str = "cpu",
    precision: float = PRECISION,
) -> Kernels:
    """K (Eq. 14) and the DEQ NTK read off it (:func:`deqlab.theory.ntk.deq_ntk`), λ_min of
    each with a certified bracket ``precision`` wide (dense estimates: as narrow as rounding
    allows), in two n×n buffers (:data:`KERNEL_BUFFERS`) on ``device``: K, its estimate and
    proof, then the NTK written over K, its estimate — preconditioned by the factor that
    certified K (:class:`~deqlab.theory.spectra.Reuse`) — and proof, in one work array.
    Inputs past memory (``inputs.sample``): both from the subsample S, each bracket
    [0, a certified upper bound] (:func:`deqlab.verification.subsample.kernels`)."""
    sample = inputs.sample
    if sample is not None:
        X_S = inputs.subset(sample.indices).X.to(device)
        return Kernels(*subsample.kernels(X_S, sigma_w2, sample, progress))
    X = inputs.X.to(device)
    with warnings.catch_warnings():  # Assumption 1 is reported as a hypothesis statement
        warnings.simplefilter("ignore")
        gram = population_gram(X, sigma_w2, progress=progress)
        work, reuse = torch.empty_like(gram), Reuse()

        def least(M: torch.Tensor) -> LeastEigenvalue:
            return least_eigenvalue_large(
                M, work=work, reuse=reuse, precision=precision, progress=progress
            )

        K = least(gram)
        ntk = least(deq_ntk(X, sigma_w2, gram=gram, out=gram, progress=progress))
    return Kernels(K, ntk, precision)


def initialize(
    inputs: Inputs,
    *,
    width: int,
    sigma_w2: float,
    seed: int,
    progress: Progress = silent,
    known: Kernels | None = None,
    device: str = "cpu",
    precision: float = PRECISION,
) -> ReLUDEQInit:
    """Measure everything of the module docstring for ``inputs`` and a width-``width`` DEQ
    (``known``: the :func:`kernels` of these inputs, reused across widths, else computed
    on ``device`` with brackets ``precision`` wide). Inputs past memory (``inputs.sample``,
    :mod:`deqlab.verification.subsample`): K and the NTK on the subsample S, Z(0) on S,
    ‖X‖_F over every point, λ_0 = 0 by rank."""
    sample = inputs.sample
    solved = inputs if sample is None else inputs.subset(sample.indices)
    X, y = solved.X, solved.y
    if known is None:
        known = kernels(inputs, sigma_w2, progress, device=device, precision=precision)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = ReLUDEQ.init(inputs.d, width, sigma_w2=sigma_w2, seed=seed)
    progress(f"equilibrium Z(0) at width {width}, λ_0, Condition 1", 3, 4)
    W_norm = _norm(model.W.detach())
    if not W_norm < 1.0:
        return ReLUDEQInit(
            inputs, width, sigma_w2, seed, known.K, known.ntk, model, W_norm, None,
            precision=known.precision,
        )  # fmt: skip
    Z = model.equilibrium(X, tol=SOLVE_TOL).raise_if_failed("forward").Z  # (m, n)
    residual = model.predict(Z).detach() - y  # (n,)
    gram0 = (
        _gram_lambda_min(model, X, Z) if sample is None else subsample.rank_zero(width, inputs.n)
    )
    constants = Constants(
        gram0.value,
        W_norm,
        _norm(model.U.detach()),
        float(model.a.detach().norm()),
        float(inputs.X.norm()),
        float(residual.norm()),
    )
    curvature, pl0, bottom = _curvature(model, X, residual) if sample is None else (None,) * 3
    return ReLUDEQInit(
        inputs,
        width,
        sigma_w2,
        seed,
        known.K,
        known.ntk,
        model,
        W_norm,
        evaluate_condition1(constants),
        curvature,
        pl0,
        bottom,
        gram0,
        known.precision,
    )


def _curvature(model: ReLUDEQ, X: torch.Tensor, r: torch.Tensor) -> tuple:
    """(λ_max(H(0)), rᵀH(0)r/rᵀr = ‖∇Φ(0)‖²/(2Φ(0)), λ_min(H(0))) with H = H1 + H2 + H3
    of Eq. (4), r = ŷ(0) − y (Lemma 2: ‖∇Φ‖² = rᵀHr); Nones above :data:`STANDIN_LIMIT`."""
    if X.shape[1] > STANDIN_LIMIT or not float(r @ r) > 0:
        return None, None, None
    H = pl_gram(model, X, tol=SOLVE_TOL)  # (n, n)
    spectrum = least_eigenvalue_large(H)
    return spectrum.max_eigenvalue, float(r @ (H @ r) / (r @ r)), spectrum.value


def _norm(A: torch.Tensor) -> float:
    if max(A.shape) <= EXACT_NORM_LIMIT:
        return spectral_norm(A)
    return spectral_norm_lanczos(A, tol=1e-12, max_iter=500)[0]


def _gram_lambda_min(model: ReLUDEQ, X: torch.Tensor, Z: torch.Tensor) -> LeastEigenvalue:
    """λ_0 = λ_min(Z*ᵀZ*) of the exact equilibrium Z* (m, n), estimated on the computed Z,
    with a bracket of λ_0 itself: λ_min(fl(ZᵀZ))'s widened by the product's rounding and
    the solve's error (:mod:`deqlab.verification.equilibrium_error`); 0 exactly when m < n
    (rank ≤ m), 0 when singular to working precision."""
    m, n = Z.shape
    if m < n:
        proof = f"rank(Z(0)ᵀZ(0)) ≤ m = {m} < n = {n}: λ_0 = 0 exactly"
        reason = f"m = {m} < n = {n}: Z(0)ᵀZ(0) has rank ≤ m"
        return LeastEigenvalue(0.0, 0.0, math.nan, 0.0, True, reason, Bracket(0, 0, proof, proof))
    found = least_eigenvalue_large(Z.T @ Z)
    error, how = relu_deq_error(model, X, Z)
    sigma = sigma_min_of_equilibrium(found.bracket, Z, error, how)
    return replace(found, bracket=squared(sigma))


@functools.lru_cache(maxsize=64)
def _condition_at(constants: Constants) -> Condition1:
    """:func:`evaluate_condition1`, once per λ_0 the corners of the brackets share."""
    return evaluate_condition1(constants)


def evaluate_condition1(constants: Constants) -> Condition1:
    """Condition 1 and Eq. (10) at the best δ; with λ_0 = 0 every margin is 0 and δ is
    taken at the middle of (0, 1 − ‖W(0)‖₂) (Eq. (10) then has only its second term)."""
    if constants.lambda0 > 0:
        return Condition1.evaluate(best_delta(constants), constants)
    zero = replace(constants, lambda0=np.float64(0.0))  # 2/λ_0 = inf in Eq. (10)
    with np.errstate(divide="ignore"):
        return Condition1.evaluate((1.0 - constants.W_norm) / 2, zero)


@functools.lru_cache(maxsize=64)
def widths_needed(constants: Constants, m: int) -> dict[str, float]:
    """The smallest width ≥ m at which Condition 1 holds (one δ for Eqs. (7)–(9)) and at
    which each of Eqs. (7)–(9) holds alone (δ free), from ``constants`` measured at m
    (:func:`deqlab.papers.ling2023.theory.condition1_width`, ``required_width``); none (inf)
    when λ_0 = 0 there (λ* = 0: λ_0 = mλ*/2 = 0 at every width)."""
    if not constants.lambda0 > 0:
        return dict.fromkeys(("condition1", *EQUATIONS), math.inf)
    return {
        "condition1": condition1_width(constants, m, low=m),
        **{key: required_width(constants, m, key) for key in EQUATIONS},
    }


def theorem2_scale(n: int, lambda_star: float) -> float:
    """Theorem 2's width scale at t = :data:`THEOREM2_T`
    (:func:`deqlab.papers.ling2023.theory.theorem2_scale`)."""
    return ling2023.theorem2_scale(n, lambda_star, THEOREM2_T)


def lemma1_value(init: ReLUDEQInit) -> float:
    """2√2σ_w(1 + √(ln(1/p)/(2m))), Lemma 1's bound at width m failing with probability p
    (:data:`LEMMA1_P`)."""
    with warnings.catch_warnings():  # Assumption 1 is its own statement
        warnings.simplefilter("ignore")
        return lemma1_bound(init.sigma_w2, init.width, LEMMA1_P)


def default_step(init: ReLUDEQInit) -> tuple[float, str]:
    """The η ``train`` uses when none is given, and why: half of Eq. (10)'s bound where
    Condition 1 holds (Theorem 1 applies); else the stand-in 1/λ_max(H(0)) (ours), where
    measured — Eq. (10)'s η guarantees nothing outside Condition 1 and is often thousands of
    times smaller; else ValueError asking for one."""
    if init.cond is None:
        raise ValueError("‖W(0)‖₂ ≥ 1: Eq. (10) gives no step size; give one with `eta`")
    theorem, m = theorem_eta(init), init.width
    if init.cond.holds:
        return theorem, f"the theorem's: half of Eq. (10)'s bound, as Condition 1 holds at m = {m}"
    if init.curvature is not None and init.curvature > 0:
        eta = 1.0 / init.curvature
        return eta, (
            f"the stand-in 1/λ_max(H(0)) (ours), as Condition 1 fails at m = {m}: the theorem's "
            f"η = {theorem:.3g} (half of Eq. (10)'s bound) guarantees nothing there, and is "
            f"{eta / theorem:.3g} times smaller"
        )
    raise ValueError(
        f"`eta`: Condition 1 fails at m = {m}, so the theorem's η = {theorem:.3g} guarantees "
        f"nothing, and the stand-in 1/λ_max(H(0)) is measured only for n ≤ {STANDIN_LIMIT}: "
        "give a step size with --eta"
    )


def theorem_eta(init: ReLUDEQInit) -> float | None:
    """η = :data:`ETA_FRACTION` × Eq. (10)'s bound (None when Condition 1 is not defined)."""
    return None if init.cond is None else learning_rate(init.cond, ETA_FRACTION)

"""Ling et al. (2023) on the user's data and a ReLU DEQ of width m: what is measured at
initialization (the statements built from it: :mod:`deqlab.verification.relu_deq_statements`).

- λ* = λ_min(K) (Eq. 14), cond(K), and the DEQ NTK's λ_min beside it (that of
  :func:`deqlab.theory.ntk.deq_ntk`, standard parameterization: lim Θ/m = K + P⊙K, read
  off K with its ``gram`` option); K does not depend on the width (:func:`kernels`, reused
  by a width sweep);
- a network drawn from Assumption 1 (``seed``): λ_0 = λ_min(Z(0)ᵀZ(0)) with Theorem 2's
  mλ*/2 beside it (λ_0 = 0 exactly when m < n: Z(0)ᵀZ(0) has rank ≤ m);
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
- for the stand-ins (ours, :mod:`deqlab.verification.answers`): λ_max(H(0)) and the PL ratio
  ‖∇Φ(0)‖²/(2Φ(0)) = rᵀH(0)r/rᵀr of Eq. (4)'s H (n ≤ :data:`STANDIN_LIMIT`).
"""

from __future__ import annotations

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
    MAX_WIDTH,
    Condition1,
    Constants,
    best_delta,
    condition1_width,
    eq9_margin_bound,
    learning_rate,
    required_width,
    width_margin,
)
from deqlab.theory.kernels import LeastEigenvalue, population_gram
from deqlab.theory.ntk import deq_ntk, pl_gram
from deqlab.theory.spectra import (
    DENSE_LIMIT,
    Reuse,
    least_eigenvalue_large,
    spectral_norm,
    spectral_norm_lanczos,
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
#: array of the eigenvalue solves (later Z(0)ᵀZ(0) and its work array).
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

    @property
    def lambda_star(self) -> float:
        return self.K.value

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
    """What does not depend on the width: λ* = λ_min(K) and λ_min of the DEQ NTK."""

    K: LeastEigenvalue
    ntk: LeastEigenvalue


def kernels(
    inputs: Inputs, sigma_w2: float, progress: Progress = silent, *, device: str = "cpu"
) -> Kernels:
    """K (Eq. 14) and the DEQ NTK read off it (:func:`deqlab.theory.ntk.deq_ntk`), λ_min of
    each, in two n×n buffers (:data:`KERNEL_BUFFERS`) on ``device``: K, then the NTK written
    over K once λ* is taken, and one work array for both eigenvalue solves."""
    X = inputs.X.to(device)
    with warnings.catch_warnings():  # Assumption 1 is reported as a hypothesis statement
        warnings.simplefilter("ignore")
        gram = population_gram(X, sigma_w2, progress=progress)
        work = torch.empty_like(gram) if gram.shape[0] > DENSE_LIMIT else None
        reuse = Reuse()  # K's float32 factor preconditions the NTK ⪰ K too
        K = least_eigenvalue_large(gram, work=work, progress=progress, reuse=reuse)
        kernel = deq_ntk(X, sigma_w2, gram=gram, out=gram, progress=progress)
        ntk = least_eigenvalue_large(kernel, work=work, progress=progress, reuse=reuse)
    return Kernels(K, ntk)


def initialize(
    inputs: Inputs,
    *,
    width: int,
    sigma_w2: float,
    seed: int,
    progress: Progress = silent,
    known: Kernels | None = None,
) -> ReLUDEQInit:
    """Measure everything of the module docstring for ``inputs`` and a width-``width`` DEQ
    (``known``: the :func:`kernels` of these inputs, reused across widths)."""
    X, y = inputs.X, inputs.y
    known = known or kernels(inputs, sigma_w2, progress)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = ReLUDEQ.init(inputs.d, width, sigma_w2=sigma_w2, seed=seed)
    progress(f"equilibrium Z(0) at width {width}, λ_0, Condition 1", 3, 4)
    W_norm = _norm(model.W.detach())
    if not W_norm < 1.0:
        return ReLUDEQInit(inputs, width, sigma_w2, seed, known.K, known.ntk, model, W_norm, None)
    Z = model.equilibrium(X, tol=SOLVE_TOL).raise_if_failed("forward").Z  # (m, n)
    residual = model.predict(Z).detach() - y  # (n,)
    constants = Constants(
        _gram_lambda_min(Z),
        W_norm,
        _norm(model.U.detach()),
        float(model.a.detach().norm()),
        float(X.norm()),
        float(residual.norm()),
    )
    curvature, pl0, bottom = _curvature(model, X, residual)
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


def _gram_lambda_min(Z: torch.Tensor) -> float:
    """λ_min(ZᵀZ) for Z (m, n): 0 when m < n (rank ≤ m) or singular to working precision."""
    m, n = Z.shape
    if m < n:
        return 0.0
    return least_eigenvalue_large(Z.T @ Z).value


def evaluate_condition1(constants: Constants) -> Condition1:
    """Condition 1 and Eq. (10) at the best δ; with λ_0 = 0 every margin is 0 and δ is
    taken at the middle of (0, 1 − ‖W(0)‖₂) (Eq. (10) then has only its second term)."""
    if constants.lambda0 > 0:
        return Condition1.evaluate(best_delta(constants), constants)
    zero = replace(constants, lambda0=np.float64(0.0))  # 2/λ_0 = inf in Eq. (10)
    with np.errstate(divide="ignore"):
        return Condition1.evaluate((1.0 - constants.W_norm) / 2, zero)


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


def theorem_eta(init: ReLUDEQInit) -> float | None:
    """η = :data:`ETA_FRACTION` × Eq. (10)'s bound (None when Condition 1 is not defined)."""
    return None if init.cond is None else learning_rate(init.cond, ETA_FRACTION)


def numbers(init: ReLUDEQInit, eta: float | None) -> dict[str, object]:
    """Every number of the module docstring under stable keys (None: not measured)."""
    K, n, m = init.K, init.inputs.n, init.width
    out: dict[str, object] = {
        "width": m,
        "sigma_w2": init.sigma_w2,
        "seed": init.seed,
        "lambda_star": K.value,
        "lambda_star_singular": K.singular,
        "lambda_max_K": K.max_eigenvalue,
        "condition_number_K": K.condition_number,
        "ntk_lambda_min": init.ntk.value,
        "ntk_parameterization": "standard: lim Θ/m = K + P⊙K",
        "W_norm": init.W_norm,
        "lemma1_bound": lemma1_value(init),
        "lambda0": init.lambda0,
        "lambda0_theorem2": init.predicted_lambda0,
        "theorem2_width": {
            "scale": theorem2_scale(n, K.value),
            "t": THEOREM2_T,
            "formula": "n²/λ*² · log(n/(λ*·t))",
            "constant": None,
            "depth_l": ling2023.theorem2_depth(n, K.value, init.sigma_w2),
            "note": "m = Ω(scale): the proof's constants (Bernstein, ε-net) are not given",
        },
    }
    cond = init.cond
    if cond is not None:
        out.update(_condition_numbers(init, cond, eta))
    return out


def _condition_numbers(init: ReLUDEQInit, cond: Condition1, eta: float | None) -> dict:
    k, m = cond.constants, init.width
    eqs = {key: getattr(cond, key) for key in EQUATIONS}
    scaled = init.scaled_constants()
    lam = float(k.lambda0)
    rate = None if eta is None else 1 - eta * lam / 2
    return {
        "lambda0_over_theorem2": lam / init.predicted_lambda0 if init.lambda_star > 0 else None,
        "U_norm": k.U_norm,
        "a_norm": k.a_norm,
        "X_fro": k.X_fro,
        "residual_norm": k.residual_norm,
        "loss0": k.residual_norm**2 / 2,
        "delta": cond.delta,
        "c_w": cond.c_w,
        "c_u": cond.c_u,
        "c_a": cond.c_a,
        "condition1": {
            **{key: {"lhs": q.lhs, "rhs": q.rhs, "margin": q.margin} for key, q in eqs.items()},
            "holds": cond.holds,
        },
        "required_width": {**widths_needed(scaled, m), "scaling": SCALING, "what": WIDTH_NEEDED},
        "eq9_limit": {
            "limit": width_margin(scaled, m, MAX_WIDTH, "eq9"),
            "bound": eq9_margin_bound(scaled),
            "at_width": MAX_WIDTH,
        },
        "eq10_bound": cond.lr_bound,
        "eta_theorem": theorem_eta(init),
        "eta": eta,
        "rate_at_bound": 1 - cond.lr_bound * lam / 2,
        "rate_at_eta_theorem": 1 - theorem_eta(init) * lam / 2,
        "rate": rate,
        "curvature": init.curvature,
        "pl_ratio0": init.pl_ratio0,
        "H_lambda_min0": init.h_lambda_min0,
    }

"""Ling et al. (2023) on the user's data and a ReLU DEQ of width m, at initialization.

- λ* = λ_min(K) (Eq. 14), cond(K), and the DEQ NTK's λ_min beside it (that of
  :func:`deqlab.theory.ntk.deq_ntk`, standard parameterization: lim Θ/m = K + P⊙K, read
  off K with its ``gram`` option); K does not depend on the width (:func:`kernels`, reused
  by a width sweep);
- a network drawn from Assumption 1 (``seed``): λ_0 = λ_min(Z(0)ᵀZ(0)) with Theorem 2's
  mλ*/2 beside it (λ_0 = 0 exactly when m < n: Z(0)ᵀZ(0) has rank ≤ m);
- Condition 1, Eqs. (7)–(9), each with its margin lhs/rhs, at the δ that maximizes the
  smallest margin (:func:`deqlab.theory.ling2023.best_delta`);
- the smallest width at which Condition 1 would hold (:func:`widths_needed`), under
  :data:`SCALING`: λ_0 = mλ*/2 as Theorem 2 gives, ‖U(0)‖₂ ∝ √m, the other constants as
  measured (Section 3.2); where Eq. (9) never holds, its margin's limit and the bound
  :func:`deqlab.theory.ling2023.eq9_margin_bound` it stays under;
- Eq. (10)'s bound on η and the rate 1 − ηλ_0/2 it implies (Theorem 1 (iii));
- Theorem 2's width n²λ*⁻² log(n/(λ*t)) without its constant: the proof (Section 4.4)
  makes explicit the accuracy λ*/2 that ‖G/m − K‖_F must reach (Weyl) and the per-layer
  factor 2√2σ_w, but its Ω and O hide the absolute constants of Bernstein's inequality and
  of an ε-net argument (Theorems 4–5), which the paper does not give: Theorem 2 is then
  NOT APPLICABLE, never FAIL;
- for the stand-ins (ours, :mod:`deqlab.verify.answers`): λ_max(H(0)) and the PL ratio
  ‖∇Φ(0)‖²/(2Φ(0)) = rᵀH(0)r/rᵀr of Eq. (4)'s H (n ≤ :data:`STANDIN_LIMIT`).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace

import numpy as np
import torch

from deqlab.experiments.ling2023.statements import (
    assumption1,
    condition1_hypotheses,
    learning_rate_hypothesis,
    power_of_ten,
    source,
    theorem3_ii,
)
from deqlab.models.relu_deq import ReLUDEQ
from deqlab.statements import OURS, Kind, Statement, Verdict, measure, not_measured, theorem
from deqlab.theory.init_theorems import lemma1_bound
from deqlab.theory.kernels import LeastEigenvalue, population_gram
from deqlab.theory.ling2023 import (
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
from deqlab.theory.ntk import deq_ntk, pl_gram
from deqlab.theory.spectra import (
    DENSE_LIMIT,
    least_eigenvalue_large,
    spectral_norm,
    spectral_norm_lanczos,
)
from deqlab.verify.inputs import Inputs, assumption2
from deqlab.verify.progress import Progress, silent

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


def kernels(inputs: Inputs, sigma_w2: float, progress: Progress = silent) -> Kernels:
    """K (Eq. 14) and the DEQ NTK read off it (:func:`deqlab.theory.ntk.deq_ntk`), λ_min of
    each, in two n×n buffers (:data:`KERNEL_BUFFERS`): K, then the NTK written over K once
    λ* is taken, and one work array for both eigenvalue solves."""
    with warnings.catch_warnings():  # Assumption 1 is reported as a hypothesis statement
        warnings.simplefilter("ignore")
        gram = population_gram(inputs.X, sigma_w2, progress=progress)
        work = torch.empty_like(gram) if gram.shape[0] > DENSE_LIMIT else None
        K = least_eigenvalue_large(gram, work=work, progress=progress)
        kernel = deq_ntk(inputs.X, sigma_w2, gram=gram, out=gram, progress=progress)
        ntk = least_eigenvalue_large(kernel, work=work, progress=progress)
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
    constants = Constants(_gram_lambda_min(Z), W_norm, _norm(model.U.detach()),
                          float(model.a.detach().norm()), float(X.norm()),
                          float(residual.norm()))  # fmt: skip
    curvature, pl0, bottom = _curvature(model, X, residual)
    return ReLUDEQInit(inputs, width, sigma_w2, seed, known.K, known.ntk, model, W_norm,
                       evaluate_condition1(constants), curvature, pl0, bottom)  # fmt: skip


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
    (:func:`deqlab.theory.ling2023.condition1_width`, ``required_width``); none (inf)
    when λ_0 = 0 there (λ* = 0: λ_0 = mλ*/2 = 0 at every width)."""
    if not constants.lambda0 > 0:
        return dict.fromkeys(("condition1", *EQUATIONS), math.inf)
    return {"condition1": condition1_width(constants, m, low=m),
            **{key: required_width(constants, m, key) for key in EQUATIONS}}  # fmt: skip


def theorem2_scale(n: int, lambda_star: float, t: float = THEOREM2_T) -> float:
    """n²λ*⁻² log(n/(λ* t)), Theorem 2's width up to its unknown constant (inf if λ* = 0)."""
    if lambda_star <= 0:
        return math.inf
    return n**2 / lambda_star**2 * math.log(n / (lambda_star * t))


def theorem2_depth(n: int, lambda_star: float, sigma_w2: float) -> float:
    """The depth l of the proof of Theorem 2 at which n(2√2σ_w)^l ≤ λ*/2 (Section 4.4, its
    O(·) constant taken as 1): l = log(2n/λ*)/log(1/(2√2σ_w)); inf if λ* = 0 or 2√2σ_w ≥ 1."""
    rate = 2 * math.sqrt(2 * sigma_w2)
    if lambda_star <= 0 or rate >= 1:
        return math.inf
    return math.log(2 * n / lambda_star) / math.log(1 / rate)


def theorem_eta(init: ReLUDEQInit) -> float | None:
    """η = :data:`ETA_FRACTION` × Eq. (10)'s bound (None when Condition 1 is not defined)."""
    return None if init.cond is None else learning_rate(init.cond, ETA_FRACTION)


def numbers(init: ReLUDEQInit, eta: float | None) -> dict[str, object]:
    """Every number of the module docstring under stable keys (None: not measured)."""
    K, n, m = init.K, init.inputs.n, init.width
    out: dict[str, object] = {
        "width": m, "sigma_w2": init.sigma_w2, "seed": init.seed,
        "lambda_star": K.value, "lambda_star_singular": K.singular,
        "lambda_max_K": K.max_eigenvalue, "condition_number_K": K.condition_number,
        "ntk_lambda_min": init.ntk.value, "ntk_parameterization": "standard: lim Θ/m = K + P⊙K",
        "W_norm": init.W_norm, "lemma1_bound": _lemma1_bound(init),
        "lambda0": init.lambda0, "lambda0_theorem2": init.predicted_lambda0,
        "theorem2_width": {
            "scale": theorem2_scale(n, K.value), "t": THEOREM2_T,
            "formula": "n²/λ*² · log(n/(λ*·t))", "constant": None,
            "depth_l": theorem2_depth(n, K.value, init.sigma_w2),
            "note": "m = Ω(scale): the proof's constants (Bernstein, ε-net) are not given",
        },
    }  # fmt: skip
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
        "U_norm": k.U_norm, "a_norm": k.a_norm, "X_fro": k.X_fro,
        "residual_norm": k.residual_norm, "loss0": k.residual_norm**2 / 2,
        "delta": cond.delta, "c_w": cond.c_w, "c_u": cond.c_u, "c_a": cond.c_a,
        "condition1": {
            **{key: {"lhs": q.lhs, "rhs": q.rhs, "margin": q.margin} for key, q in eqs.items()},
            "holds": cond.holds,
        },
        "required_width": {**widths_needed(scaled, m), "scaling": SCALING,
                           "what": WIDTH_NEEDED},
        "eq9_limit": {"limit": width_margin(scaled, m, MAX_WIDTH, "eq9"),
                      "bound": eq9_margin_bound(scaled), "at_width": MAX_WIDTH},
        "eq10_bound": cond.lr_bound, "eta_theorem": theorem_eta(init), "eta": eta,
        "rate_at_bound": 1 - cond.lr_bound * lam / 2,
        "rate_at_eta_theorem": 1 - theorem_eta(init) * lam / 2, "rate": rate,
        "curvature": init.curvature, "pl_ratio0": init.pl_ratio0,
        "H_lambda_min0": init.h_lambda_min0,
    }  # fmt: skip


def statements(init: ReLUDEQInit, eta: float | None) -> list[Statement]:
    """The hypotheses and theorems at initialization (module docstring), each with a
    margin; ``eta`` adds the Eq. (10) hypothesis."""
    a1 = assumption1(init.sigma_w2)
    a2 = assumption2(init.inputs)
    out = [a1, *a2, theorem(_theorem3(init), [a1, *a2]), _lemma1(init), _well_posed(init)]
    widths = [_width_hypothesis(init), _scale_hypothesis(init)]
    out += [*widths, _undecided(theorem(_theorem2(init), [a1, *a2, *widths]))]
    out += guards(init, eta)[1:]
    return [*out, _ntk(init)]


def guards(init: ReLUDEQInit, eta: float | None) -> list[Statement]:
    """The hypotheses of Theorem 1: Assumption 1, Eqs. (7)–(9) and, with ``eta``, Eq. (10)."""
    out = [assumption1(init.sigma_w2), *condition_hypotheses(init)]
    if eta is not None and init.cond is not None:
        out.append(learning_rate_hypothesis("", [init.width], [init.cond], [eta]))
    return out


def _theorem3(init: ReLUDEQInit) -> Statement:
    K = init.K
    context = f"λ_max(K) = {K.max_eigenvalue:.6g}, cond(K) = {K.condition_number:.4g}"
    return theorem3_ii(K.value, K.tolerance, context + (f"; {K.reason}" if K.reason else ""))


def _lemma1_bound(init: ReLUDEQInit) -> float:
    with warnings.catch_warnings():  # Assumption 1 is its own statement
        warnings.simplefilter("ignore")
        return lemma1_bound(init.sigma_w2, init.width, LEMMA1_P)


def _lemma1(init: ReLUDEQInit) -> Statement:
    bound = _lemma1_bound(init)
    return measure(
        "Lemma 1: ‖W(0)‖₂ ≤ 2√2σ_w", Kind.THEOREM, source("Lemma 1"),
        value=init.W_norm, relation="<=", threshold=bound,
        measured=f"‖W(0)‖₂ = {init.W_norm:.6g} (m = {init.width}, seed {init.seed})",
        expected=f"≤ 2√2σ_w(1 + √(ln(1/p)/(2m))) = {bound:.6g}",
        detail=f"finite-m form of Lemma 1's w.h.p. bound, failing with probability ≤ p = "
        f"{LEMMA1_P:g} (Gaussian concentration of ‖W‖₂)",
    )  # fmt: skip


def _well_posed(init: ReLUDEQInit) -> Statement:
    return measure(
        "‖W(0)‖₂ < 1 (a δ of Section 3.1 exists)", Kind.HYPOTHESIS,
        source("Section 3.1 (δ with ‖W(0)‖₂ + δ < 1); Section 2.2"),
        value=init.W_norm, relation="<", threshold=1.0,
        measured=f"‖W(0)‖₂ = {init.W_norm:.6g}", expected="< 1: Eq. (1) contracts, Condition "
        "1 is defined", needs="σ_w² < 1/8 (Assumption 1 and Lemma 1 give ‖W(0)‖₂ < 1 w.h.p.)",
    )  # fmt: skip


def _width_hypothesis(init: ReLUDEQInit) -> Statement:
    n, m = init.inputs.n, init.width
    scale = theorem2_scale(n, init.lambda_star)
    return measure(
        "Theorem 2's width m = Ω(n²/λ*² log(n/(λ*t))): at least m ≥ n", Kind.HYPOTHESIS,
        source("Theorem 2"), value=m / n, relation=">=", threshold=1.0,
        measured=f"m/n = {m}/{n} = {m / n:.4g}",
        expected="≥ 1: below, λ_0 = 0 (Z(0)ᵀZ(0) has rank ≤ m), so the width the theorem "
        "asks for is at least n",
        detail=f"n²/λ*² log(n/(λ*t)) = {_big(scale)} at t = {THEOREM2_T:g}, times a constant "
        "the paper does not give: not checked beyond m ≥ n",
        needs=f"m ≥ {n}",
    )  # fmt: skip


def _scale_hypothesis(init: ReLUDEQInit) -> Statement:
    m, scale = init.width, theorem2_scale(init.inputs.n, init.lambda_star)
    return measure(
        "Theorem 2's width m = Ω(n²/λ*² log(n/(λ*t))), its constant taken as 1",
        Kind.HYPOTHESIS, source("Theorem 2"), value=m / scale, relation=">=", threshold=1.0,
        measured=f"m / (n²/λ*² log(n/(λ*t))) = {m}/{_big(scale)} = {m / scale:.3g} "
        f"(t = {THEOREM2_T:g})", expected="≥ 1 at the least: the paper's Ω hides a constant "
        "it does not give (Bernstein's inequality, an ε-net)",
        needs=f"m ≥ C·{_big(scale)} for the paper's unknown constant C",
    )  # fmt: skip


def _undecided(check: Statement) -> Statement:
    """Theorem 2 at a width that meets its hypotheses with the constant taken as 1: a
    FAIL there cannot be told from a too small constant (DESIGN: a width hypothesis with a
    constant the paper does not give cannot make a theorem FAIL)."""
    if check.verdict is not Verdict.FAIL:
        return check
    return replace(check, verdict=Verdict.NOT_APPLICABLE, needs="a width C·n²/λ*² log(n/(λ*t)) "
                   "with the paper's constant C, which it does not give",
                   detail="the width hypothesis cannot be decided: " + check.detail)  # fmt: skip


def _theorem2(init: ReLUDEQInit) -> Statement:
    name, where = "Theorem 2: λ_0 ≥ mλ*/2", source("Theorem 2")
    expected = "≥ 1 (holds with probability ≥ 1 − t at the theorem's width)"
    if init.lambda0 is None:
        return not_measured(name, Kind.THEOREM, where, expected=expected,
                            why="‖W(0)‖₂ ≥ 1: no equilibrium is solved")  # fmt: skip
    pred = init.predicted_lambda0
    ratio = init.lambda0 / pred if pred > 0 else None
    return measure(
        name, Kind.THEOREM, where, value=ratio, relation=">=", threshold=1.0,
        measured=f"λ_0 = {init.lambda0:.6g}, mλ*/2 = {pred:.6g}: λ_0/(mλ*/2) = "
        f"{'—' if ratio is None else f'{ratio:.4g}'} (m = {init.width}, seed {init.seed})",
        expected=expected, detail=_theorem2_detail(init) if pred > 0 else "λ* = 0: the ratio "
        "is not defined",
    )  # fmt: skip


def _theorem2_detail(init: ReLUDEQInit) -> str:
    scale = theorem2_scale(init.inputs.n, init.lambda_star)
    return (
        f"m = {init.width} is {init.width / scale:.2g} × n²/λ*² log(n/(λ*t)) = {_big(scale)} "
        f"(t = {THEOREM2_T:g}); the theorem asks for a constant multiple of that width and "
        "does not give the constant, so a FAIL well below it may mean the width is too small"
    )


def condition_hypotheses(init: ReLUDEQInit) -> list[Statement]:
    """Eqs. (7)–(9) (the experiments' builder), ``needs`` solved under :data:`SCALING`, the
    scaling of the "width needed" number (:func:`widths_needed`), so both say the same."""
    expected = "lhs/rhs ≥ 1"
    if init.cond is None:
        return [not_measured(f"Condition 1, Eq. ({key[2:]}) at initialization", Kind.HYPOTHESIS,
                             source(f"Condition 1, Eq. ({key[2:]})"), expected=expected,
                             why="‖W(0)‖₂ ≥ 1: no δ with ‖W(0)‖₂ + δ < 1")
                for key in EQUATIONS]  # fmt: skip
    with np.errstate(divide="ignore"):  # λ_0 = 0: Eq. (10)'s 2/λ_0 is inf
        found = condition1_hypotheses("", [init.width], [init.cond])
    needed = widths_needed(init.scaled_constants(), init.width)
    detail = f"δ = {init.cond.delta:.3g}; the width needed is solved under {SCALING}, δ free"
    floor = f"λ_0 > 0, so m ≥ n = {init.inputs.n}; " if init.cond.lambda0 <= 0 else ""
    return [
        replace(s, detail=detail, needs=f"{floor}Eq. ({key[2:]}) alone: m ≥ {_big(needed[key])}"
                f"; Condition 1 (one δ): m ≥ {_big(needed['condition1'])}")
        if s.needs else replace(s, detail=detail)
        for s, key in zip(found, EQUATIONS, strict=True)
    ]  # fmt: skip


def _ntk(init: ReLUDEQInit) -> Statement:
    ntk, K = init.ntk, init.K
    slack = ntk.tolerance + K.tolerance
    return measure(
        "DEQ NTK: λ_min(NTK) ≥ λ*", Kind.OURS, OURS,
        value=ntk.value - K.value, relation=">=", threshold=-slack,
        measured=f"λ_min(NTK) = {ntk.value:.6g}, λ* = {K.value:.6g}",
        expected=f"λ_min(NTK) − λ* ≥ −{slack:.2g} (round-off of both)",
        detail="NTK = K + P⊙K with P ⪰ 0 (Schur product: P⊙K ⪰ 0), the infinite-width limit "
        "of Θ/m for the Assumption 1 network (deqlab.theory.ntk); the kernel of the whole "
        "training dynamics, of which G = ZᵀZ (λ_0) is one term",
    )  # fmt: skip


def _big(x: float) -> str:
    return "∞ (no width)" if math.isinf(x) else power_of_ten(math.ceil(x))

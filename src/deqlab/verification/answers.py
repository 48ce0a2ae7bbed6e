"""One line per theorem: can it apply at this width, at some width (which), or at none
(and why); and the practical stand-ins where it cannot (ours: measurements, not guarantees).

An :class:`Answer` is read off the numbers the checks measured; it decides nothing the
statements do not already say, it says it in one line. The width hypothesis of a theorem
whose constant the paper does not give (Ling et al. 2023, Theorem 2: m = Ω(·)) is
*undecided*, never failed.

Stand-ins (ours) for the ReLU DEQ, from H(0) = H1 + H2 + H3 of Eq. (4), the Gauss–Newton
curvature of Φ at θ(0) (∇²Φ ≈ JᵀJ, whose nonzero spectrum is that of H = JJᵀ):

- the step η_c = 1/λ_max(H(0)): GD on the quadratic model of Φ is stable for η <
  2/λ_max, and the descent lemma's decrease Φ(τ+1) ≤ (1 − η(2 − ηλ_max)μ)Φ(τ) is largest at
  η = 1/λ_max;
- the rate 1 − μ/λ_max that the PL ratio μ = ‖∇Φ(0)‖²/(2Φ(0)) measured at θ(0) predicts
  at η_c, and 1 − λ_min(H(0))/λ_max, the rate for the residual's slowest direction (μ ≥
  λ_min(H) for every residual: Eq. (4));
- with training, the measured rate (Φ(T)/Φ(0))^(1/T) at the η trained with, and the steps
  to a target loss at the measured and at the predicted rate.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from deqlab._format import number
from deqlab.papers import HIEU, KAWAGUCHI, LING
from deqlab.papers.hieu2022.mondeq import eq_3_18_possible
from deqlab.statements import Verdict
from deqlab.verification.delm import statements as delm_statements

#: A target loss of this fraction of Φ(0) when none is given.
TARGET_FRACTION = 1e-3

AT_THIS_WIDTH = "applies at this width"
AT_SOME_WIDTH = "can apply at a larger width"
AT_NO_WIDTH = "applies at no width"
UNDECIDED = "cannot be decided"
NOT_ON_DATA = "does not apply to these data"


@dataclass(frozen=True)
class Answer:
    """Whether ``theorem`` can apply (``status``: one of the module's constants), the
    width it needs (None: no width question), and why, in one sentence."""

    theorem: str
    status: str
    why: str
    width: float | None = None

    def line(self) -> str:
        return f"{self.theorem}: {self.status} — {self.why}"

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def _big(x: float) -> str:
    """A width: "∞", whole digits below 10⁵, else "3.2·10¹¹"."""
    return "∞" if math.isinf(x) else number(x, 2, power=True)


def relu_deq(init, numbers: dict, training: dict | None) -> list[Answer]:
    """Theorem 3 (ii), Theorem 2, Theorem 1 for the ReLU DEQ (module docstring)."""
    return [_theorem3(numbers), _theorem2(init, numbers), _theorem1(init, numbers)]


def _theorem3(k: dict) -> Answer:
    name = f"{LING.cite('Theorem 3 (ii)')}: λ* > 0"
    if k["lambda_star_singular"]:
        return Answer(
            name,
            NOT_ON_DATA,
            "λ* = λ_min(K) is 0 to working precision: no width "
            "makes any theorem of the paper apply (parallel or duplicate inputs)",
        )
    return Answer(
        name, "holds for these data", f"λ* = {k['lambda_star']:.4g} (Eq. 14), whatever the width"
    )


def _theorem2(init, k: dict) -> Answer:
    name = f"{LING.cite('Theorem 2')}: λ_0 ≥ mλ*/2"
    scale = k["theorem2_width"]["scale"]
    if not math.isfinite(scale):
        return Answer(name, AT_NO_WIDTH, "λ* = 0: m = Ω(n²/λ*² log(n/(λ*t))) is no width")
    ratio = k.get("lambda0_over_theorem2")
    measured = "" if ratio is None else f"; measured λ_0/(mλ*/2) = {ratio:.3g}"
    return Answer(
        name,
        UNDECIDED,
        f"it needs m = Ω(n²/λ*² log(n/(λ*t))) = Ω({_big(scale)}) "
        f"(t = {k['theorem2_width']['t']:g}) with a constant the paper does not give; "
        f"m = {init.width} is {init.width / scale:.2g} of that scale{measured}",
        scale,
    )


def _theorem1(init, k: dict) -> Answer:
    name = f"{LING.cite('Theorem 1')}: GD converges, Φ(τ) ≤ (1 − ηλ_0/2)^τ Φ(0)"
    if "condition1" not in k:
        return Answer(
            name,
            NOT_ON_DATA,
            f"‖W(0)‖₂ = {k['W_norm']:.4g} ≥ 1: Condition 1 is "
            "not defined (no δ with ‖W(0)‖₂ + δ < 1)",
        )
    if k["condition1"]["holds"]:
        return Answer(
            name,
            AT_THIS_WIDTH,
            f"Condition 1 holds at m = {init.width}; with η < {k['eq10_bound']:.3g} (Eq. 10)",
            init.width,
        )
    widths = k["required_width"]
    needed = widths["condition1"]
    if math.isfinite(needed):
        return Answer(
            name,
            AT_SOME_WIDTH,
            f"Condition 1 (Eqs. (7)–(9) at one δ) holds from m "
            f"≥ {_big(needed)} under Section 3.2's scaling (λ_0 = mλ*/2, ‖U(0)‖₂ ∝ "
            f"√m); m = {init.width} is too narrow",
            needed,
        )
    never = [f"Eq. ({e[2:]})" for e in ("eq7", "eq8", "eq9") if math.isinf(widths[e])]
    verb = "holds" if len(never) == 1 else "hold"
    why = f"{', '.join(never) or 'Condition 1'} {verb} at no width under Section 3.2's scaling"
    limit = k.get("eq9_limit")
    if math.isinf(widths["eq9"]) and limit is not None:
        why += (
            f": Eq. (9)'s margin λ_0/(4(c_w² + c_u²)‖X‖_F²) tends to {limit['limit']:.3g} "
            f"as m → ∞ and stays below m₀λ*/(8‖U(0)‖₂²‖a(0)‖₂²‖X‖_F²) = "
            f"{limit['bound']:.3g} < 1 at every width (λ_0 = mλ*/2 and c_w² ≥ "
            "‖U‖₂²‖a‖₂² both grow like m)"
        )
    return Answer(name, AT_NO_WIDTH, why, math.inf)


def mondeq(init, numbers: dict, training: dict | None) -> list[Answer]:
    """Theorem 3.3.1 (Condition 1) and Theorem 3.3.5 (Condition 2) of the thesis, in its
    notation: n the width, N the samples."""
    out = []
    for theorem, condition, key in (
        (
            f"{HIEU.cite('Theorem 3.3.1')}: gradient flow converges",
            "Condition 1",
            "condition1_holds",
        ),
        (
            f"{HIEU.cite('Theorem 3.3.5')}: GD converges, Eq. (3.20)",
            "Condition 2",
            "condition2_holds",
        ),
    ):
        out.append(_mondeq_answer(init, numbers, theorem, condition, key))
    return out


def _mondeq_answer(init, k: dict, theorem: str, condition: str, key: str) -> Answer:
    n_samples = init.inputs.n
    if init.width < n_samples:
        return Answer(
            theorem,
            AT_SOME_WIDTH,
            f"λ_0 = σ_min(Z(0)) = 0 below width n = N = "
            f"{n_samples} (Eq. 3.14); widen to n ≥ {n_samples}",
            n_samples,
        )
    if k[key]:
        return Answer(theorem, AT_THIS_WIDTH, f"{condition} holds at n = {init.width}", init.width)
    rows = _rows_of(init, condition)
    if "Eq. (3.18)" in rows and not eq_3_18_possible(init.monotonicity, n_samples):
        m = init.monotonicity
        return Answer(
            theorem,
            AT_NO_WIDTH,
            f"Eq. (3.18) of {condition} holds at no width: m²N "
            f"= {m * m * n_samples:.3g} ≥ 1/20 (λ₀² ≤ ‖Z(0)‖_F²/N, Lemma 3.3.3); it needs "
            f"--monotonicity m < 1/√(20N) = {(20 * n_samples) ** -0.5:.3g}",
            math.inf,
        )
    fitted = [k["required_width"].get(name) for name in rows]
    widths = [f["width"] if f else math.inf for f in fitted]
    needed = max(widths, default=math.inf)
    if math.isfinite(needed):
        return Answer(
            theorem,
            AT_SOME_WIDTH,
            f"{condition} would hold from n ≈ {_big(needed)} "
            f"(power laws of lhs/rhs fitted over n ∈ {list(init.fit_widths)}: an "
            "extrapolation)",
            needed,
        )
    return Answer(
        theorem,
        AT_NO_WIDTH,
        f"{condition}'s margins do not grow with n over the "
        f"fit widths {list(init.fit_widths)}: no width in their trend",
        math.inf,
    )


def _rows_of(init, condition: str) -> list[str]:
    return [row["name"] for row in init.conditions[condition]]


def delm(init, numbers: dict, training: dict | None) -> list[Answer]:
    """Theorem 1 / the corollary of Kawaguchi (2021): the DELM's width is d; the answer is
    whether the corollary's hypotheses hold on these data."""
    where = KAWAGUCHI.cite(f"Theorem 1, {numbers['corollary']}")
    name = f"{where}: L − L* ≤ (L₀ − L*)e^(−2κλ_T T)"
    unmet = [s.name for s in delm_statements(init, None) if s.verdict is Verdict.UNMET]
    if unmet:
        return [
            Answer(
                name,
                NOT_ON_DATA,
                f"unmet: {'; '.join(unmet)} (the DELM's width is d = {init.m}, fixed by φ(x) = x)",
            )
        ]
    return [
        Answer(
            name,
            AT_THIS_WIDTH,
            f"its hypotheses hold at m = d = {init.m} (no width "
            "condition: λ_T ≥ 1/(m(1+γ)²) at every width)",
            init.m,
        )
    ]


def answers_for(model: str, init, numbers: dict, training: dict | None) -> list[Answer]:
    """The answers of ``model`` (``"relu-deq"``, ``"mondeq"``, ``"delm"``)."""
    return {"relu-deq": relu_deq, "mondeq": mondeq, "delm": delm}[model](init, numbers, training)


@dataclass(frozen=True)
class StandIns:
    """The practical stand-ins of the module docstring (ours); None: not measured."""

    curvature: float | None
    eta: float | None
    pl_ratio: float | None
    rate_predicted: float | None
    rate_worst: float | None = None
    eta_trained: float | None = None
    rate_measured: float | None = None
    target_loss: float | None = None
    steps_measured_rate: float | None = None
    steps_predicted_rate: float | None = None

    def as_dict(self) -> dict[str, object]:
        return asdict(self)

    def lines(self) -> list[str]:
        """The stand-ins as terminal lines, each labelled ours."""
        if self.curvature is None:
            return []
        out = [
            f"ours: largest useful step from the measured curvature: η = 1/λ_max(H(0)) = "
            f"{self.eta:.3g} (stable below 2/λ_max = {2 * self.eta:.3g})",
            f"ours: the rate the measured PL ratio μ = ‖∇Φ(0)‖²/(2Φ(0)) = "
            f"{self.pl_ratio:.3g} predicts at that η: 1 − μ/λ_max = "
            f"{self.rate_predicted:.6g} per step"
            + (
                ""
                if self.rate_worst is None
                else f" (1 − λ_min(H(0))/λ_max = "
                f"{self.rate_worst:.6g} for the slowest direction of the residual)"
            ),
        ]
        if self.rate_measured is not None:
            out.append(
                f"ours: measured rate (Φ(T)/Φ(0))^(1/T) at the η trained with "
                f"({self.eta_trained:.3g}): {self.rate_measured:.6g} per step"
            )
            out.append(
                f"ours: steps to Φ = {self.target_loss:.3g}: "
                f"{_steps(self.steps_measured_rate)} at the measured rate, "
                f"{_steps(self.steps_predicted_rate)} at the predicted one (η = "
                f"{self.eta:.3g})"
            )
        return [*out, "ours: these are measurements at θ(0), not guarantees of the papers"]


def _steps(x: float | None) -> str:
    return "never (no decrease)" if x is None or not math.isfinite(x) else f"{math.ceil(x):,}"


def steps_to(loss0: float, target: float, rate: float | None) -> float | None:
    """log(target/Φ(0))/log(rate): the steps a linear rate takes from Φ(0) to ``target``."""
    if rate is None or not 0 < rate < 1 or loss0 <= 0:
        return None if rate is None else math.inf
    if target >= loss0:
        return 0.0
    return math.log(target / loss0) / math.log(rate)


def measured_rate(loss0: float, loss_T: float, steps: int) -> float | None:
    """(Φ(T)/Φ(0))^(1/T), the mean rate per step of a run (None without steps or a loss)."""
    if not steps or not loss0 > 0 or not loss_T >= 0:
        return None
    return (loss_T / loss0) ** (1 / steps)


def standins(numbers: dict, training: dict | None, target: float | None) -> StandIns:
    """:class:`StandIns` from the numbers (``curvature``, ``pl_ratio0``, ``loss0``, and
    ``H_lambda_min0`` where measured) and, with training, its measured rate; ``target``
    defaults to :data:`TARGET_FRACTION` Φ(0)."""
    top, mu = numbers.get("curvature"), numbers.get("pl_ratio0")
    if top is None or mu is None or not top > 0:
        return StandIns(None, None, None, None)
    bottom = numbers.get("H_lambda_min0")
    eta, rate = 1.0 / top, 1.0 - mu / top
    worst = None if bottom is None else 1.0 - bottom / top
    if training is None:
        return StandIns(top, eta, mu, rate, worst)
    loss0 = numbers["loss0"]
    target = TARGET_FRACTION * loss0 if target is None else target
    measured = training.get("rate_measured")
    return StandIns(
        top,
        eta,
        mu,
        rate,
        worst,
        training["eta"],
        measured,
        target,
        steps_to(loss0, target, measured),
        steps_to(loss0, target, rate),
    )

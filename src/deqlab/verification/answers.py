"""One line per theorem: can it apply at this width, at some width (which), or at none
(and why); and the practical stand-ins where it cannot (ours: measurements, not guarantees).

An :class:`Answer` is read off the statements and numbers the checks measured; it decides
nothing the statements do not already say, it says it in one line (where a theorem's
statement is NOT APPLICABLE for a hypothesis on the data, so is the answer: one source for
both). The width hypothesis of a theorem whose constant the paper does not give (Ling et al.
2023, Theorem 2: m = Ω(·)) is *undecided*, never failed. Numbers read off certified
brackets print as ranges where the brackets move them at the printed precision
(:mod:`deqlab.verification.precision`).
The stand-ins (ours) where a theorem cannot apply: :mod:`deqlab.verification.stand_ins`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass

from deqlab._format import number
from deqlab.papers import HIEU, KAWAGUCHI, LING
from deqlab.papers.hieu2022.mondeq import eq_3_18_possible
from deqlab.statements import Kind, Statement, Verdict
from deqlab.verification.delm import statements as delm_statements

AT_THIS_WIDTH = "applies at this width"
AT_SOME_WIDTH = "can apply at a larger width"
AT_NO_WIDTH = "applies at no width"
UNDECIDED = "cannot be decided"
NOT_ON_DATA = "does not apply to these data"
UNDECIDED_AT_BRACKETS = "cannot be decided at the certified brackets"
AT_LEAST_WIDTH = "needs a larger width: at least"
#: The name of Theorem 3 (ii)'s statement, the one source of its answer.
THEOREM3_II = "Theorem 3 (ii): λ* > 0 (K strictly positive definite)"
#: ... and of Theorem 2's.
THEOREM2 = "Theorem 2: λ_0 ≥ mλ*/2"


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


def span(numbers: dict, path: str, fmt: Callable[[float], str]) -> str:
    """``fmt`` of the number at the dotted ``path`` of ``numbers``, or "fmt(least) to
    fmt(largest)" where its range over the brackets' corners (``numbers["ranges"]``) shows
    at that precision."""
    value: object = numbers
    for key in path.split("."):
        value = value[key]  # type: ignore[index]
    ends = numbers.get("ranges", {}).get(path)
    if ends is None:
        return fmt(value)  # type: ignore[arg-type]
    low, high = fmt(ends[0]), fmt(ends[1])
    return low if low == high else f"{low} to {high}"


def bracket_text(symbol: str, bounds: list[float] | None, value: float) -> str:
    """ "λ* ∈ [0.02550534, 0.02552842]" with the digits that tell the ends apart (4 to 10),
    "λ* = 0.002145316, certified to 10 digits" where even 10 do not; "λ* = 0.0255" without
    a bracket."""
    if bounds is None:
        return f"{symbol} = {value:.4g}"
    low, high = bounds
    for digits in range(4, 11):
        if f"{low:.{digits}g}" != f"{high:.{digits}g}":
            return f"{symbol} ∈ [{low:.{digits}g}, {high:.{digits}g}]"
    return f"{symbol} = {high:.10g}, certified to 10 digits"


def _named(statements: list[Statement], name: str) -> Statement | None:
    return next((s for s in statements if s.name == name), None)


def _unmet_on_data(theorem: Statement | None, statements: list[Statement]) -> list[Statement]:
    """The unmet hypotheses on the data (Assumption 2) that make ``theorem`` NOT APPLICABLE."""
    if theorem is None or theorem.verdict is not Verdict.NOT_APPLICABLE:
        return []
    return [
        h
        for h in statements
        if h.kind is Kind.HYPOTHESIS
        and h.verdict is Verdict.UNMET
        and h.name.startswith("Assumption 2")
        and h.name in theorem.detail
    ]


def _not_on_data(name: str, unmet: list[Statement], measured: str) -> Answer:
    needs = "; ".join(dict.fromkeys(h.needs for h in unmet if h.needs))
    what = "; ".join(h.name for h in unmet)
    return Answer(
        name,
        NOT_ON_DATA,
        f"its hypothesis on the data is unmet: {what}"
        + (f" (needs {needs})" if needs else "")
        + f"; measured nonetheless: {measured}",
    )


def relu_deq(init, numbers: dict, training: dict | None, statements: list[Statement]):
    """Theorem 3 (ii), Theorem 2, Theorem 1 for the ReLU DEQ (module docstring)."""
    return [
        _theorem3(numbers, statements),
        _theorem2(init, numbers, statements),
        _theorem1(init, numbers),
    ]


def _theorem3(k: dict, statements: list[Statement]) -> Answer:
    """The answer its statement gives (one source): PASS holds, FAIL (λ* = 0 to working
    precision) and an unmet hypothesis on the data do not apply, NOT MEASURED (a bracket or
    a subsample that does not decide λ* > 0) cannot be decided, saying why."""
    name = f"{LING.cite('Theorem 3 (ii)')}: λ* > 0"
    statement = _named(statements, THEOREM3_II)
    lam = bracket_text("λ*", k.get("lambda_star_bounds"), k["lambda_star"])
    unmet = _unmet_on_data(statement, statements)
    if unmet:
        return _not_on_data(name, unmet, f"{lam} (Eq. 14)")
    if "subsample" in k:
        return Answer(
            name,
            UNDECIDED,
            f"from {_sample(k)}, λ* ≤ {k['lambda_star']:.4g} (Cauchy interlacing) bounds λ* "
            "from above only; λ* > 0 needs the full K",
        )
    failed = k["lambda_star_singular"] if statement is None else statement.verdict is Verdict.FAIL
    if failed:
        return Answer(
            name,
            NOT_ON_DATA,
            f"λ* = λ_min(K) is 0 to working precision ({lam}): no width "
            "makes any theorem of the paper apply (parallel or duplicate inputs)",
        )
    if statement is not None and statement.verdict is Verdict.NOT_MEASURED:
        return Answer(name, UNDECIDED, f"{lam}: {statement.detail}")
    return Answer(name, "holds for these data", f"{lam} (Eq. 14), whatever the width")


def _theorem2(init, k: dict, statements: list[Statement]) -> Answer:
    name = f"{LING.cite('Theorem 2')}: λ_0 ≥ mλ*/2"
    scale = k["theorem2_width"]["scale"]
    unmet = _unmet_on_data(_named(statements, THEOREM2), statements)
    if unmet:
        return _not_on_data(name, unmet, f"Ω({span(k, 'theorem2_width.scale', _big)})")
    if not math.isfinite(scale):
        return Answer(name, AT_NO_WIDTH, "λ* = 0: m = Ω(n²/λ*² log(n/(λ*t))) is no width")
    ratio = k.get("lambda0_over_theorem2")
    measured = (
        "" if ratio is None else f"; measured λ_0/(mλ*/2) = {span(k, 'lambda0_over_theorem2', _g3)}"
    )
    share = span(k, "theorem2_width.scale", lambda x: f"{init.width / x:.2g}")
    least = f" at least (λ* ≤ {k['lambda_star']:.4g} from {_sample(k)})" if "subsample" in k else ""
    return Answer(
        name,
        UNDECIDED,
        f"it needs m = Ω(n²/λ*² log(n/(λ*t))) = Ω({span(k, 'theorem2_width.scale', _big)})"
        f"{least} "
        f"(t = {k['theorem2_width']['t']:g}) with a constant the paper does not give; "
        f"m = {init.width} is {'at most ' if least else ''}{share} of that scale{measured}",
        scale,
    )


def _sample(k: dict) -> str:
    """ "S = 20,000 of the 1,000,000 points (seed 0)"."""
    sample = k["subsample"]
    return f"S = {sample['size']:,} of the {sample['n']:,} points (seed {sample['seed']})"


def _g3(x: float) -> str:
    return f"{x:.3g}"


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
        bound = span(k, "eq10_bound", _g3)
        return Answer(
            name,
            AT_THIS_WIDTH,
            f"Condition 1 holds at m = {init.width}; with η < {bound} (Eq. 10)",
            init.width,
        )
    widths = k["required_width"]
    needed = widths["condition1"]
    if math.isfinite(needed) and "subsample" in k:
        return Answer(
            name,
            AT_LEAST_WIDTH,
            f"Condition 1 (Eqs. (7)–(9) at one δ) needs m ≥ "
            f"{span(k, 'required_width.condition1', _big)} at least under Section 3.2's "
            f"scaling, a certified lower bound from {_sample(k)}: λ* ≤ "
            f"{k['lambda_star']:.4g} (Cauchy interlacing) and ‖ŷ(0) − y‖₂ over S; the width "
            f"itself, or whether there is one, needs the full K; m = {init.width} is too narrow",
            needed,
        )
    if math.isfinite(needed):
        return Answer(
            name,
            AT_SOME_WIDTH,
            f"Condition 1 (Eqs. (7)–(9) at one δ) holds from m "
            f"≥ {span(k, 'required_width.condition1', _big)} under Section 3.2's scaling "
            f"(λ_0 = mλ*/2, ‖U(0)‖₂ ∝ √m); m = {init.width} is too narrow",
            needed,
        )
    never = [f"Eq. ({e[2:]})" for e in ("eq7", "eq8", "eq9") if math.isinf(widths[e])]
    verb = "holds" if len(never) == 1 else "hold"
    why = f"{', '.join(never) or 'Condition 1'} {verb} at no width under Section 3.2's scaling"
    limit = k.get("eq9_limit")
    if math.isinf(widths["eq9"]) and limit is not None:
        why += (
            f": Eq. (9)'s margin λ_0/(4(c_w² + c_u²)‖X‖_F²) tends to "
            f"{span(k, 'eq9_limit.limit', _g3)} as m → ∞ and stays below "
            f"m₀λ*/(8‖U(0)‖₂²‖a(0)‖₂²‖X‖_F²) = {span(k, 'eq9_limit.bound', _g3)} < 1 at "
            "every width (λ_0 = mλ*/2 and c_w² ≥ ‖U‖₂²‖a‖₂² both grow like m)"
        )
    if "subsample" in k:
        why += (
            f"; certified from {_sample(k)}: each width grows as λ* falls, λ* ≤ "
            f"{k['lambda_star']:.4g} there"
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


def answers_for(
    model: str, init, numbers: dict, training: dict | None, statements: list[Statement] = ()
) -> list[Answer]:
    """The answers of ``model`` (``"relu-deq"``, ``"mondeq"``, ``"delm"``); the ReLU DEQ's
    read its ``statements`` too."""
    if model == "relu-deq":
        return relu_deq(init, numbers, training, list(statements))
    return {"mondeq": mondeq, "delm": delm}[model](init, numbers, training)

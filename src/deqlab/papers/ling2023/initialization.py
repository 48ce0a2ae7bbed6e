"""The claims of Ling et al. (2023) on networks at initialization, over many draws: Lemma 1,
Theorems 2–5 and the bounds of Section 3.2 (the experiment ``ling2023-init``).

The measurement is :data:`~deqlab.papers.ling2023.draws.Draws` (per quantity, one run whose
points are the draws; :mod:`deqlab.papers.ling2023.draws` reads them). Every statement over
draws is decided by :func:`~deqlab.statements.worst` (a violating draw beside one not
measured is FAIL); a fitted rate with a draw not measured is not measured unless the rate of
the others already violates the bound.

Hypotheses: Assumption 1 (σ_w² < 1/8) and Assumption 2 (i) measured on the inputs, as
Theorem 3 (ii), by :mod:`.claims`. Lemma 1's bound holds for any σ_w; Lemma 1 and Section
3.2 are guarded by Assumption 1, Theorems 2–5 by Assumptions 1 and 2, as the paper states
them. t = √(2 ln(1/p)) with p = :data:`FAILURE_PROBABILITY` per draw throughout.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from deqlab.papers.ling2023 import LING
from deqlab.papers.ling2023.claims import (
    NORM_RTOL,
    PARALLEL_TOL,
    assumption1,
    assumption2,
    theorem3_ii,
)
from deqlab.papers.ling2023.draws import Draws, Point, largest_width, seed_mean, select
from deqlab.papers.ling2023.init_theorems import (
    fit_loglog_slope,
    geometric_decay,
    initial_loss_bound,
    lemma1_bound,
    u_norm_ratio_bound,
)
from deqlab.statements import (
    Statement,
    claim,
    is_measured,
    number,
    numbers,
    ours,
    theorem,
    worst,
)

#: Probability per draw that Lemma 1's finite-m bound may fail.
FAILURE_PROBABILITY = 1e-6
#: Errors below these fractions of the largest error are round-off (Theorem 3: exact
#: float64 kernels; Theorem 4: equilibria solved to a relative residual of 1e-12).
THEOREM3_FLOOR, THEOREM4_FLOOR = 1e-12, 1e-9


def _unless_missing(
    value: float | None, complete: bool, relation: str, threshold: float
) -> float | None:
    """A fitted rate as the statement's value: itself when every point it is fitted from
    was measured or when it violates the bound, else None (:func:`worst` with a missing
    point beside it)."""
    return worst([value, *([] if complete else [None])], relation, threshold)


def _overflowed(errors: Sequence[float], fitted: float | None) -> float | None:
    """inf where an error overflowed (+inf: it does not fall, whatever the others do),
    else the rate ``fitted`` from the finite errors."""
    return math.inf if math.inf in errors else fitted


@claim
def lemma1_well_posed(draws: Draws) -> Statement:
    """Lemma 1 (Section 2.2): ‖W(0)‖₂ < 1 for every draw."""
    norms = [p["measured"] for p in select(draws, "W_spectral_norm")]
    value = worst(norms, "<", 1.0)
    return LING.theorem(
        "Lemma 1, Section 2.2",
        name="Lemma 1: ‖W(0)‖₂ < 1 at initialization",
        quote="From Lemma 1, we know that ‖W(0)‖₂ < 1 holds with a high probability",
        value=value,
        relation="<",
        threshold=1.0,
        measured=f"max ‖W(0)‖₂ = {numbers([value])} over {len(norms)} draws",
        expected="< 1 for every width and seed",
    )


@claim
def lemma1_finite_m(draws: Draws, sigma_w2: float) -> Statement:
    """Lemma 1's finite-m form: every ‖W(0)‖₂ ≤ 2√2σ_w(1 + √(ln(1/p)/(2m)))."""
    norms = select(draws, "W_spectral_norm")
    ratios = [
        p["measured"] / lemma1_bound(sigma_w2, int(p["m"]), FAILURE_PROBABILITY)
        if is_measured(p["m"])
        else math.nan
        for p in norms
    ]
    value = worst(ratios, "<=", 1.0)
    m_max = largest_width(norms)
    edge = 2.0 * math.sqrt(2.0 * sigma_w2)
    raw = worst([p["measured"] / edge for p in norms if p["m"] == m_max], "<=")
    slack = math.sqrt(math.log(1 / FAILURE_PROBABILITY) / (2 * m_max)) if m_max else math.nan
    return LING.theorem(
        "Lemma 1",
        name="Lemma 1: ‖W(0)‖₂ ≤ 2√2σ_w, finite-m form",
        value=value,
        relation="<=",
        threshold=1.0,
        measured=f"max ‖W(0)‖₂ / (2√2σ_w(1 + ε_m)) = {numbers([value])}; "
        f"at m = {m_max}: max ‖W(0)‖₂ / 2√2σ_w = {numbers([raw])}",
        expected=f"≤ 1 for every draw, ε_m = √(ln(1/p)/(2m)), p = {FAILURE_PROBABILITY:g} "
        f"(ε = {slack:.3g} at m = {m_max})",
        detail="2√2σ_w is the edge of the spectrum as m → ∞, which a finite-m draw may "
        "exceed; by Gaussian concentration (Davidson & Szarek 2001, Theorem II.13) a draw "
        "exceeds 2√2σ_w(1 + ε_m) with probability at most p",
    )


def _depth(point: Point) -> float:
    """The depth to sort by (a draw without one last)."""
    return point["depth"] if is_measured(point["depth"]) else math.inf


@claim
def theorem3(draws: Draws, sigma_w2: float) -> Statement:
    """Theorem 3 (i): the raw per-layer decay of ‖K − K^(l)‖_F between the two deepest
    depths above round-off, against the decay of n l σ_w^(2l) between them."""
    k3 = sorted(select(draws, "K_minus_Kl_fro"), key=lambda p: _depth(p))
    errors = [p["measured"] for p in k3]
    floor = THEOREM3_FLOOR * max((e for e in errors if is_measured(e)), default=0.0)
    kept = [
        (int(p["depth"]), p["measured"])
        for p in k3
        if is_measured(p["depth"]) and is_measured(p["measured"]) and p["measured"] > floor
    ]
    name, where = "Theorem 3 (i): ‖K − K^(l)‖_F = O(n l σ_w^(2l))", "Theorem 3 (i)"
    if len(kept) < 2:
        return LING.theorem(
            where,
            name=name,
            value=None,
            relation="<=",
            threshold=sigma_w2,
            measured="—",
            expected="two depths above round-off",
        )
    (l1, e1), (l2, e2) = kept[-2:]
    decay = (e2 / e1) ** (1 / (l2 - l1))
    allowed = sigma_w2 * (l2 / l1) ** (1 / (l2 - l1))
    steps = [(b / a) ** (1 / (lb - la)) for (la, a), (lb, b) in itertools.pairwise(kept)]
    complete = all(
        is_measured(e) and is_measured(p["depth"]) for e, p in zip(errors, k3, strict=True)
    )
    value = _unless_missing(_overflowed(errors, decay), complete, "<=", allowed)
    return LING.theorem(
        where,
        name=name,
        value=value,
        relation="<=",
        threshold=allowed,
        measured=f"raw per-layer decay (‖K − K^(l₂)‖_F/‖K − K^(l₁)‖_F)^(1/(l₂ − l₁)) = "
        f"{decay:.4g} per layer between l₁ = {l1} and l₂ = {l2}, against σ_w² = {sigma_w2:g} "
        f"(ratio {decay / sigma_w2:.4g})",
        expected=f"≤ {allowed:.4g} = σ_w² ({l2}/{l1})^(1/{l2 - l1}), the per-layer decay of "
        "the theorem's n l σ_w^(2l) between those depths (it tends to σ_w² as l grows)",
        detail="the deepest two depths whose errors are above round-off "
        f"({THEOREM3_FLOOR:g} × the largest); raw per-layer decays from l = {kept[0][0]} on: "
        f"{', '.join(f'{q:.4g}' for q in steps)}",
    )


@claim
def theorem3_ii_of(draws: Draws) -> Statement:
    """Theorem 3 (ii) on the measured λ* (:func:`~.claims.theorem3_ii`; the worst draw)."""
    points = select(draws, "lambda_star")
    if not points:
        return theorem3_ii(None, None)
    value = worst([p["measured"] for p in points], ">", 0.0)
    return theorem3_ii(value, worst([p["theory"] for p in points], "<="))


@claim
def theorem4(draws: Draws, sigma_w2: float) -> Statement:
    """Theorem 4: the per-layer decay of the seed-mean ‖G − G^(l)‖_F/m at the largest width
    is at most 2√2σ_w."""
    rate = 2.0 * math.sqrt(2.0 * sigma_w2)
    m_max = largest_width(select(draws, "G_minus_Gl_fro_over_m"))
    depths, errors = seed_mean(select(draws, "G_minus_Gl_fro_over_m", m=m_max), "depth")
    finite = [e for e in errors if is_measured(e)]
    decay = geometric_decay(
        [d for d, e in zip(depths, errors, strict=True) if is_measured(e)],
        finite,
        THEOREM4_FLOOR * max(finite, default=0.0),
    )
    value = _unless_missing(_overflowed(errors, decay), len(finite) == len(errors), "<=", rate)
    return LING.theorem(
        "Theorem 4",
        name="Theorem 4: ‖G − G^(l)‖_F/m = O(n (2√2σ_w)^l)",
        value=value,
        relation="<=",
        threshold=rate,
        measured=f"per-layer decay of the seed-mean ‖G − G^(l)‖_F/m = {numbers([decay])} at "
        f"m = {m_max}",
        expected=f"≤ 2√2σ_w = {rate:.4g}",
        detail=f"least-squares fit of ln error against l over the errors above "
        f"{THEOREM4_FLOOR:g} × the largest (round-off of the equilibrium solve)",
    )


@claim
def theorem5(draws: Draws) -> Statement:
    """Theorem 5: ‖G^(l)/m − K^(l)‖_F ≤ n (2√2σ_w)^l for every depth and seed at the
    largest width."""
    points = select(draws, "Gl_over_m_minus_Kl_fro")
    m_max = largest_width(points)
    value = worst([p["measured"] / p["theory"] for p in points if p["m"] == m_max], "<=", 1.0)
    return LING.theorem(
        "Theorem 5",
        name="Theorem 5: ‖G^(l)/m − K^(l)‖_F ≤ n (2√2σ_w)^l",
        value=value,
        relation="<=",
        threshold=1.0,
        measured=f"max ‖G^(l)/m − K^(l)‖_F / (n (2√2σ_w)^l) = {numbers([value])} at m = {m_max}",
        expected="≤ 1 for every depth and seed at the largest width",
        detail="the theorem's probability 1 − n² exp(−Ω(m 8^l σ_w^(2l)) + O(l²)) grows with m",
    )


def theorem2_fractions(draws: Draws) -> dict[int, float]:
    """Per width m: the fraction of seeds with λ_0 >= m λ*/2 (Theorem 2)."""
    lam = [p for p in select(draws, "lambda0") if is_measured(p["m"])]
    widths = sorted({int(p["m"]) for p in lam})
    return {
        m: sum(p["measured"] >= p["theory"] for p in lam if p["m"] == m)
        / sum(p["m"] == m for p in lam)
        for m in widths
    }


@claim
def theorem2(draws: Draws) -> Statement:
    """Theorem 2: λ_0 ≥ mλ*/2 for every seed at the largest width."""
    lam = select(draws, "lambda0")
    m_max = largest_width(lam)
    ratios = [
        p["measured"] / p["theory"] if p["theory"] > 0 else math.inf  # λ* = 0: no bound
        for p in lam
        if p["m"] == m_max
    ]
    value = worst(ratios, ">=", 1.0)
    fractions = ", ".join(f"m={m}: {f:.2g}" for m, f in theorem2_fractions(draws).items())
    return LING.theorem(
        "Theorem 2",
        name="Theorem 2: λ_0 ≥ mλ*/2",
        value=value,
        relation=">=",
        threshold=1.0,
        measured=f"min λ_0 / (mλ*/2) = {numbers([value])} at m = {m_max}",
        expected="≥ 1 for every seed at the largest width",
        detail=f"fraction of seeds with λ_0 ≥ mλ*/2 per width: {fractions}; the theorem's "
        "width m = Ω(n²/λ*² log(n/(λ*t))) has unstated constants and is not checked",
    )


@claim
def u_norm(draws: Draws) -> Statement:
    """Section 3.2: every ‖U(0)‖₂/√(m/d) ≤ √2(1 + √(d/m₀) + t/√m₀) (m₀ the smallest width)."""
    norms = select(draws, "U_spectral_norm")
    widths = sorted({int(p["m"]) for p in norms if is_measured(p["m"])})
    m0 = widths[0] if widths else None
    d = round(m0 / norms[0]["theory"] ** 2) if m0 else None
    bound = u_norm_ratio_bound(m0, d, FAILURE_PROBABILITY) if m0 else math.nan
    ratios = [p["measured"] / p["theory"] for p in norms]
    per_width = [
        worst([p["measured"] / p["theory"] for p in norms if p["m"] == m], "<=", bound)
        for m in widths
    ]
    t = math.sqrt(2 * math.log(1 / FAILURE_PROBABILITY))
    return LING.theorem(
        "Section 3.2",
        name="Section 3.2: ‖U(0)‖₂ = O(√(m/d))",
        quote="‖U(0)‖₂ = O(√(m/d)) under Assumption 1",
        value=worst(ratios, "<=", bound),
        relation="<=",
        threshold=bound,
        measured=f"max over seeds of ‖U(0)‖₂/√(m/d) = {numbers(per_width)} (m = "
        f"{', '.join(map(str, widths))}; d = {d})",
        expected=f"≤ {bound:.4g} = √2(1 + √(d/m₀) + t/√m₀) at every width, m₀ = {m0}, "
        f"t = √(2 ln(1/p)) = {t:.3g}, p = {FAILURE_PROBABILITY:g} per draw",
        detail="U_ij ~ N(0, 2/d): ‖U‖₂ ≤ √(2/d)(√m + √d + t) with probability ≥ 1 − p "
        "(Gaussian concentration, Davidson & Szarek 2001, Theorem II.13); divided by √(m/d) "
        "the bound falls with m, so its value at the smallest width m₀ is one constant for "
        "every width ≥ m₀ (it tends to √2 as m → ∞)",
    )


def _loss_bound(loss: Point, feature: Point | None) -> float:
    """The Gaussian bound C of Φ(0)/n given Z(0) (NaN where a side is not measured)."""
    if feature is None or not (is_measured(loss["theory"]) and is_measured(feature["measured"])):
        return math.nan
    return initial_loss_bound(loss["theory"], feature["measured"], FAILURE_PROBABILITY)


@claim
def initial_loss(draws: Draws) -> Statement:
    """Section 3.2: every Φ(0)/n ≤ ½(√(2μ) + t√s)², the Gaussian bound given Z(0)."""
    losses = select(draws, "initial_loss")
    features = {(p["m"], p["seed"]): p for p in select(draws, "feature_norm_sq")}
    widths = sorted({int(p["m"]) for p in losses if is_measured(p["m"])})
    bounds = [_loss_bound(p, features.get((p["m"], p["seed"]))) for p in losses]
    value = worst([p["measured"] / c for p, c in zip(losses, bounds, strict=True)], "<=", 1.0)
    per_width = [worst([p["measured"] for p in losses if p["m"] == m], "<=") for m in widths]
    s = sorted(p["measured"] for p in features.values())
    limit = sorted({p["theory"] for p in features.values()})
    known = [c for c in bounds if is_measured(c)]
    return LING.theorem(
        "Section 3.2",
        name="Section 3.2: Φ(0) = O(n)",
        quote="Φ(0) = O(n)",
        value=value,
        relation="<=",
        threshold=1.0,
        measured=f"max over seeds of Φ(0)/n = {numbers(per_width)} (m = "
        f"{', '.join(map(str, widths))}); max Φ(0)/(n C) = {numbers([value])}",
        expected="Φ(0)/n ≤ C = ½(√(s + ‖y‖²/n) + t√s)² for every draw, t = √(2 ln(1/p)), "
        f"p = {FAILURE_PROBABILITY:g}: C = {number(min(known, default=None))} … "
        f"{number(max(known, default=None))}",
        detail=f"s = ‖Z(0)‖_F²/(mn) = {numbers(s[:1])} … {numbers(s[-1:])} (→ tr K/n = "
        f"{numbers(limit[:1])} as m → ∞, so C tends to a constant); a ~ N(0, I/m) is "
        "independent of Z(0), so given Z(0), ‖ŷ(0) − y‖₂ is √(ns)-Lipschitz in √m·a with mean "
        "≤ √(n(s + ‖y‖²/n)) (Gaussian concentration)",
    )


@claim
def concentration(draws: Draws) -> Statement:
    """Ours: the seed-mean ‖G/m − K‖_F falls like m^(−1/2) (log-log slope within 1/4)."""
    ms, errors = seed_mean(select(draws, "G_over_m_minus_K_fro"), "m")
    kept = [(m, e) for m, e in zip(ms, errors, strict=True) if is_measured(e) and e > 0]
    slope = fit_loglog_slope(*zip(*kept, strict=True)) if len(kept) >= 2 else None
    gap = None if slope is None else abs(slope + 0.5)
    return ours(
        "‖G/m − K‖_F falls like m^(−1/2)",
        value=_unless_missing(_overflowed(errors, gap), len(kept) == len(errors), "<=", 0.25),
        relation="<=",
        threshold=0.25,
        measured=f"log-log slope of the seed-mean ‖G/m − K‖_F against m = {numbers([slope])}",
        expected="within 1/4 of −1/2 (averages of m independent units)",
        detail="the concentration the proof of Theorem 2 (Section 4.4) needs to reach λ*/2",
    )


@claim
def assumption2_of(draws: Draws) -> list[Statement]:
    """Assumption 2 (i) on the run's inputs (:func:`~.claims.assumption2`)."""
    norms = [p["measured"] for p in select(draws, "x_norm_deviation")]
    cosines = [p["measured"] for p in select(draws, "max_abs_cos")]
    return assumption2(
        worst(norms, "<=", NORM_RTOL),
        worst(cosines, "<", 1.0 - PARALLEL_TOL),
        how_to_normalize="inputs scaled to ‖x_i‖ = √d (the data sets of deqlab.data are)",
    )


def initialization(draws: Draws, sigma_w2: float) -> list[Statement]:
    """Every statement of the module docstring."""
    a1, a2 = assumption1(sigma_w2), assumption2_of(draws)
    both = [a1, *a2]
    return [
        a1,
        *a2,
        lemma1_finite_m(draws, sigma_w2),
        theorem(lemma1_well_posed(draws), [a1]),
        theorem(theorem3(draws, sigma_w2), both),
        theorem(theorem3_ii_of(draws), both),
        theorem(theorem4(draws, sigma_w2), both),
        theorem(theorem5(draws), both),
        theorem(theorem2(draws), both),
        theorem(u_norm(draws), [a1]),
        theorem(initial_loss(draws), [a1]),
        concentration(draws),
    ]

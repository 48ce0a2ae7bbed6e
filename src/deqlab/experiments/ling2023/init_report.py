"""The statements of ``ling2023-init`` (its figure: :mod:`.init_figure`), read from the tidy
table of :mod:`deqlab.papers.ling2023.init_theorems` (Assumption 2, Lemma 1, Theorems 2–5 and the
bounds of Section 3.2 at initialization).

Hypotheses: Assumption 1 (σ_w² < 1/8) and Assumption 2 (i) measured on the inputs —
‖x_i‖ = √d and no two inputs parallel (|cos θ_ij| < 1), built, as Theorem 3 (ii), by
:mod:`deqlab.papers.ling2023.claims` (shared with ``deqlab verify``). Statements
(Lemma 1's bound holds for any σ_w; Lemma 1 and Section 3.2 are guarded by Assumption 1,
Theorems 2–5 by Assumptions 1 and 2, as the paper states them):

* Lemma 1, well-posedness: max ‖W(0)‖₂ < 1 over every draw (Section 2.2);
* Lemma 1, bound: every ‖W(0)‖₂ <= 2√2σ_w (1 + √(ln(1/p)/(2m))), p = 10⁻⁶ per draw — the
  finite-m form of the lemma (:func:`deqlab.papers.ling2023.init_theorems.lemma1_bound`);
* Theorem 3 (i): the raw per-layer decay of ‖K − K^(l)‖_F between the two deepest depths
  above round-off, shown next to σ_w², against the decay of the theorem's n l σ_w^{2l}
  between the same depths (σ_w² (l₂/l₁)^(1/(l₂−l₁)), which tends to σ_w² as l grows): a
  decay above what the bound allows fails;
* Theorem 3 (ii): λ* = λ_min(K) > 0 (0 within the eigensolver's round-off);
* Theorem 4: the per-layer decay of the seed-mean ‖G − G^(l)‖_F/m at the largest width,
  against 2√2σ_w;
* Theorem 5: ‖G^(l)/m − K^(l)‖_F <= n (2√2σ_w)^l for every depth and seed at the largest
  width;
* Theorem 2: λ_0 >= mλ*/2 for every seed at the largest width;
* Section 3.2, ‖U(0)‖₂ = O(√(m/d)): every ‖U(0)‖₂/√(m/d) <= √2(1 + √(d/m₀) + t/√m₀), the
  Gaussian bound at the smallest width m₀, which holds at every width >= m₀
  (:func:`deqlab.papers.ling2023.init_theorems.u_norm_ratio_bound`);
* Section 3.2, Φ(0) = O(n): every Φ(0)/n <= ½(√(2μ) + t√s)², the Gaussian bound given Z(0)
  (:func:`deqlab.papers.ling2023.init_theorems.initial_loss_bound`), which tends to a constant as
  s → tr K / n;
* ours: the seed-mean ‖G/m − K‖_F falls like m^(−1/2) (log-log slope within 1/4 of −1/2),
  the concentration rate of averages of m independent units that the proof of Theorem 2
  relies on (the paper states no rate).

t = √(2 ln(1/p)) with p = 10⁻⁶ per draw throughout.

A quantity absent from the table gives NOT MEASURED.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from deqlab.experiments.base import Row
from deqlab.papers import LING
from deqlab.papers.ling2023.claims import assumption1
from deqlab.papers.ling2023.claims import assumption2 as shared_assumption2
from deqlab.papers.ling2023.claims import theorem3_ii as shared_theorem3_ii
from deqlab.papers.ling2023.init_theorems import (
    fit_loglog_slope,
    geometric_decay,
    initial_loss_bound,
    lemma1_bound,
    u_norm_ratio_bound,
)
from deqlab.statements import Statement, numbers, ours, theorem

if TYPE_CHECKING:
    from deqlab.experiments.ling2023.init import InitConfig

#: Probability per draw that Lemma 1's finite-m bound may fail (module docstring).
FAILURE_PROBABILITY = 1e-6
#: Errors below these fractions of the largest error are round-off (Theorem 3: exact
#: float64 kernels; Theorem 4: equilibria solved to a relative residual of 1e-12).
THEOREM3_FLOOR, THEOREM4_FLOOR = 1e-12, 1e-9


def select(rows: Sequence[dict], quantity: str, **where) -> list[dict]:
    """The rows of ``quantity`` whose columns equal ``where``."""
    return [
        r for r in rows if r["quantity"] == quantity and all(r[k] == v for k, v in where.items())
    ]


def seed_mean(rows: Sequence[dict], by: str) -> tuple[list, list[float]]:
    """Mean of ``measured`` over seeds, grouped by ``by`` (sorted)."""
    keys = sorted({r[by] for r in rows})
    return keys, [float(np.mean([r["measured"] for r in rows if r[by] == k])) for k in keys]


def theorem2_fractions(rows: Sequence[dict]) -> dict[int, float]:
    """Per width m: the fraction of seeds with λ_0 >= m λ*/2 (Theorem 2)."""
    lam = select(rows, "lambda0")
    return {
        m: float(np.mean([r["measured"] >= r["theory"] for r in lam if r["m"] == m]))
        for m in sorted({r["m"] for r in lam})
    }


def statements(config: InitConfig, rows: list[Row]) -> list[Statement]:
    """The statements of the module docstring for the run's rows (:func:`init_statements`)."""
    return init_statements(rows, config.sigma_w2)


def init_statements(rows: Sequence[dict], sigma_w2: float) -> list[Statement]:
    """The statements of the module docstring."""
    a1, a2 = assumption1(sigma_w2), assumption2(rows)
    both = [a1, *a2]
    return [
        a1,
        *a2,
        lemma1_finite_m(rows, sigma_w2),
        theorem(lemma1_well_posed(rows), [a1]),
        theorem(theorem3(rows, sigma_w2), both),
        theorem(theorem3_ii(rows), both),
        theorem(theorem4(rows, sigma_w2), both),
        theorem(theorem5(rows), both),
        theorem(theorem2(rows), both),
        theorem(u_norm(rows), [a1]),
        theorem(initial_loss(rows), [a1]),
        concentration(rows),
    ]


def assumption2(rows: Sequence[dict]) -> list[Statement]:
    """Assumption 2 (i) on the run's inputs (:func:`~.statements.assumption2`), from the rows
    of :func:`deqlab.papers.ling2023.init_theorems.measure_assumption2`."""
    (norm,) = select(rows, "x_norm_deviation") or [None]
    (cos,) = select(rows, "max_abs_cos") or [None]
    return shared_assumption2(
        None if norm is None else norm["measured"],
        None if cos is None else cos["measured"],
        how_to_normalize="inputs scaled to ‖x_i‖ = √d (the data sets of deqlab.data are)",
    )


def _largest(rows: Sequence[dict]) -> int | None:
    return max((r["m"] for r in rows), default=None)


def lemma1_well_posed(rows: Sequence[dict]) -> Statement:
    norms = [r["measured"] for r in select(rows, "W_spectral_norm")]
    worst = max(norms, default=None)
    return LING.theorem(
        "Lemma 1, Section 2.2",
        name="Lemma 1: ‖W(0)‖₂ < 1 at initialization",
        quote="From Lemma 1, we know that ‖W(0)‖₂ < 1 holds with a high probability",
        value=worst,
        relation="<",
        threshold=1.0,
        measured=f"max ‖W(0)‖₂ = {numbers([worst])} over {len(norms)} draws",
        expected="< 1 for every width and seed",
    )


def lemma1_finite_m(rows: Sequence[dict], sigma_w2: float) -> Statement:
    norms = select(rows, "W_spectral_norm")
    ratios = [r["measured"] / lemma1_bound(sigma_w2, r["m"], FAILURE_PROBABILITY) for r in norms]
    m_max = _largest(norms)
    edge = 2.0 * math.sqrt(2.0 * sigma_w2)
    raw = max((r["measured"] / edge for r in norms if r["m"] == m_max), default=None)
    slack = math.sqrt(math.log(1 / FAILURE_PROBABILITY) / (2 * m_max)) if m_max else math.nan
    return LING.theorem(
        "Lemma 1",
        name="Lemma 1: ‖W(0)‖₂ ≤ 2√2σ_w, finite-m form",
        value=max(ratios, default=None),
        relation="<=",
        threshold=1.0,
        measured=f"max ‖W(0)‖₂ / (2√2σ_w(1 + ε_m)) = {numbers([max(ratios, default=None)])}; "
        f"at m = {m_max}: max ‖W(0)‖₂ / 2√2σ_w = {numbers([raw])}",
        expected=f"≤ 1 for every draw, ε_m = √(ln(1/p)/(2m)), p = {FAILURE_PROBABILITY:g} "
        f"(ε = {slack:.3g} at m = {m_max})",
        detail="2√2σ_w is the edge of the spectrum as m → ∞, which a finite-m draw may "
        "exceed; by Gaussian concentration (Davidson & Szarek 2001, Theorem II.13) a draw "
        "exceeds 2√2σ_w(1 + ε_m) with probability at most p",
    )


def theorem3(rows: Sequence[dict], sigma_w2: float) -> Statement:
    k3 = sorted(select(rows, "K_minus_Kl_fro"), key=lambda r: r["depth"])
    floor = THEOREM3_FLOOR * max((r["measured"] for r in k3), default=0.0)
    kept = [(r["depth"], r["measured"]) for r in k3 if r["measured"] > floor]
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
    return LING.theorem(
        where,
        name=name,
        value=decay,
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


def theorem3_ii(rows: Sequence[dict]) -> Statement:
    (row,) = select(rows, "lambda_star") or [None]
    if row is None:
        return shared_theorem3_ii(None, None)
    return shared_theorem3_ii(row["measured"], row["theory"])


def theorem4(rows: Sequence[dict], sigma_w2: float) -> Statement:
    rate = 2.0 * math.sqrt(2.0 * sigma_w2)
    m_max = _largest(select(rows, "G_minus_Gl_fro_over_m"))
    depths, errors = seed_mean(select(rows, "G_minus_Gl_fro_over_m", m=m_max), "depth")
    decay = geometric_decay(depths, errors, THEOREM4_FLOOR * max(errors, default=0.0))
    return LING.theorem(
        "Theorem 4",
        name="Theorem 4: ‖G − G^(l)‖_F/m = O(n (2√2σ_w)^l)",
        value=decay,
        relation="<=",
        threshold=rate,
        measured=f"per-layer decay of the seed-mean ‖G − G^(l)‖_F/m = {numbers([decay])} at "
        f"m = {m_max}",
        expected=f"≤ 2√2σ_w = {rate:.4g}",
        detail=f"least-squares fit of ln error against l over the errors above "
        f"{THEOREM4_FLOOR:g} × the largest (round-off of the equilibrium solve)",
    )


def theorem5(rows: Sequence[dict]) -> Statement:
    m_max = _largest(select(rows, "Gl_over_m_minus_Kl_fro"))
    ratios = [r["measured"] / r["theory"] for r in select(rows, "Gl_over_m_minus_Kl_fro", m=m_max)]
    return LING.theorem(
        "Theorem 5",
        name="Theorem 5: ‖G^(l)/m − K^(l)‖_F ≤ n (2√2σ_w)^l",
        value=max(ratios, default=None),
        relation="<=",
        threshold=1.0,
        measured=f"max ‖G^(l)/m − K^(l)‖_F / (n (2√2σ_w)^l) = "
        f"{numbers([max(ratios, default=None)])} at m = {m_max}",
        expected="≤ 1 for every depth and seed at the largest width",
        detail="the theorem's probability 1 − n² exp(−Ω(m 8^l σ_w^(2l)) + O(l²)) grows with m",
    )


def theorem2(rows: Sequence[dict]) -> Statement:
    lam = select(rows, "lambda0")
    m_max = _largest(lam)
    ratios = [
        r["measured"] / r["theory"] if r["theory"] > 0 else math.inf  # λ* = 0: no bound
        for r in lam
        if r["m"] == m_max
    ]
    fractions = ", ".join(f"m={m}: {f:.2g}" for m, f in theorem2_fractions(rows).items())
    return LING.theorem(
        "Theorem 2",
        name="Theorem 2: λ_0 ≥ mλ*/2",
        value=min(ratios, default=None),
        relation=">=",
        threshold=1.0,
        measured=f"min λ_0 / (mλ*/2) = {numbers([min(ratios, default=None)])} at m = {m_max}",
        expected="≥ 1 for every seed at the largest width",
        detail=f"fraction of seeds with λ_0 ≥ mλ*/2 per width: {fractions}; the theorem's "
        "width m = Ω(n²/λ*² log(n/(λ*t))) has unstated constants and is not checked",
    )


def u_norm(rows: Sequence[dict]) -> Statement:
    norms = select(rows, "U_spectral_norm")
    widths = sorted({r["m"] for r in norms})
    per_width = [max(r["measured"] / r["theory"] for r in norms if r["m"] == m) for m in widths]
    m0 = widths[0] if widths else None
    d = round(m0 / norms[0]["theory"] ** 2) if norms else None
    bound = u_norm_ratio_bound(m0, d, FAILURE_PROBABILITY) if norms else math.nan
    t = math.sqrt(2 * math.log(1 / FAILURE_PROBABILITY))
    return LING.theorem(
        "Section 3.2",
        name="Section 3.2: ‖U(0)‖₂ = O(√(m/d))",
        quote="‖U(0)‖₂ = O(√(m/d)) under Assumption 1",
        value=max(per_width, default=None),
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


def initial_loss(rows: Sequence[dict]) -> Statement:
    losses = select(rows, "initial_loss")
    features = {(r["m"], r["seed"]): r["measured"] for r in select(rows, "feature_norm_sq")}
    limit = {r["theory"] for r in select(rows, "feature_norm_sq")}
    widths = sorted({r["m"] for r in losses})
    bounds = {
        (r["m"], r["seed"]): initial_loss_bound(
            r["theory"], features[r["m"], r["seed"]], FAILURE_PROBABILITY
        )
        for r in losses
    }
    ratios = [r["measured"] / bounds[r["m"], r["seed"]] for r in losses]
    per_width = [max(r["measured"] for r in losses if r["m"] == m) for m in widths]
    c = [bounds[k] for k in sorted(bounds)]
    s = sorted(features.values())
    return LING.theorem(
        "Section 3.2",
        name="Section 3.2: Φ(0) = O(n)",
        quote="Φ(0) = O(n)",
        value=max(ratios, default=None),
        relation="<=",
        threshold=1.0,
        measured=f"max over seeds of Φ(0)/n = {numbers(per_width)} (m = "
        f"{', '.join(map(str, widths))}); max Φ(0)/(n C) = {numbers([max(ratios, default=None)])}",
        expected="Φ(0)/n ≤ C = ½(√(s + ‖y‖²/n) + t√s)² for every draw, t = √(2 ln(1/p)), "
        f"p = {FAILURE_PROBABILITY:g}: C = {numbers([min(c, default=None)])} … "
        f"{numbers([max(c, default=None)])}",
        detail=f"s = ‖Z(0)‖_F²/(mn) = {numbers(s[:1])} … {numbers(s[-1:])} (→ tr K/n = "
        f"{numbers(sorted(limit)[:1])} as m → ∞, so C tends to a constant); a ~ N(0, I/m) is "
        "independent of Z(0), so given Z(0), ‖ŷ(0) − y‖₂ is √(ns)-Lipschitz in √m·a with mean "
        "≤ √(n(s + ‖y‖²/n)) (Gaussian concentration)",
    )


def concentration(rows: Sequence[dict]) -> Statement:
    ms, errors = seed_mean(select(rows, "G_over_m_minus_K_fro"), "m")
    slope = fit_loglog_slope(ms, errors) if len(ms) >= 2 and min(errors) > 0 else None
    return ours(
        "‖G/m − K‖_F falls like m^(−1/2)",
        value=None if slope is None else abs(slope + 0.5),
        relation="<=",
        threshold=0.25,
        measured=f"log-log slope of the seed-mean ‖G/m − K‖_F against m = {numbers([slope])}",
        expected="within 1/4 of −1/2 (averages of m independent units)",
        detail="the concentration the proof of Theorem 2 (Section 4.4) needs to reach λ*/2",
    )

"""Conditions and linear rates of GD on monotone DEQs (thesis, Chapter 3).

Notation of the thesis (Section 3.3): ``λ_0 = σ_min(Z(0))`` with ``Z(0)`` the ``(n, N)``
equilibrium at initialisation (``n ≥ N``); balls ``B(·(0), R_·)`` around the initial
A, B, U, u; ``λ̄_· = ‖·(0)‖₂ + R_·`` bounds the operator norm of each parameter in its ball
and ``λ̄_{ab} = λ̄_a λ̄_b``. The loss is ``L(θ) = ½‖ŷ − y‖²`` (Eq. 3.4), ``ŷ = Zᵀu``.

Every check returns :class:`Inequality` values ``{"name", "lhs", "relation", "rhs", "holds"}``:
both sides of one inequality of the thesis as plain floats (``holds`` is ``lhs ≥ rhs`` or
``lhs ≤ rhs``), so a caller can tell how far each one is from holding; statements and
verdicts are built from them elsewhere (``deqlab.papers.hieu2022.claims``). The
formulas are transcribed as printed, including (3.17), which has no ``m``;
:func:`eq_3_17_as_proved` is (3.17) as Proposition 6's proof needs it (ours).

Facts worth knowing when reading the results:

* ``λ_0² ≤ ‖Z(0)‖_F²/N`` (the smallest of N squared singular values is at most their
  mean) and Lemma 3.3.3 gives ``‖Z(0)‖_F ≤ ‖X‖_F‖U(0)‖₂/m``, while the right side of (3.18)
  is at least ``20‖X‖_F² λ̄_U² > 20‖X‖_F²‖U(0)‖₂²``: condition (3.18) can only hold when
  ``m²N < 1/20`` (:func:`eq_3_18_possible`; for N = 1, ``m < 1/√20 ≈ 0.224``,
  :data:`M_BOUND_3_18`), at any width.
* ``C_11`` of Lemma 3.3.8 (hence the second term of the step-size bound and (3.18)) drops
  the ``1/m`` factors of Lemmas 3.3.4 and 3.3.7. And ``η = 4/λ_0²``, allowed whenever it
  is the smallest term of the bound, makes the update of ``u`` alone map the residual
  ``ŷ − y`` to ``(I − η Z(0)ᵀZ(0))(ŷ − y)``, whose eigenvalues are all ``≤ −3`` (``n ≥ N``):
  at the bound, GD can increase the loss although the theorem promises ``L(θ(1)) ≤ 0``.
* Lemma 3.3.2 / C.0.4 as printed, ``‖(I − WᵀD)⁻¹u‖ ≤ ‖u‖/m``, holds for ``D = I`` but not
  for every 0/1 diagonal ``D`` (see
  :func:`deqlab.papers.hieu2022.mondeq_lemmas.lemma_3_3_2`). Every use of it (Lemmas 3.2.3
  and 3.3.7, Proposition 4) has ``(uᵀ ⊗ I)Q⁻¹`` followed by ``D``, and that form always
  holds: ``g = D(I − WᵀD)⁻¹u`` has ``Dg = g`` and ``g = DWᵀg + Du``, so
  ``gᵀ(I − Wᵀ)g = gᵀu`` and monotonicity gives ``m‖g‖² ≤ ‖g‖‖u‖``.

The lemmas on the equilibrium (3.3.2–3.3.4) are in :mod:`deqlab.papers.hieu2022.mondeq_lemmas`,
those on one GD step (3.3.6–3.3.10) in :mod:`deqlab.papers.hieu2022.mondeq_step`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypedDict, Unpack

import torch

from deqlab._checks import check_bool, check_int, check_positive, check_real, check_tensor
from deqlab.theory.spectra import gram_lambda_min, spectral_norm

PARAMETERS = ("A", "B", "U", "u")


class Theta(TypedDict):
    """θ = (A, B, U, u) of a monotone DEQ, ``W = (1 − m)I − AᵀA + B − Bᵀ`` (Eq. 3.3):
    A, B (n, n); U (n, d); u (n,)."""

    A: torch.Tensor
    B: torch.Tensor
    U: torch.Tensor
    u: torch.Tensor


def check_point(
    theta: Mapping[str, torch.Tensor], Z: torch.Tensor, X: torch.Tensor
) -> tuple[int, int, int]:
    """``(n, d, N)`` of θ = (A, B, U, u) (:class:`Theta`, given as keywords), its
    equilibrium ``Z`` (n, N) and the inputs ``X`` (d, N); a clear error for a missing or
    unknown keyword or a wrong shape."""
    missing = [k for k in PARAMETERS if k not in theta]
    unknown = [k for k in theta if k not in PARAMETERS]
    if missing or unknown:
        raise TypeError(f"θ is the keywords A, B, U, u; missing {missing}, unknown {unknown}")
    n = check_tensor("A", theta["A"], ndim=2).shape[0]
    check_tensor("B", theta["B"], shape=(n, n))
    N = check_tensor("Z", Z, shape=(n, None)).shape[1]
    d = check_tensor("X", X, shape=(None, N)).shape[0]
    check_tensor("U", theta["U"], shape=(n, d))
    check_tensor("u", theta["u"], shape=(n,))
    return n, d, N


#: Condition (3.18) can hold only for ``m < 1/√20`` (Lemma 3.3.3; see the module docstring).
M_BOUND_3_18 = 1 / math.sqrt(20)


def eq_3_18_possible(m: float, n_samples: int) -> bool:
    """Whether Eq. (3.18) can hold at all: ``m²N < 1/20`` (see the module docstring)."""
    return m * m * check_int("n_samples", n_samples, min_value=1) < 1 / 20


class Inequality(TypedDict):
    """``lhs relation rhs`` (relation ``">="`` or ``"<="``), both sides evaluated."""

    name: str
    lhs: float
    relation: str
    rhs: float
    holds: bool


#: The name :mod:`deqlab.train.mondeq_gd` gives these values.
Row = Inequality


def inequality(name: str, lhs: float, relation: str, rhs: float) -> Inequality:
    """``lhs relation rhs`` evaluated (``relation`` ``">="`` or ``"<="``)."""
    holds = lhs >= rhs if relation == ">=" else lhs <= rhs
    return Inequality(name=name, lhs=float(lhs), relation=relation, rhs=float(rhs), holds=holds)


def sigma_min(Z: torch.Tensor) -> float:
    """``σ_min(Z) = √λ_min(ZᵀZ)`` of the ``(n, N)`` feature matrix (``n ≥ N``), in float64."""
    Z = check_tensor("Z", Z, ndim=2)
    if Z.shape[0] < Z.shape[1]:
        raise ValueError(
            f"`Z` must have at least as many rows (width n) as columns (samples N); got "
            f"{tuple(Z.shape)} — the thesis assumes n >= N (Eq. 3.14)"
        )
    return math.sqrt(max(gram_lambda_min(Z), 0.0))


def _check_radius(radius: float | Mapping[str, float]) -> dict[str, float]:
    if isinstance(radius, Mapping):
        if set(radius) != set(PARAMETERS):
            raise ValueError(
                f"`radius` must have exactly the keys {PARAMETERS}; got {tuple(radius)}"
            )
        return {k: check_positive(f"radius[{k!r}]", radius[k]) for k in PARAMETERS}
    value = check_positive("radius", radius)
    return dict.fromkeys(PARAMETERS, value)


@dataclass(frozen=True)
class MonDEQConstants:
    """The constants of Conditions 1–2 at initialisation (thesis, Section 3.3).

    Attributes:
        m: monotonicity parameter; lambda0: ``σ_min(Z(0))``; x_norm: ``‖X‖_F``;
        loss0: ``L(θ(0)) = ½‖Z(0)ᵀu(0) − y‖²``; norms: ``‖·(0)‖₂`` of A, B, U, u;
        radii: ``R_·``; bars: ``λ̄_· = ‖·(0)‖₂ + R_·``.
    """

    m: float
    lambda0: float
    x_norm: float
    loss0: float
    norms: dict[str, float]
    radii: dict[str, float]
    bars: dict[str, float]

    def bar(self, *keys: str) -> float:
        """``λ̄_{ab…} = λ̄_a λ̄_b …``."""
        return math.prod(self.bars[k] for k in keys)


def mondeq_constants(
    *,
    Z: torch.Tensor,
    X: torch.Tensor,
    y: torch.Tensor,
    m: float,
    radius: float | Mapping[str, float],
    allow_narrow: bool = False,
    **theta: Unpack[Theta],
) -> MonDEQConstants:
    """Evaluate λ_0, ‖X‖_F, L(θ_0) and the λ̄'s from the initial θ = (A, B, U, u) and ``Z(0)``.

    Shapes: A, B (n, n); U (n, d); u (n,); Z (n, N) the equilibrium; X (d, N); y (N,).
    ``radius`` is one ``R`` for all four balls or a mapping with keys A, B, U, u.
    ``allow_narrow`` (ours): accept a width n < N, where Z(0) has rank ≤ n < N and so
    λ_0 = σ_min(Z(0)) = √λ_min(Z(0)ᵀZ(0)) = 0; by default such a width is refused, as the
    thesis assumes n ≥ N (Eq. 3.14).
    """
    n, _, N = check_point(theta, Z, X)
    check_tensor("y", y, shape=(N,))
    m = check_positive("m", m)
    radii = _check_radius(radius)
    narrow = check_bool("allow_narrow", allow_narrow) and n < N
    A, B, U, u = (theta[k] for k in PARAMETERS)
    with torch.no_grad():
        norms = {
            "A": spectral_norm(A),
            "B": spectral_norm(B),
            "U": spectral_norm(U),
            "u": float(torch.linalg.vector_norm(u)),
        }
        loss0 = 0.5 * float(torch.sum((Z.T @ u - y) ** 2))
        x_norm = float(torch.linalg.matrix_norm(X))
        lambda0 = 0.0 if narrow else sigma_min(Z.detach())
    bars = {k: norms[k] + radii[k] for k in PARAMETERS}
    return MonDEQConstants(m, lambda0, x_norm, loss0, norms, radii, bars)


def _ball_terms(c: MonDEQConstants) -> float:
    """``max{2λ̄_{UuA}/(m²R_A), 2λ̄_{Uu}/(m²R_B), λ̄_u/(mR_U), λ̄_U/(mR_u)}``."""
    m, R = c.m, c.radii
    return max(
        2 * c.bar("U", "u", "A") / (m**2 * R["A"]),
        2 * c.bar("U", "u") / (m**2 * R["B"]),
        c.bars["u"] / (m * R["U"]),
        c.bars["U"] / (m * R["u"]),
    )


def condition_1(c: MonDEQConstants) -> list[Inequality]:
    """Condition 1, Eqs. (3.8)–(3.9), of Theorem 3.3.1 (gradient flow)."""
    root = math.sqrt(2 * c.loss0)
    rhs_39 = (
        8
        * c.x_norm**2
        * root
        * c.bars["u"]
        / c.m**2
        * (4 * (c.bar("U", "A") ** 2 + c.bars["U"] ** 2) / c.m**2 + 1)
    )
    return [
        inequality("Eq. (3.8)", c.lambda0**2, ">=", 4 * c.x_norm * root * _ball_terms(c)),
        inequality("Eq. (3.9)", c.lambda0**3, ">=", rhs_39),
    ]


def condition_2(c: MonDEQConstants) -> list[Inequality]:
    """Condition 2, Eqs. (3.16)–(3.18), of Theorem 3.3.5 (gradient descent)."""
    root = math.sqrt(2 * c.loss0)
    rhs_317 = (
        8 * c.x_norm**2 * root * c.bars["u"] * (1 + 6 * c.bar("U", "A") ** 2 + 4 * c.bars["U"] ** 2)
    )
    rhs_318 = 20 * c.x_norm**2 * _c11_sum(c)
    return [
        inequality("Eq. (3.16)", c.lambda0**2, ">=", 8 * c.x_norm * root * _ball_terms(c)),
        inequality("Eq. (3.17)", c.lambda0**3, ">=", rhs_317),
        inequality("Eq. (3.18)", c.lambda0**2, ">=", rhs_318),
    ]


#: The name of :func:`eq_3_17_as_proved`'s inequality.
EQ_3_17_AS_PROVED = "Eq. (3.17) as Proposition 6's proof needs (ours)"


def eq_3_17_as_proved(c: MonDEQConstants) -> Inequality:
    """Eq. (3.17) as the proof of Proposition 6 needs it (ours):
    ``λ_0³ ≥ 16‖X‖_F²√(2L(θ_0)) λ̄_u (1/m² + (6λ̄_{UA}² + 4λ̄_U²)/m⁴)``.

    Lemma 3.3.4 (Eq. 3.15) with Proposition 5's ``‖ΔU‖ ≤ 8‖X‖_Fλ̄_u‖r_0‖/(λ_0²m)`` and
    ``‖ΔW‖ ≤ 16(3λ̄_A² + 2)λ̄_{Uu}‖X‖_F‖r_0‖/(λ_0²m²)`` (``‖r_0‖ = √(2L(θ_0))``, ``‖U(0)‖₂ ≤
    λ̄_U``) bounds ``‖Z(k+1) − Z(0)‖_F`` by ``8‖X‖_F²‖r_0‖λ̄_u(1/m² + (6λ̄_{UA}² +
    4λ̄_U²)/m⁴)/λ_0²``, which is ``≤ λ_0/2`` (Weyl: Hypothesis 2) exactly when this holds.
    The proof's second line drops every ``m``, and solving its third for ``λ_0³`` gives 16, not
    the 8 printed; Eq. (3.9), the flow's analogue, keeps its ``/m²`` and ``/m⁴``.
    """
    root = math.sqrt(2 * c.loss0)
    terms = 1 / c.m**2 + (6 * c.bar("U", "A") ** 2 + 4 * c.bars["U"] ** 2) / c.m**4
    return inequality(
        EQ_3_17_AS_PROVED, c.lambda0**3, ">=", 16 * c.x_norm**2 * root * c.bars["u"] * terms
    )


def c11(c: MonDEQConstants) -> float:
    """``C₁₁ = ‖X‖_F²(λ̄_u² + 4λ̄_{Uu}² + 4λ̄_{UuA}² + λ̄_U²)`` of Lemma 3.3.8."""
    return c.x_norm**2 * _c11_sum(c)


def _c11_sum(c: MonDEQConstants) -> float:
    """``λ̄_u² + 4λ̄_{Uu}² + 4λ̄_{UuA}² + λ̄_U²`` (C_11 of Lemma 3.3.8 without ``‖X‖_F²``)."""
    return (
        c.bars["u"] ** 2
        + 4 * c.bar("U", "u") ** 2
        + 4 * c.bar("U", "u", "A") ** 2
        + c.bars["U"] ** 2
    )


def step_size_bound(c: MonDEQConstants) -> float:
    """The largest η allowed by Theorem 3.3.5.

    ``min{4/λ_0², ‖X‖_F⁻²(λ̄_u² + 4λ̄_{Uu}² + 4λ̄_{UuA}² + λ̄_U²)⁻¹,
    ½‖X‖_F⁻¹λ_0⁻¹λ̄_{UuA}⁻¹, ⅙λ_0⁻²λ̄_{uA}⁻²}``.
    """
    lam = c.lambda0
    if lam == 0.0:
        return 0.0
    return min(
        4 / lam**2,
        1 / c11(c),
        0.5 / (c.x_norm * lam * c.bar("U", "u", "A")),
        1 / (6 * lam**2 * c.bar("u", "A") ** 2),
    )


def gradient_flow_bound(c: MonDEQConstants, t: torch.Tensor | float) -> torch.Tensor:
    """Theorem 3.3.1: ``L(θ(t)) ≤ exp(−λ_0² t / 2) L(θ(0))`` at times ``t ≥ 0``."""
    t = torch.as_tensor(t, dtype=torch.float64)
    if bool((t < 0).any()):
        raise ValueError("`t` must be >= 0")
    return torch.exp(-(c.lambda0**2) * t / 2) * c.loss0


def rate_defined(lambda0: float, eta: float) -> bool:
    """Whether ``η ≤ 4/λ_0²`` (to rounding: ``1 − ηλ_0²/4 ≥ −1e-12``), the first term of
    Theorem 3.3.5's step-size bound; beyond it the rate of Eq. (3.20) would be negative."""
    return 1 - eta * lambda0**2 / 4 >= -1e-12


def gd_rate(lambda0: float, eta: float) -> float:
    """Theorem 3.3.5's per-step factor ``1 − ηλ_0²/4``: ``L(θ(k+1)) ≤ (1 − ηλ_0²/4) L(θ(k))``.

    ``η = 4/λ_0²`` (allowed by the bound) gives 0; a factor within ``1e-12`` of 0 from
    rounding is 0, a clearly negative one (``η > 4/λ_0²``, :func:`rate_defined` False)
    raises ValueError.
    """
    lambda0 = check_real("lambda0", lambda0, low=0.0)
    eta = check_positive("eta", eta)
    rate = 1 - eta * lambda0**2 / 4
    if not rate_defined(lambda0, eta):
        raise ValueError(
            f"`eta` = {eta:g} makes the rate 1 − ηλ_0²/4 = {rate:.3g} negative; Theorem 3.3.5 "
            f"needs eta <= 4/λ_0² = {4 / lambda0**2:.4g}"
        )
    return max(rate, 0.0)


def gd_bound(c: MonDEQConstants, k: torch.Tensor | int, eta: float) -> torch.Tensor:
    """Theorem 3.3.5 / Eq. (3.20): ``L(θ(k)) ≤ (1 − η λ_0²/4)^k L(θ(0))`` at steps ``k``."""
    rate = gd_rate(c.lambda0, eta)
    k = torch.as_tensor(k, dtype=torch.float64)
    if bool((k < 0).any()):
        raise ValueError("`k` must be >= 0")
    return rate**k * c.loss0


def hypotheses(
    c: MonDEQConstants,
    *,
    initial: Mapping[str, torch.Tensor],
    current: Mapping[str, torch.Tensor],
    Z: torch.Tensor,
    loss: float,
    k: int,
    eta: float,
) -> list[Inequality]:
    """Induction hypotheses 1–3 of the proof of Theorem 3.3.5 at GD step ``k``.

    ``initial`` / ``current`` map A, B, U, u to their values at steps 0 and ``k``; ``Z`` is
    the equilibrium at step ``k`` and ``loss`` its ``L(θ(k))``. Rows: ``‖·(k) − ·(0)‖_F ≤ R_·``
    (Hypothesis 1), ``σ_min(Z(k)) ≥ λ_0/2`` (Hypothesis 2) and, where ``η ≤ 4/λ_0²``
    (:func:`rate_defined`; the theorem assumes it), Eq. (3.20) (Hypothesis 3).
    """
    k = check_int("k", k, min_value=0)
    loss = check_real("loss", loss, low=0.0)
    rows = [
        inequality(
            f"Hypothesis 1 ({name})",
            float(torch.linalg.vector_norm((current[name] - initial[name]).detach())),
            "<=",
            c.radii[name],
        )
        for name in PARAMETERS
    ]
    rows.append(inequality("Hypothesis 2", sigma_min(Z.detach()), ">=", c.lambda0 / 2))
    if rate_defined(c.lambda0, eta):
        rows.append(inequality("Hypothesis 3 / Eq. (3.20)", loss, "<=", float(gd_bound(c, k, eta))))
    return rows


def sides(keys: Sequence[str], rows: Sequence[Inequality]) -> dict[str, float]:
    """``<key>_lhs`` / ``<key>_rhs`` of each row, the keys in the order of the rows."""
    columns: dict[str, float] = {}
    for key, row in zip(keys, rows, strict=True):
        columns.update({f"{key}_lhs": row["lhs"], f"{key}_rhs": row["rhs"]})
    return columns

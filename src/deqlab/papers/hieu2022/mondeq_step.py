"""One GD step of a monotone DEQ against Lemmas 3.3.6–3.3.10 of the thesis (Hieu 2022).

Step ``k → k+1`` of ``θ(k+1) = θ(k) − η∇L(θ(k))``; ``r(k) = ŷ(k) − y`` with ``ŷ = Zᵀu``,
``L = ½‖r‖²`` (Eq. 3.4); ``g = Z(k)ᵀu(k+1)``. The proof of Theorem 3.3.5 splits the change of
the loss exactly as

    L(k+1) − L(k) = I₁ + I₂ + I₃,   I₁ = ½‖ŷ(k+1) − ŷ(k)‖²,
    I₂ = (ŷ(k+1) − g)ᵀ r(k),         I₃ = (g − ŷ(k))ᵀ r(k)

(:func:`progress_terms`) and bounds each term (Lemmas 3.3.8, 3.3.9, 3.3.10) with the
constants ``C₁₁ = ‖X‖_F²(λ̄_u² + 4λ̄_{Uu}² + 4λ̄_{UuA}² + λ̄_U²)`` and ``C₁₂ = ‖X‖_F²λ̄_{UuA}²/4``
(:func:`c11`, :func:`c12`). Lemma 3.3.7 bounds the step of each parameter, Lemma 3.3.6 the
change of ``W`` it causes. The formulas are transcribed as printed; where the print is not
self-consistent the docstring says which reading is used.

``C₁₁`` drops the ``1/m`` and ``1/m²`` factors that Lemmas 3.3.4 and 3.3.7 carry into the
first line of Lemma 3.3.8's proof, so for ``m < 1`` the printed bound on ``I₁`` (and the
step-size bound and Eq. 3.18 built on it) is too small by up to ``m⁻⁴``.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from deqlab._checks import check_positive, check_real
from deqlab.papers.hieu2022.mondeq import Inequality, MonDEQConstants, c11, inequality
from deqlab.solvers.splitting import MonotoneOperator
from deqlab.theory.spectra import spectral_norm

#: The keys of :func:`lemma_3_3_7`'s rows, in order (``W`` last).
STEP_KEYS = ("U", "u", "A", "B", "W")


def c12(c: MonDEQConstants) -> float:
    """``C₁₂ = ‖X‖_F² λ̄_{UuA}² / 4`` (Lemma 3.3.8)."""
    return c.x_norm**2 * c.bar("U", "u", "A") ** 2 / 4


def progress_terms(
    yhat: torch.Tensor, yhat_next: torch.Tensor, g: torch.Tensor, y: torch.Tensor
) -> tuple[float, float, float]:
    """``(I₁, I₂, I₃)`` of the step from ``ŷ(k)`` to ``ŷ(k+1)``, with ``g = Z(k)ᵀu(k+1)``.

    All arguments are ``(N,)``; ``L(k+1) − L(k) = I₁ + I₂ + I₃`` exactly.
    """
    r = yhat - y  # r(k)
    i1 = 0.5 * float(torch.sum((yhat_next - yhat) ** 2))
    return i1, float((yhat_next - g) @ r), float((g - yhat) @ r)


def lemma_3_3_6(
    A: torch.Tensor, dA: torch.Tensor, dB: torch.Tensor, dW: torch.Tensor
) -> Inequality:
    """Lemma 3.3.6: ``‖Δ_W‖₂ ≤ 2‖A‖₂‖Δ_A‖₂ + ‖Δ_A‖₂² + 2‖Δ_B‖₂`` at ``A = A(k)``."""
    a = spectral_norm(dA.detach())
    rhs = 2 * spectral_norm(A.detach()) * a + a**2 + 2 * spectral_norm(dB.detach())
    return inequality("Lemma 3.3.6", spectral_norm(dW.detach()), "<=", rhs)


def lemma_3_3_7(
    c: MonDEQConstants, *, eta: float, loss: float, steps: Mapping[str, float]
) -> list[Inequality]:
    """Lemma 3.3.7: the step of each parameter against ``η‖X‖_F‖r(k)‖`` times
    ``λ̄_u/m`` (U), ``λ̄_U/m`` (u), ``2λ̄_{UuA}/m²`` (A), ``2λ̄_{Uu}/m²`` (B) and
    ``4λ̄_{Uu}(λ̄_A² + ηλ₀²λ̄_A²/16 + 1)/m²`` (W), with ``‖r(k)‖ = √(2L(k))``.

    ``steps`` maps U, u, A, B to ``‖·(k+1) − ·(k)‖_F = η‖∇·L‖_F`` (the middle term of the
    lemma: the printed ``‖·‖₂ = ‖∇L‖_F`` misses η) and W to ``‖W(k+1) − W(k)‖₂``.
    """
    eta = check_positive("eta", eta)
    scale = eta * c.x_norm * (2 * check_real("loss", loss, low=0.0)) ** 0.5
    m, bar_A = c.m, c.bars["A"]
    factors = {
        "U": c.bars["u"] / m,
        "u": c.bars["U"] / m,
        "A": 2 * c.bar("U", "u", "A") / m**2,
        "B": 2 * c.bar("U", "u") / m**2,
        "W": 4 * c.bar("U", "u") * (bar_A**2 + eta * c.lambda0**2 * bar_A**2 / 16 + 1) / m**2,
    }
    return [inequality(f"Lemma 3.3.7 ({p})", steps[p], "<=", scale * factors[p]) for p in STEP_KEYS]


def lemma_3_3_8(c: MonDEQConstants, *, eta: float, loss: float, i1: float) -> Inequality:
    """Lemma 3.3.8: ``I₁ ≤ L(k)(ηC₁₁ + η²λ₀²C₁₂)²``.

    The lemma prints ``L(k)[η²C₁₁² + 2η³λ₀²C₁₁C₁₂ + η⁴λ₀C₁₂²]``; its proof squares
    ``√(2L)(ηC₁₁ + η²λ₀²C₁₂)``, whose last term is ``η⁴λ₀⁴C₁₂²``: the proof's square is used.
    """
    bound = loss * (eta * c11(c) + eta**2 * c.lambda0**2 * c12(c)) ** 2
    return inequality("Lemma 3.3.8", i1, "<=", bound)


def lemma_3_3_9(c: MonDEQConstants, *, eta: float, loss: float, i2: float) -> Inequality:
    """Lemma 3.3.9: ``I₂ ≤ 2L(k)[η(C₁₁ − λ̄_U²‖X‖_F²) + η²λ₀²C₁₂]``."""
    inner = eta * (c11(c) - c.bars["U"] ** 2 * c.x_norm**2) + eta**2 * c.lambda0**2 * c12(c)
    return inequality("Lemma 3.3.9", i2, "<=", 2 * loss * inner)


def lemma_3_3_10(c: MonDEQConstants, *, eta: float, loss: float, i3: float) -> Inequality:
    """Lemma 3.3.10: ``I₃ ≤ −ηλ₀²L(k)/2`` (needs ``n ≥ N`` and Hypotheses 1–3 at ``k′ ≤ k``)."""
    return inequality("Lemma 3.3.10", i3, "<=", -eta * c.lambda0**2 * loss / 2)


def proposition_3(W: torch.Tensor, *, alpha: float, m: float) -> Inequality:
    """Proposition 3: ``L[T_α] = ‖I − α(I − W)‖₂ ≤ √(1 − 2αm + α²‖I − W‖₂²)``.

    ``T_α`` of Eq. (3.5) is linear, so its Lipschitz constant is its spectral norm; the
    bound is :meth:`deqlab.solvers.splitting.MonotoneOperator.contraction_bound`.
    """
    alpha = check_positive("alpha", alpha)
    eye = torch.eye(W.shape[0], dtype=W.dtype, device=W.device)
    bound = MonotoneOperator(W.detach(), m).contraction_bound(alpha)
    return inequality(
        "Proposition 3", spectral_norm((eye - alpha * (eye - W)).detach()), "<=", bound
    )

"""Lemmas 3.3.2–3.3.4 of the thesis (Hieu 2022) on a monotone DEQ's equilibrium, both sides
measured: the norm of the equilibrium (3.3.3), its resolvent bound (3.3.2, which fails for
some ReLU masks: see :func:`lemma_3_3_2`) and how far the equilibrium and the output move
when the parameters do (3.3.4, Eqs. 3.15 and C.6).

Notation of :mod:`deqlab.papers.hieu2022.mondeq`: the equilibrium ``Z`` (n, N), ``W = (1 − m)I −
AᵀA + B − Bᵀ``, inputs ``X`` (d, N), output ``ŷ = Zᵀu``; every lemma returns an
:class:`~deqlab.papers.hieu2022.mondeq.Inequality`.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from deqlab._checks import check_positive, check_tensor
from deqlab.models.mondeq import active_set
from deqlab.papers.hieu2022.mondeq import Inequality, inequality, sides
from deqlab.theory.spectra import spectral_norm


def lemma_3_3_3(Z: torch.Tensor, X: torch.Tensor, U: torch.Tensor, m: float) -> Inequality:
    """Lemma 3.3.3: ``‖Z*‖_F ≤ ‖X‖_F ‖U‖₂ / m`` for the equilibrium ``Z*`` (n, N)."""
    m = check_positive("m", m)
    return inequality(
        "Lemma 3.3.3",
        float(torch.linalg.matrix_norm(Z.detach())),
        "<=",
        float(torch.linalg.matrix_norm(X)) * spectral_norm(U.detach()) / m,
    )


def lemma_3_3_2(W: torch.Tensor, u: torch.Tensor, mask: torch.Tensor, m: float) -> Inequality:
    """Lemma 3.3.2 / C.0.4 as printed: ``max_j ‖(I − Wᵀ D_j)⁻¹ u‖ ≤ ‖u‖ / m``.

    ``D_j = diag(mask[:, j])`` is the ReLU derivative of sample ``j`` (``mask`` (n, N));
    ``(uᵀ ⊗ I_N) Q⁻¹`` is block diagonal over samples, so its norm is the max over ``j``.
    The left side is computed exactly (one linear solve per sample). The inequality holds
    when every ``D_j = I`` (``σ_min(I − W) ≥ m``) but fails for some 0/1 masks, at genuine
    equilibria too (a constructed one: the complement rows of ``v`` pick up ``W``). The form
    its uses need, ``‖D_j(I − WᵀD_j)⁻¹u‖ ≤ ‖u‖/m``, holds for every mask (see
    :mod:`deqlab.papers.hieu2022.mondeq`).
    """
    m = check_positive("m", m)
    n = check_tensor("W", W, ndim=2).shape[0]
    check_tensor("mask", mask, shape=(n, None))
    eye = torch.eye(n, dtype=W.dtype, device=W.device)
    systems = eye - W.detach().T.unsqueeze(0) * mask.T.unsqueeze(1)  # (N, n, n): I − Wᵀ D_j
    v = torch.linalg.solve(systems, u.detach().expand(mask.shape[1], n))  # (N, n)
    lhs = float(torch.linalg.vector_norm(v, dim=1).max())
    return inequality("Lemma 3.3.2", lhs, "<=", float(torch.linalg.vector_norm(u)) / m)


def lemma_3_3_4(
    X: torch.Tensor,
    *,
    Z: tuple[torch.Tensor, torch.Tensor],
    W: tuple[torch.Tensor, torch.Tensor],
    U: tuple[torch.Tensor, torch.Tensor],
    m: float,
) -> Inequality:
    """Lemma 3.3.4, Eq. (3.15): ``‖Z(k) − Z(s)‖_F ≤ ‖X‖_F(‖ΔU‖₂/m + ‖ΔW‖₂‖U(s)‖₂/m²)``.

    Each pair holds the values at steps ``(k, s)``.
    """
    m = check_positive("m", m)
    dU = spectral_norm((U[0] - U[1]).detach())
    dW = spectral_norm((W[0] - W[1]).detach())
    rhs = float(torch.linalg.matrix_norm(X)) * (dU / m + dW * spectral_norm(U[1].detach()) / m**2)
    return inequality(
        "Lemma 3.3.4", float(torch.linalg.matrix_norm((Z[0] - Z[1]).detach())), "<=", rhs
    )


def lemma_3_3_4_output(
    X: torch.Tensor,
    *,
    Z: torch.Tensor,
    W: tuple[torch.Tensor, torch.Tensor],
    U: tuple[torch.Tensor, torch.Tensor],
    u: tuple[torch.Tensor, torch.Tensor],
    m: float,
) -> Inequality:
    """Lemma 3.3.4, second part (Eq. C.6): ``‖ŷ(k) − ŷ(s)‖ ≤ ‖X‖_F(‖ΔU‖₂‖u(k)‖/m +
    ‖ΔW‖₂‖U(s)‖₂‖u(k)‖/m² + ‖U(s)‖₂‖Δu‖/m)`` with ``ŷ = Zᵀu``.

    ``Z``, ``W``, ``U``, ``u`` are pairs of values at steps ``(k, s)``; Eq. (3.15) prints
    ``y(s)`` on the left, Eq. (C.6) (Appendix C.0.5) ``ŷ_s``, which is what is measured.
    """
    m = check_positive("m", m)
    Zk, Zs = (z.detach() for z in Z)
    uk, us = (v.detach() for v in u)
    Us = spectral_norm(U[1].detach())
    norm_uk = float(torch.linalg.vector_norm(uk))
    rhs = float(torch.linalg.matrix_norm(X)) * (
        spectral_norm((U[0] - U[1]).detach()) * norm_uk / m
        + spectral_norm((W[0] - W[1]).detach()) * Us * norm_uk / m**2
        + Us * float(torch.linalg.vector_norm(uk - us)) / m
    )
    lhs = float(torch.linalg.vector_norm(Zk.T @ uk - Zs.T @ us))
    return inequality("Lemma 3.3.4 (Eq. C.6)", lhs, "<=", rhs)


#: The column prefixes of :func:`lemma_columns`, in the order of its lemmas.
LEMMA_KEYS = ("lemma3_3_2", "lemma3_3_3", "lemma3_3_4", "lemma3_3_4_output")


def lemma_columns(
    X: torch.Tensor,
    *,
    m: float,
    current: Mapping[str, torch.Tensor],
    initial: Mapping[str, torch.Tensor],
    W: tuple[torch.Tensor, torch.Tensor],
    Z: tuple[torch.Tensor, torch.Tensor],
) -> dict[str, float]:
    """Both sides of Lemmas 3.3.2, 3.3.3 and 3.3.4 (Eqs. 3.15 and C.6) at step ``k`` against
    step 0, as tidy columns ``<key>_lhs`` / ``<key>_rhs`` (:data:`LEMMA_KEYS`).

    ``current`` / ``initial`` map A, B, U, u to their values at steps ``k`` and 0; ``W`` and
    ``Z`` are the pairs ``(W(k), W(0))`` and ``(Z(k), Z(0))`` (equilibria, n × N). Lemma
    3.3.2's masks ``D_j`` are the active set ``W(k)Z(k) + U(k)X > 0`` (as the backward's).
    """
    U, u = (current["U"], initial["U"]), (current["u"], initial["u"])
    rows = [
        lemma_3_3_2(W[0], current["u"], active_set(W[0], Z[0], current["U"] @ X), m),
        lemma_3_3_3(Z[0], X, current["U"], m),
        lemma_3_3_4(X, Z=Z, W=W, U=U, m=m),
        lemma_3_3_4_output(X, Z=Z, W=W, U=U, u=u, m=m),
    ]
    return sides(LEMMA_KEYS, rows)

"""Batched Golub–Kahan and Arnoldi against dense float64 SVDs and eigenvalues: the brackets
contain the truth on random spectra, a Ritz value alone would not, exhaustion and an early
closed Krylov space are exact."""

import math

import pytest
import torch

from deqlab.krylov_bounds import kw_epsilon, singular_extremes, spectral_radius


def operator(A: torch.Tensor):
    """v ↦ A v and u ↦ Aᵀ u on (R, n) rows of the batch A (R, n, n)."""
    return (lambda v: (A @ v[:, :, None])[:, :, 0]), (lambda u: (A.mT @ u[:, :, None])[:, :, 0])


def with_singular_values(S: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    R, n = S.shape
    Q1, _ = torch.linalg.qr(torch.randn(R, n, n, generator=gen, dtype=torch.float64))
    Q2, _ = torch.linalg.qr(torch.randn(R, n, n, generator=gen, dtype=torch.float64))
    return Q1 @ torch.diag_embed(S) @ Q2


def spectra(kind: str, R: int, n: int, gen: torch.Generator) -> torch.Tensor:
    u = torch.rand(R, n, generator=gen, dtype=torch.float64)
    if kind == "uniform":
        return 0.01 + 2 * u
    if kind == "geometric":  # σ_i = 10^{-3 u}: a dense bottom, the hard case for σ_min
        return 10 ** (-3 * u)
    return torch.cat([torch.full((R, 1), 3.0, dtype=torch.float64), 1 + 0.01 * u[:, 1:]], 1)


@pytest.mark.parametrize("kind", ["uniform", "geometric", "outlier"])
@pytest.mark.parametrize("steps", [3, 8, 25])
def test_brackets_contain_the_dense_singular_values(kind, steps):
    gen = torch.Generator().manual_seed(steps)
    S = spectra(kind, 24, 60, gen)
    mv, rmv = operator(with_singular_values(S, gen))
    for target in ("min", "max"):
        start = torch.randn(24, 60, generator=gen, dtype=torch.float64)
        found = singular_extremes(
            mv, rmv, start, target=target, rtol=1e-12, max_steps=steps, delta=1e-3
        )
        small, large = found.smallest, found.largest
        lo, hi = S.amin(1), S.amax(1)
        assert bool(((small.lower <= lo) & (lo <= small.upper)).all())
        assert bool(((large.lower <= hi) & (hi <= large.upper)).all())
        assert bool((small.value >= lo - 1e-12).all()) and bool((large.value <= hi + 1e-12).all())
        # some singular value lies within each residual of the estimate
        for e in (small, large):
            gap = (S - e.value[:, None]).abs().amin(1)
            assert bool((gap <= e.residual + 1e-12).all())


def test_a_ritz_value_alone_is_not_an_upper_bound_of_the_norm():
    """Must-not: after 3 steps the largest Ritz value is below ‖A‖₂ on most rows (Courant–
    Fischer: from below); only the widened side is above it."""
    gen = torch.Generator().manual_seed(0)
    S = spectra("uniform", 32, 200, gen)
    mv, rmv = operator(with_singular_values(S, gen))
    start = torch.randn(32, 200, generator=gen, dtype=torch.float64)
    found = singular_extremes(mv, rmv, start, target="max", rtol=0.1, max_steps=3, delta=1e-3)
    large, truth = found.largest, S.amax(1)
    assert int((large.value < truth - 1e-3).sum()) > 16
    assert bool((large.upper >= truth).all()) and not bool(large.converged.any())


def test_exhaustion_is_exact():
    gen = torch.Generator().manual_seed(1)
    S = spectra("geometric", 3, 20, gen)
    mv, rmv = operator(with_singular_values(S, gen))
    start = torch.randn(3, 20, generator=gen, dtype=torch.float64)
    found = singular_extremes(mv, rmv, start, target="min", rtol=1e-12, max_steps=50, delta=1e-3)
    e = found.smallest
    assert e.steps == 20 and bool(e.exact.all()) and bool(e.converged.all())
    torch.testing.assert_close(e.value, S.amin(1), rtol=1e-10, atol=0)
    assert bool((e.upper - e.lower <= 1e-12).all())


def test_a_closed_krylov_space_stops_its_row_exactly():
    """Rows with 2 or 3 distinct singular values (multiplicities 10): the space closes after
    2 or 3 steps, those rows are exact there and the padding leaves their values alone."""
    gen = torch.Generator().manual_seed(2)
    S = torch.stack([
        torch.tensor([0.5, 2.0] * 15, dtype=torch.float64),
        torch.tensor([0.3, 1.0, 4.0] * 10, dtype=torch.float64),
        torch.linspace(0.2, 1.0, 30, dtype=torch.float64),
    ])  # fmt: skip
    mv, rmv = operator(with_singular_values(S, gen))
    start = torch.randn(3, 30, generator=gen, dtype=torch.float64)
    found = singular_extremes(mv, rmv, start, target="min", rtol=1e-12, max_steps=30, delta=1e-3)
    assert found.smallest.exact.tolist() == [True, True, True]
    torch.testing.assert_close(found.smallest.value, S.amin(1), rtol=1e-10, atol=0)
    torch.testing.assert_close(found.largest.value, S.amax(1), rtol=1e-10, atol=0)


def test_kuczynski_wozniakowski_epsilon():
    # ε_k = (ln(1.648 √n / δ) / (2k − 3))², decreasing in k; no bound below 2 steps
    assert kw_epsilon(100, 10, 1e-3) == pytest.approx((math.log(16480) / 17) ** 2)
    assert kw_epsilon(100, 1, 1e-3) == math.inf
    assert kw_epsilon(100, 40, 1e-3) < kw_epsilon(100, 20, 1e-3) < kw_epsilon(1000, 20, 1e-3)


def test_each_checkpoint_reads_the_bound_at_delta_over_the_checkpoints():
    """The run returns the bracket of the first of its 15 checkpoints (k = 2, 3, 4, 5, 6, 7,
    8, 10, 12, 15, 18, 22, 27, 33, 40) where it converges, so the bound read there must hold
    at all of them at once: each at δ/15 (union bound), else the stop makes it 1 − 15δ."""
    gen = torch.Generator().manual_seed(4)
    S = spectra("uniform", 4, 200, gen)
    mv, rmv = operator(with_singular_values(S, gen))
    start = torch.randn(4, 200, generator=gen, dtype=torch.float64)
    found = singular_extremes(mv, rmv, start, target="max", rtol=0.5, max_steps=40, delta=1e-3)
    e = found.largest
    assert 2 < e.steps < 40 and not bool(e.exact.any())
    epsilon = kw_epsilon(200, e.steps, 1e-3 / 15)
    margin = e.steps * torch.finfo(torch.float64).eps * e.value
    torch.testing.assert_close(e.upper, e.value / math.sqrt(1 - epsilon) + margin)
    assert bool((e.upper >= S.amax(1)).all())


def test_arnoldi_spectral_radius_of_nonsymmetric_rows():
    gen = torch.Generator().manual_seed(3)
    A = torch.randn(5, 40, 40, generator=gen, dtype=torch.float64) / 40**0.5
    mv, _ = operator(A)
    start = torch.randn(5, 40, generator=gen, dtype=torch.float64)
    rho = spectral_radius(mv, start, rtol=1e-3, max_steps=100)
    truth = torch.linalg.eigvals(A).abs().amax(1)
    assert bool(rho.converged.all())
    torch.testing.assert_close(rho.value, truth, rtol=2e-3, atol=0)
    exact = spectral_radius(mv, start, rtol=1e-14, max_steps=100)
    assert exact.steps == 40 and bool(exact.exact.all())
    torch.testing.assert_close(exact.value, truth, rtol=1e-9, atol=0)


def test_arnoldi_unconverged_is_flagged():
    gen = torch.Generator().manual_seed(4)
    A = torch.randn(4, 60, 60, generator=gen, dtype=torch.float64) / 60**0.5
    mv, _ = operator(A)
    start = torch.randn(4, 60, generator=gen, dtype=torch.float64)
    rho = spectral_radius(mv, start, rtol=1e-6, max_steps=4)
    assert rho.steps == 4 and not bool(rho.converged.any()) and bool((rho.residual > 0).all())

"""Certified brackets of λ_min (deqlab.theory.brackets): each side against a dense eigvalsh on
closed-form spectra with a clustered bottom, the proofs' rounding terms, and a Ritz block
that misses the least eigenvalue (the bracket is wide, never wrong)."""

from __future__ import annotations

import math

import pytest
import torch

from deqlab.theory import brackets
from deqlab.theory.brackets import (
    Bracket,
    abs_row_norm,
    certify_least,
    factor_inverse,
    gamma,
    inertia_lower,
    mirror_lower,
    narrowest,
    rayleigh_lower,
    rayleigh_upper,
    rounding_floor,
)
from deqlab.theory.lobpcg import least_eigenvalue_lobpcg
from helpers import with_spectrum


def _clustered(n: int, width: float, seed: int = 0) -> torch.Tensor:
    """A kernel-like spectrum: 40 eigenvalues within ``width`` (relative) of λ₁ = 0.025 under
    a spread of large ones, condition number about 4·10⁵."""
    bottom = 0.025 * (1 + width * torch.linspace(0, 1, 40, dtype=torch.float64))
    top = torch.logspace(-1, 4, n - 40, dtype=torch.float64)
    return with_spectrum(torch.cat([bottom, top]), seed)


def _improve(A: torch.Tensor):
    def improve(precondition, block, atol):
        pair = least_eigenvalue_lobpcg(A, precondition, rtol=0.0, atol=atol, stall=5, start=block)
        return pair.value, pair.block

    return improve


@pytest.mark.parametrize("width", [1e-2, 1e-4, 1e-6])
@pytest.mark.parametrize("target", [1e-3, 1e-6, 0.0])
def test_the_bracket_holds_the_dense_eigenvalue_of_a_clustered_spectrum(width, target):
    A = _clustered(300, width, seed=int(-math.log10(width)))
    exact = float(torch.linalg.eigvalsh(A)[0])
    estimate = exact * (1 + 0.1 * max(target, 1e-9))  # an estimate from above, as LOBPCG's
    found, best = certify_least(
        A, estimate, None, target=target, work=torch.empty_like(A), improve=_improve(A)
    )
    assert found.contains(exact)
    assert found.width <= max(target * found.upper, 1.01 * narrowest(A))
    assert best >= found.lower and best == pytest.approx(exact, rel=max(target, 1e-9))


def test_a_rayleigh_quotient_with_its_rounding_bounds_lambda_min_from_above():
    A = _clustered(200, 1e-3)
    exact = float(torch.linalg.eigvalsh(A)[0])
    vectors = torch.linalg.eigh(A).eigenvectors
    norm = abs_row_norm(A)
    assert norm >= float(A.abs().sum(dim=1).max())
    for x in (vectors[:, 0], vectors[:, 0] + 1e-6 * vectors[:, 7], torch.ones(200)):
        upper, proof = rayleigh_upper(A, x.to(torch.float64), norm)
        assert upper >= exact and "Courant–Fischer" in proof
    tight, _ = rayleigh_upper(A, vectors[:, 0], norm)
    assert tight - exact <= 5 * gamma(200) * norm + 1e-15  # no more than its rounding above


def test_a_rayleigh_quotient_less_its_rounding_bounds_lambda_max_from_below():
    A = _clustered(200, 1e-3, seed=1)
    values, vectors = torch.linalg.eigh(A)
    top, norm = float(values[-1]), abs_row_norm(A)
    for x in (vectors[:, -1], vectors[:, -1] + 1e-3 * vectors[:, 0], torch.ones(200)):
        lower, proof = rayleigh_lower(A, x.to(torch.float64), norm)
        assert lower <= top and "≤ λ_max" in proof
    tight, _ = rayleigh_lower(A, vectors[:, -1], norm)
    assert top - tight <= 2 * 5 * gamma(200) * norm  # its rounding bound, and the vector's


def test_a_completed_factorization_bounds_lambda_min_from_below_and_a_failed_one_gives_none():
    A = _clustered(200, 1e-3, seed=2)
    exact = float(torch.linalg.eigvalsh(A)[0])
    work = torch.empty_like(A)
    below = inertia_lower(A, exact * (1 - 1e-6), work)
    assert below is not None
    lower, proof = below
    assert exact * (1 - 1e-6) - 1e-8 < lower <= exact and "Cholesky" in proof
    L = work.mT  # the factor of A − ℓI, in place
    assert torch.allclose(L @ L.T, A - exact * (1 - 1e-6) * torch.eye(200, dtype=A.dtype))
    assert inertia_lower(A, exact * (1 + 1e-6), work) is None  # ℓ above λ_min
    assert inertia_lower(A, exact / 2, work) is not None
    R = torch.randn(200, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    shifted = A - exact / 2 * torch.eye(200, dtype=A.dtype)
    assert torch.allclose(shifted @ factor_inverse(work)(R), R, atol=1e-7)


def test_the_inertia_bound_loses_gamma_n_times_the_trace():
    A = torch.diag(torch.linspace(1.0, 2.0, 100, dtype=torch.float64))
    lower, _ = inertia_lower(A, 0.5, torch.empty_like(A))
    loss = 0.5 - lower
    trace = float((A.diagonal() - 0.5).sum())
    assert gamma(101) * trace <= loss <= 1.01 * gamma(101) * trace + 1e-15
    assert rounding_floor(A) == pytest.approx(gamma(101) * 150.0, rel=1e-9)


def test_a_ritz_block_that_misses_the_least_eigenvalue_gives_a_wide_bracket_never_a_wrong_one():
    values = torch.cat([torch.tensor([0.01]), torch.linspace(1.0, 100.0, 99)]).to(torch.float64)
    A = torch.diag(values)  # eigenvectors e_i: a block without e_1 stays without it
    block = torch.randn(100, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    block[0] = 0.0
    missed = least_eigenvalue_lobpcg(A, lambda R: R, rtol=1e-12, stall=5, start=block)
    assert missed.value == pytest.approx(1.0, rel=1e-9)  # the estimate is λ₂, not λ₁
    found, _ = certify_least(
        A, missed.value, missed.block, target=1e-3, work=torch.empty_like(A),
        improve=_improve(A),
    )  # fmt: skip
    assert found.contains(0.01)  # the factorization failed until its shift passed λ₁


def test_a_bracket_says_its_width_relative_to_its_upper_side():
    found = Bracket(0.999, 1.0, "below", "above")
    assert found.width == pytest.approx(1e-3) and found.relative_width == pytest.approx(1e-3)
    assert found.contains(0.9995) and not found.contains(1.1)
    assert Bracket(-1e-12, 1e-12, "", "").relative_width > 1
    assert Bracket(-2.0, -1.0, "", "").relative_width == math.inf
    assert found.as_dict()["lower_proof"] == "below"


def test_a_matrix_with_no_factorization_at_any_shift_is_refused():
    A = torch.full((4, 4), float("nan"), dtype=torch.float64)
    with pytest.raises(ValueError, match="no float64 Cholesky factorization"):
        certify_least(A, 1.0, None, target=1e-3, work=torch.empty_like(A), improve=_improve(A))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_proofs_run_on_the_gpu_and_hold_the_dense_eigenvalue():
    A = _clustered(300, 1e-4).cuda()
    exact = float(torch.linalg.eigvalsh(A)[0])
    found, _ = certify_least(
        A, exact, None, target=0.0, work=torch.empty_like(A), improve=_improve(A)
    )
    assert found.contains(exact) and found.width <= 1.01 * narrowest(A)


def test_mirror_lower_makes_the_matrix_its_lower_triangle_by_row_blocks(monkeypatch):
    monkeypatch.setattr(brackets, "BLOCK_ENTRIES", 7 * 3)  # 3 rows a block: 3 blocks of 7
    A = torch.randn(7, 7, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    expected = torch.tril(A) + torch.tril(A, -1).T
    assert mirror_lower(A) is A and torch.equal(A, expected)


def test_at_floor_only_when_the_width_is_what_rounding_allows():
    """A block far from the least eigenvector, and an improve that only makes it worse: the
    bracket is wide, not at the floor, and the estimate is never replaced by a larger one."""
    A = torch.diag(torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0], dtype=torch.float64))
    far = torch.zeros(5, 1, dtype=torch.float64)
    far[4] = 1.0  # the eigenvector of 5

    def worse(precondition, block, atol):
        return 4.5, far

    found, best = certify_least(A, 1.0, far, target=0.0, work=torch.empty_like(A), improve=worse)
    assert found.contains(1.0) and found.upper >= 5.0 and not found.at_floor
    assert best == 1.0
    vector = torch.zeros(5, 1, dtype=torch.float64)
    vector[0] = 1.0
    tight, _ = certify_least(A, 1.0, vector, target=0.0, work=torch.empty_like(A), improve=worse)
    assert tight.at_floor and tight.width <= 1.01 * narrowest(A)

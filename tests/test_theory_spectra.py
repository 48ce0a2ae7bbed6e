"""λ_min of large PSD matrices (deqlab.theory.spectra): float32-preconditioned LOBPCG, and
Cholesky + Lanczos on K⁻¹ where it cannot answer, against a dense eigvalsh on small cases;
singular matrices, the dense path."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from deqlab._memory import MemoryRefusal
from deqlab.data import get_dataset
from deqlab.theory import lobpcg, spectra
from deqlab.theory.kernels import least_eigenvalue, population_gram
from deqlab.theory.ntk import deq_ntk
from deqlab.theory.spectra import (
    cholesky_lower,
    gram_lambda_min,
    lanczos_largest,
    least_eigenvalue_large,
)


@pytest.fixture
def iterative(monkeypatch):
    """Force the iterative paths on small matrices."""
    monkeypatch.setattr(spectra, "DENSE_LIMIT", 1)


@pytest.fixture
def float64_path(iterative, monkeypatch):
    """Force the float64 Cholesky + Lanczos path: no float32 preconditioner."""
    monkeypatch.setattr(spectra, "float32_cholesky", lambda K, work: None)


def test_lanczos_finds_the_largest_eigenvalue_of_a_symmetric_matrix():
    rng = np.random.default_rng(1)
    A = rng.standard_normal((200, 200))
    S = (A + A.T) / 2
    theta, steps = lanczos_largest(lambda v: S @ v, 200)
    assert theta == pytest.approx(np.linalg.eigvalsh(S)[-1], rel=1e-9)
    assert steps <= 200


def test_lanczos_stops_on_an_invariant_subspace():
    D = np.diag([3.0, 1.0])
    theta, steps = lanczos_largest(lambda v: D @ v, 2)
    assert theta == pytest.approx(3.0) and steps <= 2


@pytest.mark.parametrize("path", ["lobpcg", "float64"])
def test_iterative_least_eigenvalue_matches_eigvalsh_on_a_kernel_matrix(path, request):
    request.getfixturevalue("iterative" if path == "lobpcg" else "float64_path")
    X = get_dataset("sphere", n=300, d=20, seed=3).X
    K = population_gram(X, 0.08)
    exact = least_eigenvalue(K)
    got = least_eigenvalue_large(K)
    assert not got.singular
    assert got.value == pytest.approx(exact.value, rel=1e-7)
    assert got.max_eigenvalue == pytest.approx(exact.max_eigenvalue, rel=1e-9)
    assert got.value >= exact.value * (1 - 1e-12)  # a Ritz value: an upper estimate


def test_the_ntk_reuses_the_factor_and_block_of_k(iterative):
    X = get_dataset("sphere", n=400, d=20, seed=2).X
    K = population_gram(X, 0.08)
    ntk = deq_ntk(X, 0.08, gram=K)
    work, reuse = torch.empty_like(K), spectra.Reuse()
    stages: list[list[int]] = [[], []]
    for M, seen in ((K, stages[0]), (ntk, stages[1])):
        got = least_eigenvalue_large(
            M, work=work, reuse=reuse, progress=lambda what, i, t, seen=seen: seen.append(i)
        )
        assert got.value == pytest.approx(least_eigenvalue(M).value, rel=1e-8)
    assert stages == [[0, 1, 2], [0, 2]]  # the NTK: λ_max, LOBPCG; no factorization
    assert reuse.block is not None and reuse.block.shape == (400, lobpcg.BLOCK)


def test_lobpcg_past_its_step_limit_falls_back_to_float64(iterative, monkeypatch):
    monkeypatch.setattr(lobpcg, "MAX_STEPS", 2)
    X = get_dataset("sphere", n=300, d=20, seed=3).X
    K = population_gram(X, 0.08)
    stages = []
    got = least_eigenvalue_large(K, progress=lambda what, i, t: stages.append(i))
    assert stages == [0, 1, 2, 1, 2, 3, 4]  # LOBPCG gave up; Cholesky, coarse, shift, refine
    assert got.value == pytest.approx(least_eigenvalue(K).value, rel=1e-7)


def test_a_matrix_too_ill_conditioned_for_float32_takes_the_float64_path(iterative):
    Q = torch.linalg.qr(torch.randn(60, 60, dtype=torch.float64, generator=_seeded(1)))[0]
    K = Q @ torch.diag(torch.logspace(-9, 0, 60, dtype=torch.float64)) @ Q.T
    K = (K + K.T) / 2
    stages = []
    got = least_eigenvalue_large(K, progress=lambda what, i, t: stages.append(i))
    assert stages[:3] == [0, 1, 1]  # the float32 factorization fails; float64 Cholesky
    assert got.value == pytest.approx(1e-9, rel=1e-6)


def _seeded(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_the_shift_sits_below_lambda_min_or_falls_back(float64_path, monkeypatch):
    X = get_dataset("sphere", n=200, d=10, seed=4).X
    K = population_gram(X, 0.08)
    exact = least_eigenvalue(K).value
    assert torch.equal(K, population_gram(X, 0.08))  # K is left as it was
    for shifts in ((5e-3,), (-0.5, 0.5), (-0.5,)):  # below; above then below; only above
        monkeypatch.setattr(spectra, "SHIFTS", shifts)
        assert least_eigenvalue_large(K).value == pytest.approx(exact, rel=1e-7)


def test_a_duplicate_column_is_singular_in_both_paths(iterative):
    X = get_dataset("sphere", n=50, d=10, seed=0).X
    K = population_gram(torch.cat([X, X[:, :1]], dim=1), 0.08)
    got = least_eigenvalue_large(K)
    assert got.singular and got.value == 0.0 and "Cholesky" in got.reason
    assert least_eigenvalue(K).singular


def test_an_asymmetric_or_indefinite_matrix_is_refused_in_both_paths(iterative):
    K = 2 * torch.eye(5, dtype=torch.float64)
    K[0, 4] = 1.5  # its eigenvalues are all 2; the lower triangle alone has λ_min = 0.5
    for compute in (least_eigenvalue, least_eigenvalue_large):
        with pytest.raises(ValueError, match=r"`K` must be symmetric; got max \|K - Kᵀ\| = 1.5"):
            compute(K)
    indefinite = torch.diag(torch.tensor([3.0, 2.0, 1.0, -1.0], dtype=torch.float64))
    for compute in (least_eigenvalue, least_eigenvalue_large):
        with pytest.raises(ValueError, match="`K` must be positive semi-definite"):
            compute(indefinite)


def test_cholesky_factor_reproduces_the_shifted_matrix_or_is_none():
    A = torch.randn(30, 30, dtype=torch.float64)
    K = A @ A.T + torch.eye(30, dtype=torch.float64)
    work = torch.empty_like(K)
    L = cholesky_lower(K, work, 0.5)
    assert L.data_ptr() == work.data_ptr()  # in place, no n×n copy
    assert torch.allclose(L @ L.T, K - 0.5 * torch.eye(30, dtype=K.dtype))
    assert torch.equal(L, torch.tril(L))
    assert cholesky_lower(K, work, float(torch.linalg.eigvalsh(K)[0]) + 1e-6) is None


def test_small_matrices_take_the_exact_path():
    K = torch.diag(torch.tensor([2.0, 5.0], dtype=torch.float64))
    assert least_eigenvalue_large(K).value == 2.0


def test_a_non_square_matrix_is_refused():
    with pytest.raises(ValueError, match="square"):
        least_eigenvalue_large(torch.ones(2, 3, dtype=torch.float64))


def test_a_given_work_array_is_used_and_k_is_left_unchanged(float64_path):
    X = get_dataset("sphere", n=120, d=10, seed=5).X
    K = population_gram(X, 0.08)
    before = K.clone()
    work = torch.full_like(K, float("nan"))
    stages = []
    got = least_eigenvalue_large(K, work=work, progress=lambda what, i, t: stages.append(i))
    assert torch.equal(K, before)
    assert got.value == pytest.approx(least_eigenvalue(K).value, rel=1e-7)
    assert stages == [0, 1, 1, 2, 3, 4]  # λ_max, no float32 factor, Cholesky, coarse, shift, refine
    assert bool(torch.isfinite(work).all())  # the factor went into `work`


def test_a_wrong_work_array_is_refused(iterative):
    K = population_gram(get_dataset("sphere", n=20, d=5, seed=0).X, 0.08)
    with pytest.raises(ValueError, match=r"`work` must be a \(20, 20\) float64 CPU tensor"):
        least_eigenvalue_large(K, work=torch.empty(20, 19, dtype=torch.float64))


def test_a_non_finite_entry_is_found_in_any_block(monkeypatch):
    from deqlab import _checks

    monkeypatch.setattr(_checks, "_FINITE_BLOCK", 7)  # 2 rows of 3 a block
    K = torch.eye(10, dtype=torch.float64)
    for where in ((0, 0), (9, 2), (5, 9)):
        bad = K.clone()
        bad[where] = float("nan")
        with pytest.raises(ValueError, match="`K` must be finite; got 1 NaN/Inf entries"):
            least_eigenvalue_large(bad)
        with pytest.raises(ValueError, match="`K` must be finite"):
            least_eigenvalue_large(bad.T)  # a transposed view: blocks of its rows too
    assert least_eigenvalue_large(K).value == 1.0


def test_a_gram_matrix_too_large_for_memory_is_refused_before_it_is_formed():
    Z = torch.zeros(1, 10**6, dtype=torch.float64)  # 8 MB; ZᵀZ would be 8 TB
    with pytest.raises(MemoryRefusal, match=r"^`Z`: n = 1000000 needs 16 TB for ZᵀZ and"):
        gram_lambda_min(Z)

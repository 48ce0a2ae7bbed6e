"""λ_min of large PSD matrices (deqlab.theory.spectra): an estimate (dense eigvalsh, or LOBPCG
preconditioned by a float32 or float64 Cholesky factor) and its certified bracket, against a
dense eigvalsh on small cases; singular matrices, the dense path."""

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
    Estimate,
    certify,
    estimate_least,
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
    """Force LOBPCG preconditioned by the float64 factor: no float32 preconditioner."""
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


def _kernel(n: int = 300, d: int = 20, seed: int = 3) -> torch.Tensor:
    return population_gram(get_dataset("sphere", n=n, d=d, seed=seed).X, 0.08)


@pytest.mark.parametrize("path", ["lobpcg", "float64"])
@pytest.mark.parametrize("precision", [1e-3, 1e-6])
def test_the_bracket_holds_the_exact_least_eigenvalue_and_is_as_narrow_as_asked(
    path, precision, request
):
    request.getfixturevalue("iterative" if path == "lobpcg" else "float64_path")
    K = _kernel()
    exact = least_eigenvalue(K)
    got = least_eigenvalue_large(K, precision=precision)
    assert not got.singular
    assert got.bracket.contains(exact.value)
    assert got.bracket.relative_width <= precision
    assert got.value == pytest.approx(exact.value, rel=precision)
    assert got.value >= exact.value * (1 - 1e-12)  # a Ritz value: an upper estimate
    assert got.max_eigenvalue == pytest.approx(exact.max_eigenvalue, rel=1e-9)


def test_a_dense_estimate_gets_a_bracket_as_narrow_as_rounding_allows():
    K = _kernel(n=200, d=10, seed=1)
    exact = float(torch.linalg.eigvalsh(K)[0])
    got = least_eigenvalue_large(K)
    assert got.value == pytest.approx(exact, rel=1e-13) and got.bracket.contains(exact)
    assert got.bracket.relative_width < 1e-7


def test_a_wrong_estimate_is_corrected_by_the_proof_not_believed(iterative):
    K = _kernel()
    exact = least_eigenvalue(K).value
    optimistic = Estimate(exact * 1.01, None, 30.0, 1e-12, False)  # 1 % above λ_min
    stages = []
    got = certify(K, optimistic, progress=lambda what, i, t: stages.append(what))
    assert got.bracket.contains(exact) and got.bracket.relative_width <= spectra.PRECISION
    assert sum("Cholesky" in s for s in stages) >= 3  # failed, then below, then moved up


def test_the_ntk_reuses_the_factor_and_block_of_k(iterative):
    X = get_dataset("sphere", n=400, d=20, seed=2).X
    K = population_gram(X, 0.08)
    ntk = deq_ntk(X, 0.08, gram=K)
    work, reuse = torch.empty_like(K), spectra.Reuse()
    stages: list[list[int]] = [[], []]
    estimates = []
    for M, seen in ((K, stages[0]), (ntk, stages[1])):
        estimates.append(
            estimate_least(M, work=work, reuse=reuse, progress=lambda w, i, t, s=seen: s.append(i))
        )
    assert stages == [[0, 1, 2], [0, 2]]  # the NTK: λ_max, LOBPCG; no factorization
    assert reuse.block is not None and reuse.block.shape == (400, lobpcg.BLOCK)
    for M, found in zip((ntk, K), estimates[::-1], strict=True):  # the proofs come last
        got = certify(M, found, work=work)
        assert got.bracket.contains(least_eigenvalue(M).value)


def test_the_factor_that_certified_k_preconditions_the_ntk(iterative):
    X = get_dataset("sphere", n=400, d=20, seed=2).X
    K = population_gram(X, 0.08)
    work, reuse = torch.empty_like(K), spectra.Reuse()
    stages: list[list[int]] = [[], []]
    found = least_eigenvalue_large(K, work=work, reuse=reuse, progress=_stages(stages[0]))
    assert found.bracket.contains(least_eigenvalue(K).value)
    ntk = deq_ntk(X, 0.08, gram=K, out=K)  # over K, as verify does
    got = least_eigenvalue_large(ntk, work=work, reuse=reuse, progress=_stages(stages[1]))
    assert stages == [[0, 1, 2, 3], [0, 2, 3]]  # the NTK: no factorization before its proof
    assert got.bracket.contains(least_eigenvalue(ntk).value)


def test_lobpcg_past_its_step_limit_takes_the_float64_factor(iterative, monkeypatch):
    monkeypatch.setattr(lobpcg, "MAX_STEPS", 2)
    K = _kernel()
    stages = []
    got = least_eigenvalue_large(K, progress=_stages(stages))
    assert stages == [0, 1, 2, 1, 2, 3]  # LOBPCG gave up; the float64 factor, LOBPCG, proof
    assert got.bracket.contains(least_eigenvalue(K).value)


def test_a_matrix_too_ill_conditioned_for_float32_takes_the_float64_factor(iterative):
    Q = torch.linalg.qr(torch.randn(60, 60, dtype=torch.float64, generator=_seeded(1)))[0]
    K = Q @ torch.diag(torch.logspace(-9, 0, 60, dtype=torch.float64)) @ Q.T
    K = (K + K.T) / 2
    stages = []
    got = least_eigenvalue_large(K, progress=lambda what, i, t: stages.append(i))
    assert stages[:3] == [0, 1, 1]  # the float32 factorization fails; float64 Cholesky
    assert got.bracket.contains(float(torch.linalg.eigvalsh(K)[0]))
    assert got.value == pytest.approx(1e-9, rel=1e-3)


def _stages(seen: list[int]):
    """A progress callback that records the stages of least_eigenvalue_large (of 4)."""
    return lambda what, i, total: seen.append(i) if total == 4 else None


def _seeded(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("path", ["dense", "iterative"])
def test_a_duplicate_column_is_singular_and_its_bracket_holds_zero(path, request):
    if path == "iterative":
        request.getfixturevalue("iterative")
    X = get_dataset("sphere", n=50, d=10, seed=0).X
    K = population_gram(torch.cat([X, X[:, :1]], dim=1), 0.08)
    got = least_eigenvalue_large(K)
    assert got.singular and got.value == 0.0
    assert got.bracket.lower <= 0.0 <= got.bracket.upper
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


@pytest.mark.parametrize("path", ["dense", "iterative"])
def test_a_nearly_symmetric_matrix_is_certified_as_its_lower_triangle(path, request):
    """K = I + 11ᵀ (n = 6) with its lower triangle 4·10⁻¹³ smaller: eigvalsh (lower) says
    1 + 4·10⁻¹³, the upper triangle 1 − 7·10⁻¹⁶. The factorization used to read the upper
    triangle and fail below the estimate; all steps now see the lower one, K unchanged."""
    if path == "iterative":
        request.getfixturevalue("iterative")
    n, delta = 6, 4e-13
    K = torch.eye(n, dtype=torch.float64) + torch.ones(n, n, dtype=torch.float64)
    K -= delta * torch.tril(torch.ones(n, n, dtype=torch.float64), -1)
    before = K.clone()
    lower = torch.tril(K) + torch.tril(K, -1).T
    exact = float(torch.linalg.eigvalsh(lower)[0])
    assert exact == pytest.approx(1 + delta, abs=1e-15)
    got = least_eigenvalue_large(K)
    assert got.bracket.contains(exact)
    assert got.bracket.width < (1e-13 if path == "dense" else spectra.PRECISION)
    assert torch.equal(K, before)


@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_tiny_matrices_get_a_bracket_as_narrow_as_rounding_allows(n):
    """At n = 2–4 the bracket was up to 98% wide and marked at_floor: the dense path had no
    eigenvector, and LOBPCG's basis with 3b ≥ n gave a bad Ritz vector."""
    generator = torch.Generator().manual_seed(0)
    for _ in range(10):
        Z = torch.randn(n + 2, n, dtype=torch.float64, generator=generator)
        K = Z.T @ Z
        exact = float(torch.linalg.eigvalsh(K)[0])
        found = least_eigenvalue_large(K).bracket
        assert found.contains(exact) and found.relative_width < 1e-11 and found.at_floor


def test_small_matrices_take_the_exact_path():
    K = torch.diag(torch.tensor([2.0, 5.0], dtype=torch.float64))
    got = least_eigenvalue_large(K)
    assert got.value == 2.0 and got.bracket.contains(2.0)


def test_a_non_square_matrix_is_refused():
    with pytest.raises(ValueError, match="square"):
        least_eigenvalue_large(torch.ones(2, 3, dtype=torch.float64))


def test_a_given_work_array_is_used_and_k_is_left_unchanged(float64_path):
    K = _kernel(n=120, d=10, seed=5)
    before = K.clone()
    work = torch.full_like(K, float("nan"))
    stages = []
    got = least_eigenvalue_large(K, work=work, progress=_stages(stages))
    assert torch.equal(K, before)
    assert got.bracket.contains(least_eigenvalue(K).value)
    assert stages == [0, 1, 1, 2, 3]  # λ_max, no float32 factor, float64, LOBPCG, proof
    assert bool(torch.isfinite(work).all())  # the factors went into `work`


def test_a_wrong_work_array_is_refused(iterative):
    K = _kernel(n=20, d=5, seed=0)
    with pytest.raises(ValueError, match=r"`work` must be a \(20, 20\) float64 tensor on cpu"):
        least_eigenvalue_large(K, work=torch.empty(20, 19, dtype=torch.float64))


def test_a_precision_outside_0_1_is_refused():
    with pytest.raises(ValueError, match="precision"):
        least_eigenvalue_large(torch.eye(3, dtype=torch.float64), precision=1.5)


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

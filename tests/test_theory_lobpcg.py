"""Float32-preconditioned LOBPCG (deqlab.theory.lobpcg) against a closed-form spectrum."""

from __future__ import annotations

import math

import pytest
import torch

from deqlab.theory import lobpcg
from deqlab.theory.lobpcg import extrapolated_error, float32_cholesky, least_eigenvalue_lobpcg
from helpers import with_spectrum


def _clustered(n: int = 500) -> torch.Tensor:
    """A kernel-like spectrum: a dense cluster at the bottom (λ₂/λ₁ − 1 = 10⁻³) under a
    spread of large eigenvalues, condition number 10⁴."""
    bottom = 0.5 * (1 + 1e-3 * torch.arange(50, dtype=torch.float64))
    top = torch.logspace(0, 3.7, n - 50, dtype=torch.float64)
    return torch.cat([bottom, top])


def test_the_least_eigenvalue_of_a_clustered_spectrum_to_rtol_and_from_above():
    A = with_spectrum(_clustered())
    found = least_eigenvalue_lobpcg(A, float32_cholesky(A, torch.empty_like(A)), rtol=1e-9, stall=5)
    assert found is not None
    assert found.value == pytest.approx(0.5, rel=1e-9)
    assert found.value >= 0.5 * (1 - 1e-12)  # a Rayleigh quotient: never below λ_min
    assert found.block.shape == (500, lobpcg.BLOCK)


def test_the_trace_sees_every_step_and_ritz_values_fall_to_the_answer():
    A = with_spectrum(_clustered())
    trace = []
    found = least_eigenvalue_lobpcg(
        A, float32_cholesky(A, torch.empty_like(A)), rtol=1e-9, stall=5,
        on_step=lambda step, theta, residual: trace.append((step, theta, residual)),
    )  # fmt: skip
    assert [step for step, _, _ in trace] == list(range(1, found.steps + 1))
    thetas = torch.tensor([theta for _, theta, _ in trace], dtype=torch.float64)
    assert bool((thetas[1:] <= thetas[:-1] * (1 + 1e-12)).all())  # Rayleigh–Ritz: monotone
    assert thetas[-1].item() == pytest.approx(found.value, rel=1e-10)
    assert trace[-1][2] < trace[0][2]


def test_the_block_of_a_solve_restarts_the_same_matrix_at_once():
    A = with_spectrum(_clustered())
    precondition = float32_cholesky(A, torch.empty_like(A))
    cold = least_eigenvalue_lobpcg(A, precondition, rtol=1e-9, stall=5)
    warm = least_eigenvalue_lobpcg(A, precondition, rtol=1e-9, stall=5, start=cold.block)
    assert warm.steps < cold.steps / 3
    assert warm.value == pytest.approx(cold.value, rel=1e-9)


def test_a_solve_past_the_step_limit_is_flagged_and_still_an_upper_estimate(monkeypatch):
    monkeypatch.setattr(lobpcg, "MAX_STEPS", 3)
    A = with_spectrum(_clustered())
    found = least_eigenvalue_lobpcg(A, lambda R: R, rtol=1e-12, stall=5)
    assert not found.converged and found.steps == 3
    assert found.value >= 0.5  # a Rayleigh quotient: above λ_min whether converged or not


def test_an_absolute_tolerance_stops_at_a_least_eigenvalue_of_zero():
    values = torch.cat([torch.zeros(1, dtype=torch.float64), torch.logspace(-2, 2, 99)])
    A = with_spectrum(values.to(torch.float64), seed=4)
    shifted = float32_cholesky(A + 1e-3 * torch.eye(100, dtype=torch.float64), torch.empty_like(A))
    found = least_eigenvalue_lobpcg(A, shifted, rtol=1e-9, atol=1e-10, stall=5)
    assert found.converged and abs(found.value) < 1e-9


def test_the_extrapolated_error_continues_a_geometric_decrease():
    history = [1.0 + 0.5**k for k in range(12)]  # error 2^-k: halves every step
    error = extrapolated_error(history, stall=2)
    # d = θ₉ − θ₁₁ = 3·2⁻¹¹ with q = 1/4, taken as 1/2: 3·2⁻¹¹ ≥ the error 2⁻¹¹ left
    assert error == pytest.approx(3 * 0.5**11, rel=1e-9) and error >= history[-1] - 1.0
    assert extrapolated_error(history[:4], stall=2) == math.inf  # too few steps
    assert extrapolated_error([1.0, 0.9, 0.8, 0.7, 0.6], stall=2) == math.inf  # not shrinking
    assert extrapolated_error([1.0] * 5, stall=2) == 0.0  # stopped moving


def test_the_float32_factor_inverts_the_matrix_in_half_the_work_array():
    A = with_spectrum(torch.linspace(1.0, 10.0, 40, dtype=torch.float64), seed=3)
    work = torch.full_like(A, float("nan"))
    precondition = float32_cholesky(A, work)
    R = torch.randn(40, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    exact = torch.linalg.solve(A, R)
    assert torch.allclose(precondition(R), exact, rtol=0, atol=1e-5 * float(exact.abs().max()))
    assert precondition(R).dtype == torch.float64
    assert bool(torch.isnan(work[20:]).all())  # the float32 factor fills the first half only


def test_an_indefinite_matrix_has_no_float32_factor():
    A = with_spectrum(torch.tensor([-1.0, 1.0, 2.0], dtype=torch.float64))
    assert float32_cholesky(A, torch.empty_like(A)) is None


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7, 10, 24])
def test_no_ritz_value_falls_below_the_least_eigenvalue_at_small_sizes(n):
    """With 3b ≥ n the basis [X, W, P] cannot be orthonormal and Rayleigh–Ritz fell below
    λ_min (n = 2: θ = 0 < λ_min = 3.06, the answer 3.08); the block now has 3b < n."""
    generator = torch.Generator().manual_seed(n)
    Z = torch.randn(n + 2, n, dtype=torch.float64, generator=generator)
    A = Z.T @ Z
    exact = float(torch.linalg.eigvalsh(A)[0])
    factor = torch.linalg.cholesky(A - 0.999 * exact * torch.eye(n, dtype=torch.float64))
    thetas = []
    found = least_eigenvalue_lobpcg(
        A, lambda R: torch.cholesky_solve(R, factor), rtol=0.0, atol=1e-15 * exact, stall=5,
        on_step=lambda step, theta, residual: thetas.append(theta),
    )  # fmt: skip
    assert all(theta >= exact * (1 - 1e-12) for theta in thetas)
    assert found.value == pytest.approx(exact, rel=1e-12)
    assert 3 * found.block.shape[1] < n or n < 4

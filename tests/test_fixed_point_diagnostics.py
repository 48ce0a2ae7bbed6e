"""Fixed-point diagnostics against dense Jacobians (torch.autograd.functional.jacobian) and
dense float64 SVDs: exact at the state's size, exact by default on near-singular cells of at
most 512 per sample (dense SVD), brackets that contain the truth, and an unconverged estimate
reported as such."""

import math
import sys

import pytest
import torch
from torch import nn

from deqlab import DEQ, Anderson, fixed_point_diagnostics
from deqlab._memory import MemoryRefusal
from helpers import TransformerCell, TwoScaleCell, contraction, near_singular_tanh


def symmetric(d: int, rate: float) -> torch.Tensor:
    A = torch.randn(d, d, dtype=torch.float64)
    S = A + A.T
    return rate * S / torch.linalg.matrix_norm(S, 2)


def dense_blocks(f, z: torch.Tensor) -> torch.Tensor:
    """Per-sample Jacobians ``(B, n, n)`` of a map acting on each sample alone."""
    B = z.shape[0]
    J = torch.autograd.functional.jacobian(f, z).reshape(B, -1, B, z[0].numel())
    return torch.stack([J[i, :, i] for i in range(B)])


def references(J: torch.Tensor):
    eye = torch.eye(J.shape[1], dtype=J.dtype)
    rho = torch.linalg.eigvals(J).abs().amax(dim=1)
    return rho, torch.linalg.matrix_norm(J, 2), torch.linalg.svdvals(eye - J).amin(dim=1)


def sigma_max(J: torch.Tensor) -> torch.Tensor:
    return torch.linalg.matrix_norm(torch.eye(J.shape[1], dtype=J.dtype) - J, 2)


def tanh_problem(d=6, batch=3, rate=1.2):
    """``f(z) = tanh(z Wᵀ + x)`` with W symmetric: J = D W has real eigenvalues."""
    W, x = symmetric(d, rate), torch.randn(batch, d, dtype=torch.float64)
    return (lambda z: torch.tanh(z @ W.T + x)), torch.randn(batch, d, dtype=torch.float64)


def contains(e, truth, slack=0.0) -> bool:
    return bool(((e.lower <= truth + slack) & (truth - slack <= e.upper)).all())


def test_exact_once_the_krylov_space_spans_the_row():
    f, z = tanh_problem()
    J = dense_blocks(f, z)
    rho, norm, sigma = references(J)
    got = fixed_point_diagnostics(
        f, z, rows=3, rtol=1e-12, generator=torch.Generator().manual_seed(0)
    )
    torch.testing.assert_close(got.jacobian_norm.value, norm, atol=1e-10, rtol=0)
    torch.testing.assert_close(got.sigma_min.value, sigma, atol=1e-10, rtol=0)
    torch.testing.assert_close(got.sigma_max.value, sigma_max(J), atol=1e-10, rtol=0)
    torch.testing.assert_close(got.spectral_radius.value, rho, atol=1e-10, rtol=0)
    for e in (got.jacobian_norm, got.sigma_min, got.sigma_max):
        assert bool(e.exact.all()) and bool(e.converged.all()) and e.steps == 6
        assert bool((e.upper - e.lower <= 1e-12).all())
    assert got.converged and got.route == "double backward"
    assert 0 < got.products <= 3 * 2 * 6


@pytest.mark.parametrize("d", [128, 256, 512])
def test_near_singular_cells_default_sigma_min_is_exact(d):
    """The acceptance case: σ_min(I − J_f) ≤ 0.02 at dims 128–512, default settings. 100
    Golub–Kahan steps leave the bracket wide; the dense SVD of the per-sample Jacobians (d
    VJPs) gives σ_min and σ_max to 1e-8 of the reference."""
    f, z, J = near_singular_tanh(d, [0.0016, 0.012, 0.02])
    _, norm, exact = references(J)
    got = fixed_point_diagnostics(f, z, rows=3, generator=torch.Generator().manual_seed(d))
    sigma = got.sigma_min
    assert got.dense and bool(sigma.exact.all()) and bool(sigma.converged.all())
    torch.testing.assert_close(sigma.value, exact, rtol=1e-8, atol=0)
    torch.testing.assert_close(got.sigma_max.value, sigma_max(J), rtol=1e-8, atol=0)
    assert contains(sigma, exact) and bool((sigma.upper - sigma.lower <= 1e-10).all())
    assert contains(got.jacobian_norm, norm) and bool(got.jacobian_norm.converged.all())
    assert got.products >= d and "0.0016 (exact) by dense SVD" in got.summary()


def test_a_well_conditioned_cell_stops_at_the_10_percent_bracket_without_the_dense_svd():
    """tanh(z Wᵀ + x) with ‖W‖₂ = 0.5 at width 512: σ_min(I − J_f) ≥ 0.5, bracketed within 10%
    by Golub–Kahan long before the cap; no dense Jacobian is formed."""
    torch.manual_seed(0)
    W, x = contraction(512, 0.5), torch.randn(2, 512, dtype=torch.float64)
    f, z = (lambda v: torch.tanh(v @ W.T + x)), torch.zeros(2, 512, dtype=torch.float64)
    for _ in range(60):
        z = f(z)
    exact = references(dense_blocks(f, z))[2]
    got = fixed_point_diagnostics(f, z, rows=2, generator=torch.Generator().manual_seed(0))
    sigma = got.sigma_min
    assert not got.dense and bool(sigma.converged.all()) and not bool(sigma.exact.any())
    assert contains(sigma, exact) and bool((sigma.upper <= 1.1 * sigma.lower).all())
    assert got.products < 3 * 2 * 100


def test_above_the_dense_size_the_cap_is_reached_and_the_bracket_holds():
    """Must-not case at default settings: a state of 640 per sample stays on Golub–Kahan; its
    σ_min is not converged after 100 steps, and its bracket contains the dense SVD's value."""
    f, z, J = near_singular_tanh(640, [0.0016])
    exact = references(J)[2]
    got = fixed_point_diagnostics(f, z, rows=1, generator=torch.Generator().manual_seed(1))
    sigma = got.sigma_min
    assert not got.dense and not bool(sigma.converged[0]) and not bool(sigma.exact[0])
    assert sigma.steps == 100 and contains(sigma, exact)
    assert float(sigma.value[0]) > 1.1 * float(exact[0])  # the estimate alone is not the truth
    assert "not converged after 100 steps" in got.summary()


def test_near_singular_cell_is_exact_when_the_cap_reaches_the_state_size():
    f, z, J = near_singular_tanh(128, [0.0016, 0.012])
    exact = references(J)[2]
    got = fixed_point_diagnostics(f, z, rows=2, max_iter=128)
    assert bool(got.sigma_min.exact.all())
    torch.testing.assert_close(got.sigma_min.value, exact, rtol=1e-8, atol=0)


def test_an_unconverged_estimate_is_reported_and_is_not_the_truth():
    """Must-not case: 20 Golub–Kahan steps (Krylov only) overestimate σ_min = 0.0016 many
    times over (the issue's 17.5×); the estimate is flagged, its bracket still holds, the
    summary says so."""
    f, z, J = near_singular_tanh(256, [0.0016])
    exact = references(J)[2]
    got = fixed_point_diagnostics(f, z, rows=1, max_iter=20, dense_up_to=0)
    assert float(got.sigma_min.value[0]) > 5 * float(exact[0]) and not got.dense
    assert not bool(got.sigma_min.converged[0]) and not got.converged
    assert contains(got.sigma_min, exact)
    assert "not converged after 20 steps" in got.summary()


def test_the_jacobian_norm_bracket_converges_within_rtol_long_before_the_state_size():
    f, z, J = near_singular_tanh(512, [0.05, 0.3])
    got = fixed_point_diagnostics(f, z, rows=2, rtol=0.05, dense_up_to=0)
    norm = references(J)[1]
    e = got.jacobian_norm
    assert bool(e.converged.all()) and not bool(e.exact.any()) and e.steps < 60
    assert contains(e, norm) and bool((e.upper <= 1.05 * e.lower).all())


def test_complex_dominant_pair():
    # J = 0.9 × rotation by 1 rad in every 2-plane: eigenvalues 0.9 e^{±i}, never real
    c, s = math.cos(1.0), math.sin(1.0)
    R = 0.9 * torch.tensor([[c, -s], [s, c]], dtype=torch.float64)
    f, z = (lambda z: z @ R.T), torch.randn(4, 2, dtype=torch.float64)
    got = fixed_point_diagnostics(f, z, rows=4)
    torch.testing.assert_close(
        got.spectral_radius.value, torch.full((4,), 0.9, dtype=torch.float64)
    )
    exact = float(torch.linalg.svdvals(torch.eye(2, dtype=torch.float64) - R).min())
    torch.testing.assert_close(got.sigma_min.value, torch.full((4,), exact, dtype=torch.float64))


def test_whole_tensor_is_the_worst_block():
    f, z = tanh_problem(d=3, batch=2)
    rho, norm, sigma = references(dense_blocks(f, z))
    got = fixed_point_diagnostics(
        f, z, rows=1, rtol=1e-12, generator=torch.Generator().manual_seed(2)
    )
    torch.testing.assert_close(got.jacobian_norm.value, norm.max()[None], atol=1e-10, rtol=0)
    torch.testing.assert_close(got.sigma_min.value, sigma.min()[None], atol=1e-10, rtol=0)
    torch.testing.assert_close(got.spectral_radius.value, rho.max()[None], rtol=1e-8, atol=0)


class ConvGroupNormCell(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 2, 3, padding=1, dtype=torch.float64)
        self.norm = nn.GroupNorm(1, 2, dtype=torch.float64)

    def forward(self, z: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return self.norm(torch.relu(self.conv(z) + x))


def test_deq_diagnostics_on_a_conv_groupnorm_cell():
    torch.manual_seed(0)
    deq = DEQ(
        ConvGroupNormCell(),
        solver=Anderson(tol=1e-3, max_iter=40, per_sample=True),
        on_failure="record",
    )
    with pytest.raises(RuntimeError, match=r"call deq\(x\) first"):
        deq.diagnostics()
    x = torch.randn(2, 2, 3, 3, dtype=torch.float64)
    z = deq(x).detach()
    got = deq.diagnostics(rtol=1e-12, generator=torch.Generator().manual_seed(0))  # 18 = C·H·W
    _, norm, sigma = references(dense_blocks(lambda z: deq.cell(z, x), z))
    torch.testing.assert_close(got.jacobian_norm.value, norm, atol=1e-9, rtol=0)
    torch.testing.assert_close(got.sigma_min.value, sigma, atol=1e-9, rtol=0)
    assert got.sample_steps.tolist() == deq.last_forward.sample_steps.tolist()
    assert got.sample_residuals is deq.last_forward.sample_residuals
    assert "σ_min(I − J_f) min" in got.summary() and "solver steps max" in got.summary()


def test_deq_diagnostics_on_a_transformer_block_with_fused_attention():
    """nn.MultiheadAttention's fused CPU kernel has no forward-mode derivative: the products
    go by double backward, and agree with a dense reverse-mode Jacobian."""
    torch.manual_seed(0)
    cell = TransformerCell(d=4).double()
    deq = DEQ(cell, solver=Anderson(tol=1e-10, max_iter=200, per_sample=True))
    x = torch.randn(3, 3, 4, dtype=torch.float64)
    z = deq(x).detach()
    with pytest.raises(NotImplementedError, match="forward AD"):
        torch.func.jvp(lambda v: cell(v, x), (z,), (z,))
    got = deq.diagnostics(rtol=1e-12)  # to the state's size, 12: exact
    assert got.route == "double backward"
    rho, norm, sigma = references(dense_blocks(lambda v: cell(v, x), z))
    torch.testing.assert_close(got.jacobian_norm.value, norm, atol=1e-9, rtol=0)
    torch.testing.assert_close(got.sigma_min.value, sigma, atol=1e-9, rtol=0)
    torch.testing.assert_close(got.spectral_radius.value, rho, atol=1e-9, rtol=0)


def test_deq_diagnostics_on_a_tuple_state_is_over_the_concatenated_state():
    torch.manual_seed(0)
    cell = TwoScaleCell().double()
    deq = DEQ(cell, solver=Anderson(tol=1e-10, max_iter=200, per_sample=True))
    x = torch.randn(2, 2, 4, 4, dtype=torch.float64)
    z1, z2 = (t.detach() for t in deq(x))

    def packed(v):  # (B, 32 + 8) → the cell on the unpacked tuple, packed again
        out = cell((v[:, :32].reshape(-1, 2, 4, 4), v[:, 32:].reshape(-1, 2, 2, 2)), x)
        return torch.cat([t.flatten(1) for t in out], 1)

    J = dense_blocks(packed, torch.cat([z1.flatten(1), z2.flatten(1)], 1))
    got = deq.diagnostics(rtol=1e-12)
    _, norm, sigma = references(J)
    torch.testing.assert_close(got.jacobian_norm.value, norm, atol=1e-9, rtol=0)
    torch.testing.assert_close(got.sigma_min.value, sigma, atol=1e-9, rtol=0)


def test_bad_arguments():
    f, z = tanh_problem()
    with pytest.raises(ValueError, match=r"`rows` must be 1 or z.shape\[0\] = 3; got 2"):
        fixed_point_diagnostics(f, z, rows=2)
    with pytest.raises(ValueError, match=r"`max_iter` must be >= 2"):
        fixed_point_diagnostics(f, z, max_iter=1)
    with pytest.raises(ValueError, match=r"`rtol` must be in \(0, inf\); got 0"):
        fixed_point_diagnostics(f, z, rtol=0.0)
    with pytest.raises(ValueError, match="`route` must be one of"):
        fixed_point_diagnostics(f, z, route="finite differences")
    with pytest.raises(ValueError, match=r"`dense_up_to` must be >= 0"):
        fixed_point_diagnostics(f, z, dense_up_to=-1)


def test_krylov_bases_beyond_memory_are_refused_before_any_product(monkeypatch):
    module = sys.modules["deqlab.fixed_point_diagnostics"]

    calls = []
    monkeypatch.setattr(module, "available_bytes", lambda device: 4 * 10**6)
    z = torch.zeros(4, 4000, dtype=torch.float64)
    said = (
        r"`max_iter`: 100 Krylov steps on 4 rows of size 4000 need 25.9 MB for their bases, but "
        r"4 MB of memory is available; pass max_iter <= 14 or fewer samples"
    )
    with pytest.raises(MemoryRefusal, match=said):
        fixed_point_diagnostics(lambda v: calls.append(1) or 0.5 * v, z, rows=4)
    assert not calls


def test_dense_jacobians_beyond_memory_stay_on_the_krylov_bracket(monkeypatch):
    """1 MB available: the Krylov bases (0.4 MB) fit, the 256 × 256 Jacobian and its two
    float64 copies (1.6 MB) do not; the bracket is reported as not converged and holds."""
    monkeypatch.setattr(
        sys.modules["deqlab.fixed_point_diagnostics"], "available_bytes", lambda device: 10**6
    )
    f, z, J = near_singular_tanh(256, [0.0016])
    got = fixed_point_diagnostics(f, z, rows=1, generator=torch.Generator().manual_seed(2))
    assert not got.dense and not bool(got.sigma_min.converged[0])
    assert contains(got.sigma_min, references(J)[2])

"""deqlab.diagnose on the cells researchers build: a transformer block with the default
(fused) attention, a multi-scale cell with a tuple state, a cell with tuple inputs, against
dense references (unrolled autograd through a converged solve, dense per-sample Jacobians);
and a near-singular cell whose unconverged σ_min the reading does not state as a fact."""

import pytest
import torch
from torch import nn

from deqlab import DEQ, Anderson
from deqlab.diagnosis import diagnose
from helpers import TransformerCell, TwoScaleCell, contraction, dense_ntk, near_singular_tanh


def assert_ntk(found, reference: torch.Tensor) -> None:
    ref = torch.linalg.eigvalsh(reference)
    got = torch.tensor(found.ntk.eigenvalues, dtype=torch.float64)
    torch.testing.assert_close(got, ref, rtol=1e-7, atol=1e-9)


class PooledHead(nn.Module):
    """Mean over tokens / pixels of every part of the state, then a linear map to 2 outputs."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.lin = nn.Linear(width, 2)

    def forward(self, z):
        parts = z if isinstance(z, tuple | list) else (z,)
        return self.lin(torch.cat([p.flatten(2).mean(2) if p.ndim > 3 else p.mean(1)
                                   for p in parts], 1))  # fmt: skip


def test_transformer_block_with_fused_attention():
    torch.manual_seed(0)
    cell, head = TransformerCell(d=4).double(), PooledHead(4).double()
    X = torch.randn(3, 3, 4, dtype=torch.float64)
    deq = DEQ(cell, solver=Anderson(tol=1e-12, max_iter=300))
    found = diagnose(deq, X, torch.randn(3, 2, dtype=torch.float64), head=head, lr=0.05)
    assert found.wellposed.estimates.route == "double backward"
    assert found.equilibrium_converged and found.adjoint_converged
    assert_ntk(found, dense_ntk(cell, head, X))
    assert (
        "the NTK over 12 tensors of the cell, cell.attn.in_proj_weight … cell.mlp.2.bias, "
        "head.lin.weight, head.lin.bias (P = 182)" in found.reading()
    )


def test_multi_scale_tuple_state():
    """The per-sample Jacobian is over the concatenated state (z₁, z₂): 32 + 8 entries."""
    torch.manual_seed(0)
    cell, head = TwoScaleCell().double(), PooledHead(4).double()
    X = torch.randn(3, 2, 4, 4, dtype=torch.float64)
    deq = DEQ(cell, solver=Anderson(tol=1e-12, max_iter=300, per_sample=True))
    found = diagnose(deq, X, torch.randn(3, 2, dtype=torch.float64), head=head, rtol=1e-12)
    assert_ntk(found, dense_ntk(cell, head, X))
    w = found.wellposed
    assert w.sigma_min.steps == 40 and bool(w.sigma_min.exact.all())
    z1, z2 = (t.detach() for t in deq(X))
    for i in range(3):

        def packed(v, i=i):
            out = cell((v[:32].reshape(1, 2, 4, 4), v[32:].reshape(1, 2, 2, 2)), X[i : i + 1])
            return torch.cat([t.reshape(-1) for t in out])

        J = torch.autograd.functional.jacobian(
            packed, torch.cat([z1[i].reshape(-1), z2[i].reshape(-1)])
        )
        sv = torch.linalg.svdvals(torch.eye(40, dtype=torch.float64) - J)
        assert float(w.sigma_min.value[i]) == pytest.approx(float(sv[-1]), rel=1e-8)
        assert float(w.jacobian_norm.value[i]) == pytest.approx(
            float(torch.linalg.matrix_norm(J, 2)), rel=1e-8
        )


class TwoInputCell(nn.Module):
    """f(z, (x, s)) = tanh(W z + x) · sigmoid(s): an input given as a tuple."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)
        with torch.no_grad():
            self.lin.weight.mul_(0.5)

    def forward(self, z, x):
        return torch.tanh(self.lin(z) + x[0]) * torch.sigmoid(x[1])


def test_tuple_inputs():
    torch.manual_seed(0)
    cell, head = TwoInputCell().double(), nn.Linear(3, 1).double()
    X = (torch.randn(4, 3, dtype=torch.float64), torch.randn(4, 3, dtype=torch.float64))
    deq = DEQ(cell, solver=Anderson(tol=1e-12, max_iter=300))
    found = diagnose(deq, X, head=head, z0=torch.zeros(4, 3, dtype=torch.float64))

    class Stacked(nn.Module):  # the same cell on x = [x; s] stacked on the feature axis
        def __init__(self):
            super().__init__()
            self.inner = cell

        def forward(self, z, xs):
            return self.inner(z, (xs[:, :3], xs[:, 3:]))

    stacked = Stacked()
    reference = dense_ntk_with_zeros(stacked, head, torch.cat(X, 1))
    assert_ntk(found, reference)


def dense_ntk_with_zeros(cell, head, X):
    """dense_ntk for a cell whose state (n, 3) is not shaped like its input."""

    class WithStart(nn.Module):
        def __init__(self):
            super().__init__()
            self.cell = cell

        def forward(self, z, x):
            return self.cell(z, x)

        def initial_state(self, x):
            return x.new_zeros(x.shape[0], 3)

    return dense_ntk(WithStart(), head, X)


class NearSingularCell(nn.Module):
    """tanh(z Wᵀ + x) whose Jacobian at the given z* is I − M with σ_min(M) = 0.0016."""

    def __init__(self, W: torch.Tensor) -> None:
        super().__init__()
        self.W = nn.Parameter(W)

    def forward(self, z, x):
        return torch.tanh(z @ self.W.T + x)


def near_singular_deq(d: int):
    """A DEQ on one sample of width ``d`` whose σ_min(I − J_f) at z* is 0.0016, its input and
    z* (the solver's start, already the fixed point)."""
    _, z, J = near_singular_tanh(d, [0.0016])
    W = J[0] / (1 - z[0].square())[:, None]  # J_f = D W at z*, D = 1 − z*²
    x = torch.atanh(z) - z @ W.T
    cell = NearSingularCell(W)
    torch.testing.assert_close(cell(z, x), z)
    return DEQ(cell, solver=Anderson(tol=1e-10, max_iter=50)), x, z


def test_the_reading_does_not_state_an_unconverged_sigma_min_as_a_fact():
    """Width 640 (above the dense SVD's 512): σ_min stays on Golub–Kahan, not converged after
    100 steps; width 256: the default takes it from the dense SVD, exact, and says so."""
    deq, x, z = near_singular_deq(640)
    found = diagnose(deq, x, head=nn.Linear(640, 1).double(), z0=z, params=["head.weight"])
    sigma = found.wellposed.sigma_min
    assert not bool(sigma.converged.any()) and float(sigma.lower[0]) <= 0.0016
    reading = found.reading()
    assert "not converged after 100 Krylov steps" in reading and "is not decided" in reading
    assert ": the implicit gradient is well posed" not in reading
    deq, x, z = near_singular_deq(256)
    exact = diagnose(deq, x, head=nn.Linear(256, 1).double(), z0=z, params=["head.weight"])
    assert exact.wellposed.estimates.dense
    assert float(exact.wellposed.sigma_min.value[0]) == pytest.approx(0.0016, rel=1e-8)
    said = "σ_min(I − J_f) = 0.0016 > 0 at every sample (exact): the implicit gradient is well"
    assert said in exact.reading() and "σ_min, σ_max by dense SVD" in str(exact)


def test_a_bound_from_the_random_start_says_its_probability():
    """Width 200, ‖W‖₂ = 0.5: ‖J_f‖₂ and σ_min converge within 10% before the state's size, so
    their bounds rest on Kuczyński & Woźniakowski's and the reading gives the probability;
    width 6 exhausts the Krylov space and the reading states the bounds outright."""
    for width, likely in ((200, True), (6, False)):
        torch.manual_seed(0)
        W = contraction(width, 0.5)
        cell = NearSingularCell(W.to(torch.get_default_dtype()))
        found = diagnose(DEQ(cell, solver=Anderson(tol=1e-6)), torch.randn(3, width))
        reading = found.reading()
        assert "f contracts near z*" in reading and "the implicit gradient is well posed" in reading
        assert ("with probability ≥ 0.999 over the random start" in reading) is likely
        assert ("(exact)" in reading) is not likely

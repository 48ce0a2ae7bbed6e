"""deqlab.diagnose: the general tool against the specific toolkit and independent references.

References, all float64: Ling et al.'s λ_0 = λ_min(Z(0)ᵀZ(0)) (deqlab.theory.spectra) and
H = H1 + H2 + H3 of their Eq. (4) (deqlab.theory.ntk.pl_gram); a dense Jacobian by unrolled
autograd through a converged solve; dense SVDs of the per-sample cell Jacobians; closed
forms of a linear-regression head.
"""

from __future__ import annotations

import json
import sys

import pytest
import torch
from torch import nn

import deqlab
from deqlab import DEQ, Anderson, Picard
from deqlab._memory import MemoryRefusal
from deqlab.diagnosis import diagnose
from helpers import dense_ntk

TIGHT = Picard(tol=1e-14, max_iter=3000)


class ReLUCell(nn.Module):
    """Ling et al.'s layer relu(W z + U x) with samples as rows."""

    def __init__(self, W: torch.Tensor, U: torch.Tensor) -> None:
        super().__init__()
        self.W, self.U = nn.Parameter(W.detach().clone()), nn.Parameter(U.detach().clone())

    def forward(self, z: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(z @ self.W.T + x @ self.U.T)

    def initial_state(self, x: torch.Tensor) -> torch.Tensor:
        return x.new_zeros(x.shape[0], self.W.shape[0])


class TanhCell(nn.Module):
    def __init__(self, d: int, scale: float = 0.5) -> None:
        super().__init__()
        self.lin = nn.Linear(d, d)
        with torch.no_grad():
            self.lin.weight.mul_(scale)

    def forward(self, z: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.lin(z) + x)


class ConvCell(nn.Module):
    """3 × 3 conv + input injection + GroupNorm, per sample."""

    def __init__(self, channels: int = 4) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)
        self.norm = nn.GroupNorm(2, channels)
        with torch.no_grad():
            self.conv.weight.mul_(0.3)

    def forward(self, z: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return self.norm(torch.relu(self.conv(z) + x)) * 0.5


class BatchNormCell(nn.Module):
    """Mixes the samples of a batch (BatchNorm in training mode): no per-sample Jacobian."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.lin, self.norm = nn.Linear(d, d), nn.BatchNorm1d(d)

    def forward(self, z: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return 0.5 * torch.tanh(self.norm(self.lin(z)) + x)


def test_a_batchnorm_cell_in_eval_mode_is_per_sample():
    cell = BatchNormCell(3).eval()
    found = diagnose(DEQ(cell, solver=Anderson(tol=1e-10)), torch.randn(4, 3), torch.randn(4, 3))
    assert found.ntk.lambda_min > 0


@pytest.mark.parametrize("kind", ["tanh", "conv"])
def test_ntk_against_a_dense_unrolled_jacobian(kind):
    torch.manual_seed(3)
    if kind == "tanh":
        cell, head, X = TanhCell(5), nn.Linear(5, 2), torch.randn(4, 5)
    else:
        cell, X = ConvCell(), torch.randn(3, 4, 4, 4)
        head = nn.Sequential(nn.Flatten(), nn.Linear(64, 2))
    deq = DEQ(cell, solver=Anderson(tol=1e-13, max_iter=300))
    found = diagnose(deq, X, head=head, solver=Picard(tol=1e-14, max_iter=2000))
    reference = torch.linalg.eigvalsh(dense_ntk(cell, head, X))
    assert found.ntk.lambda_min == pytest.approx(float(reference[0]), rel=1e-8, abs=1e-11)
    assert found.ntk.lambda_max == pytest.approx(float(reference[-1]), rel=1e-10)


def dense_singular_values(cell, X, z):
    out = []
    for i in range(X.shape[0]):
        x_i = X[i : i + 1]
        J = torch.autograd.functional.jacobian(lambda v, x_i=x_i: cell(v[None], x_i)[0], z[i])
        J = J.reshape(z[i].numel(), z[i].numel())
        eye = torch.eye(J.shape[0])
        out.append((torch.linalg.svdvals(J)[0], *torch.linalg.svdvals(eye - J)[[0, -1]]))
    return torch.tensor(out)


@pytest.mark.parametrize("scale", [0.5, 3.0])
def test_well_posedness_against_dense_svd(scale):
    """‖J_f‖₂ and σ_max, σ_min of I − J_f per sample; scale 3 expands (margin < 0)."""
    torch.manual_seed(1)
    cell, X = TanhCell(6, scale), torch.randn(5, 6) * 0.3
    deq = DEQ(cell, solver=Anderson(tol=1e-12, max_iter=500))
    found = diagnose(deq, X, rtol=1e-12).wellposed  # Golub–Kahan is exact at the state's size 6
    z = deq(X).detach()
    ref = dense_singular_values(cell, X, z)
    got = torch.stack([found.jacobian_norm.value, found.sigma_max.value, found.sigma_min.value]).T
    torch.testing.assert_close(got, ref, rtol=1e-8, atol=1e-10)
    assert (found.contraction_margin[0] > 0) is (scale < 1)
    assert (found.contraction_margin[1] < 0) is (scale > 1)


def head_only_case(n=8, m=3):
    """A DEQ trained through its linear head alone: L(w) = ‖Z w − y‖²/(2n), z* fixed."""
    torch.manual_seed(5)
    cell, X, y = TanhCell(m), torch.randn(n, m), torch.randn(n, 1)
    head = nn.Linear(m, 1, bias=False)
    deq = DEQ(cell, solver=Anderson(tol=1e-13, max_iter=300))
    Z = deq(X).detach()
    return deq, head, X, y, Z


def test_pl_ratio_curvature_and_rates_closed_form():
    deq, head, X, y, Z = head_only_case()
    n, lr = X.shape[0], 0.3
    found = diagnose(deq, X, y, head=head, params=["head.weight"], lr=lr).rate
    w = head.weight.detach().reshape(-1)
    r = Z @ w - y.reshape(-1)
    g = Z.T @ r / n
    loss = float(r @ r) / (2 * n)
    beta = float(torch.linalg.eigvalsh(Z.T @ Z / n)[-1])
    r_next = Z @ (w - lr * g) - y.reshape(-1)
    assert found.loss == pytest.approx(loss, rel=1e-12)
    assert found.pl_ratio == pytest.approx(float(g @ g) / (2 * loss), rel=1e-10)
    assert found.pl_floor == pytest.approx(float(torch.linalg.eigvalsh(Z @ Z.T)[0]) / n, abs=1e-12)
    assert found.curvature == pytest.approx(beta, rel=1e-10)
    assert found.eta_max == pytest.approx(2 / beta, rel=1e-10)
    assert found.measured == pytest.approx(float(r_next @ r_next) / (2 * n) / loss, rel=1e-10)
    # on a quadratic with β = λ_max the prediction bounds the measured factor from above
    assert found.predicted == pytest.approx(1 - 2 * lr * found.pl_ratio * (1 - beta * lr / 2))
    assert found.measured <= found.predicted + 1e-12


def test_prediction_is_exact_when_the_gradient_is_the_top_eigenvector():
    deq, head, X, _, Z = head_only_case()
    n = X.shape[0]
    top = torch.linalg.eigh(Z.T @ Z / n).eigenvectors[:, -1]
    # y chosen so that g = Zᵀ(Zw − y)/n ∝ top: r = Z top (in the column space)
    y_top = (Z @ head.weight.detach().reshape(-1) - Z @ top).reshape(-1, 1)
    found = diagnose(deq, X, y_top, head=head, params=["head.weight"], lr=0.3).rate
    assert found.measured == pytest.approx(found.predicted, rel=1e-9)


def test_cross_entropy_rates_and_reading():
    torch.manual_seed(2)
    deq = DEQ(TanhCell(6), solver=Anderson(tol=1e-12, max_iter=200))
    head, X, y = nn.Linear(6, 3), torch.randn(10, 6), torch.randint(0, 3, (10,))
    found = diagnose(deq, X, y, head=head, loss="cross_entropy", lr=0.05)
    assert found.rate.pl_floor is None
    assert found.rate.measured == pytest.approx(found.rate.predicted, abs=2e-3)
    text = str(found)
    assert "f contracts near z*" in text and "measured" in text
    json.dumps(found.to_dict())


def test_deqlab_diagnose_is_the_function_and_leaves_the_layer_alone():
    torch.manual_seed(0)
    deq = DEQ(TanhCell(4), solver=Anderson(tol=1e-10))
    X = torch.randn(3, 4)
    before = [p.clone() for p in deq.parameters()]
    found = deqlab.diagnose(deq, X, torch.randn(3, 4), lr=0.1)
    assert deqlab.diagnose is diagnose and isinstance(found, deqlab.Diagnosis)
    assert deq.last_forward is None
    assert all(torch.equal(a, b) for a, b in zip(before, deq.parameters(), strict=True))


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"deq": nn.Linear(3, 3)}, TypeError, "`deq` must be a deqlab.DEQ"),
        ({"deq": DEQ(lambda z, x: torch.tanh(z + x))}, TypeError, "`deq` must have an nn.Module"),
        ({"X": [1.0, 2.0]}, TypeError, "`X` must be a flat tuple/list of tensors; got list of "),
        ({"y": torch.zeros(5, 3)}, ValueError, "`y` must have shape"),
        ({"loss": "hinge"}, ValueError, "loss"),
        ({"lr": -1.0}, ValueError, "lr"),
        ({"params": ["cell.nope"]}, ValueError, "`params` names unknown"),
        ({"head": lambda z: z}, TypeError, "`head` must be an nn.Module"),
        ({"y": torch.zeros(4, 3), "loss": "cross_entropy"}, ValueError, "class indices"),
        ({"y": torch.zeros(4, 2)}, ValueError, "one target per output"),
        ({"X": torch.randn(4, 3, dtype=torch.float32)}, ValueError, "`X` must have the cell's"),
        ({"deq": DEQ(BatchNormCell(3))}, ValueError, "treats the samples of a batch apart"),
        ({"X": torch.randn(2731, 3), "y": None}, ValueError, "NTK of 8193 rows"),
        ({"chunk": 0}, ValueError, r"`chunk` must be >= 1; got 0"),
        ({"rtol": -0.1}, ValueError, r"`rtol` must be in \(0, inf\); got -0.1"),
        ({"max_iter": 1}, ValueError, r"`max_iter` must be >= 2; got 1"),
        (
            {"head": nn.Linear(3, 4), "y": torch.tensor([0, 1, 4, 2]), "loss": "cross_entropy"},
            ValueError,
            r"`y` must hold class indices in \[0, 4\) for the head's 4 outputs; got indices "
            r"from 0 to 4",
        ),
        (
            {"head": nn.Linear(3, 4), "y": torch.tensor([0, -1, 3, 2]), "loss": "cross_entropy"},
            ValueError,
            r"indices from -1 to 3",
        ),
        ({"X": (torch.randn(4, 3), torch.randn(5, 3))}, ValueError, "share the batch dim 0"),
        ({"X": torch.zeros(0, 3)}, ValueError, "`X` must have a non-empty batch dim 0"),
    ],
)
def test_bad_arguments_are_named(kwargs, error, match):
    args = {"deq": DEQ(TanhCell(3)), "X": torch.randn(4, 3), "y": torch.randn(4, 3)}
    args |= kwargs
    with pytest.raises(error, match=match):
        diagnose(args.pop("deq"), args.pop("X"), args.pop("y"), **args)


def test_a_head_containing_the_deq_is_refused_in_one_line():
    """Was: 'Cannot access storage of TensorWrapper' from inside vmap."""
    deq = DEQ(TanhCell(3))
    net = nn.Sequential(deq, nn.Linear(3, 2))
    with pytest.raises(ValueError, match="`head` must map the equilibrium z\\* to the outputs; it "
                       "contains the DEQ itself"):  # fmt: skip
        diagnose(deq, torch.randn(4, 3), head=net)


class NaNCell(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, z: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.sqrt(-1 - self.lin(z).square()) + x


def test_a_non_finite_equilibrium_is_refused():
    deq = DEQ(NaNCell(), solver=Anderson(tol=1e-8), on_failure="record")
    with pytest.raises(ValueError, match=r"^the forward solve of `deq` on `X` failed: `f\(z0\)` "
                       r"= cell\(z0, x\) must be finite; got 12 NaN/Inf entries: x and z0 are "
                       r"finite, so the cell made them at its first evaluation$"):  # fmt: skip
        diagnose(deq, torch.randn(4, 3))


def test_an_ntk_beyond_memory_is_refused_before_any_solve(monkeypatch):
    monkeypatch.setattr(sys.modules["deqlab.diagnosis.checks"], "available_bytes", lambda d: 10**6)
    calls = []

    class Counting(TanhCell):
        def forward(self, z, x):
            calls.append(1)
            return super().forward(z, x)

    with pytest.raises(MemoryRefusal, match=r"`X`: the NTK over 20 parameters on 300 rows needs "
                       r"1.54 MB .* pass fewer samples or fewer parameters"):  # fmt: skip
        diagnose(DEQ(Counting(4)), torch.randn(75, 4))
    assert not calls

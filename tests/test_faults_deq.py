"""Fault catalogue of a user's own DEQ (issue 36): each bad input or failing cell at the public
boundary of :class:`deqlab.DEQ`, :func:`deqlab.fixed_point` and the solvers gets one clear
message naming what is wrong (the argument, the cell, the backward pass), its exception type
and text asserted."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

from deqlab import DEQ, Implicit, Phantom, fixed_point
from deqlab.fixed_point_stats import ConvergenceWarning
from deqlab.implicit import TRAINING_SOLVER
from deqlab.solvers import Anderson, Broyden, Picard, SolverError, Status
from deqlab.solvers.solution import training_tol


class Cell(nn.Module):
    """``tanh(W z / 2 + x)``; from call ``nan_from`` on, its output is NaN."""

    def __init__(self, d: int = 8, nan_from: int | None = None, dtype=torch.float32) -> None:
        super().__init__()
        self.lin = nn.Linear(d, d, dtype=dtype)
        self.calls, self.nan_from = 0, nan_from

    def forward(self, z: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        out = torch.tanh(self.lin(z) / 2 + x)
        if self.nan_from is not None and self.calls >= self.nan_from:
            out = out * float("nan")
        return out


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def x_batch(*shape: int, dtype=torch.float32) -> torch.Tensor:
    return torch.randn(*(shape or (4, 8)), dtype=dtype)


# --- a cell that starts returning NaN is named as such, not as divergence --------------------


NAN_AT_4 = r"f\(z\) returned 32 NaN entries at evaluation 4, from a finite z"


def test_a_cell_returning_nan_is_named_nan_in_the_warning():
    deq = DEQ(Cell(nan_from=4))
    with pytest.warns(ConvergenceWarning) as caught:
        deq(x_batch())
    (message,) = [str(w.message) for w in caught]
    assert message.startswith("DEQ forward solve stopped at NaN (Anderson after 4 steps: ")
    assert "f(z) returned 32 NaN entries at evaluation 4, from a finite z)" in message
    assert "What to try: a NaN is not a sign of a non-contractive map" in message
    assert "diverged" not in message and "contractive (e.g." not in message
    solution = deq.last_forward
    assert solution.status is Status.DIVERGED and solution.non_finite.nan == 32


def test_a_cell_returning_nan_is_named_nan_when_strict():
    with pytest.raises(
        SolverError,
        match=rf"^Anderson stopped at NaN after 4 steps: {NAN_AT_4}; best rel residual "
        r"\S+ \(tol 1.0e-03\)\. Hint: forward solve; a NaN is not a sign of a non-contractive "
        r"map: find what makes it",
    ):
        DEQ(Cell(nan_from=4), on_failure="raise")(x_batch())


def test_an_overflow_stays_a_divergence_and_says_so():
    with pytest.raises(
        SolverError,
        match=r"^Anderson diverged after 2 steps: f\(z\) returned 2 Inf entries \(an overflow\) "
        r"at evaluation 2, from a finite z; best rel residual .* may not be contractive",
    ):
        Anderson(damping=0.5)(lambda z: torch.exp(50.0 * (z + 1.0)), torch.zeros(2))


NAN_VJP = {
    "implicit": r"^backward pass: the adjoint solve u = g \+ J_f\(z\*\)ᵀu met 32 NaN/Inf "
    r"entries at its first step, g \+ J_fᵀu₀; the gradient g reaching z\* is finite, so the "
    r"cell's vector-Jacobian product at z\* is not",
    "phantom": r"^backward pass: the phantom gradient's damped steps u ← λ\(g \+ J_f\(z\*\)ᵀu\) "
    r"\+ \(1 − λ\)u met 32 NaN/Inf entries; the gradient g reaching z\* is finite, so the "
    r"cell's vector-Jacobian product at z\* is not",
}


@pytest.mark.parametrize("backward", [Implicit(), Phantom(3, 0.8)], ids=["implicit", "phantom"])
@pytest.mark.parametrize("on_failure", ["warn", "raise", "record"])
def test_nan_in_the_backward_pass_says_it_is_the_backward_pass(backward, on_failure):
    cell = Cell()
    z = DEQ(cell, backward=backward, on_failure=on_failure)(x_batch())
    cell.nan_from = 0  # its VJPs at z* are NaN: a gradient of NaN must not reach the weights
    with pytest.raises(ValueError, match=NAN_VJP[type(backward).__name__.lower()]):
        z.sum().backward()
    assert all(p.grad is None for p in cell.parameters())


def test_a_finite_phantom_backward_passes_the_check():
    cell = Cell()
    z = DEQ(cell, backward=Phantom(3, 0.8))(x_batch())
    z.sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in cell.parameters())


def test_nan_in_x_names_x():
    x = x_batch()
    x[1, 2] = float("nan")
    with pytest.raises(
        ValueError, match=r"^`x` must be finite; got 1 NaN/Inf entries \(the cell's input\)$"
    ):
        DEQ(Cell())(x)


def test_nan_from_the_first_evaluation_with_a_finite_x_names_the_cell():
    with pytest.raises(
        ValueError,
        match=r"^`f\(z0\)` = cell\(z0, x\) must be finite; got 32 NaN/Inf entries: x and z0 "
        r"are finite, so the cell made them at its first evaluation$",
    ):
        DEQ(Cell(nan_from=1))(x_batch())


# --- a cell that changes the dtype ----------------------------------------------------------


@pytest.mark.parametrize("solver", [None, Picard(), Anderson(), Broyden()], ids=repr)
def test_a_cell_that_changes_the_dtype_is_named_at_its_first_evaluation(solver):
    lin = nn.Linear(8, 8, dtype=torch.float64)  # float64 parameters, float32 state

    def cell(z, x):
        return torch.tanh(lin(z.double()) / 2 + x)

    with pytest.raises(
        TypeError,
        match=r"^`f\(z0\)` must have the dtype and device of `z0` \(torch.float32, cpu\); got "
        r"\(torch.float64, cpu\): the map changes them",
    ):
        DEQ(cell, solver=solver)(x_batch())


# --- an empty batch is its own equilibrium --------------------------------------------------


def test_an_empty_batch_gives_the_empty_equilibrium_and_zero_gradients():
    cell = Cell()
    deq = DEQ(cell)
    z = deq(x_batch(0, 8))
    assert z.shape == (0, 8) and deq.last_forward.converged and deq.last_forward.n_steps == 0
    z.sum().backward()  # in the graph of the cell: zero gradients, no error
    assert cell.lin.weight.grad is not None and not cell.lin.weight.grad.any()
    with torch.no_grad():
        assert DEQ(Cell())(x_batch(0, 8)).shape == (0, 8)
    for solver in (Picard(), Anderson(per_sample=True), Broyden()):
        solution = solver(torch.tanh, torch.zeros(0, 3))
        assert solution.converged and solution.z.shape == (0, 3) and solution.residual == 0.0
    assert fixed_point(torch.tanh, torch.zeros(2, 0)).shape == (2, 0)


# --- inputs of the wrong kind ---------------------------------------------------------------


def test_an_integer_x_names_x_and_the_default_z0():
    with pytest.raises(
        TypeError,
        match=r"^`x` must be a floating-point tensor when the cell has no initial_state\(x\): "
        r"the default z0 is zeros_like\(x\); got dtype torch.int64\. Pass x.float\(\)",
    ):
        DEQ(lambda z, x: torch.tanh(z + x))(torch.ones(4, 8, dtype=torch.long))


def test_a_z0_on_another_device_than_x_is_named():
    """The meta device stands in for a GPU (no GPU needed)."""
    with pytest.raises(
        ValueError,
        match=r"^`z0` is on meta and `x` on cpu: the state and the input must be on one device",
    ):
        DEQ(Cell())(x_batch(), z0=torch.zeros(4, 8, device="meta"))
    with pytest.raises(ValueError, match=r"^`z0` is on cpu and `x` on meta: "):
        DEQ(Cell())(torch.zeros(4, 8, device="meta"), z0=torch.zeros(4, 8))
    with pytest.raises(
        ValueError,
        match=r"^`z0` is on the meta device: it has a shape but no values to check or use$",
    ):
        Picard()(torch.tanh, torch.zeros(3, device="meta"))


# --- the default tolerance follows the dtype -------------------------------------------------


def test_the_default_tolerance_follows_the_dtype():
    assert TRAINING_SOLVER.tol == 1e-3
    assert training_tol(torch.float32) == training_tol(torch.float64) == 1e-3
    assert training_tol(torch.float16) == 2 * 2.0**-10
    assert training_tol(torch.bfloat16) == 2 * 2.0**-7


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_low_precision_layer_converges_without_a_warning(dtype):
    """bfloat16 rounding stalls the relative residual near 0.1–0.4 eps = 1–3e-3: above the
    float32 default of 1e-3, which warned on every forward."""
    cells = [Cell(d, dtype=dtype) for d in (8, 64, 256)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        for cell in cells:
            deq = DEQ(cell)
            for _ in range(3):
                deq(x_batch(16, cell.lin.in_features, dtype=dtype))
                assert deq.last_forward.converged
                assert deq.last_forward.residual <= training_tol(dtype)
    strict = DEQ(Cell(256, dtype=torch.bfloat16), solver=Anderson(tol=1e-4, per_sample=True))
    with pytest.warns(ConvergenceWarning, match="> tol 1.0e-04"):  # an explicit tol wins
        strict(x_batch(16, 256, dtype=torch.bfloat16))

"""Variational (DEQ) dropout (issue 31) against a closed form in float64: with its mask m held
over the solve, the linear cell z = m ⊙ (W z) + x has z* = (I − diag(m) W)⁻¹ x per sample, and
the exact gradient is the linear solve's; an ordinary dropout draws anew at each evaluation and
the solve cannot settle."""

import pytest
import torch
from torch import nn

from deqlab import DEQ, Anderson, Implicit, VariationalDropout, reset_dropout

D = 6


class DropCell(nn.Module):
    def __init__(self, dropout: nn.Module) -> None:
        super().__init__()
        torch.manual_seed(1)
        self.W = nn.Parameter(0.3 * torch.randn(D, D, dtype=torch.float64) / D**0.5)
        self.drop = dropout

    def forward(self, z, x):
        return self.drop(z @ self.W.T) + x


def test_the_mask_is_held_over_the_solve_and_gives_the_closed_form():
    cell = DropCell(VariationalDropout(0.5))
    deq = DEQ(cell, solver=Anderson(tol=1e-12, per_sample=True), backward=Implicit())
    x = torch.randn(4, D, dtype=torch.float64)
    z = deq(x)
    m = cell.drop.mask  # (4, D), entries 0 or 2
    assert set(m.unique().tolist()) <= {0.0, 2.0} and deq.last_forward.converged
    # row compaction: the samples still to converge were evaluated with their mask rows
    assert deq.last_forward.evaluations < deq.last_forward.n_steps
    eye = torch.eye(D, dtype=torch.float64)
    W = cell.W.detach().requires_grad_()
    z_star = torch.stack([torch.linalg.solve(eye - m[i, :, None] * W, x[i]) for i in range(4)])
    torch.testing.assert_close(z, z_star, rtol=0, atol=1e-10)
    c = torch.randn(4, D, dtype=torch.float64)
    (z * c).sum().backward()
    (expected,) = torch.autograd.grad((z_star * c).sum(), W)  # the same mask, by autograd
    torch.testing.assert_close(cell.W.grad, expected, rtol=0, atol=1e-9)
    assert deq.last_backward.exact


def test_each_forward_draws_a_new_mask_and_eval_mode_is_the_identity():
    cell = DropCell(VariationalDropout(0.5))
    deq = DEQ(cell, solver=Anderson(tol=1e-12, per_sample=True))
    x = torch.randn(8, D, dtype=torch.float64)
    deq(x)
    first = cell.drop.mask.clone()
    deq(x)
    assert not torch.equal(first, cell.drop.mask)
    deq.eval()
    z = deq(x)
    plain = torch.linalg.solve(torch.eye(D, dtype=torch.float64) - cell.W.detach(), x.T).T
    torch.testing.assert_close(z, plain, rtol=0, atol=1e-10)


def test_an_ordinary_dropout_cannot_settle_where_the_variational_one_does():
    x = torch.randn(4, D, dtype=torch.float64)
    plain = DEQ(DropCell(nn.Dropout(0.5)), solver=Anderson(tol=1e-10, max_iter=60),
                on_failure="record")  # fmt: skip
    plain(x)
    assert not plain.last_forward.converged  # a new mask at every evaluation
    variational = DEQ(DropCell(VariationalDropout(0.5)), solver=Anderson(tol=1e-10, max_iter=60))
    variational(x)
    assert variational.last_forward.converged


def test_shared_dims_share_one_draw_and_the_mask_is_rescaled():
    drop = VariationalDropout(0.25, shared_dims=(2, 3))
    y = drop(torch.ones(64, 8, 5, 5, dtype=torch.float64))
    assert drop.mask.shape == (64, 8, 1, 1)
    assert set(y.unique().tolist()) <= {0.0, 4.0 / 3.0}
    assert abs(float(drop.mask.mean()) - 1.0) < 0.1  # E[mask] = 1: kept entries scale 1/(1−p)
    with pytest.raises(ValueError, match=r"drawn for a batch of 64; got an input of 3 samples"):
        drop(torch.ones(3, 8, 5, 5, dtype=torch.float64))
    reset_dropout(drop)
    assert drop.mask is None
    with pytest.raises(ValueError, match=r"`p` must be in \[0, 1\); got 1"):
        VariationalDropout(1.0)
    with pytest.raises(ValueError, match=r"`shared_dims` must be dims of the input other than 0"):
        VariationalDropout(0.1, shared_dims=(0,))

"""WarmStart (rows, per-sample trends): exact products, first/second-order prediction,
jumps, corrections; and the unverified start that costs one exact product per row."""

import math

import pytest
import torch

from deqlab.models import ReLUDEQ
from deqlab.models.relu_deq_solve import solve_adjoint, solve_forward
from deqlab.train.warm_start import WarmStart

F64 = torch.float64


def _path(order: int, steps: int, n=3, m=5, seed=0):
    """Rows x(τ) = A + τ B (+ τ² C) and their products x(τ) M with a fixed M."""
    gen = torch.Generator().manual_seed(seed)
    A, B, C, M = (torch.randn(*shape, generator=gen, dtype=F64) for shape in
                  ((n, m), (n, m), (n, m), (m, m)))  # fmt: skip
    xs = [A + t * B + (t * t * C if order == 2 else 0) for t in range(steps)]
    return xs, M


def _advance_through(start: WarmStart, xs, M, jumps=None):
    for x in xs:
        start.advance(x, x @ M, keep_history=True, jumps=jumps)


def test_second_order_prediction_is_exact_on_a_quadratic_path():
    xs, M = _path(order=2, steps=4)
    start = WarmStart(xs[0], xs[0] @ M)
    _advance_through(start, xs[1:3], M)  # history: x(0), x(1), x(2)
    x0, product, _, verified, _ = start.start()
    assert not verified
    torch.testing.assert_close(x0, xs[3], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(product, x0 @ M, rtol=1e-12, atol=1e-12)


def test_second_order_fit_follows_a_geometric_trend_and_a_damped_one():
    """Changes t_k = 0.9^k v (collinear: the fit falls back to c t with c = 0.9), and
    t_k = 0.9^k v + 0.5^k w (two rates: α t + β (t − t_prev) is exact)."""
    gen = torch.Generator().manual_seed(2)
    v, w, M = (torch.randn(*shape, generator=gen, dtype=F64) for shape in ((3, 5), (3, 5), (5, 5)))
    for changes in ([0.9**k * v for k in range(6)], [0.9**k * v + 0.5**k * w for k in range(6)]):
        xs = [torch.zeros_like(v)]
        for t in changes:
            xs.append(xs[-1] + t)
        start = WarmStart(xs[0], xs[0] @ M)
        _advance_through(start, xs[1:5], M)
        x0, product, _, _, _ = start.start()
        torch.testing.assert_close(x0, xs[5], rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(product, x0 @ M, rtol=1e-10, atol=1e-10)


def test_first_order_prediction_is_exact_on_a_straight_path_and_needs_history():
    xs, M = _path(order=1, steps=4)
    start = WarmStart(xs[0], xs[0] @ M)
    assert start.start()[3] and math.isnan(start.start()[2])  # no history: x itself
    _advance_through(start, xs[1:3], M)
    x0, product, c, verified, _ = start.start()
    assert c == pytest.approx(1.0, rel=1e-12) and not verified
    torch.testing.assert_close(x0, xs[3], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(product, x0 @ M, rtol=1e-12, atol=1e-12)


def test_a_jump_row_gets_its_predicted_change_not_the_jump():
    xs, M = _path(order=1, steps=5)
    start = WarmStart(xs[0], xs[0] @ M)
    _advance_through(start, xs[1:3], M)
    jumped = xs[3].clone()
    jumped[1] += 100.0  # row 1 jumps (its mask flipped), the others move on smoothly
    jumps = torch.tensor([False, True, False])
    start.advance(jumped, jumped @ M, keep_history=True, jumps=jumps)
    x0, product, c, _, _ = start.start()
    assert c == pytest.approx(1.0, rel=1e-12)  # fitted on the rows without a jump
    expected = xs[4].clone()
    expected[1] += 100.0  # the jump stays, the trend goes on
    torch.testing.assert_close(x0, expected, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(product, x0 @ M, rtol=1e-12, atol=1e-12)


def test_correct_follows_a_low_rank_update_exactly():
    gen = torch.Generator().manual_seed(3)
    W = torch.randn(6, 6, generator=gen, dtype=F64)
    x, L, R = (torch.randn(4, 6, generator=gen, dtype=F64) for _ in range(3))
    start = WarmStart(x, x @ W.T)  # forward layout: product = x Wᵀ
    start.correct(0.1, L, R)  # W ← W − 0.1 Rᵀ L
    torch.testing.assert_close(start.product, x @ (W - 0.1 * R.T @ L).T)


def test_an_unverified_start_takes_one_exact_product_per_row():
    model = ReLUDEQ.init(6, 20, seed=0, dtype=F64)
    X = torch.randn(6, 5, generator=torch.Generator().manual_seed(1), dtype=F64)
    sol = model.equilibrium(X, tol=1e-13)
    W, B = model.W.detach(), (model.U @ X).detach()
    Z = sol.Z
    verified = solve_forward(W, B, Z, W @ Z, tol=1e-6)
    assert verified.converged and verified.n_products == 0
    unverified = solve_forward(W, B, Z, W @ Z + 1e-9, tol=1e-6, verified_start=False)
    assert unverified.converged and unverified.n_products == 1
    torch.testing.assert_close(unverified.product, W @ unverified.x_in, rtol=1e-13, atol=1e-13)


def test_a_row_whose_mask_returns_restarts_from_that_state():
    """Rows 0 and 2 flip a unit at step 3 (their C jumps) and back at step 4: they restart
    from the step-2 state, which had their mask, moved by the smooth changes since; on a
    straight path that start is exact. Their product is left to the solve (``unknown``),
    the other rows' is exact."""
    xs, M = _path(order=1, steps=7)
    masks = [torch.ones(3, 5, dtype=torch.bool) for _ in range(7)]
    masks[3][0, 1] = masks[3][2, 4] = False  # flipped off at step 3, back on at step 4
    jumps_at = {3: torch.tensor([True, False, True]), 4: torch.tensor([True, False, True])}
    # a jump of +100 in rows 0 and 2 while their mask is flipped
    states = [x.clone() for x in xs]
    states[3][0] += 100.0
    states[3][2] += 100.0
    start = WarmStart(states[0], states[0] @ M, memory=3)
    for t in range(1, 5):
        if t == 4:
            x0, product, _, _, unknown = start.start(jumps_at[4], masks[4])
            assert unknown is not None and unknown.tolist() == [0, 2]
            torch.testing.assert_close(x0, xs[4], rtol=1e-10, atol=1e-10)
            torch.testing.assert_close(product[1], x0[1] @ M, rtol=1e-10, atol=1e-10)
        start.advance(
            states[t], states[t] @ M, keep_history=True, jumps=jumps_at.get(t), mask=masks[t]
        )


def test_adjoint_columns_without_a_product_start_from_their_input():
    """``unknown`` columns ignore Q (garbage here) and start from C_in itself: started at
    the closed form c_i = (I − Wᵀ D_i)⁻¹ a, every column stops after its one exact
    product, at that solution; a verified start refuses them."""
    model = ReLUDEQ.init(6, 20, seed=0, dtype=F64)
    X = torch.randn(6, 5, generator=torch.Generator().manual_seed(1), dtype=F64)
    W, a = model.W.detach(), model.a.detach()[:, None]
    mask = model.equilibrium(X, tol=1e-13).mask
    eye = torch.eye(20, dtype=F64)
    C = torch.stack([torch.linalg.solve(eye - W.T * mask[:, i], a[:, 0]) for i in range(5)], 1)
    Q = W.T @ (mask * C)
    Q[:, [1, 3]] = 1e6  # not their product
    unknown = torch.tensor([1, 3])
    solve = solve_adjoint(W, mask, a, C, Q, tol=1e-12, verified_start=False, unknown=unknown)
    assert solve.converged and solve.n_products == 1
    torch.testing.assert_close(solve.x, C, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="unknown"):
        solve_adjoint(W, mask, a, C, Q, tol=1e-6, unknown=unknown)

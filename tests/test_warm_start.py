"""The fast path's warm starts in layers: the trend's prediction (first/second order,
jumps), the product cache's rank-n correction and reused inner product, the flip memory's
restarts, and the unverified start that costs one exact product per row."""

import itertools
import math

import pytest
import torch

from deqlab.models import ReLUDEQ
from deqlab.models.relu_deq_solve import RowSolution, solve_adjoint, solve_forward
from deqlab.solvers import Status
from deqlab.train.relu_deq.cost import ProductCount
from deqlab.train.relu_deq.product_cache import ProductCache
from deqlab.train.relu_deq.trend import TrendPredictor
from deqlab.train.relu_deq.warm_start import WarmStart

F64 = torch.float64


def _path(order: int, steps: int, n=3, m=5, seed=0):
    """Rows x(τ) = A + τ B (+ τ² C) and a fixed M (products x(τ) M)."""
    gen = torch.Generator().manual_seed(seed)
    A, B, C, M = (torch.randn(*shape, generator=gen, dtype=F64) for shape in
                  ((n, m), (n, m), (n, m), (m, m)))  # fmt: skip
    xs = [A + t * B + (t * t * C if order == 2 else 0) for t in range(steps)]
    return xs, M


def _observe(trend: TrendPredictor, xs, M, jumps=None):
    for before, after in itertools.pairwise(xs):
        trend.observe(after - before, after @ M - before @ M, jumps)


def _ended_at(x, product):
    """The solution of a solve whose last input was x (as the trainer passes it on)."""
    return RowSolution(x, Status.CONVERGED, 1, [0.0], 0.0, x, product, 0.0, 1e-6)


def test_second_order_prediction_is_exact_on_a_quadratic_path():
    xs, M = _path(order=2, steps=4)
    trend = TrendPredictor()
    _observe(trend, xs[:3], M)  # changes x(1) − x(0), x(2) − x(1): the first fit is 2t − t_prev
    x0, product = trend.predict(xs[2], xs[2] @ M)
    torch.testing.assert_close(x0, xs[3], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(product, x0 @ M, rtol=1e-12, atol=1e-12)


def test_second_order_fit_follows_a_geometric_trend_and_a_damped_one():
    """Changes t_k = 0.9^k v (collinear: the fit falls back to c t with c = 0.9), and
    t_k = 0.9^k v + 0.5^k w (two rates: p t + q t_prev is exact)."""
    gen = torch.Generator().manual_seed(2)
    v, w, M = (torch.randn(*shape, generator=gen, dtype=F64) for shape in ((3, 5), (3, 5), (5, 5)))
    for changes in ([0.9**k * v for k in range(6)], [0.9**k * v + 0.5**k * w for k in range(6)]):
        xs = [torch.zeros_like(v)]
        for t in changes:
            xs.append(xs[-1] + t)
        trend = TrendPredictor()
        _observe(trend, xs[:5], M)
        x0, product = trend.predict(xs[4], xs[4] @ M)
        torch.testing.assert_close(x0, xs[5], rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(product, x0 @ M, rtol=1e-10, atol=1e-10)


def test_first_order_prediction_is_exact_on_a_straight_path_and_needs_history():
    xs, M = _path(order=1, steps=4)
    trend = TrendPredictor()
    assert trend.predict(xs[0], xs[0] @ M) is None and math.isnan(trend.ratio)
    _observe(trend, xs[:2], M)
    assert trend.predict(xs[1], xs[1] @ M) is None  # one change: no ratio yet
    _observe(trend, xs[1:3], M)
    assert trend.ratio == pytest.approx(1.0, rel=1e-12) and trend.t_prev is not None
    start = WarmStart(xs[0], xs[0] @ M, extrapolate=True)
    assert start.start().verified  # no history: the cached input itself


def test_a_jump_row_gets_its_predicted_change_not_the_jump():
    xs, M = _path(order=1, steps=5)
    trend = TrendPredictor()
    _observe(trend, xs[:3], M)
    jumped = xs[3].clone()
    jumped[1] += 100.0  # row 1 jumps (its mask flipped), the others move on smoothly
    trend.observe(jumped - xs[2], jumped @ M - xs[2] @ M, torch.tensor([False, True, False]))
    assert trend.ratio == pytest.approx(1.0, rel=1e-12)  # fitted on the rows without a jump
    x0, product = trend.predict(jumped, jumped @ M)
    expected = xs[4].clone()
    expected[1] += 100.0  # the jump stays, the trend goes on
    torch.testing.assert_close(x0, expected, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(product, x0 @ M, rtol=1e-12, atol=1e-12)


def test_correct_follows_a_low_rank_update_exactly_and_counts_thin_products():
    gen = torch.Generator().manual_seed(3)
    W = torch.randn(6, 6, generator=gen, dtype=F64)
    x, L, R = (torch.randn(4, 6, generator=gen, dtype=F64) for _ in range(3))
    cache, count = ProductCache(x, x @ W.T), ProductCount()  # forward layout: x Wᵀ
    cache.correct(0.1, L, R, count)  # W ← W − 0.1 Rᵀ L
    torch.testing.assert_close(cache.product, x @ (W - 0.1 * R.T @ L).T)
    assert count.thin == pytest.approx(2 * 4 / 6) and count.products == 0 and cache.corrections == 1
    cache.correct(0.1, L, R, count, reuse=1)  # the inner product x Lᵀ is reused: one thin
    torch.testing.assert_close(cache.product, x @ (W - 0.2 * R.T @ L).T)
    assert count.thin == pytest.approx(3 * 4 / 6)
    cache.correct(0.1, L, R, count, reuse=1)  # reused once already: recomputed
    assert count.thin == pytest.approx(5 * 4 / 6) and cache.corrections == 3
    cache.refresh(x @ W.T, count)
    assert count.products == 1 and cache.corrections == 0


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
    straight path that start is exact. Their product is left to the solve (``unknown``);
    the other rows' is the extrapolated exact one. Without the memory they would not."""
    xs, M = _path(order=1, steps=7)
    masks = [torch.ones(3, 5, dtype=torch.bool) for _ in range(7)]
    masks[3][0, 1] = masks[3][2, 4] = False  # flipped off at step 3, back on at step 4
    jumps = torch.tensor([True, False, True])
    states = [x.clone() for x in xs]
    states[3][[0, 2]] += 100.0  # a jump in rows 0 and 2 while their mask is flipped
    for memory in (3, 0):
        start = WarmStart(states[0], states[0] @ M, extrapolate=True, memory=memory)
        for t in range(1, 4):
            s = start.start()
            at = _ended_at(states[t], states[t] @ M)
            start.advance(at, s, jumps=jumps if t == 3 else None, mask=masks[t])
        x0, product, _, _, unknown = start.start(jumps, masks[4])
        if memory == 0:
            assert unknown is None and (x0[0] - xs[4][0]).abs().max() > 50
            continue
        assert unknown is not None and unknown.tolist() == [0, 2]
        torch.testing.assert_close(x0, xs[4], rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(product[1], x0[1] @ M, rtol=1e-10, atol=1e-10)


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

"""The fast path's trend (deqlab.train.relu_deq.trend): first- and second-order predictions
of the next input and its product, fitted on the rows without a jump."""

import itertools
import math

import pytest
import torch

from deqlab.train.relu_deq.trend import TrendPredictor
from helpers import row_path as _path

F64 = torch.float64


def _observe(trend: TrendPredictor, xs, M, jumps=None):
    for before, after in itertools.pairwise(xs):
        trend.observe(after - before, after @ M - before @ M, jumps)


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

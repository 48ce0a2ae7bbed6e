"""The fast path's warm start (deqlab.train.relu_deq.warm_start): the cached input without
history, and the flip memory's restart of a row whose mask returns."""

import torch

from deqlab.models.relu_deq_solve import RowSolution
from deqlab.solvers import Status
from deqlab.train.relu_deq.warm_start import WarmStart
from helpers import row_path as _path


def _ended_at(x, product):
    """The solution of a solve whose last input was x (as the trainer passes it on)."""
    return RowSolution(x, Status.CONVERGED, 1, [0.0], 0.0, x, product, 0.0, 1e-6)


def test_without_history_the_start_is_the_cached_input():
    xs, M = _path(order=1, steps=2)
    start = WarmStart(xs[0], xs[0] @ M, extrapolate=True)
    assert start.start().verified  # no history: the cached input itself


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

"""Hieu (2022)'s landscape observations (papers/hieu2022/landscapes.py) on surfaces with a
grid point that is not finite: a minimum beside it is not known, so the count is decided
only where the minima known already break it; the flat share is at most what the unknown
points could add."""

import math

import pytest
import torch

from deqlab.landscape import LossSurface
from deqlab.papers.hieu2022.landscapes import flat_minimum, local_minima, one_minimum
from deqlab.statements import Verdict


def _surface(losses) -> LossSurface:
    losses = torch.tensor(losses, dtype=torch.float64)
    alphas = torch.linspace(-1, 1, losses.shape[0], dtype=torch.float64)
    betas = torch.linspace(-1, 1, losses.shape[1], dtype=torch.float64)
    return LossSurface(alphas, betas, losses, ({}, {}))


#: Two wells inside a 5 × 5 grid: 1 + the squared distance to the nearer of (1, 1), (3, 3).
TWO_WELLS = [
    [1.0 + min((i - 1) ** 2 + (j - 1) ** 2, (i - 3) ** 2 + (j - 3) ** 2) for j in range(5)]
    for i in range(5)
]


def _with(losses, i, j, value):
    found = [list(row) for row in losses]
    found[i][j] = value
    return found


@pytest.mark.parametrize("lost", [math.nan, math.inf, -math.inf])
def test_a_non_finite_point_beside_a_minimum_leaves_the_count_unmeasured(lost):
    """Beside one of two wells, a NaN used to hide that well: 1 minimum, PASS."""
    assert one_minimum(_surface(TWO_WELLS), "", setting="").verdict is Verdict.FAIL
    hidden = one_minimum(_surface(_with(TWO_WELLS, 0, 0, lost)), "", setting="")
    assert hidden.verdict is Verdict.NOT_MEASURED
    assert "1 local minima known (1 grid points not finite)" in hidden.measured


def test_minima_known_beside_a_non_finite_point_still_fail():
    far = one_minimum(_surface(_with(TWO_WELLS, 4, 0, math.nan)), "", setting="")
    assert far.verdict is Verdict.FAIL and far.value == 2
    single = [[3.0, 3.0, 3.0], [3.0, 1.0, 3.0], [3.0, 3.0, math.nan]]
    assert one_minimum(_surface(single), "", setting="").verdict is Verdict.NOT_MEASURED


def test_local_minima_of_a_non_square_grid_match_a_brute_force_count():
    losses = torch.rand(5, 7, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    losses[2, 3] = math.nan
    mask = local_minima(_surface(losses.tolist()))
    for i in range(5):
        for j in range(7):
            near = [
                losses[p, q]
                for p in range(i - 1, i + 2)
                for q in range(j - 1, j + 2)
                if 0 <= p < 5 and 0 <= q < 7 and (p, q) != (i, j)
            ]
            known = all(math.isfinite(v) for v in [losses[i, j], *near])
            assert bool(mask[i, j]) == (known and all(losses[i, j] <= v for v in near))


BOWL = [[3.0, 2.0, 3.0], [2.0, 1.0, 2.0], [3.0, 2.0, 3.0]]


def test_the_flat_share_is_at_most_what_the_unknown_points_could_add():
    """{Φ ≤ Φ(θ*) + 0.5} is the centre only: 1/9 < 1/2 fails; with a point not finite it
    is at most 2/9, still a measured FAIL; a share it could reach is not measured."""
    assert flat_minimum(_surface(BOWL), "", delta=0.5, share=0.5, setting="").value == 1 / 9
    lost = _surface(_with(BOWL, 0, 0, math.nan))
    found = flat_minimum(lost, "", delta=0.5, share=0.5, setting="")
    assert found.verdict is Verdict.FAIL and found.value == pytest.approx(2 / 9)
    assert found.measured == "at most 0.222 of the grid (1 grid points not finite)"
    reachable = flat_minimum(lost, "", delta=0.5, share=0.2, setting="")
    assert reachable.verdict is Verdict.NOT_MEASURED


def test_a_centre_not_finite_leaves_the_flat_share_unmeasured():
    """It used to compare every point with NaN: share 0, FAIL."""
    found = flat_minimum(
        _surface(_with(BOWL, 1, 1, math.nan)), "", delta=1.5, share=0.5, setting=""
    )
    assert found.verdict is Verdict.NOT_MEASURED

"""The fast path's product cache (deqlab.train.relu_deq.product_cache): its rank-n
correction follows a low-rank update of W exactly, and reuses the inner product once."""

import pytest
import torch

from deqlab.train.relu_deq.cost import ProductCount
from deqlab.train.relu_deq.product_cache import ProductCache

F64 = torch.float64


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

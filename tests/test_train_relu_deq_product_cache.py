"""The fast path's product cache (deqlab.train.relu_deq.product_cache): its rank-n
correction follows a low-rank update of W exactly, a remask equals the direct product, and
the inner product is reused once."""

import pytest
import torch

from deqlab.train.relu_deq.cost import ProductCount
from deqlab.train.relu_deq.product_cache import ProductCache, mask_flips

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


def test_remask_product_equals_the_direct_product():
    """In rows (one per sample): (old ⊙ C) W → (new ⊙ C) W through the flipped entries."""
    gen = torch.Generator().manual_seed(0)
    W, C = torch.randn(9, 9, generator=gen), torch.randn(4, 9, generator=gen)
    old, new = torch.rand(4, 9, generator=gen) > 0.5, torch.rand(4, 9, generator=gen) > 0.5
    cache, count = ProductCache(C, (C * old) @ W), ProductCount()
    flips = mask_flips(old, new)
    cache.remask(W, flips, count)
    Q, rows = cache.product, flips[0]
    assert rows.numel() == int((old != new).sum()) and count.thin == 2 * rows.numel() / C.numel()
    assert set(rows.tolist()) == set((old != new).any(dim=1).nonzero().squeeze(1).tolist())
    torch.testing.assert_close(Q, (C * new) @ W, rtol=1e-13, atol=1e-13)

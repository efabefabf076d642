from __future__ import annotations

import torch

from engine.kv_cache import KVCache


def filled_cache() -> KVCache:
    cache = KVCache(layers=2, kv_heads=1, head_dim=2, rows=12)
    rows = torch.arange(12, dtype=torch.float32)
    cache.k[:] = rows[None, None, :, None, None]
    cache.v[:] = -rows[None, None, :, None, None]
    return cache


def test_it_gathers_a_branched_path_into_place_in_every_layer() -> None:
    cache = filled_cache()
    cache.commit(start=4, accepted=[0, 2, 5, 6])
    for layer in range(2):
        assert cache.k[layer, 0, :, 0, 0].tolist()[:8] == [0, 1, 2, 3, 4, 6, 9, 10]
        assert cache.v[layer, 0, 4:8, 0, 0].tolist() == [-4, -6, -9, -10]


def test_it_leaves_a_chain_path_where_it_is() -> None:
    cache = filled_cache()
    before = cache.k.clone()
    cache.commit(start=3, accepted=[0, 1, 2, 3])
    assert torch.equal(cache.k, before)


def test_it_reads_only_the_window_of_recent_rows() -> None:
    cache = KVCache(layers=1, kv_heads=1, head_dim=1, rows=10)
    cache.window = 3
    k, _ = cache.write(0, 0, torch.ones(1, 5, 1, 1), torch.ones(1, 5, 1, 1))
    assert k.shape[1] == 3
    cache.window = None
    k, _ = cache.write(0, 5, torch.ones(1, 2, 1, 1), torch.ones(1, 2, 1, 1))
    assert k.shape[1] == 7


def test_it_refuses_to_write_past_its_rows() -> None:
    cache = KVCache(layers=1, kv_heads=1, head_dim=1, rows=4)
    try:
        cache.write(0, 3, torch.ones(1, 2, 1, 1), torch.ones(1, 2, 1, 1))
    except ValueError as e:
        assert "overflow" in str(e)
    else:
        raise AssertionError("an overflowing write must raise")

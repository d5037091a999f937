"""The paged key/value cache (lesson 16, course_utils.paged_cache): attention through block tables equals attention
over a contiguous cache for random block layouts; the pool's bookkeeping (free list, counts, copy-on-write, prefix
sharing) keeps every sequence's keys; bad sizes are refused with a clear error."""
import pytest
import torch

from course_utils.paged_cache import (
    BlockAllocator,
    CacheFull,
    PagedKVCache,
    append_slot,
    blocks_needed,
    paged_attention,
    release,
)


def _contiguous_attention(q, k, v):
    """q (h, d) over k, v (T, h, d): the plain form."""
    w = (torch.einsum("hd,thd->ht", q, k) / q.size(-1) ** 0.5).softmax(-1)
    return torch.einsum("ht,thd->hd", w, v)


@pytest.mark.parametrize("seed", range(5))
def test_paged_attention_equals_a_contiguous_cache_for_random_block_layouts(seed):
    g = torch.Generator().manual_seed(seed)
    block_size = int(torch.randint(1, 6, (1,), generator=g))
    B, h, d = 4, 3, 8
    lengths = torch.randint(1, 20, (B,), generator=g)
    need = [blocks_needed(n, block_size) for n in lengths.tolist()]
    num_blocks = sum(need) + 5
    order = torch.randperm(num_blocks, generator=g)                  # a random free list
    tables = torch.full((B, max(need) + 2), -1, dtype=torch.long)
    k_cache = torch.randn(num_blocks, block_size, h, d, generator=g) * 10   # junk everywhere ...
    v_cache = torch.randn(num_blocks, block_size, h, d, generator=g) * 10
    q = torch.randn(B, h, d, generator=g)
    contiguous, used = [], 0
    for b, n in enumerate(lengths.tolist()):
        tables[b, :need[b]] = order[used:used + need[b]]
        used += need[b]
        k, v = torch.randn(n, h, d, generator=g), torch.randn(n, h, d, generator=g)   # ... but in its positions
        for t in range(n):
            block, offset = tables[b, t // block_size], t % block_size
            k_cache[block, offset], v_cache[block, offset] = k[t], v[t]
        contiguous.append(_contiguous_attention(q[b], k, v))
    torch.testing.assert_close(paged_attention(q, k_cache, v_cache, tables, lengths), torch.stack(contiguous))


def test_gather_reads_a_sequence_in_order_through_its_table():
    cache = PagedKVCache(2, 1, 3, num_blocks=8, block_size=2)
    cache.free = [5, 1, 7, 0, 2, 3, 4, 6]                          # blocks 6, 4, 3, ... handed out first
    table, slots = cache.reserve([], 0, 5)
    assert table == [6, 4, 3] and slots.tolist() == [12, 13, 8, 9, 6]
    keys = torch.arange(5.0)[:, None, None].expand(5, 1, 3)
    cache.write(1, slots, keys, -keys)
    k, v = cache.gather(1, table, 5)
    assert k.shape == (1, 5, 3) and k[0, :, 0].tolist() == [0, 1, 2, 3, 4] and torch.equal(v, -k)
    assert cache.gather(0, table, 5)[0].abs().sum() == 0            # layer 0 untouched


def test_release_frees_a_block_only_when_nobody_holds_it():
    refs = torch.tensor([1, 2, 3, 0, 1])
    refs, free = release([0, 1, 2], refs, [3])
    assert refs.tolist() == [0, 1, 2, 0, 1] and sorted(free) == [0, 3]
    with pytest.raises(ValueError, match="released twice"):
        release([3], refs, free)


def test_copy_on_write_keeps_the_shared_prefix_and_gives_each_sequence_its_own_last_block():
    cache = PagedKVCache(1, 1, 1, num_blocks=6, block_size=4)
    parent, slots = cache.reserve([], 0, 6)                         # 6 positions: a full block and half of one
    cache.write(0, slots, torch.arange(6.0).view(6, 1, 1), torch.zeros(6, 1, 1))
    child = cache.fork(parent)
    assert cache.refs[parent].tolist() == [2, 2] and cache.num_used == 2
    child, slot = cache.append_slot(child, 6)                        # the child writes: its last block is copied
    assert child[0] == parent[0] and child[1] != parent[1] and cache.refs[parent].tolist() == [2, 1]
    cache.write(0, torch.tensor([slot]), torch.full((1, 1, 1), 60.0), torch.zeros(1, 1, 1))
    parent, slot = cache.append_slot(parent, 6)                      # the parent now holds its block alone
    cache.write(0, torch.tensor([slot]), torch.full((1, 1, 1), -60.0), torch.zeros(1, 1, 1))
    assert cache.gather(0, child, 7)[0].flatten().tolist() == [0, 1, 2, 3, 4, 5, 60]
    assert cache.gather(0, parent, 7)[0].flatten().tolist() == [0, 1, 2, 3, 4, 5, -60]
    cache.free_sequence(child)
    cache.free_sequence(parent)
    assert cache.num_free == 6 and cache.refs.sum() == 0


def test_append_slot_takes_the_pools_bookkeeping_as_data_and_returns_it_with_the_copy_to_make():
    refs, free = torch.tensor([2, 1, 0, 0, 1]), [3, 2]
    table, slot, new_refs, new_free, copy = append_slot([4, 0], 6, 4, refs, free)     # block 0 shared, room left
    assert (table, slot, copy, new_free) == ([4, 2], 10, (0, 2), [3]) and new_refs.tolist() == [1, 1, 1, 0, 1]
    assert refs.tolist() == [2, 1, 0, 0, 1] and free == [3, 2]                      # the inputs stay as they were
    assert append_slot([1], 3, 4, refs, free)[:2] == ([1], 7) and append_slot([1], 3, 4, refs, free)[4] is None
    table, slot, new_refs, new_free, copy = append_slot([4, 0], 8, 4, refs, free)     # full: a new block, no copy
    assert (table, slot, copy, new_free) == ([4, 0, 2], 8, None, [3]) and new_refs[2] == 1
    with pytest.raises(CacheFull):
        append_slot([0], 4, 4, refs, [])


def test_a_full_shared_block_stays_shared_and_a_truncated_table_gives_its_blocks_back():
    cache = PagedKVCache(1, 1, 1, num_blocks=6, block_size=2)
    parent, _ = cache.reserve([], 0, 4)
    child = cache.fork(parent)
    child, _ = cache.reserve(child, 4, 3)                            # new blocks, nothing copied
    assert child[:2] == parent and cache.num_used == 4
    child = cache.truncate(child, 4)                                  # the drafts rejected: back to 4 positions
    assert child == parent and cache.num_used == 2


def test_bad_sizes_are_refused_with_a_clear_error():
    with pytest.raises(ValueError, match="does not divide"):
        PagedKVCache(1, 1, 4, num_blocks=None, block_size=24, capacity=128)
    assert PagedKVCache(1, 1, 4, num_blocks=None, block_size=16, capacity=128).num_blocks == 8
    with pytest.raises(ValueError, match="at least one block"):
        BlockAllocator(0)
    cache = PagedKVCache(1, 1, 1, num_blocks=2, block_size=2)
    with pytest.raises(CacheFull, match="all 2 blocks"):
        cache.reserve([], 0, 5)
    with pytest.raises(ValueError, match="holds at most 2 positions"):
        cache.gather(0, [0], 3)

"""A paged key/value cache (lesson 16; Kwon et al., PagedAttention, SOSP 2023): the cache of every sequence in
fixed-size BLOCKS of `block_size` positions, taken from one pool as the sequence grows, found through its BLOCK
TABLE (logical block i of the sequence lives in physical block table[i]), given back when it ends.

    cache = PagedKVCache(num_layers, num_kv_heads, d_head, num_blocks=64, block_size=16)
    table = []                                         # a new sequence: no block yet
    table, slot = cache.append_slot(table, length)     # room for its next position (a new block, copy-on-write)
    cache.write(layer, slots, k, v)                    # k, v (n, h_kv, d_head) into those slots
    k, v = cache.gather(layer, table, length)          # (h_kv, length, d_head): its keys and values, in order
    child = cache.fork(table)                          # a second sequence that SHARES the blocks (a common prefix)
    cache.free_sequence(table)                         # its blocks back to the pool (those nobody else holds)
    out = paged_attention(q, k_cache, v_cache, block_tables, lengths)   # one query per sequence, through tables

Physical position of a sequence's position t: block table[t // block_size], offset t % block_size, i.e. the
SLOT table[t // block_size] * block_size + t % block_size of the pool seen as one long row of slots.

The pool keeps a FREE LIST (the blocks nobody holds) and a REFERENCE COUNT per block (how many block tables list
it): a block goes back to the free list when its count falls to 0 (`release`), so a prefix shared by several
sequences (`fork`) stays as long as one of them holds it. A sequence that writes into a block it shares copies the
block first (COPY-ON-WRITE, `append_slot`): only the last block of a sequence is ever written, so only it is copied.
The two rules the lesson's learner writes, `release` and `append_slot`, take the bookkeeping as plain data (the
counts, the free list) and return it changed; the pool's methods apply them to itself.
"""
import torch

__all__ = ["BlockAllocator", "CacheFull", "PagedKVCache", "append_slot", "release", "paged_attention",
           "blocks_needed", "slots_of"]


class CacheFull(RuntimeError):
    """No free block is left in the pool (the scheduler must preempt a sequence, or wait)."""


def blocks_needed(length, block_size):
    """Blocks that hold `length` positions: ceil(length / block_size)."""
    return -(-int(length) // int(block_size))


def slots_of(table, positions, block_size):
    """The slots (a LongTensor like `positions`) of a sequence's `positions` through its block `table`."""
    table = torch.as_tensor(table, dtype=torch.long)
    positions = torch.as_tensor(positions, dtype=torch.long)
    return table[positions // block_size] * block_size + positions % block_size


class BlockAllocator:
    """The pool's bookkeeping: a free list of block ids and a reference count per block.

    allocate() -> a free block, its count set to 1 (CacheFull when none is left); share(b): one more holder;
    release(b): one holder less, back to the free list at 0 (`release` below, lesson 16's exercise)."""

    def __init__(self, num_blocks):
        if int(num_blocks) < 1:
            raise ValueError(f"a pool needs at least one block, got num_blocks={num_blocks}")
        self.num_blocks = int(num_blocks)
        self.free = list(range(self.num_blocks))[::-1]     # a stack: block 0 is handed out first
        self.refs = torch.zeros(self.num_blocks, dtype=torch.long)

    @property
    def num_free(self):
        return len(self.free)

    @property
    def num_used(self):
        return self.num_blocks - len(self.free)

    def allocate(self):
        return _take(self.refs, self.free)

    def share(self, block):
        if self.refs[block] < 1:
            raise ValueError(f"block {block} is free: only a block some sequence holds can be shared")
        self.refs[block] += 1

    def release(self, block):
        self.refs, self.free = release([block], self.refs, self.free)


def _take(refs, free):
    """A block off the end of the free list (in place), its count set to 1."""
    if not free:
        raise CacheFull(f"all {len(refs)} blocks of the cache are in use")
    block = free.pop()
    refs[block] = 1
    return block


def release(table, refs, free):
    """A sequence ends: each block of its `table` loses one holder, and the blocks nobody holds any more go back
    to the `free` list. refs (num_blocks,) long: holders per block. Returns (refs, free), updated."""
    refs, free = refs.clone(), list(free)
    for block in table:
        if refs[block] < 1:
            raise ValueError(f"block {block} is released but no sequence holds it (released twice?)")
        refs[block] -= 1
        if refs[block] == 0:
            free.append(int(block))
    return refs, free


class PagedKVCache(BlockAllocator):
    """The pool of one model: keys and values of every layer, (num_blocks, block_size, h_kv, d_head) each,
    and the allocator of its blocks. Sequences are block tables (lists of block ids) kept by their owner."""

    def __init__(self, num_layers, num_kv_heads, d_head, num_blocks, block_size, dtype=torch.float32,
                 device="cpu", capacity=None):
        """capacity: the tokens the pool must hold (a page of memory); when given, block_size must divide it and
        num_blocks = capacity // block_size."""
        if int(block_size) < 1:
            raise ValueError(f"block_size must be a whole number >= 1, got {block_size}")
        if capacity is not None:
            if capacity % block_size:
                raise ValueError(f"a block size of {block_size} does not divide the cache's {capacity} positions: "
                                 f"choose a block size that divides it (e.g. {_divisor_near(capacity, block_size)})")
            num_blocks = capacity // block_size
        super().__init__(num_blocks)
        self.num_layers, self.num_kv_heads, self.d_head = num_layers, num_kv_heads, d_head
        self.block_size = int(block_size)
        shape = (num_layers, self.num_blocks, self.block_size, num_kv_heads, d_head)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.peak_used = 0

    @property
    def bytes_per_block(self):
        return 2 * self.num_layers * self.block_size * self.num_kv_heads * self.d_head * self.k.element_size()

    def memory_bytes(self, blocks=None):
        """Bytes of `blocks` blocks (default: those in use now)."""
        return (self.num_used if blocks is None else blocks) * self.bytes_per_block

    def allocate(self):
        block = super().allocate()
        self.peak_used = max(self.peak_used, self.num_used)
        return block

    def copy_block(self, source, target):
        """Copy the keys and values of block `source` into block `target` (every layer)."""
        self.k[:, target] = self.k[:, source]
        self.v[:, target] = self.v[:, source]

    def layer_view(self, layer):
        """(k, v) of one layer, each (num_blocks * block_size, h_kv, d_head): the pool as one row of slots."""
        n = self.num_blocks * self.block_size
        return self.k[layer].view(n, self.num_kv_heads, self.d_head), self.v[layer].view(n, self.num_kv_heads,
                                                                                          self.d_head)

    def write(self, layer, slots, k, v):
        """k, v (n, h_kv, d_head) into the slots (n,) of layer `layer`."""
        keys, values = self.layer_view(layer)
        keys[slots] = k.to(keys.dtype)
        values[slots] = v.to(values.dtype)

    def gather(self, layer, table, length):
        """(k, v), each (h_kv, length, d_head): the keys and values of positions 0..length-1 of the sequence
        whose block table is `table`, in order."""
        if blocks_needed(length, self.block_size) > len(table):
            raise ValueError(f"a table of {len(table)} block(s) of {self.block_size} holds at most "
                             f"{len(table) * self.block_size} positions, not {length}")
        slots = slots_of(table, torch.arange(length), self.block_size).to(self.k.device)
        keys, values = self.layer_view(layer)
        return keys[slots].transpose(0, 1), values[slots].transpose(0, 1)

    def reserve(self, table, length, n):
        """Room for positions length .. length+n-1 of a sequence (blocks allocated, its last block copied if
        shared): returns (table, their slots (n,))."""
        slots = []
        for t in range(length, length + n):
            table, slot = self.append_slot(table, t)
            slots.append(slot)
        return table, torch.tensor(slots, dtype=torch.long)

    def append_slot(self, table, length):
        """Room for position `length` of the sequence of `table` (`append_slot` below, applied to this pool: its
        counts and free list replaced, the copy made). `table` changes in place; returns (table, slot)."""
        new, slot, self.refs, self.free, copy = append_slot(table, length, self.block_size, self.refs, self.free)
        if copy is not None:
            self.copy_block(*copy)
        self.peak_used = max(self.peak_used, self.num_used)
        table[:] = new
        return table, slot

    def fork(self, table):
        """A new table that shares every block of `table` (one more holder each): a common prefix, kept once."""
        for block in table:
            self.share(block)
        return list(table)

    def free_sequence(self, table):
        """Give back every block of a finished sequence (those another sequence still holds stay)."""
        self.refs, self.free = release(table, self.refs, self.free)
        return []

    def truncate(self, table, length):
        """Keep the blocks that hold positions 0..length-1, give back the others (a rejected draft's slots)."""
        keep = blocks_needed(length, self.block_size)
        self.refs, self.free = release(table[keep:], self.refs, self.free)
        return table[:keep]


def append_slot(table, length, block_size, refs, free):
    """Room for position `length` (the next one) of a sequence that holds `length` positions in the blocks of its
    `table`; refs and free: the pool's bookkeeping, as `release` takes them. A new block (off the end of the free
    list) when the last one is full or there is none; a private copy of the last block when another sequence shares
    it (copy-on-write). Returns (table, slot, refs, free, copy): the table, the slot of position `length`, the counts
    and free list after it, and copy = (old, new), the block whose keys and values go into the new one, or None."""
    table, refs, free, copy = list(table), refs.clone(), list(free), None
    if length % block_size == 0:                # the last block is full, or there is none: a new one
        table.append(_take(refs, free))
    elif refs[table[-1]] > 1:                   # shared: copy it before writing, and leave the original to the others
        new = _take(refs, free)
        copy = (table[-1], new)
        refs, free = release([table[-1]], refs, free)
        table[-1] = new
    return table, table[length // block_size] * block_size + length % block_size, refs, free, copy


def paged_attention(q, k_cache, v_cache, block_tables, lengths):
    """One query per sequence over its keys and values, read from the pool through its block table.

    q (B, h, d): the newest query of each sequence; k_cache, v_cache (num_blocks, block_size, h, d): the pool;
    block_tables (B, max_blocks) long: row b lists sequence b's blocks in order (entries past its last block are
    padding, -1); lengths (B,) long: the positions sequence b holds (its newest key included).
    Returns (B, h, d): softmax(q kᵀ / √d) v over positions 0..lengths[b]-1 of each sequence."""
    B, h, d = q.shape
    block_size = k_cache.size(1)
    t = torch.arange(block_tables.size(1) * block_size)                 # every position a table can name
    blocks = block_tables.clamp(min=0)[:, t // block_size]              # (B, T): the block of position t
    k = k_cache[blocks, t % block_size]                                 # (B, T, h, d)
    v = v_cache[blocks, t % block_size]
    scores = torch.einsum("bhd,bthd->bht", q, k) / d ** 0.5             # (B, h, T)
    scores = scores.masked_fill(t[None, None, :] >= lengths[:, None, None], float("-inf"))
    return torch.einsum("bht,bthd->bhd", scores.softmax(-1), v)


def _divisor_near(n, b):
    return min((d for d in range(1, n + 1) if n % d == 0), key=lambda d: (abs(d - b), d))

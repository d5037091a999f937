"""Lesson 16, exercise 1: attention through a block table.

    paged_attention(q (B, h, d), k_cache, v_cache (num_blocks, block_size, h, d), block_tables (B, max_blocks),
                    lengths (B,)) -> (B, h, d)

Sequence b's position t lives in block block_tables[b, t // block_size] at offset t % block_size; its query sees
positions 0 .. lengths[b] - 1. The check lays the sequences out in blocks at random (a random free list), fills
every slot that holds none of their positions with large junk (other sequences' blocks, free blocks, the unused end
of a last block), and compares the outputs with the course's. Its cases: a table wider than any sequence (block
size 2: a table read at the position stays in range and gives values of its own), tight tables of blocks of 4 and
3, lengths that end a block exactly, a sequence of one position. Where no registered mistake matches, it names the
property that fails: an output that moves when slots holding none of the sequence's positions change.
"""
import torch

from ... import paged_cache as ref
from ..core import Mistake, Mistakes, exercise, expect_shape, randn, single_threaded
from ..evaluation import Evaluation, call_naming
from ..lesson14.properties import by_property
from ..mistakes import Said
from ..torch_errors import INDEX_BOUNDS


def _attend(q, k, v, valid, scale=True):
    """q (B, h, d) over k, v (B, T, h, d) where valid (B, T)."""
    scores = torch.einsum("bhd,bthd->bht", q, k) / (q.size(-1) ** 0.5 if scale else 1.0)
    scores = scores.masked_fill(~valid[:, None, :], float("-inf"))
    return torch.einsum("bht,bthd->bhd", scores.softmax(-1), v)


def _wrong(kind):
    """paged_attention with one typical mistake."""
    def paged_attention(q, k_cache, v_cache, block_tables, lengths):
        bs = k_cache.size(1)
        tables = block_tables.clamp(min=0)
        t = torch.arange(int(lengths.max()) if kind == "by_position" else tables.size(1) * bs)
        blocks, offsets = tables[:, t // bs], t % bs
        if kind == "by_position":                      # the table read at the position, not at its block
            blocks = tables[:, t]
        elif kind == "offset":                         # block and offset swapped
            blocks, offsets = tables[:, t % bs], t // bs
        elif kind == "physical":                       # the pool read in order, as if it were contiguous
            blocks = (t // bs)[None, :].expand(len(tables), -1)
        elif kind == "first_table":                    # every sequence read through the first one's table
            blocks = tables[:1, t // bs].expand(len(tables), -1)
        if kind == "offset_is_block":                  # slot = block * B + t // B, in the pool as one row of slots
            slots = blocks * bs + t // bs
            k, v = (c.reshape(-1, *c.shape[2:])[slots] for c in (k_cache, v_cache))
        else:
            k, v = k_cache[blocks, offsets], v_cache[blocks, offsets]
        valid = {"no_length": torch.ones(len(tables), len(t), dtype=torch.bool),
                 "without_newest": t[None, :] < lengths[:, None] - 1,
                 "one_more": t[None, :] <= lengths[:, None]}.get(kind, t[None, :] < lengths[:, None])
        if kind == "softmax_heads":                    # the weights normalised over the heads, not the positions
            scores = torch.einsum("bhd,bthd->bht", q, k) / q.size(-1) ** 0.5
            w = scores.masked_fill(~valid[:, None, :], -1e9).softmax(1)
            return torch.einsum("bht,bthd->bhd", w, v)
        if kind == "mask_after_softmax":               # the softmax over every slot, the mask applied after it
            w = (torch.einsum("bhd,bthd->bht", q, k) / q.size(-1) ** 0.5).softmax(-1) * valid[:, None, :]
            return torch.einsum("bht,bthd->bhd", w, v)
        return _attend(q, k, v, valid, scale=kind != "no_scale")
    return paged_attention


M = Mistakes(
    Mistake("by_position", "the block table is read at the POSITION: position t is in the table's entry "
            "t // block_size (its logical block), at offset t % block_size of that block",
            hint="blocks = block_tables[:, t // block_size]", shows=_wrong("by_position")),
    Mistake("offset", "the block and the offset are swapped: position t is in logical block t // block_size, at "
            "offset t % block_size inside it", shows=_wrong("offset")),
    Mistake("offset_is_block", "position t is read at offset t // block_size of its block: t // block_size numbers "
            "the block in the table; the offset inside the block is t % block_size",
            hint="slot = block_tables[b, t // block_size] * block_size + t % block_size",
            shows=_wrong("offset_is_block")),
    Mistake("physical", "the pool is read in its own order (blocks 0, 1, 2, ...), as if each sequence were stored "
            "contiguously: a sequence's blocks are wherever its block table says", shows=_wrong("physical")),
    Mistake("first_table", "every sequence is read through the FIRST sequence's block table: row b of "
            "block_tables is sequence b's", shows=_wrong("first_table")),
    Mistake("no_length", "the query attends to every slot its table names, the unused end of its last block and "
            "the padding too: only positions 0 .. lengths[b] - 1 hold keys",
            hint="mask the scores where t >= lengths[b] (set them to -inf)", shows=_wrong("no_length")),
    Mistake("without_newest", "the newest key is left out: lengths[b] counts the positions INCLUDING the query's "
            "own, which was written before the attention; keep t < lengths[b]", shows=_wrong("without_newest")),
    Mistake("one_more", "one slot too many is attended: positions 0 .. lengths[b] - 1 hold keys, position "
            "lengths[b] does not", shows=_wrong("one_more")),
    Mistake("no_scale", "the scores are not scaled by 1/√d", shows=_wrong("no_scale")),
    Mistake("softmax_heads", "the weights are normalised over the heads: each head's weights must sum to 1 over "
            "the positions (the last axis of the scores (B, h, T))", shows=_wrong("softmax_heads")),
    Mistake("junk", "the output of sequence {b} changed when slots that hold none of its positions changed (other "
            "sequences' blocks, free blocks or the unused end of its last block): it must read only its positions "
            "0 .. lengths[b] - 1, through its table", shows=_wrong("mask_after_softmax")),
)
_BY_VALUES = ["by_position", "offset", "offset_is_block", "physical", "first_table", "no_length", "without_newest",
              "one_more", "no_scale", "softmax_heads"]
# block size, number of blocks, table width, lengths
CASES = [(2, 30, 12, (9, 4, 1)), (4, 16, 5, (13, 8, 6)), (3, 14, 4, (7, 3, 9, 1))]


def _layout(g, block_size, num_blocks, width, lengths, h=2, d=4):
    """Random blocks for each sequence (in the order a shuffled free list gives them), junk everywhere else."""
    order = torch.as_tensor(g.permutation(num_blocks))
    tables = torch.full((len(lengths), width), -1, dtype=torch.long)
    used = 0
    for b, n in enumerate(lengths):
        k = ref.blocks_needed(n, block_size)
        tables[b, :k] = order[used:used + k]
        used += k
    k_cache = randn(g, num_blocks, block_size, h, d, scale=8.0)     # junk: large, so that reading it shows
    v_cache = randn(g, num_blocks, block_size, h, d, scale=8.0)
    keep = torch.zeros(num_blocks, block_size, dtype=torch.bool)
    for b, n in enumerate(lengths):
        t = torch.arange(n)
        keep[tables[b, t // block_size], t % block_size] = True
    k_cache[keep] = randn(g, int(keep.sum()), h, d)
    v_cache[keep] = randn(g, int(keep.sum()), h, d)
    return randn(g, len(lengths), h, d), k_cache, v_cache, tables, torch.tensor(lengths), keep


def _probes(ev, answer, q, k_cache, v_cache, tables, lengths, keep, got):
    def junk():
        k2, v2 = k_cache.clone(), v_cache.clone()
        k2[~keep] = -k2[~keep] * 3
        v2[~keep] = -v2[~keep] * 3
        moved = (ev.call(answer, q, k2, v2, tables, lengths) - got).abs().flatten(1).amax(1) > 1e-4
        return M.junk.at(b=int(moved.nonzero()[0])) if moved.any() else None

    return (junk,)


def _crashes(inputs, tables, block_size, num_blocks):
    """The index errors of typical mistakes; `inputs`: the call's arguments (a crash of the pool seen as one row of
    slots is offset_is_block's where that mistake crashes alike on them)."""
    def named(match):
        size = int(match["size"])
        if size == tables.size(1):
            return M.by_position
        if size == num_blocks * block_size:
            try:
                M.offset_is_block.run(*inputs)
            except IndexError as error:
                if match[0] in str(error):
                    return M.offset_is_block
            return Said("slot_range", f"a slot past the pool's end ({size} slots): the slot of position t is "
                                      "table[t // block_size] * block_size + t % block_size, below "
                                      "num_blocks * block_size")
        return M.offset if size == block_size else None
    return [(INDEX_BOUNDS, named)]


def _gathered(q, k_cache, v_cache, block_tables, lengths):
    """A right answer written another way: each sequence's keys gathered one position at a time."""
    bs, out = k_cache.size(1), []
    for b in range(q.size(0)):
        n = int(lengths[b])
        k = torch.stack([k_cache[block_tables[b, t // bs], t % bs] for t in range(n)])      # (n, h, d)
        v = torch.stack([v_cache[block_tables[b, t // bs], t % bs] for t in range(n)])
        w = (torch.einsum("hd,thd->ht", q[b], k) / q.size(-1) ** 0.5).softmax(-1)
        out.append(torch.einsum("ht,thd->hd", w, v))
    return torch.stack(out)


@exercise("attention through a block table", name="paged_attention", reference=ref.paged_attention, mistakes=M,
          right=[_gathered])
@single_threaded
def paged_attention(ev: Evaluation, answer):
    """answer(q, k_cache, v_cache, block_tables, lengths) -> (B, h, d)."""
    tests = 0
    for seed, (bs, n, width, lengths) in enumerate(CASES):
        q, k_cache, v_cache, tables, lens, keep = _layout(ev.rng(seed), bs, n, width, lengths)
        want = ref.paged_attention(q, k_cache, v_cache, tables, lens)
        inputs = (q, k_cache, v_cache, tables, lens)
        got = call_naming(ev, _crashes(inputs, tables, bs, n), answer, *inputs)
        expect_shape(got, tuple(q.shape), f"paged_attention(...) with {len(lengths)} sequences")
        with by_property(*_probes(ev, answer, q, k_cache, v_cache, tables, lens, keep, got)):
            ev.expect_close(got, want, f"the output (block size {bs}, lengths {list(lengths)})",
                            mistakes=M.variants(_BY_VALUES, q, k_cache, v_cache, tables, lens))
        tests += 1
    return tests

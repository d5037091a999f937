"""Exercise 2's crashes, named from what torch's words show (torch_errors.py), each a registry entry with the wrong
answer that shows it: a tensor d_k wide receiving the output's d_v-wide rows; a failure with a mask only (it ran
without one: a padding mask sliced on its query axis before it is broadcast, or a full mask's tile taken wrong); a
tensor made for a FULL block of queries (or keys) meeting the last, shorter block (the answer runs when every block of
those is full); one number per query lined up with the values' features; a tile meeting the whole sequence; the
weights' tile and the values' block disagreeing on the keys; two tensors of a tile that do not line up, where nothing
singles out a cause. torch's line stays below the words."""
import contextlib
import re

from ..core import ExerciseError, Mistake, Mistakes
from ..evaluation import RAISED, renamed
from ..torch_errors import BMM, BROADCAST, EXPAND, found
from .tiled_attention_mistakes import learner

CRASHES = Mistakes(
    Mistake("wide_out", "a tensor {d_k} wide (the width of q and k, d_k) receives rows of the output, which are "
            "d_v = {d_v} wide: out and acc have the values' width", hint="q.new_zeros(*q.shape[:-1], v.shape[-1]), "
            "not torch.zeros_like(q)", shows=learner("out_like_q")),
    Mistake("mask_not_broadcast", "your function fails with a mask of shape {shape}, and ran without one: a mask need "
            "only BROADCAST to (..., T_q, T_k) (a padding mask has size 1 on the query axis), so a tile of it is taken "
            "after broadcasting, the queries' rows first, then the keys' columns",
            hint="torch.broadcast_to(mask, (*lead, T_q, T_k))[..., i0:i1, j0:j1]", shows=learner("mask_query_rows")),
    Mistake("mask_tile", "your function fails with a mask of shape {shape} (as large as the scores), and ran without "
            "one: the tile of the mask is the tile's queries (its rows) and keys (its columns), the same block as "
            "the tile of scores", hint="mask[..., i0:i1, j0:j1]", shows=learner("mask_keys_first")),
    Mistake("tile_sizes", "two tensors of your tile loop do not line up: one has {a} where the other has {b} "
            "(block_q = {bq}, block_k = {bk}; the last blocks hold {last_q} queries and {last_k} keys): every tensor "
            "of a tile is its i1 − i0 queries by its j1 − j0 keys, in that order, rows first",
            shows=learner("keep_transposed")),
    Mistake("full_block", "a tensor made for a full block of {n} {what} meets the last block of {what}, which holds "
            "only {last} (T = {T} is not a multiple of {n}): everything made per block (m, l, acc, the causal mask of "
            "a tile) has the block's own size, shorter at the end (with every block of {what} full, your function "
            "runs)", hint="rows i1 - i0 with i1 = min(i0 + block_q, "
            "T_q) (and j1 - j0 for the keys), not block_q", shows=learner("mask_full_block")),
    Mistake("per_query_axis", "a vector of one number per query ({rows} of them: the rescale factor, l, or m) meets a "
            "tensor whose last axis is d_v = {d_v} (acc, or the output): it lines up with the values' features, not "
            "with the queries; one number per query needs an axis of size 1 after it",
            hint="rescale[..., None], ell[..., None]", shows=learner("no_axis")),
    Mistake("slices", "a tensor of the whole sequence ({T} positions) meets a tile of {b}: each tile takes its block "
            "of queries from q and its block of keys from k and v", hint="q[..., i0:i1, :], k[..., j0:j1, :], "
            "v[..., j0:j1, :]", shows=learner("q_whole")),
    Mistake("tile_keys", "the tile of weights P and the block of values disagree on the number of keys (P has one "
            "column per key of the tile): the values are the same block of keys as the scores' keys",
            hint="k[..., j0:j1, :] and v[..., j0:j1, :], the same j0:j1", shows=learner("v_block_q")),
)


def _sizes(text):
    match = found(BROADCAST, text)
    return {int(match["a"]), int(match["b"])} if match else set()


def _up(T, n):
    return -(-T // n) * n


def symptom(text, mask, block_q, T_q, d_v, block_k, T_k, d_k, runs_at=None):
    """The entry (its words filled in) that torch's message `text` shows, or None. runs_at(T_q, T_k): whether the
    answer runs on sequences of those lengths: a tensor made for a full block of queries fits when every block of
    queries is full (the keys as they were), and likewise for the keys; a tile the wrong way round fits neither."""
    raised = text.partition(": ")[2]
    wide = found(EXPAND, raised)
    if wide and int(wide["old"]) == d_v != int(wide["new"]) == d_k:
        return CRASHES.wide_out.at(d_k=wide["new"], d_v=d_v)
    if mask is not None:
        full_size = mask.dim() >= 2 and mask.shape[-2] == T_q
        return (CRASHES.mask_tile if full_size else CRASHES.mask_not_broadcast).at(shape=tuple(mask.shape))
    sizes = _sizes(raised)
    lengths = {"queries": (_up(T_q, block_q), T_k), "keys": (T_q, _up(T_k, block_k))}
    full = [(n, what, T) for n, what, T in ((block_q, "queries", T_q), (block_k, "keys", T_k))
            if n and T % n and sizes == {n, T % n} and runs_at is not None and runs_at(*lengths[what])]
    if full:
        n, what, T = full[0]
        return CRASHES.full_block.at(n=n, what=what, last=T % n, T=T)
    rows = sizes & {block_q, T_q % block_q} - {d_v}
    if len(sizes) == 2 and d_v in sizes and d_v != block_q and rows:
        return CRASHES.per_query_axis.at(rows=min(rows), d_v=d_v)
    if len(sizes) == 2 and sizes <= {block_q, block_k, T_q % block_q, T_k % block_k}:   # (a tile the wrong way round)
        a, b = sorted(sizes)
        return CRASHES.tile_sizes.at(a=a, b=b, bq=block_q, bk=block_k, last_q=T_q % block_q or block_q,
                                     last_k=T_k % block_k or block_k)
    numbers = [int(n) for n in re.findall(r"\d+", raised.partition("\n")[0])]
    blocks = {block_q, block_k} & set(numbers)
    if T_q in numbers and blocks and T_q not in (block_q, block_k):
        return CRASHES.slices.at(T=T_q, b=min(blocks))
    if found(BMM, raised):
        return CRASHES.tile_keys.said()
    return None


@contextlib.contextmanager
def forward_failure(mask, block_q, T_q, d_v, block_k, T_k, d_k, runs_at=None):
    """The tiled forward pass's crashes, named (see `symptom`)."""
    try:
        yield
    except ExerciseError as error:
        said = symptom(str(error), mask, block_q, T_q, d_v, block_k, T_k, d_k, runs_at) \
            if str(error).startswith(RAISED) else None
        if said is None:
            raise
        raise renamed(error, said) from None

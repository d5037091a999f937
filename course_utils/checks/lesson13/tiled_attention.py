"""Lesson 13, exercise 2: tiled attention, FlashAttention-2's forward pass.

    tiled_attention(q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v), block_q, block_k, causal=False,
                    mask=None) -> (out (..., T_q, d_v), lse (..., T_q))

Blocks of block_q queries, inside them blocks of block_k keys; m, l and acc per block of queries, out = acc / l once
at the end; lse = m + log l. causal: the tiles above the diagonal are never computed, the diagonal ones get the
element-wise mask (key j visible from query i iff j <= i, positions in the whole sequence); mask: broadcastable to
(..., T_q, T_k), True = may attend; a query with no key gets a zero output and lse = −∞.

The check compares out and lse with the formula (formula.py) for six tile shapes (square, tall, wide, larger than
T, 1 x T), causal or not, with padding (a whole sequence padded) and a mask with empty rows, in cross-attention
(T_q != T_k, d_v != d_k) and in float64; and it tests the two points (probes.py): nothing of size T_q x T_k
created (64 x 64, tiles of 8 x 8; and tiles of block_q x block_k, not block_q x block_q), and with causal=True the
tiles above the diagonal never computed (later values set to +inf: a computed, masked tile gives 0 · inf = NaN).
The wrong answers are in tiled_attention_mistakes.py, the crashes' entries in tiled_attention_crashes.py.
"""
import functools

import numpy as np
import torch

from ... import efficient_attention as ref
from ..core import (
    ExerciseError,
    Mistake,
    Mistakes,
    exercise,
    expect,
    expect_returns,
    expect_shape,
    randn,
    single_threaded,
    to_numpy,
)
from ..evaluation import Evaluation
from ..expectations import explained, fail
from .crashes import naming_crashes
from .formula import expected as formula
from .formula import padding_mask
from .naming import by_values, same
from .probes import (
    block_ranges,
    forward_part,
    largest_tensor,
    moves_earlier_outputs,
    quadratic_symptom,
    tail_missing,
    tile_ranges,
    tiles_above_computed,
    tiles_skipped,
)
from .tiled_attention_crashes import CRASHES, forward_failure
from .tiled_attention_mistakes import (
    FORMS,
    empty_rows_one,
    every_tile,
    learner,
    lse_of_empty_nan,
    peeks,
    q_as_out,
    returns_p,
    square_tiles,
    whole_scores,
)
from .tiled_attention_right import flash1, keys_outside

_SKIP = "a tile is skipped when its first key comes after the block's last query, j0 > i1 − 1"
_SAFE = "torch.where(torch.isneginf(m_new), 0.0, m_new)"
_RESCALE = "l = l·e^(m_old − m_new) + rowsum(P) and acc = acc·e^(m_old − m_new) + P V_j"
M = CRASHES + Mistakes(
    # what it returns
    Mistake("returns_p", "your forward pass returns a T_q x T_k tensor besides out and lse: nothing of that size is "
            "kept for the backward pass; L, one number per query, is enough to recompute P tile by tile",
            shows=returns_p),
    Mistake("q_as_out", "out is q itself: the output is the weighted sum of the values, one row per query, of the "
            "values' width d_v = {d_v}", shows=q_as_out),
    Mistake("dtype", "with float64 inputs your function returns {what} in {dtype}: its tensors are made in q's dtype "
            "(section 4 runs it in float64)", hint="q.new_zeros(...), q.new_full(...): torch.zeros and torch.full "
            "make float32", shows=FORMS.shows("ok")),
    # the running statistics
    Mistake("acc_not_rescaled", "the accumulator is not rescaled: when the maximum grows, acc is rescaled by "
            "e^(m_old − m_new) exactly as l is (it holds Σ exp(s − m_old) v, measured from the old maximum), "
            + _RESCALE,
            shows=FORMS.shows("acc_not_rescaled")),
    Mistake("l_not_rescaled", "l is not rescaled: when the maximum grows, l is rescaled by e^(m_old − m_new) exactly "
            "as acc is (both are sums measured from the running maximum), " + _RESCALE,
            shows=FORMS.shows("l_not_rescaled")),
    Mistake("m_first", "neither l nor acc is rescaled when the maximum grows: their factor e^(m_old − m_new) comes "
            "out 1, as it does when m is set to m_new before the factor is computed; the factor comes from the OLD m, "
            "and m becomes m_new only after l and acc are rescaled", shows=FORMS.shows("m_first")),
    Mistake("m_not_updated", "m is never updated (it stays −∞), so e^(m − m_new) = 0 wipes acc and l at every tile: "
            "after each tile m becomes m_new", shows=FORMS.shows("m_not_updated")),
    Mistake("p_old_max", "P is measured from the OLD maximum, exp(S − m_old): it is measured from the maximum after "
            "this tile, P = exp(S − m_new), the one l and acc are rescaled to", shows=FORMS.shows("p_old_max")),
    Mistake("divide_inside", "the output is divided by l inside the loop over the blocks of keys (normalised at every "
            "step): acc stays unnormalised while the blocks of keys come in, and out = acc / l once, after the last",
            shows=FORMS.shows("divide_inside")),
    Mistake("state_outside", "m, l and acc are not started afresh for each block of queries (made once before the "
            "loop, then only sliced): the next block inherits the last one's running statistics; each block of "
            "queries starts from m = −∞, l = 0, acc = 0 for its own i1 − i0 queries",
            shows=FORMS.shows("state_outside")),
    # the scale
    Mistake("scale_d", "the scores are divided by d_k instead of √d_k: S_ij = Q_i K_jᵀ / √d_k",
            shows=FORMS.shows("scale_d")),
    Mistake("no_scale", "the scores are not scaled: S_ij = Q_i K_jᵀ / √d_k", shows=FORMS.shows("no_scale")),
    Mistake("scale_times", "the scores are multiplied by √d_k: they are divided by it, S_ij = Q_i K_jᵀ / √d_k",
            shows=FORMS.shows("scale_times")),
    Mistake("scale_half_d", "the scores are scaled by 1/(2·d_k): a power of −1/2 written without brackets is "
            "(1/d_k)/2 by precedence; the scale is 1/√d_k", hint="d_k ** -0.5, or 1 / math.sqrt(d_k)",
            shows=FORMS.shows("scale_half_d")),
    Mistake("scale_dv", "the scores are divided by √d_v, the width of the values: the scale is √d_k, the width of q "
            "and k", hint="math.sqrt(q.shape[-1])", shows=FORMS.shows("scale_dv")),
    # the blocks
    Mistake("drop_tail", "the last positions are missing: when the block size does not divide T, the last block is "
            "shorter, and it is visited too", hint="range(0, T, block), and slice up to min(start + block, T)",
            shows=FORMS.shows("drop_tail")),
    Mistake("drop_last_q", "no output is computed for the last queries ({rows}: all 0): the loop over the blocks of "
            "queries stops before them; every query is in a block (the last one shorter when block_q does not "
            "divide T_q)", hint="range(0, T_q, block_q) and i1 = min(i0 + block_q, T_q)",
            shows=FORMS.shows("drop_last_q")),
    Mistake("drop_last_keys", "the last, shorter block of keys is never visited (only T_k // block_k full blocks)",
            hint="j0 in range(0, T_k, block_k), j1 = min(j0 + block_k, T_k)", shows=FORMS.shows("drop_last_keys")),
    Mistake("tk_from_q", "only the first T_q keys are read: the number of keys is T_k, the keys' own length (they "
            "differ in cross-attention, where the keys come from another sequence)",
            hint="T_k = k.shape[-2]; range(0, T_k, block_k)", shows=FORMS.shows("tk_from_q")),
    # masked queries
    Mistake("no_guard", "a query whose every key is masked gives NaN (0/0, or exp(−∞ − (−∞))): such a query has "
            "l = 0; a safe maximum (0 where m = −∞) keeps l at 0, and its output is 0", hint="shift = " + _SAFE +
            "; out = torch.where(l > 0, acc / l, 0)", shows=FORMS.shows("no_guard")),
    Mistake("no_safe", "the queries whose first tiles of keys are all masked lose the keys they do see: at such a "
            "tile m_new = −∞ and exp(−∞ − (−∞)) is NaN, which spoils l and acc for the rest of the row; a safe "
            "maximum, 0 where m_new = −∞, keeps them 0", hint=_SAFE, shows=FORMS.shows("no_safe")),
    Mistake("nan_out", "out is NaN for {rows}: attention's output is a weighted mean of values, never NaN; NaN comes "
            "from exp(−∞ − (−∞)) where a query's maximum so far is −∞ (a safe maximum, 0 there, avoids it), from "
            "0/0 for a query with no key (l = 0: its output is 0), or from 0·∞", hint=_SAFE,
            shows=learner("flipped+unguarded")),
    Mistake("empty_rows", "only the rows of queries with no key allowed are wrong: their output is zeros (they have "
            "l = 0: 0, not acc / l)", shows=empty_rows_one),
    # the masks
    Mistake("wrong_side", "the tiles BELOW the diagonal are skipped: with a causal mask, " + _SKIP + " (above the "
            "diagonal); the tiles below it are fully visible", shows=FORMS.shows("wrong_side")),
    Mistake("skip_ge", "the causal test is off by one at a block edge: a tile whose first key j0 is the block's LAST "
            "query i1 − 1 was skipped, though that query sees that key (j ≤ i): " + _SKIP,
            shows=FORMS.shows("skip_ge")),
    Mistake("skip_diag", "the tiles on the diagonal are skipped: a tile that holds both earlier and later keys is "
            "computed, with the element-wise causal mask; " + _SKIP, shows=FORMS.shows("skip_diag")),
    Mistake("diag_full", "the tiles on the diagonal are treated as fully visible: a tile that holds both earlier and "
            "later keys needs the element-wise causal mask (key j visible from query i iff j ≤ i) before the "
            "softmax", shows=FORMS.shows("diag_full")),
    Mistake("local_idx", "the element-wise causal mask is built from positions within the tile (0, 1, ...) instead "
            "of the whole sequence: it compares the GLOBAL positions, key j0 + c against query i0 + r (they differ "
            "when the tiles are not square or not aligned)", hint="torch.arange(j0, j1) against torch.arange(i0, "
            "i1)", shows=FORMS.shows("local_idx")),
    Mistake("inverted_causal", "the causal mask is inverted: key j is visible from query i iff j ≤ i (on and below "
            "the diagonal), and −∞ goes where a key is NOT visible", shows=FORMS.shows("inverted_causal")),
    Mistake("strict_causal", "the element-wise causal mask leaves out the diagonal: key j is visible from query i iff "
            "j ≤ i, the query's own position included", shows=FORMS.shows("strict_causal")),
    Mistake("causal_ignored", "with causal=True the queries see later keys: the tiles above the diagonal are skipped "
            "and the diagonal tiles masked element by element", shows=FORMS.shows("causal_ignored")),
    Mistake("leak", "with causal=True the outputs of earlier positions change when only later keys and values "
            "change: query i sees keys j ≤ i only", shows=peeks),
    Mistake("skipped_visible", "the causal test skips tiles that hold keys their queries may see: {tiles} (found by "
            "changing those keys' values: the outputs of the queries that see them did not move). " + _SKIP + ", the "
            "tiles on the diagonal included", hint="if causal and j0 > i1 - 1: continue",
            shows=learner("first_query")),
    Mistake("causal_part", "out is right without the causal mask and wrong with it: the slip is in the causal part, "
            "the tiles skipped (" + _SKIP + ") or the diagonal tiles' element-wise mask (key j visible from query i "
            "iff j ≤ i, positions in the whole sequence)", shows=learner("or")),
    Mistake("mask_ignored", "the mask is ignored: the scores of masked keys are −∞ in every tile",
            hint="s.masked_fill(~mask[..., i0:i1, j0:j1], float('-inf'))", shows=FORMS.shows("mask_ignored")),
    Mistake("inverted_mask", "the mask is inverted: True means 'may attend', so −∞ goes where the mask is False",
            hint="s.masked_fill(~mask_tile, float('-inf'))", shows=FORMS.shows("inverted_mask")),
    Mistake("mask_part", "out is right without the mask and wrong with it: the slip is in the mask, broadcast to "
            "(..., T_q, T_k), its tile taken at the tile's queries and keys, −∞ where it is False (True = may "
            "attend)", shows=learner("mask_first_keys")),
    Mistake("weights_sum", "with every value equal to 1 the output should be 1 for every query that sees a key, and "
            "it is not for {queries}: a query's weights sum to 1 over its keys, which needs every block of keys "
            "counted, l and acc rescaled together by e^(m_old − m_new), and out = acc / l once, after the last block "
            "of keys", shows=learner("l_counts")),
    # lse
    Mistake("lse_m", "lse is the running maximum m alone: the log-sum-exp is L = m + log l",
            shows=FORMS.shows("lse_m")),
    Mistake("lse_log_l", "lse is log l alone: the maximum it was measured from is added, L = m + log l",
            shows=FORMS.shows("lse_log_l")),
    Mistake("lse_l", "lse is m + l: the log-sum-exp is L = m + log l", shows=FORMS.shows("lse_l")),
    Mistake("lse_empty_zero", "the log-sum-exp of a query with no key allowed is −∞ (the log of a sum of nothing: "
            "m = −∞, l = 0), not a number", shows=FORMS.shows("lse_empty_zero")),
    Mistake("lse_nan", "the log-sum-exp of a query with no key allowed is NaN: it is −∞ (m = −∞, l = 0, so "
            "L = m + log l = −∞); NaN comes from exp(−∞ − (−∞)) (a safe maximum keeps l at 0) or from −∞ − (−∞)",
            hint=_SAFE, shows=lse_of_empty_nan),
    # the point of tiling
    Mistake("quadratic", "{symptom}: ONE tile of scores at a time (block_q x block_k), and the causal mask of a tile "
            "built from its positions; nothing of size T_q x T_k exists (the point of tiling: memory that grows as T, "
            "not T²)", shows=whole_scores),
    Mistake("block_k_ignored", "your tiles are block_q x block_q, a tensor of shape {shape} with block_q={bq} and "
            "block_k={bk}: the blocks of keys have block_k keys, so that each tile of scores is block_q x block_k",
            hint="j0 in range(0, T_k, block_k), j1 = min(j0 + block_k, T_k)", shows=square_tiles),
    Mistake("all_tiles", "with causal=True the tiles above the diagonal are computed (and masked): the outputs of "
            "queries {rows} turned NaN or changed when only the values of later keys, which they may not see, were "
            "set to inf (0 · inf = NaN: their weights of 0 were multiplied by those values). Such a tile is never "
            "computed, the point of the causal part: " + _SKIP, hint="if causal and j0 > i1 - 1: continue, before "
            "computing anything", shows=every_tile),
    Mistake("extra_tile", "the causal test is off by one at a block edge: the tile just above the diagonal (first key "
            "j0 = i1, right after the block's last query) is computed, {rows} (found by setting those keys' values "
            "to inf: 0 · inf = NaN): " + _SKIP, shows=FORMS.shows("extra_tile")),
)
_OUT_KEYS = ("acc_not_rescaled", "l_not_rescaled", "divide_inside", "scale_d", "no_scale", "scale_times",
             "drop_tail", "no_guard", "p_old_max", "no_safe", "tk_from_q", "m_first", "state_outside",
             "drop_last_keys", "scale_dv", "scale_half_d")
_CAUSAL_KEYS = ("wrong_side", "skip_ge", "skip_diag", "diag_full", "local_idx", "inverted_causal", "causal_ignored",
                "strict_causal")
_LSE_KEYS = ("lse_m", "lse_log_l", "lse_l", "lse_empty_zero")


def _queries(where):
    """'every query' or 'n of the N queries' for a boolean (..., T_q) of the queries concerned."""
    n, total = int(where.sum()), where.size
    return "every query" if n == total else f"{n} of the {total} queries (all sequences and heads together)"


def _returned(result, expected, T_q, T_k):
    """(out, lse) from the answer's result; a T_q x T_k tensor among them is named."""
    if isinstance(result, (tuple, list)) and len(result) > 2:
        expect(not any(hasattr(r, "shape") and tuple(r.shape[-2:]) == (T_q, T_k) for r in result), M.returns_p)
    return expect_returns(result, expected, ("out", "lse"))


def _out_of(ev: Evaluation, bq, bk):
    """run(answer, q, k, v) -> the output (..., T_q, d_v) of a causal answer (for the probes)."""
    def run(answer, q, k, v):
        result = ev.call(answer, q, k, v, bq, bk, causal=True)
        return result[0] if isinstance(result, (tuple, list)) else result
    return run


def _runs_at(ev: Evaluation, answer, q, v, bq, bk, causal, T_q, T_k):
    """Whether the answer runs on T_q queries and T_k keys (the other sizes as in q and v)."""
    g = ev.rng(450)
    lead, d, d_v = q.shape[:-2], q.shape[-1], v.shape[-1]
    try:
        ev.call(answer, randn(g, *lead, T_q, d), randn(g, *lead, T_k, d), randn(g, *lead, T_k, d_v), bq, bk,
                causal=causal)
    except ExerciseError:
        return False
    return True


def _check_forward(ev: Evaluation, answer, q, k, v, bq, bk, causal=False, mask=None, what="", plain_passed=False):
    """One call of the answer, compared with the formula; its mistakes named. plain_passed: the answer passed these
    very inputs without the causal mask (which rules out the mistakes that show there)."""
    T_q, T_k, d_v = q.shape[-2], k.shape[-2], v.shape[-1]
    expected = formula(q, k, v, causal, mask)
    runs_at = functools.partial(_runs_at, ev, answer, q, v, bq, bk, causal)
    with forward_failure(mask, bq, T_q, d_v, bk, T_k, q.shape[-1], runs_at):
        result = ev.call(answer, q, k, v, bq, bk, causal=causal, mask=mask)
    out, lse = _returned(result, expected, T_q, T_k)
    if hasattr(out, "shape") and tuple(out.shape) == tuple(q.shape) != tuple(expected[0].shape) and same(out, q):
        fail(M.q_as_out.at(d_v=d_v))
    expect_shape(out, tuple(expected[0].shape), "out")
    expect_shape(lse, tuple(expected[1].shape), "lse (one number per query)")
    keys = _OUT_KEYS + (_CAUSAL_KEYS if causal else ()) + (("mask_ignored", "inverted_mask") if mask is not None
                                                            else ()) + ("m_not_updated",)
    inputs = (q, k, v, bq, bk, causal, mask)
    plain = formula(q, k, v, False, mask)[0] if plain_passed else None

    def ruled_out(key):
        return plain is not None and not any(same(o, plain) for _, o in FORMS.values([key], q, k, v, bq, bk, False,
                                                                                     mask, pick=lambda r: r[0]))

    by_values(out, expected[0], M, FORMS.values(keys, *inputs, pick=lambda r: r[0]), "out", ruled_out=ruled_out)
    tail = tail_missing(out, expected[0])
    expect(tail is None, M.drop_last_q.at(rows=tail))
    if causal and not same(out, expected[0]):
        expect(not moves_earlier_outputs(ev, answer, q, k, v, T_q // 2, _out_of(ev, bq, bk)), M.leak)
        skipped = tiles_skipped(ev, answer, q, k, v, bq, bk, _out_of(ev, bq, bk))
        expect(not skipped, M.skipped_visible.at(tiles=tile_ranges(skipped, bq, bk, T_q, T_k)))
    nan = np.isnan(to_numpy(out)).any(axis=-1)
    expect(not nan.any(), M.nan_out.at(rows=_queries(nan)))
    empty = torch.isneginf(expected[1])
    if empty.any() and not same(out, expected[0]):
        wrong = ~np.isclose(to_numpy(out), to_numpy(expected[0]), atol=1e-5, rtol=1e-4).all(axis=-1)
        expect(not (wrong <= to_numpy(empty)).all(), M.empty_rows)
    with explained(functools.partial(forward_part, ev, answer, q, k, v, bq, bk, causal, mask,
                                     lambda causal, mask: formula(q, k, v, causal, mask), M)):
        ev.expect_close(out, expected[0], f"out{what} (block_q={bq}, block_k={bk}, causal={causal})")
    by_values(lse, expected[1], M, FORMS.values(_LSE_KEYS, *inputs, pick=lambda r: r[1]), "lse")
    expect(not np.isnan(to_numpy(lse)[to_numpy(empty)]).any(), M.lse_nan)
    expect(same(torch.isneginf(torch.as_tensor(to_numpy(lse))), empty), M.lse_empty_zero)
    ev.expect_close(lse, expected[1], f"lse{what}, the log-sum-exp L = m + log l of each query (block_q={bq}, "
                                      f"block_k={bk}, causal={causal})")


def _point(ev: Evaluation, answer):
    """The points of tiling: no T_q x T_k tensor (64 x 64, tiles of 8 x 8), tiles of block_q x block_k, and with
    causal=True no tile above the diagonal computed."""
    g = ev.rng(500)
    q, k, v = randn(g, 1, 2, 64, 8), randn(g, 1, 2, 64, 8), randn(g, 1, 2, 64, 8)
    for causal, mask in ((False, None), (True, (torch.arange(64) < 50)[None, None, None, :])):
        with forward_failure(mask, 8, 64, 8, 8, 64, 8):
            _, elements, shape = largest_tensor(ev, answer, q, k, v, 8, 8, causal=causal, mask=mask)
        symptom = quadratic_symptom(elements, shape, (1, 2), 64, 64, "your tiled_attention")
        expect(symptom is None, M.quadratic.at(symptom=symptom))
    # block_k sizes the blocks of keys: with tall tiles (32 x 2) a tile of 32 x 32 is the largest tensor of all
    g = ev.rng(510)
    q, k, v = randn(g, 1, 1, 128, 4), randn(g, 1, 1, 128, 4), randn(g, 1, 1, 128, 4)
    _, _, shape = largest_tensor(ev, answer, q, k, v, 32, 2)
    expect(shape is None or tuple(shape[-2:]) != (32, 32), M.block_k_ignored.at(shape=shape, bq=32, bk=2))
    # the causal part: tiles above the diagonal never computed (later values set to inf)
    g = ev.rng(200)
    q, k, v = randn(g, 1, 2, 12, 8), randn(g, 1, 2, 12, 8), randn(g, 1, 2, 12, 6)
    computed = tiles_above_computed(answer, q, k, v, 4, 4, _out_of(ev, 4, 4))
    if computed:
        rows = block_ranges([a for a, _ in computed], 4, 12)
        edge = all(b == a + 1 for a, b in computed)           # only tiles starting at j0 = i1: off by one
        fail((M.extra_tile if edge and len(computed) < 3 else M.all_tiles).at(rows=rows))


@exercise("tiled attention: the forward pass", name="tiled_attention", reference=ref.tiled_attention, mistakes=M,
          right=[keys_outside, flash1, learner("none")])
@single_threaded
@naming_crashes(M)
def tiled_attention(ev: Evaluation, answer):
    """answer(q, k, v, block_q, block_k, causal=False, mask=None) -> (out (..., T_q, d_v), lse (..., T_q))."""
    tests = 0
    B, H, T, d, d_v = 2, 2, 11, 8, 6
    for seed, (bq, bk) in enumerate([(4, 4), (4, 3), (3, 5), (16, 16), (5, 2), (1, 11)]):
        g = ev.rng(100 + seed)
        q, k, v = randn(g, B, H, T, d), randn(g, B, H, T, d), randn(g, B, H, T, d_v)
        for causal in (False, True):
            _check_forward(ev, answer, q, k, v, bq, bk, causal, plain_passed=causal)
            tests += 1
    _point(ev, answer)
    # masks: padding (a whole sequence padded: every row fully masked), then a mask with empty rows
    g = ev.rng(300)
    q, k, v = randn(g, 3, 2, T, d), randn(g, 3, 2, T, d), randn(g, 3, 2, T, d_v)
    pad = padding_mask(ev, 301, 3, T)
    rows = torch.as_tensor(ev.rng(302).random((3, 1, T, T)) < 0.6)
    rows[0, 0, 2] = False                               # query 2 of sequence 0 may attend to nothing
    rows[1, 0, 5:8] = False
    rows[2, 0, 3] = torch.arange(T) >= 8                # query 3 of sequence 2: its first 8 keys masked, not the rest
    for (bq, bk), mask, causal in (((3, 4), rows, False), ((4, 3), pad, False), ((5, 5), pad, True),
                                   ((2, 7), rows, True)):
        _check_forward(ev, answer, q, k, v, bq, bk, causal, mask, what=f" with a mask of shape {tuple(mask.shape)}")
        tests += 1
    # cross-attention: T_q != T_k, d_v != d_k
    g = ev.rng(400)
    q, k, v = randn(g, 2, 7, 4), randn(g, 2, 13, 4), randn(g, 2, 13, 6)
    _check_forward(ev, answer, q, k, v, 3, 5, what=" with 7 queries, 13 keys and values of width 6")
    # float64 in, float64 out (section 4 runs the function in float64, for gradcheck)
    q, k, v = q.double(), k.double(), v.double()
    result = _returned(ev.call(answer, q, k, v, 3, 5), formula(q, k, v, False, None), 7, 13)
    for what, got in zip(("out", "lse"), result):
        dtype = getattr(got, "dtype", None)
        expect(dtype in (None, torch.float64), M.dtype.at(what=what, dtype=dtype))
    _check_forward(ev, answer, q, k, v, 3, 5, what=" in float64")
    return tests + 3

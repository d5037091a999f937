"""Checks for lesson 13: the online softmax, merging its statistics, tiled attention (FlashAttention-2's
forward and backward passes) and linear attention.

Every expected value is computed from the formula itself (the whole row's maximum and sum, the course's
reference attention and autograd's gradients of it, the quadratic form of the kernel), never from the
lesson's own tiled code. Each check also tests the point of its exercise (lesson13_probes.py): ONE pass over
blocks that are handed out one at a time, the causal tiles never computed, nothing of size T_q x T_k built.
The typical mistakes are the same loops with one line wrong (lesson13_mistakes.py), named when an answer
gives their values (the messages in lesson13_symptoms.py, the crashes of typical slips named in
lesson13_crashes.py); the inputs and the formula's values on them are in lesson13_inputs.py.
"""
import functools

import numpy as np
import torch

from .. import efficient_attention as ref
from . import lesson13_mistakes as mk
from . import lesson13_symptoms as say
from .core import ExerciseError, exercise, expect, expect_returns, expect_shape, randn, single_threaded, to_numpy
from .evaluation import Evaluation
from .expectations import explained
from .lesson13_crashes import backward_failure, forward_failure, merge_failure, naming_crashes
from .lesson13_extremes import backward_in_float64, large_scores
from .lesson13_inputs import NEG_INF
from .lesson13_inputs import backward_inputs as _backward_inputs
from .lesson13_inputs import blocks as _blocks
from .lesson13_inputs import expected as _expected
from .lesson13_inputs import gradients as _gradients
from .lesson13_inputs import online_inputs as _online_inputs
from .lesson13_inputs import padding_mask as _padding_mask
from .lesson13_inputs import stats as _stats
from .lesson13_probes import (
    backward_part,
    block_ranges,
    d_rows,
    forward_part,
    largest_tensor,
    moves_earlier_outputs,
    normalised,
    quadratic_symptom,
    tail_missing,
    tile_ranges,
    tiles_above_computed,
    tiles_skipped,
)
from .lesson13_symptoms import name as _name
from .lesson13_symptoms import same as _same
from .lesson13_symptoms import variant as _variant


def _nan_free(x, what, symptom):
    expect(not np.isnan(to_numpy(x)).any(), f"{what} contains NaN: {symptom}")


# ---------------------------------------------------------------------------------------------
# Exercise 1a: the online softmax, in ONE pass over blocks handed out one at a time
# ---------------------------------------------------------------------------------------------
@exercise("the online softmax", name="online_softmax", reference=ref.online_softmax)
@single_threaded
@naming_crashes
def online_softmax(ev: Evaluation, answer):
    """answer(blocks) -> (m (R,), l (R,)): m = max of each row, l = Σ exp(x − m), in one pass over the blocks
    (R, b) that `column_blocks` hands out one at a time and once (a block read after the next one is NaN)."""
    tests = 0
    for seed, block in enumerate((6, 3, 1, 4, 7, 12, 16)):   # 6 first: blocks (6, 6), where dim 0 and -1 agree
        x = _online_inputs(ev, seed)
        expected = _stats(x)
        try:
            result = ev.call(answer, ref.column_blocks(x, block))
        except ExerciseError as error:
            if "BlocksReadTwice" in str(error):
                raise ExerciseError(say.ONLINE["two_loops"]) from None
            raise
        m, ell = expect_returns(result, expected, ("m", "l"))
        if not (_same(m, expected[0]) and _same(ell, expected[1])):       # may it keep every block?
            kept = ev.call(answer, _blocks(x, block))
            if all(_same(a, e) for a, e in zip(expect_returns(kept, expected, ("m", "l")), expected)):
                raise ExerciseError(say.ONLINE["list"])
            m, ell = kept
        variants = {}

        def values(kind, x=x, block=block, variants=variants):
            if kind not in variants:
                variants[kind] = _variant(mk.online, _blocks(x, block), kind) or (None, None)
            return variants[kind]

        if hasattr(m, "shape") and tuple(m.shape) == (block,) != (6,):
            raise ExerciseError(say.ONLINE["max_wrong_axis"])
        expect(not hasattr(m, "shape") or tuple(m.shape) != (), say.ONLINE["max_all"])
        expect_shape(m, (6,), "m")
        expect_shape(ell, (6,), "l")
        m_kinds = ("max_wrong_axis", "stale_max", "no_guard", "init_zero", "block_max_only", "first_block_only")
        _name(m, expected[0], {k: say.ONLINE[k] for k in m_kinds}, lambda kind: values(kind)[0])
        with explained(functools.partial(say.online_max_rows, m, expected[0])):   # (not a NaN from −∞ − (−∞))
            ev.expect_close(m, expected[0], f"m, the maximum of each row (block_size={block})",
                            hint="m must end as the maximum of the row: m = max(m, max of the block) at every block.")
        l_kinds = ("no_rescale", "flipped", "flipped_safe", "stale_max", "no_guard", "old_max", "no_shift",
                   "max_wrong_axis", "init_zero", "sum_wrong_axis", "no_guard_zeroed", "block_max",
                   "block_max_no_rescale", "lse", "old_max_safe", "sum_rows_mean", "sum_all", "shift_columns",
                   "clamp_safe", "rescale_new", "safe_block", "first_block_only", "safe_old")
        _name(ell, expected[1], {k: say.ONLINE[k] for k in l_kinds}, lambda kind: values(kind)[1])
        _nan_free(ell, "l", say.NO_GUARD)
        with explained(functools.partial(say.online_rows, ell, expected[1])):
            ev.expect_close(ell, expected[1], f"l, the normaliser Σ exp(x − m) of each row (block_size={block})")
        tests += 1
    large_scores(ev, answer)
    return tests + 1


# ---------------------------------------------------------------------------------------------
# Exercise 1b: merging two partial results
# ---------------------------------------------------------------------------------------------
@exercise("merging two partial softmax statistics", name="merge_softmax_stats", reference=ref.merge_softmax_stats)
@single_threaded
@naming_crashes
def merge_softmax_stats(ev: Evaluation, answer):
    """answer(m1, l1, m2, l2) -> (m, l) of the whole row, for every split point of some rows."""
    g = ev.rng(20)
    x = randn(g, 4, 9, scale=3.0)
    x[1, :5] = NEG_INF                               # a left part (up to split 5) with nothing in it
    x[2, torch.as_tensor(g.random(9) < 0.5)] = NEG_INF
    x[3] = NEG_INF                                   # both parts empty
    # the row's maximum first, then last: at every split one part holds the maximum and the other does not; a row
    # below 0 last (the safe maximum moves −∞ only)
    x = torch.cat([x, x[:1].sort(-1, descending=True).values, x[:1].sort(-1).values, -x[:1].abs() - 1])
    m_true, l_true = _stats(x)
    (R, n), tests = x.shape, 0
    empty = (torch.full((R,), NEG_INF), torch.zeros(R))
    # the splits with an empty part (0 and n) last: a slip that shows only there (a guard) is told from the others
    for split in sorted(range(n + 1), key=lambda split: split in (0, n)):
        m1, l1 = _stats(x[:, :split]) if split else empty
        m2, l2 = _stats(x[:, split:]) if split < n else empty
        with merge_failure():
            result = ev.call(answer, m1, l1, m2, l2)
        m, ell = expect_returns(result, (m_true, l_true), ("m", "l"))
        expect_shape(m, (R,), "m")
        expect_shape(ell, (R,), "l")
        v = {kind: mk.merge(m1, l1, m2, l2, kind) for kind in say.MERGE}
        _name(m, m_true, {"first_max": say.MERGE["first_max"]}, lambda kind, v=v: v[kind][0])
        expect(not (_same(m, m1) or _same(m, m2)) or _same(m, m_true), say.MERGE["first_max"])
        with explained(lambda: say.MERGE["first_max"] + " (torch.maximum(m1, m2), element by element)"):
            ev.expect_close(m, m_true, f"m (split after {split} of {n} entries)")
        _name(ell, l_true, {k: say.MERGE[k] for k in ("no_rescale", "flipped", "flipped_safe", "no_guard",
                                                     "one_rescaled", "other_rescaled", "to_min", "from_m1",
                                                     "from_m2", "same_factor_m1", "same_factor_m2", "lse", "product",
                                                     "l1_twice", "clamp_safe")},
              lambda kind, v=v: v[kind][1])
        _nan_free(ell, "l", say.NO_GUARD)
        with explained(functools.partial(say.merge_rows, ell, l_true, m1, m2)):
            ev.expect_close(ell, l_true, f"l (split after {split} of {n} entries)")
        tests += 1
    return tests


# ---------------------------------------------------------------------------------------------
# Exercise 2: tiled attention, the forward pass: (out, lse)
# ---------------------------------------------------------------------------------------------
_OUT_KINDS = ("acc_not_rescaled", "l_not_rescaled", "divide_inside", "divide_inside_twice", "divide_inside_reset",
              "scale_d", "no_scale", "scale_times", "drop_tail", "no_guard", "p_old_max", "no_safe",
              "tk_from_q", "m_first", "state_outside", "drop_last_keys", "scale_dv", "k_query_range",
              "scale_half_d")
_CAUSAL_KINDS = ("wrong_side", "wrong_side_unmasked", "skip_ge", "skip_diag", "diag_full", "local_idx",
                 "local_idx_diag", "inverted_causal", "causal_ignored", "strict_causal")
_MASK_KINDS = ("mask_ignored", "inverted_mask")
_LSE_KINDS = ("lse_m", "lse_log_l", "lse_l", "lse_empty_zero")


def _returned(ev: Evaluation, result, expected, T_q, T_k):
    """(out, lse) from the answer's result; a T_q x T_k tensor among them is named."""
    if isinstance(result, (tuple, list)) and len(result) > 2:
        expect(not any(hasattr(r, "shape") and tuple(r.shape[-2:]) == (T_q, T_k) for r in result),
               say.TILED["returns_P"])
    return expect_returns(result, expected, ("out", "lse"))


def _check_forward(ev: Evaluation, answer, q, k, v, bq, bk, causal=False, mask=None, what=""):
    """One call of the learner's tiled_attention, compared with the formula; its mistakes named."""
    expected = _expected(q, k, v, causal, mask)
    with forward_failure(mask, bq, q.shape[-2], v.shape[-1], bk):
        result = ev.call(answer, q, k, v, bq, bk, causal=causal, mask=mask)
    out, lse = _returned(ev, result, expected, q.shape[-2], k.shape[-2])
    if hasattr(out, "shape") and tuple(out.shape) == tuple(q.shape) != tuple(expected[0].shape) and _same(out, q):
        raise ExerciseError("out is q itself: the output is the weighted sum of the values, one row per query of "
                            f"the values' width d_v = {v.shape[-1]}")
    expect_shape(out, tuple(expected[0].shape), "out")
    expect_shape(lse, tuple(expected[1].shape), "lse (one number per query)")
    kinds = _OUT_KINDS + (_CAUSAL_KINDS if causal else ()) + (_MASK_KINDS if mask is not None else ()) + (
        "m_not_updated",)                                  # last: it may coincide with a causal slip
    cache = {}

    def values(kind):
        if kind not in cache:
            cache[kind] = _variant(mk.tiled, q, k, v, bq, bk, causal, mask, kind)
        return cache[kind] or (None, None)

    _name(out, expected[0], {kind: say.TILED[kind] for kind in kinds}, lambda kind: values(kind)[0])
    tail = tail_missing(out, expected[0])
    expect(tail is None, say.TILED["drop_last_q"].format(rows=tail))
    if causal and not _same(out, expected[0]):
        expect(not moves_earlier_outputs(ev, answer, q, k, v, q.shape[-2] // 2, _out_of(ev, bq, bk)),
               say.TILED["leak"])
        skipped = tiles_skipped(ev, answer, q, k, v, bq, bk, _out_of(ev, bq, bk))
        expect(not skipped, say.TILED["skipped_visible"].format(
            tiles=tile_ranges(skipped, bq, bk, q.shape[-2], k.shape[-2])))
    _nan_free(out, "out", say.TILED["no_guard"])
    empty = torch.isneginf(expected[1])
    if empty.any() and not _same(out, expected[0]):
        wrong = ~np.isclose(to_numpy(out), to_numpy(expected[0]), atol=1e-5, rtol=1e-4).all(axis=-1)
        expect(not (wrong <= to_numpy(empty)).all(), say.TILED["empty_rows"])
    with explained(functools.partial(forward_part, ev, answer, q, k, v, bq, bk, causal, mask,
                                     lambda causal, mask: _expected(q, k, v, causal, mask))):
        ev.expect_close(out, expected[0], f"out{what} (block_q={bq}, block_k={bk}, causal={causal})")
    _name(lse, expected[1], {kind: say.TILED[kind] for kind in _LSE_KINDS}, lambda kind: values(kind)[1])
    expect(not np.isnan(to_numpy(lse)[to_numpy(empty)]).any(), say.TILED["lse_nan"])
    expect(_same(torch.isneginf(torch.as_tensor(to_numpy(lse))), empty), say.TILED["lse_empty_zero"])
    ev.expect_close(lse, expected[1], f"lse{what}, the log-sum-exp L = m + log l of each query (block_q={bq}, "
                                      f"block_k={bk}, causal={causal})")


def _out_of(ev: Evaluation, bq, bk):
    """run(answer, q, k, v) -> the output (..., T_q, d_v) of a causal tiled_attention answer (for the probes)."""
    def run(answer, q, k, v):
        result = ev.call(answer, q, k, v, bq, bk, causal=True)
        return result[0] if isinstance(result, (tuple, list)) else result
    return run


@exercise("tiled attention: the forward pass", name="tiled_attention", reference=ref.tiled_attention)
@single_threaded
@naming_crashes
def tiled_attention(ev: Evaluation, answer):
    """answer(q, k, v, block_q, block_k, causal=False, mask=None) -> (out (..., T_q, d_v), lse (..., T_q)), equal
    to the formula for several block sizes, causal or not, with padding and fully masked rows; the causal tiles
    above the diagonal never computed; no tensor of size T_q x T_k built; tiles of block_q x block_k."""
    tests = 0
    B, H, T, d, d_v = 2, 2, 11, 8, 6
    for seed, (bq, bk) in enumerate([(4, 4), (4, 3), (3, 5), (16, 16), (5, 2), (1, 11)]):
        g = ev.rng(100 + seed)
        q, k, v = randn(g, B, H, T, d), randn(g, B, H, T, d), randn(g, B, H, T, d_v)
        for causal in (False, True):
            _check_forward(ev, answer, q, k, v, bq, bk, causal)
            tests += 1
    # the point of tiling: nothing of size T_q x T_k (64 x 64 here, tiles of 8 x 8)
    g = ev.rng(500)
    q, k, v = randn(g, 1, 2, 64, 8), randn(g, 1, 2, 64, 8), randn(g, 1, 2, 64, 8)
    for causal, mask in ((False, None), (True, (torch.arange(64) < 50)[None, None, None, :])):
        with forward_failure(mask, 8, 64, 8):
            _, elements, shape = largest_tensor(ev, answer, q, k, v, 8, 8, causal=causal, mask=mask)
        symptom = quadratic_symptom(elements, shape, (1, 2), 64, 64, "your tiled_attention")
        expect(symptom is None, say.TILED["quadratic"].format(symptom=symptom))
    # block_k sizes the blocks of keys: with tall tiles (32 x 2) a tile of 32 x 32 is the largest tensor of all
    g = ev.rng(510)
    q, k, v = randn(g, 1, 1, 128, 4), randn(g, 1, 1, 128, 4), randn(g, 1, 1, 128, 4)
    _, _, shape = largest_tensor(ev, answer, q, k, v, 32, 2)
    expect(shape is None or tuple(shape[-2:]) != (32, 32),
           say.TILED["block_k_ignored"].format(shape=shape, bq=32, bk=2))
    # the point of the causal part: tiles above the diagonal never computed (later values set to inf)
    g = ev.rng(200)
    q, k, v = randn(g, 1, 2, 12, d), randn(g, 1, 2, 12, d), randn(g, 1, 2, 12, d_v)
    computed = tiles_above_computed(answer, q, k, v, 4, 4, _out_of(ev, 4, 4))
    if computed:
        rows = block_ranges([a for a, _ in computed], 4, 12)
        edge = all(b == a + 1 for a, b in computed)           # only tiles starting at j0 = i1: off by one
        raise ExerciseError(say.TILED["extra_tile" if edge and len(computed) < 3 else "all_tiles"].format(rows=rows))
    tests += 1
    # masks: padding (a whole sequence padded: every row fully masked), then a mask with empty rows
    g = ev.rng(300)
    q, k, v = randn(g, 3, 2, T, d), randn(g, 3, 2, T, d), randn(g, 3, 2, T, d_v)
    pad = _padding_mask(ev, 301, 3, T)
    rows = torch.as_tensor(ev.rng(302).random((3, 1, T, T)) < 0.6)
    rows[0, 0, 2] = False                               # query 2 of sequence 0 may attend to nothing
    rows[1, 0, 5:8] = False
    rows[2, 0, 3] = torch.arange(T) >= 8                # query 3 of sequence 2: its first 8 keys masked, not the rest
    for (bq, bk), mask, causal in (((4, 3), pad, False), ((3, 4), rows, False), ((5, 5), pad, True),
                                   ((2, 7), rows, True)):
        _check_forward(ev, answer, q, k, v, bq, bk, causal, mask, what=f" with a mask of shape {tuple(mask.shape)}")
        tests += 1
    # cross-attention: T_q != T_k, d_v != d_k
    g = ev.rng(400)
    q, k, v = randn(g, 2, 7, 4), randn(g, 2, 13, 4), randn(g, 2, 13, 6)
    _check_forward(ev, answer, q, k, v, 3, 5, what=" with 7 queries, 13 keys and values of width 6")
    # float64 in, float64 out (section 4 runs the function in float64, for gradcheck)
    q, k, v = q.double(), k.double(), v.double()
    result = _returned(ev, ev.call(answer, q, k, v, 3, 5), _expected(q, k, v, False, None), 7, 13)
    for what, got in zip(("out", "lse"), result):
        dtype = getattr(got, "dtype", None)
        expect(dtype in (None, torch.float64), say.TILED["dtype"].format(what=what, dtype=dtype))
    _check_forward(ev, answer, q, k, v, 3, 5, what=" in float64")
    return tests + 3


# ---------------------------------------------------------------------------------------------
# Exercise 3: the backward pass, from (q, k, v, out, lse, dO): (dq, dk, dv)
# ---------------------------------------------------------------------------------------------
_BACKWARD_KINDS = ("no_D", "D_wrong_axis", "D_no_axis", "D_all", "D_plus", "lse_no_axis", "D_tile", "no_scale",
                   "scale_twice", "dq_no_scale", "dk_scale_twice", "p_no_scale", "p_softmax_tile", "dv_no_transpose",
                   "dk_no_transpose", "dv_from_out", "dk_from_dO", "overwrite", "overwrite_dq_dk", "overwrite_dq",
                   "overwrite_dk", "D_dO", "lse_sign", "dv_dO_keys", "lse_keys", "ds_D_outside", "keys_short",
                   "dv_from_ds", "dq_from_v", "dv_query_rows", "overwrite_dv", "bw_scale_times")


def _dq_of(ev: Evaluation, out, lse, grad_out, bq, bk):
    def run(answer, q, k, v):
        result = ev.call(answer, q, k, v, out, lse, grad_out, bq, bk, causal=True)
        return result[0] if isinstance(result, (tuple, list)) else result
    return run


@exercise("tiled attention: the backward pass", name="tiled_attention_backward",
          reference=ref.tiled_attention_backward)
@single_threaded
@naming_crashes
def tiled_attention_backward(ev: Evaluation, answer):
    """answer(q, k, v, out, lse, grad_out, block_q, block_k, causal=False) -> (dq, dk, dv), equal to autograd's
    gradients; the causal tiles above the diagonal skipped; no tensor of size T_q x T_k built."""
    tests = 0
    # first one sequence with T = d_v and square tiles: the mistakes of a wrong axis still run there
    configs = [((1, 8, 8), 8, (4, 4), False), ((1, 8, 8), 8, (4, 4), True), ((2, 2, 11, 4), 6, (4, 3), False),
               ((2, 2, 11, 4), 6, (4, 3), True), ((2, 2, 11, 4), 6, (3, 5), True), ((2, 2, 11, 4), 6, (16, 16), True),
               ((1, 11, 4), 6, (2, 7), False)]
    for seed, (shape, d_v, (bq, bk), causal) in enumerate(configs):
        q, k, v, grad_out = _backward_inputs(ev, 600 + seed, shape, d_v)
        out, lse = ref.tiled_attention(q, k, v, 4, causal=causal)
        expected = _gradients(q, k, v, grad_out, causal)
        with backward_failure(q.shape[-1], v.shape[-1]):
            result = ev.call(answer, q, k, v, out, lse, grad_out, bq, bk, causal=causal)
        expect(not ev.modified, say.BACKWARD["inplace"])    # (core says which input; this, what it does here)
        if hasattr(result, "shape"):
            raise ExerciseError("return the three gradients, as `return dq, dk, dv` (got one tensor)")
        grads = expect_returns(result, expected, ("dq", "dk", "dv"))
        for name, got, want in zip(("dq", "dk", "dv"), grads, expected):
            expect_shape(got, tuple(want.shape), f"{name} (the shape of {name[1]})")
        kinds = _BACKWARD_KINDS + (("no_diag_mask", "local_idx") if causal else ())
        _name(tuple(grads), tuple(expected), {kind: say.BACKWARD[kind] for kind in kinds},
              lambda kind, args=(q, k, v, out, lse, grad_out, bq, bk, causal): _variant(mk.backward, *args, kind)
              or (None,),
              atol=1e-4, rtol=1e-3)
        if causal and not _same(grads[0], expected[0], 1e-4, 1e-3):
            skipped = tiles_skipped(ev, answer, q, k, v, bq, bk, _dq_of(ev, out, lse, grad_out, bq, bk))
            expect(not skipped, say.BACKWARD["skipped_visible"].format(
                tiles=tile_ranges(skipped, bq, bk, q.shape[-2], k.shape[-2])))
        part = [functools.partial(backward_part, ev, answer, (q, k, v, grad_out), bq, bk, _gradients)] if causal else []
        part.append(functools.partial(d_rows, ev, answer, (q, k, v), bq, bk, causal, say.BACKWARD["D_rows"]))
        for name, got, want in zip(("dq", "dk", "dv"), grads, expected):
            with explained(*part):     # (causal: is it right without the causal mask?)
                ev.expect_close(got, want, f"{name} (block_q={bq}, block_k={bk}, causal={causal})", atol=1e-4,
                                rtol=1e-3)
        tests += 1
    # nothing of size T_q x T_k (64 x 64 here, tiles of 8 x 8)
    for causal in (False, True):
        q, k, v, grad_out = _backward_inputs(ev, 710 + causal, (1, 2, 64, 8), 8)
        out, lse = ref.tiled_attention(q, k, v, 8, causal=causal)
        _, elements, shape = largest_tensor(ev, answer, q, k, v, out, lse, grad_out, 8, 8, causal=causal)
        symptom = quadratic_symptom(elements, shape, (1, 2), 64, 64, "your backward pass")
        expect(symptom is None, say.BACKWARD["quadratic"].format(symptom=symptom))
    # the causal tiles above the diagonal are skipped in the backward pass too
    q, k, v, grad_out = _backward_inputs(ev, 700, (1, 1, 12, 8), 8)
    out, lse = ref.tiled_attention(q, k, v, 4, causal=True)
    computed = tiles_above_computed(answer, q, k, v, 4, 4, _dq_of(ev, out, lse, grad_out, 4, 4))
    expect(not computed, say.BACKWARD["all_tiles"].format(rows=block_ranges([a for a, _ in computed], 4, 12)))
    backward_in_float64(ev, answer)
    return tests + 3


# ---------------------------------------------------------------------------------------------
# Exercise 4: linear attention
# ---------------------------------------------------------------------------------------------
@exercise("linear attention", name="linear_attention", reference=ref.linear_attention)
@single_threaded
@naming_crashes
def linear_attention(ev: Evaluation, answer):
    """answer(q, k, v) -> phi(q) (phi(k)^T v) / (phi(q) . sum_j phi(k_j)), phi(x) = elu(x) + 1: equal to the
    quadratic form with weights phi(q_t).phi(k_j) / sum_j' phi(q_t).phi(k_j'); no T_q x T_k tensor built."""
    tests = 0
    # first B = T_q = T_k = d = d_v: the mistakes that sum or divide over the wrong axis still run there
    for seed, (lead, T_q, T_k, d, d_v) in enumerate((((5,), 5, 5, 5, 5), ((2, 3), 5, 9, 4, 3),
                                                      ((1,), 12, 12, 8, 5))):
        g = ev.rng(800 + seed)
        q, k, v = randn(g, *lead, T_q, d), randn(g, *lead, T_k, d), randn(g, *lead, T_k, d_v)
        out = ev.call(answer, q, k, v)
        expect_shape(out, (*lead, T_q, d_v), "the output")
        expected = mk.quadratic(q, k, v)
        kinds = {kind: symptom for kind, symptom in say.LINEAR.items() if kind != "quadratic"}
        _name(out, expected, kinds, lambda kind, qkv=(q, k, v): _variant(mk.linear, *qkv, kind))
        with explained(functools.partial(normalised, ev, answer, (q, k, v), 2, None, say.DENOMINATOR)):
            ev.expect_close(out, expected, f"the output (T_q={T_q}, T_k={T_k}, d={d}, d_v={d_v})")
        tests += 1
    # the point: no T_q x T_k tensor (256 x 256 here)
    g = ev.rng(850)
    q, k, v = randn(g, 1, 256, 8), randn(g, 1, 256, 8), randn(g, 1, 256, 4)
    out, elements, shape = largest_tensor(ev, answer, q, k, v)
    symptom = quadratic_symptom(elements, shape, (1,), 256, 256, "your function")
    expect(symptom is None, say.LINEAR["quadratic"].format(symptom=symptom))
    ev.expect_close(out, mk.quadratic(q, k, v), "the output (T_q = T_k = 256, d = 8, d_v = 4)", atol=1e-4)
    return tests + 1

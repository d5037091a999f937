"""Checks for lesson 13: the online softmax, merging its statistics, tiled attention, linear attention.

Every expected value is computed from the formula itself (a softmax of the whole row, the course's
reference attention, the quadratic form of the kernel), never from the lesson's own tiled code; the
named mistakes are the same loops with one line wrong.
"""
import math

import numpy as np
import torch
import torch.nn.functional as F

from .. import efficient_attention as ref
from ..attention import scaled_dot_product_attention
from ..masks import causal_mask
from .core import (
    ExerciseError,
    exercise,
    expect,
    expect_returns,
    expect_shape,
    randn,
    single_threaded,
    to_numpy,
)
from .evaluation import Evaluation

NEG_INF = float("-inf")


def _safe(m):
    return torch.where(torch.isneginf(m), torch.zeros_like(m), m)


def _same(a, b, atol=1e-5, rtol=1e-4):
    """Equal values, NaN and inf included (a mistake's NaN falls where the answer's does)."""
    a, b = to_numpy(a).astype(np.float64), to_numpy(b).astype(np.float64)
    return a.shape == b.shape and np.allclose(a, b, atol=atol, rtol=rtol, equal_nan=True)


def _name_mistake(actual, expected, mistakes):
    """Raise the symptom of the first mistake whose values the answer has, unless the answer is right.
    mistakes: [(symptom, [values that mistake gives, one per way of writing it])]."""
    if _same(actual, expected):
        return
    for symptom, variants in mistakes:
        if any(v is not None and _same(actual, v) for v in variants):
            raise ExerciseError(symptom)


def _nan_free(x, what, symptom):
    expect(not np.isnan(to_numpy(x)).any(), f"{what} contains NaN: {symptom}")


# ---------------------------------------------------------------------------------------------
# Exercise 1a: the online softmax
# ---------------------------------------------------------------------------------------------
def _stats(x):
    """(m, l) of every row, from the whole row at once: m = max, l = sum exp(x - m)."""
    m = x.amax(dim=-1)
    return m, torch.exp(x - _safe(m)[..., None]).sum(dim=-1)


def _online(x, block, kind="ok"):
    """The online softmax loop, right or with one typical mistake."""
    m = torch.full(x.shape[:-1], NEG_INF)
    ell = torch.zeros(x.shape[:-1])
    for j0 in range(0, x.shape[-1], block):
        blk = x[..., j0:j0 + block]
        m_new = torch.maximum(m, blk.amax(dim=-1))
        ms = m_new if kind == "no_guard" else _safe(m_new)
        p_sum = torch.exp(blk - ms[..., None]).sum(dim=-1)
        if kind == "no_rescale":
            ell = ell + p_sum
        elif kind == "flipped":                        # e^(m_new - m_old): 0 * e^(+inf) = NaN at the start
            ell = ell * torch.exp(m_new - m) + p_sum
        elif kind == "flipped_safe":
            ell = ell * torch.exp(_safe(m_new) - _safe(m)) + p_sum
        else:
            ell = ell * torch.exp((m - m_new) if kind == "no_guard" else (m - _safe(m_new))) + p_sum
        if kind != "stale_max":
            m = m_new
    return m, ell


_NO_RESCALE = ("l is too large: when a block raises the maximum, the old normaliser must be rescaled, "
               "l = l·e^(m_old − m_new) + Σ exp(x_block − m_new) (it was a sum of exponentials measured from "
               "the old maximum)")
_FLIPPED = ("l is rescaled by e^(m_new − m_old): the factor is e^(m_old − m_new) ≤ 1, since the old terms "
            "exp(x − m_old) become exp(x − m_new) = exp(x − m_old)·e^(m_old − m_new)")
_STALE = ("m is not the running maximum: after each block set m = m_new = max(m, max of the block) (the "
          "maximum is never updated, so the next rescaling uses a stale m)")
_NO_GUARD = ("NaN where a whole block is −inf (a masked row, or its first block): there m_new = −inf and "
             "exp(−inf − (−inf)) is NaN. Subtract a 'safe' maximum, 0 where m_new = −inf "
             "(torch.where(torch.isneginf(m_new), 0, m_new)): exp(−inf − 0) = 0 as it should")


def _online_inputs(ev: Evaluation, seed):
    """Rows (6, 10): random, ascending (the maximum grows at every block), with −inf entries, a first
    block of −inf (the first 4 entries), and a row of −inf only."""
    g = ev.rng(seed)
    x = randn(g, 6, 10, scale=3.0)
    x[1] = torch.sort(x[1]).values
    x[2, torch.as_tensor(g.random(10) < 0.4)] = NEG_INF
    x[2, int(g.integers(10))] = 0.5
    x[3, :4] = NEG_INF
    x[4, :] = NEG_INF
    return x


@exercise("the online softmax", name="online_softmax", reference=ref.online_softmax)
@single_threaded
def online_softmax(ev: Evaluation, answer):
    """answer(x (R, n), block_size) -> (m (R,), l (R,)): m = max of each row, l = Σ exp(x − m)."""
    tests = 0
    for seed, block in enumerate((3, 1, 4, 7, 10, 16)):
        x = _online_inputs(ev, seed)
        m_true, l_true = _stats(x)
        result = ev.call(answer, x, block)
        m, ell = expect_returns(result, (m_true, l_true), ("m", "l"))
        expect_shape(m, (6,), "m")
        expect_shape(ell, (6,), "l")
        variants = {kind: _online(x, block, kind) for kind in ("no_rescale", "flipped", "flipped_safe",
                                                               "stale_max", "no_guard")}
        _name_mistake(m, m_true, [(_STALE, [variants["stale_max"][0]]), (_NO_GUARD, [variants["no_guard"][0]])])
        ev.expect_close(m, m_true, f"m, the maximum of each row (block_size={block})",
                        hint="m must end as the maximum of the row: m = max(m, max of the block) at every block.")
        _name_mistake(ell, l_true, [(_NO_RESCALE, [variants["no_rescale"][1]]),
                                  (_FLIPPED, [variants["flipped"][1], variants["flipped_safe"][1]]),
                                  (_STALE, [variants["stale_max"][1]]), (_NO_GUARD, [variants["no_guard"][1]])])
        _nan_free(ell, "l", _NO_GUARD)
        ev.expect_close(ell, l_true, f"l, the normaliser Σ exp(x − m) of each row (block_size={block})")
        tests += 1
    return tests


# ---------------------------------------------------------------------------------------------
# Exercise 1b: merging two partial results
# ---------------------------------------------------------------------------------------------
def _merge(m1, l1, m2, l2, kind="ok"):
    m = torch.maximum(m1, m2)
    ms = m if kind == "no_guard" else _safe(m)
    if kind == "no_rescale":
        return m, l1 + l2
    if kind == "flipped":
        return m, l1 * torch.exp(m - m1) + l2 * torch.exp(m - m2)
    if kind == "flipped_safe":
        return m, l1 * torch.exp(ms - _safe(m1)) + l2 * torch.exp(ms - _safe(m2))
    if kind == "first_max":
        return m1, l1 + l2 * torch.exp(m2 - _safe(m1))
    return m, l1 * torch.exp(m1 - ms) + l2 * torch.exp(m2 - ms)


_MERGE_NO_RESCALE = ("l = l1 + l2 adds normalisers measured from different maxima: rescale each to the common "
                     "maximum m = max(m1, m2), l = l1·e^(m1 − m) + l2·e^(m2 − m)")
_MERGE_FLIPPED = ("the normalisers are rescaled by e^(m − m1) and e^(m − m2): the factors are e^(m1 − m) and "
                  "e^(m2 − m), both ≤ 1")
_MERGE_STALE = "m is not max(m1, m2): the merged maximum is the larger of the two"


@exercise("merging two partial softmax statistics", name="merge_softmax_stats", reference=ref.merge_softmax_stats)
@single_threaded
def merge_softmax_stats(ev: Evaluation, answer):
    """answer(m1, l1, m2, l2) -> (m, l) of the whole row, for every split point of some rows."""
    g = ev.rng(20)
    x = randn(g, 4, 9, scale=3.0)
    x[1, :5] = NEG_INF                               # a left part (up to split 5) with nothing in it
    x[2, torch.as_tensor(g.random(9) < 0.5)] = NEG_INF
    x[3] = NEG_INF                                   # both parts empty
    m_true, l_true = _stats(x)
    tests = 0
    for split in range(x.shape[-1] + 1):
        m1, l1 = _stats(x[:, :split]) if split else (torch.full((4,), NEG_INF), torch.zeros(4))
        m2, l2 = _stats(x[:, split:]) if split < x.shape[-1] else (torch.full((4,), NEG_INF), torch.zeros(4))
        result = ev.call(answer, m1, l1, m2, l2)
        m, ell = expect_returns(result, (m_true, l_true), ("m", "l"))
        expect_shape(m, (4,), "m")
        expect_shape(ell, (4,), "l")
        v = {kind: _merge(m1, l1, m2, l2, kind) for kind in ("no_rescale", "flipped", "flipped_safe", "first_max",
                                                              "no_guard")}
        _name_mistake(m, m_true, [(_MERGE_STALE, [v["first_max"][0], m1, m2])])
        ev.expect_close(m, m_true, f"m (split after {split} of {x.shape[-1]} entries)")
        _name_mistake(ell, l_true, [(_MERGE_NO_RESCALE, [v["no_rescale"][1]]),
                                  (_MERGE_FLIPPED, [v["flipped"][1], v["flipped_safe"][1]]),
                                  (_NO_GUARD, [v["no_guard"][1]])])
        _nan_free(ell, "l", _NO_GUARD)
        ev.expect_close(ell, l_true, f"l (split after {split} of {x.shape[-1]} entries)")
        tests += 1
    return tests


# ---------------------------------------------------------------------------------------------
# Exercise 2: tiled attention
# ---------------------------------------------------------------------------------------------
def _tiled(q, k, v, block_q, block_k, causal=False, mask=None, kind="ok"):
    """The tiled loop, right or with one typical mistake (`kind`)."""
    *lead, T_q, d = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    stop_q, stop_k = (T_q - T_q % block_q, T_k - T_k % block_k) if kind == "drop_tail" else (T_q, T_k)
    out = torch.zeros(*lead, T_q, d_v)
    for i0 in range(0, stop_q, block_q):
        i1 = min(i0 + block_q, T_q)
        m = torch.full((*lead, i1 - i0), NEG_INF)
        ell = torch.zeros(*lead, i1 - i0)
        acc = torch.zeros(*lead, i1 - i0, d_v)
        for j0 in range(0, stop_k, block_k):
            j1 = min(j0 + block_k, T_k)
            if causal and kind not in ("causal_ignored",):
                above = j0 > i1 - 1                      # every key after every query of the block
                below = j1 - 1 < i0                      # every key before every query
                if kind in ("wrong_side", "wrong_side_unmasked"):
                    if below:
                        continue
                elif above:
                    continue
            s = q[..., i0:i1, :] @ k[..., j0:j1, :].transpose(-2, -1) / math.sqrt(d)
            keep = None
            if causal and kind not in ("diag_full", "wrong_side_unmasked", "causal_ignored"):
                keep = torch.arange(j0, j1)[None, :] <= torch.arange(i0, i1)[:, None]
            if mask is not None and kind != "mask_ignored":
                keep = mask[..., i0:i1, j0:j1] if keep is None else keep & mask[..., i0:i1, j0:j1]
            if keep is not None:
                s = s.masked_fill(~keep, NEG_INF)
            m_new = torch.maximum(m, s.amax(dim=-1))
            ms = m_new if kind == "no_guard" else _safe(m_new)
            p = torch.exp(s - ms[..., None])
            rescale = torch.exp(m - ms)
            ell = ell * rescale + p.sum(dim=-1)
            if kind == "acc_not_rescaled":
                acc = acc + p @ v[..., j0:j1, :]
            else:
                acc = acc * rescale[..., None] + p @ v[..., j0:j1, :]
            if kind in ("divide_inside", "divide_inside_twice"):
                acc = acc / ell[..., None]
            m = m_new
        if kind == "divide_inside":
            out[..., i0:i1, :] = acc
        elif kind == "no_guard":
            out[..., i0:i1, :] = acc / ell[..., None]
        else:
            seen = ell > 0
            out[..., i0:i1, :] = torch.where(seen[..., None], acc / torch.where(seen, ell, 1.0)[..., None], 0.0)
    return out


_ACC = ("the accumulator is not rescaled: when the maximum grows, acc = acc·e^(m_old − m_new) + P V_j, exactly "
        "as l is (acc holds Σ exp(s − m_old) v, measured from the old maximum)")
_DIVIDE = ("the output is divided by l inside the loop over the key blocks: keep acc unnormalised while the "
           "key blocks come in, and divide once, out = acc / l, after the last one")
_WRONG_SIDE = ("the blocks BELOW the diagonal are skipped: with a causal mask, skip a key block when all its "
               "keys come after all the queries of the block (j0 > i1 − 1, above the diagonal); the blocks "
               "below it are fully visible")
_DIAG = ("the blocks on the diagonal are treated as fully visible: a block that holds both earlier and later "
         "keys needs the element-wise causal mask (key j visible from query i iff j ≤ i) before the softmax")
_TAIL = ("the last positions are missing: when the block size does not divide T, the last block is shorter; "
         "loop with range(0, T, block) and slice up to min(start + block, T)")
_MASK = "the mask is ignored: set the scores of masked keys to −inf in every tile (mask[..., i0:i1, j0:j1])"
_CAUSAL = ("with causal=True the queries see later keys: skip the blocks above the diagonal and mask the "
           "diagonal blocks element-wise")
_EMPTY = ("a query whose every key is masked gives NaN (0/0, or exp(−inf − (−inf))): such a query has l = 0; "
          "subtract a safe maximum (0 where m = −inf) and give it a zero output")
_BLOCKS = [(4, 4), (3, 5), (16, 16), (5, 2), (1, 11)]


def _expected(q, k, v, causal, mask):
    full = causal_mask(q.shape[-2]) if causal else None
    if mask is not None:
        full = mask if full is None else mask & full
    return scaled_dot_product_attention(q, k, v, full)


def _tiled_mistakes(q, k, v, bq, bk, causal, mask):
    kinds = {_ACC: ["acc_not_rescaled"], _DIVIDE: ["divide_inside", "divide_inside_twice"],
             _TAIL: ["drop_tail"], _EMPTY: ["no_guard"]}
    if causal:
        kinds.update({_WRONG_SIDE: ["wrong_side", "wrong_side_unmasked"], _DIAG: ["diag_full"],
                      _CAUSAL: ["causal_ignored"]})
    if mask is not None:
        kinds[_MASK] = ["mask_ignored"]
    return [(symptom, [_tiled(q, k, v, bq, bk, causal, mask, kind) for kind in names])
            for symptom, names in kinds.items()]


def _padding_mask(ev: Evaluation, seed, B, T):
    """(B, 1, 1, T): sequence b has its last positions padded; the last sequence is ALL padding."""
    lengths = [int(n) for n in ev.rng(seed).integers(2, T, size=B - 1)] + [0]
    return (torch.arange(T)[None, :] < torch.tensor(lengths)[:, None])[:, None, None, :]


@exercise("tiled attention (the FlashAttention forward)", name="tiled_attention", reference=ref.tiled_attention)
@single_threaded
def tiled_attention(ev: Evaluation, answer):
    """answer(q, k, v, block_q, block_k, causal=False, mask=None) -> (..., T_q, d_v), equal to the reference
    attention within 1e-5 for several block sizes, causal or not, with padding and fully masked rows."""
    tests = 0
    B, H, T, d = 2, 2, 11, 8
    for seed, (bq, bk) in enumerate(_BLOCKS):
        g = ev.rng(100 + seed)
        q, k, v = randn(g, B, H, T, d), randn(g, B, H, T, d), randn(g, B, H, T, d)
        for causal in (False, True):
            out = ev.call(answer, q, k, v, bq, bk, causal=causal)
            expect_shape(out, (B, H, T, d), "the output")
            expected = _expected(q, k, v, causal, None)
            _name_mistake(out, expected, _tiled_mistakes(q, k, v, bq, bk, causal, None))
            _nan_free(out, "the output", _EMPTY)
            ev.expect_close(out, expected, f"the output (block_q={bq}, block_k={bk}, causal={causal})")
            tests += 1
    # causality by perturbation: later keys and values must not move earlier outputs
    g = ev.rng(200)
    q, k, v = randn(g, 1, 1, T, d), randn(g, 1, 1, T, d), randn(g, 1, 1, T, d)
    k2, v2 = k.clone(), v.clone()
    k2[..., 6:, :], v2[..., 6:, :] = randn(g, 1, 1, T - 6, d), randn(g, 1, 1, T - 6, d)
    moved = to_numpy(ev.call(answer, q, k, v, 4, 3, causal=True) - ev.call(answer, q, k2, v2, 4, 3, causal=True))
    expect(np.abs(moved[..., :6, :]).max() < 1e-5,
           "with causal=True the outputs at positions 0-5 changed when only keys and values 6-10 changed: " + _CAUSAL)
    tests += 1
    # masks: padding (a whole sequence padded: every row fully masked), then a mask with empty rows
    g = ev.rng(300)
    q, k, v = randn(g, 3, 2, T, d), randn(g, 3, 2, T, d), randn(g, 3, 2, T, d)
    pad = _padding_mask(ev, 301, 3, T)
    rows = torch.as_tensor(ev.rng(302).random((3, 1, T, T)) < 0.6)
    rows[0, 0, 2] = False                               # query 2 of sequence 0 may attend to nothing
    rows[1, 0, 5:8] = False
    for (bq, bk), mask, causal in (((4, 3), pad, False), ((3, 4), rows, False), ((5, 5), pad, True),
                                   ((2, 7), rows, True)):
        out = ev.call(answer, q, k, v, bq, bk, causal=causal, mask=mask)
        expect_shape(out, (3, 2, T, d), "the output")
        expected = _expected(q, k, v, causal, mask)
        _name_mistake(out, expected, _tiled_mistakes(q, k, v, bq, bk, causal, mask))
        _nan_free(out, "the output", _EMPTY)
        ev.expect_close(out, expected, f"the output with a mask of shape {tuple(mask.shape)} (block_q={bq}, "
                                       f"block_k={bk}, causal={causal})",
                        hint="Rows with no key allowed must be zeros.")
        tests += 1
    # cross-attention: T_q != T_k, d_v != d_k
    g = ev.rng(400)
    q, k, v = randn(g, 2, 7, 4), randn(g, 2, 13, 4), randn(g, 2, 13, 6)
    out = ev.call(answer, q, k, v, 3, 5)
    expect_shape(out, (2, 7, 6), "the output (T_q = 7 queries, T_k = 13 keys, d_v = 6)")
    expected = _expected(q, k, v, False, None)
    _name_mistake(out, expected, _tiled_mistakes(q, k, v, 3, 5, False, None))
    ev.expect_close(out, expected, "the output with 7 queries, 13 keys and values of width 6")
    return tests + 1


# ---------------------------------------------------------------------------------------------
# Exercise 3: linear attention
# ---------------------------------------------------------------------------------------------
def _phi(x):
    return F.elu(x) + 1


def _quadratic(q, k, v, fq=_phi, fk=_phi):
    a = fq(q) @ fk(k).transpose(-2, -1)                   # (..., T_q, T_k)
    return (a / a.sum(dim=-1, keepdim=True)) @ v


def _identity(x):
    return x


@exercise("linear attention", name="linear_attention", reference=ref.linear_attention)
@single_threaded
def linear_attention(ev: Evaluation, answer):
    """answer(q, k, v) -> phi(q) (phi(k)^T v) / (phi(q) . sum_j phi(k_j)), phi(x) = elu(x) + 1: equal to the
    quadratic form with weights phi(q_t).phi(k_j) / sum_j' phi(q_t).phi(k_j')."""
    tests = 0
    for seed, (lead, T_q, T_k, d, d_v) in enumerate((((2,), 6, 6, 4, 4), ((2, 3), 5, 9, 4, 3), ((1,), 12, 12, 8, 5))):
        g = ev.rng(500 + seed)
        q, k, v = randn(g, *lead, T_q, d), randn(g, *lead, T_k, d), randn(g, *lead, T_k, d_v)
        out = ev.call(answer, q, k, v)
        expect_shape(out, (*lead, T_q, d_v), "the output")
        expected = _quadratic(q, k, v)
        no_denominator = _phi(q) @ (_phi(k).transpose(-2, -1) @ v)
        _name_mistake(out, expected, [
            ("the output is not normalised: divide φ(q_t)ᵀ(Σ_j φ(k_j) v_jᵀ) by φ(q_t)ᵀ Σ_j φ(k_j), the sum of the "
             "kernel over the keys, so that the weights of each query sum to 1", [no_denominator]),
            ("φ is missing: linear attention needs positive features, φ(x) = elu(x) + 1, applied to q and to k "
             "(with raw q·k the 'weights' can be negative and the denominator 0)",
             [_quadratic(q, k, v, _identity, _identity)]),
            ("φ is applied to q only: apply φ(x) = elu(x) + 1 to the keys too",
             [_quadratic(q, k, v, _phi, _identity)]),
            ("φ is applied to k only: apply φ(x) = elu(x) + 1 to the queries too",
             [_quadratic(q, k, v, _identity, _phi)]),
            ("q and k are scaled by 1/√d before φ: linear attention applies φ to q and k as they are (there is "
             "no softmax to keep from saturating)",
             [_quadratic(q / math.sqrt(d), k, v), _quadratic(q / d ** 0.25, k / d ** 0.25, v)]),
            ("this is softmax attention: linear attention replaces exp(q·k/√d) by the kernel φ(q)·φ(k), "
             "φ(x) = elu(x) + 1", [scaled_dot_product_attention(q, k, v)]),
        ])
        ev.expect_close(out, expected, f"the output (T_q={T_q}, T_k={T_k}, d={d}, d_v={d_v})")
        tests += 1
    return tests

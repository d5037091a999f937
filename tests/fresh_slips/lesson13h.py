"""Typical learner mistakes (and right answers written differently) for lesson 13, attention at scale.

Written blind from the exercise texts and the reference solutions of 13_attention_at_scale.ipynb, to
measure how well the checks name the mistakes learners commonly make. Every slip has exactly one thing
wrong, marked `# slip:` on its line. The answers have the signatures of the notebook's exercises:

    online_softmax(blocks) -> m, l
    merge_softmax_stats(m1, l1, m2, l2) -> m, l
    tiled_attention(q, k, v, block_q, block_k, causal=False, mask=None) -> out, lse
    tiled_attention_backward(q, k, v, out, lse, grad_out, block_q, block_k, causal=False) -> dq, dk, dv
    linear_attention(q, k, v) -> out
"""
import math

import torch
import torch.nn.functional as F

from course_utils.masks import causal_mask

NEG_INF = float("-inf")


# =============================================================================================
# Exercise 1a: online_softmax
# =============================================================================================
def online_no_rescale(blocks):
    m, l = torch.tensor(NEG_INF), torch.tensor(0.0)
    for block in blocks:
        m_new = torch.maximum(m, block.amax(dim=-1))
        safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
        l = l + torch.exp(block - safe[..., None]).sum(dim=-1)  # slip: old l not rescaled by exp(m - m_new)
        m = m_new
    return m, l


def online_m_updated_first(blocks):
    m, l = torch.tensor(NEG_INF), torch.tensor(0.0)
    for block in blocks:
        m = torch.maximum(m, block.amax(dim=-1))  # slip: m overwritten before the rescale, so exp(m - m_new) is 1
        safe = torch.where(torch.isneginf(m), 0.0, m)
        l = l * torch.exp(m - safe) + torch.exp(block - safe[..., None]).sum(dim=-1)
    return m, l


def online_rescale_inverted(blocks):
    m, l = torch.tensor(NEG_INF), torch.tensor(0.0)
    for block in blocks:
        m_new = torch.maximum(m, block.amax(dim=-1))
        safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
        l = l * torch.exp(safe - m) + torch.exp(block - safe[..., None]).sum(dim=-1)  # slip: exp(m_new - m), inverted
        m = m_new
    return m, l


def online_no_safe_max(blocks):
    m, l = torch.tensor(NEG_INF), torch.tensor(0.0)
    for block in blocks:
        m_new = torch.maximum(m, block.amax(dim=-1))
        l = l * torch.exp(m - m_new) + torch.exp(block - m_new[..., None]).sum(dim=-1)  # slip: no safe maximum: -inf - -inf = NaN
        m = m_new
    return m, l


def online_safe_only_in_block_term(blocks):
    m, l = torch.tensor(NEG_INF), torch.tensor(0.0)
    for block in blocks:
        m_new = torch.maximum(m, block.amax(dim=-1))
        safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
        l = l * torch.exp(m - m_new) + torch.exp(block - safe[..., None]).sum(dim=-1)  # slip: rescale uses m_new, not the safe maximum
        m = m_new
    return m, l


def online_nan_patched_at_end(blocks):
    m, l = torch.tensor(NEG_INF), torch.tensor(0.0)
    for block in blocks:
        m_new = torch.maximum(m, block.amax(dim=-1))
        l = l * torch.exp(m - m_new) + torch.exp(block - m_new[..., None]).sum(dim=-1)
        m = m_new
    return m, torch.nan_to_num(l, nan=0.0)  # slip: NaN from a masked first block patched at the end instead of a safe maximum


def online_m_starts_at_zero(blocks):
    m, l = torch.tensor(0.0), torch.tensor(0.0)  # slip: running maximum started at 0 instead of -inf
    for block in blocks:
        m_new = torch.maximum(m, block.amax(dim=-1))
        safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
        l = l * torch.exp(m - safe) + torch.exp(block - safe[..., None]).sum(dim=-1)
        m = m_new
    return m, l


def online_sum_whole_block(blocks):
    m, l = torch.tensor(NEG_INF), torch.tensor(0.0)
    for block in blocks:
        m_new = torch.maximum(m, block.amax(dim=-1))
        safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
        l = l * torch.exp(m - safe) + torch.exp(block - safe[..., None]).sum()  # slip: sums over every row of the block, not per row
        m = m_new
    return m, l


def online_safe_clamped(blocks):
    m, l = torch.tensor(NEG_INF), torch.tensor(0.0)
    for block in blocks:
        m_new = torch.maximum(m, block.amax(dim=-1))
        safe = m_new.clamp(min=0.0)  # slip: safe maximum clamps every negative maximum to 0, not only -inf
        l = l * torch.exp(m - safe) + torch.exp(block - safe[..., None]).sum(dim=-1)
        m = m_new
    return m, l


def online_two_passes(blocks):
    kept = [block for block in blocks]                # slip: keeps the blocks and reads them again: two passes
    x = torch.cat(kept, dim=-1)
    m = x.amax(dim=-1)
    safe = torch.where(torch.isneginf(m), 0.0, m)
    return m, torch.exp(x - safe[..., None]).sum(dim=-1)


# ---- right answers -------------------------------------------------------------------------
def online_first_block_init(blocks):
    """m and l created from the first block (its rows, its dtype), the safe maximum through masked_fill."""
    m = l = None
    for block in blocks:
        if m is None:
            m = block.new_full(block.shape[:-1], NEG_INF)
            l = block.new_zeros(block.shape[:-1])
        m_new = torch.max(m, block.max(dim=-1).values)
        shift = m_new.masked_fill(m_new == NEG_INF, 0.0)
        l = l * (m - shift).exp() + (block - shift.unsqueeze(-1)).exp().sum(-1)
        m = m_new
    return m, l


def online_merge_block_stats(blocks):
    """Statistics of each block on its own, merged into the running ones with the two-part rule."""
    m, l = torch.tensor(NEG_INF), torch.tensor(0.0)
    for block in blocks:
        bm = block.amax(dim=-1)
        bl = torch.exp(block - torch.where(torch.isneginf(bm), 0.0, bm)[..., None]).sum(dim=-1)
        new = torch.maximum(m, bm)
        safe = torch.where(torch.isneginf(new), 0.0, new)
        l = l * torch.exp(m - safe) + bl * torch.exp(bm - safe)
        m = new
    return m, l


# =============================================================================================
# Exercise 1b: merge_softmax_stats
# =============================================================================================
def merge_no_safe_max(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    return m, l1 * torch.exp(m1 - m) + l2 * torch.exp(m2 - m)  # slip: no safe maximum: two empty parts give NaN


def merge_no_rescale(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    return m, l1 + l2  # slip: normalisers added without moving them to the common maximum


def merge_rescale_one_side(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    safe = torch.where(torch.isneginf(m), 0.0, m)
    return m, l1 * torch.exp(m1 - safe) + l2  # slip: only the first part is rescaled


def merge_sign_flipped(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    safe = torch.where(torch.isneginf(m), 0.0, m)
    return m, l1 * torch.exp(safe - m1) + l2 * torch.exp(safe - m2)  # slip: exp(m - m_i) instead of exp(m_i - m)


def merge_minimum(m1, l1, m2, l2):
    m = torch.minimum(m1, m2)  # slip: minimum of the two maxima instead of the maximum
    safe = torch.where(torch.isneginf(m), 0.0, m)
    return m, l1 * torch.exp(m1 - safe) + l2 * torch.exp(m2 - safe)


def merge_safe_clamped(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    safe = m.clamp(min=0.0)  # slip: every negative maximum replaced by 0, not only -inf
    return m, l1 * torch.exp(m1 - safe) + l2 * torch.exp(m2 - safe)


def merge_where_unguarded(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    l = torch.where(m1 >= m2, l1 + l2 * torch.exp(m2 - m1), l1 * torch.exp(m1 - m2) + l2)  # slip: m2 - m1 is NaN when both parts are empty
    return m, l


def merge_l_in_log_space(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    safe = torch.where(torch.isneginf(m), 0.0, m)
    return m, torch.log(l1 * torch.exp(m1 - safe) + l2 * torch.exp(m2 - safe))  # slip: returns log(l) instead of l


# ---- right answers -------------------------------------------------------------------------
def merge_nan_to_num(m1, l1, m2, l2):
    """Unsafe formula, the single NaN case (both parts empty) mapped to 0 afterwards."""
    m = torch.max(m1, m2)
    l = l1 * (m1 - m).exp() + l2 * (m2 - m).exp()
    return m, torch.nan_to_num(l, nan=0.0)


def merge_big_small(m1, l1, m2, l2):
    """The part with the larger maximum keeps its l; the other is scaled by exp(small - big) (0 if empty)."""
    first = m1 >= m2
    big, small = torch.where(first, m1, m2), torch.where(first, m2, m1)
    l_big, l_small = torch.where(first, l1, l2), torch.where(first, l2, l1)
    gap = torch.where(torch.isneginf(small), torch.full_like(small, NEG_INF), small - big)
    return big, l_big + l_small * torch.exp(gap)


# =============================================================================================
# Exercise 2: tiled_attention
# =============================================================================================
def _finish(acc, l, m):
    seen = l > 0
    out = torch.where(seen[..., None], acc / torch.where(seen, l, 1.0)[..., None], 0.0)
    lse = torch.where(seen, m + torch.log(l), NEG_INF)
    return out, lse


def tiled_no_scale(q, k, v, block_q, block_k, causal=False, mask=None):
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    out, lse = q.new_zeros(*lead, T_q, d_v), q.new_zeros(*lead, T_q)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        q_i = q[..., i0:i1, :]  # slip: scores never divided by sqrt(d_k)
        m = q.new_full((*lead, i1 - i0), NEG_INF)
        l = q.new_zeros(*lead, i1 - i0)
        acc = q.new_zeros(*lead, i1 - i0, d_v)
        for j0 in range(0, T_k, block_k):
            j1 = min(j0 + block_k, T_k)
            if causal and j0 > i1 - 1:
                continue
            s = q_i @ k[..., j0:j1, :].transpose(-2, -1)
            keep = None
            if causal and j1 - 1 > i0:
                keep = torch.arange(j0, j1)[None, :] <= torch.arange(i0, i1)[:, None]
            if mask is not None:
                keep = mask[..., i0:i1, j0:j1] if keep is None else keep & mask[..., i0:i1, j0:j1]
            if keep is not None:
                s = s.masked_fill(~keep, NEG_INF)
            m_new = torch.maximum(m, s.amax(dim=-1))
            safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
            p = torch.exp(s - safe[..., None])
            rescale = torch.exp(m - safe)
            l = l * rescale + p.sum(dim=-1)
            acc = acc * rescale[..., None] + p @ v[..., j0:j1, :]
            m = m_new
        out[..., i0:i1, :], lse[..., i0:i1] = _finish(acc, l, m)
    return out, lse


def tiled_acc_not_rescaled(q, k, v, block_q, block_k, causal=False, mask=None):
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    out, lse = q.new_zeros(*lead, T_q, d_v), q.new_zeros(*lead, T_q)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        q_i = q[..., i0:i1, :] / math.sqrt(d_k)
        m = q.new_full((*lead, i1 - i0), NEG_INF)
        l = q.new_zeros(*lead, i1 - i0)
        acc = q.new_zeros(*lead, i1 - i0, d_v)
        for j0 in range(0, T_k, block_k):
            j1 = min(j0 + block_k, T_k)
            if causal and j0 > i1 - 1:
                continue
            s = q_i @ k[..., j0:j1, :].transpose(-2, -1)
            keep = None
            if causal and j1 - 1 > i0:
                keep = torch.arange(j0, j1)[None, :] <= torch.arange(i0, i1)[:, None]
            if mask is not None:
                keep = mask[..., i0:i1, j0:j1] if keep is None else keep & mask[..., i0:i1, j0:j1]
            if keep is not None:
                s = s.masked_fill(~keep, NEG_INF)
            m_new = torch.maximum(m, s.amax(dim=-1))
            safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
            p = torch.exp(s - safe[..., None])
            rescale = torch.exp(m - safe)
            l = l * rescale + p.sum(dim=-1)
            acc = acc + p @ v[..., j0:j1, :]  # slip: l is rescaled but the accumulator is not
            m = m_new
        out[..., i0:i1, :], lse[..., i0:i1] = _finish(acc, l, m)
    return out, lse


def tiled_tile_local_positions(q, k, v, block_q, block_k, causal=False, mask=None):
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    out, lse = q.new_zeros(*lead, T_q, d_v), q.new_zeros(*lead, T_q)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        q_i = q[..., i0:i1, :] / math.sqrt(d_k)
        m = q.new_full((*lead, i1 - i0), NEG_INF)
        l = q.new_zeros(*lead, i1 - i0)
        acc = q.new_zeros(*lead, i1 - i0, d_v)
        for j0 in range(0, T_k, block_k):
            j1 = min(j0 + block_k, T_k)
            if causal and j0 > i1 - 1:
                continue
            s = q_i @ k[..., j0:j1, :].transpose(-2, -1)
            keep = None
            if causal and j1 - 1 > i0:
                keep = torch.arange(j1 - j0)[None, :] <= torch.arange(i1 - i0)[:, None]  # slip: positions within the tile, not in the sequence
            if mask is not None:
                keep = mask[..., i0:i1, j0:j1] if keep is None else keep & mask[..., i0:i1, j0:j1]
            if keep is not None:
                s = s.masked_fill(~keep, NEG_INF)
            m_new = torch.maximum(m, s.amax(dim=-1))
            safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
            p = torch.exp(s - safe[..., None])
            rescale = torch.exp(m - safe)
            l = l * rescale + p.sum(dim=-1)
            acc = acc * rescale[..., None] + p @ v[..., j0:j1, :]
            m = m_new
        out[..., i0:i1, :], lse[..., i0:i1] = _finish(acc, l, m)
    return out, lse


def tiled_no_tile_skipping(q, k, v, block_q, block_k, causal=False, mask=None):
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    out, lse = q.new_zeros(*lead, T_q, d_v), q.new_zeros(*lead, T_q)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        q_i = q[..., i0:i1, :] / math.sqrt(d_k)
        m = q.new_full((*lead, i1 - i0), NEG_INF)
        l = q.new_zeros(*lead, i1 - i0)
        acc = q.new_zeros(*lead, i1 - i0, d_v)
        for j0 in range(0, T_k, block_k):  # slip: no skip: tiles above the diagonal are computed, then fully masked
            j1 = min(j0 + block_k, T_k)
            s = q_i @ k[..., j0:j1, :].transpose(-2, -1)
            keep = None
            if causal and j1 - 1 > i0:
                keep = torch.arange(j0, j1)[None, :] <= torch.arange(i0, i1)[:, None]
            if mask is not None:
                keep = mask[..., i0:i1, j0:j1] if keep is None else keep & mask[..., i0:i1, j0:j1]
            if keep is not None:
                s = s.masked_fill(~keep, NEG_INF)
            m_new = torch.maximum(m, s.amax(dim=-1))
            safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
            p = torch.exp(s - safe[..., None])
            rescale = torch.exp(m - safe)
            l = l * rescale + p.sum(dim=-1)
            acc = acc * rescale[..., None] + p @ v[..., j0:j1, :]
            m = m_new
        out[..., i0:i1, :], lse[..., i0:i1] = _finish(acc, l, m)
    return out, lse


def tiled_whole_causal_mask(q, k, v, block_q, block_k, causal=False, mask=None):
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    full_causal = causal_mask(max(T_q, T_k))[:T_q, :T_k] if causal else None  # slip: builds the whole T x T causal mask, then slices it
    out, lse = q.new_zeros(*lead, T_q, d_v), q.new_zeros(*lead, T_q)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        q_i = q[..., i0:i1, :] / math.sqrt(d_k)
        m = q.new_full((*lead, i1 - i0), NEG_INF)
        l = q.new_zeros(*lead, i1 - i0)
        acc = q.new_zeros(*lead, i1 - i0, d_v)
        for j0 in range(0, T_k, block_k):
            j1 = min(j0 + block_k, T_k)
            if causal and j0 > i1 - 1:
                continue
            s = q_i @ k[..., j0:j1, :].transpose(-2, -1)
            keep = None
            if causal and j1 - 1 > i0:
                keep = full_causal[i0:i1, j0:j1]
            if mask is not None:
                keep = mask[..., i0:i1, j0:j1] if keep is None else keep & mask[..., i0:i1, j0:j1]
            if keep is not None:
                s = s.masked_fill(~keep, NEG_INF)
            m_new = torch.maximum(m, s.amax(dim=-1))
            safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
            p = torch.exp(s - safe[..., None])
            rescale = torch.exp(m - safe)
            l = l * rescale + p.sum(dim=-1)
            acc = acc * rescale[..., None] + p @ v[..., j0:j1, :]
            m = m_new
        out[..., i0:i1, :], lse[..., i0:i1] = _finish(acc, l, m)
    return out, lse


def tiled_mask_inverted(q, k, v, block_q, block_k, causal=False, mask=None):
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    out, lse = q.new_zeros(*lead, T_q, d_v), q.new_zeros(*lead, T_q)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        q_i = q[..., i0:i1, :] / math.sqrt(d_k)
        m = q.new_full((*lead, i1 - i0), NEG_INF)
        l = q.new_zeros(*lead, i1 - i0)
        acc = q.new_zeros(*lead, i1 - i0, d_v)
        for j0 in range(0, T_k, block_k):
            j1 = min(j0 + block_k, T_k)
            if causal and j0 > i1 - 1:
                continue
            s = q_i @ k[..., j0:j1, :].transpose(-2, -1)
            if causal and j1 - 1 > i0:
                s = s.masked_fill(torch.arange(j0, j1)[None, :] > torch.arange(i0, i1)[:, None], NEG_INF)
            if mask is not None:
                s = s.masked_fill(mask[..., i0:i1, j0:j1], NEG_INF)  # slip: mask read as True = masked (it is True = may attend)
            m_new = torch.maximum(m, s.amax(dim=-1))
            safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
            p = torch.exp(s - safe[..., None])
            rescale = torch.exp(m - safe)
            l = l * rescale + p.sum(dim=-1)
            acc = acc * rescale[..., None] + p @ v[..., j0:j1, :]
            m = m_new
        out[..., i0:i1, :], lse[..., i0:i1] = _finish(acc, l, m)
    return out, lse


def tiled_mask_not_broadcast(q, k, v, block_q, block_k, causal=False, mask=None):
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    # slip: the mask is sliced as given, without broadcast_to: a (B, 1, 1, T) padding mask loses its rows past the first block
    out, lse = q.new_zeros(*lead, T_q, d_v), q.new_zeros(*lead, T_q)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        q_i = q[..., i0:i1, :] / math.sqrt(d_k)
        m = q.new_full((*lead, i1 - i0), NEG_INF)
        l = q.new_zeros(*lead, i1 - i0)
        acc = q.new_zeros(*lead, i1 - i0, d_v)
        for j0 in range(0, T_k, block_k):
            j1 = min(j0 + block_k, T_k)
            if causal and j0 > i1 - 1:
                continue
            s = q_i @ k[..., j0:j1, :].transpose(-2, -1)
            keep = None
            if causal and j1 - 1 > i0:
                keep = torch.arange(j0, j1)[None, :] <= torch.arange(i0, i1)[:, None]
            if mask is not None:
                keep = mask[..., i0:i1, j0:j1] if keep is None else keep & mask[..., i0:i1, j0:j1]
            if keep is not None:
                s = s.masked_fill(~keep, NEG_INF)
            m_new = torch.maximum(m, s.amax(dim=-1))
            safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
            p = torch.exp(s - safe[..., None])
            rescale = torch.exp(m - safe)
            l = l * rescale + p.sum(dim=-1)
            acc = acc * rescale[..., None] + p @ v[..., j0:j1, :]
            m = m_new
        out[..., i0:i1, :], lse[..., i0:i1] = _finish(acc, l, m)
    return out, lse


def tiled_unguarded_division(q, k, v, block_q, block_k, causal=False, mask=None):
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    out, lse = q.new_zeros(*lead, T_q, d_v), q.new_zeros(*lead, T_q)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        q_i = q[..., i0:i1, :] / math.sqrt(d_k)
        m = q.new_full((*lead, i1 - i0), NEG_INF)
        l = q.new_zeros(*lead, i1 - i0)
        acc = q.new_zeros(*lead, i1 - i0, d_v)
        for j0 in range(0, T_k, block_k):
            j1 = min(j0 + block_k, T_k)
            if causal and j0 > i1 - 1:
                continue
            s = q_i @ k[..., j0:j1, :].transpose(-2, -1)
            keep = None
            if causal and j1 - 1 > i0:
                keep = torch.arange(j0, j1)[None, :] <= torch.arange(i0, i1)[:, None]
            if mask is not None:
                keep = mask[..., i0:i1, j0:j1] if keep is None else keep & mask[..., i0:i1, j0:j1]
            if keep is not None:
                s = s.masked_fill(~keep, NEG_INF)
            m_new = torch.maximum(m, s.amax(dim=-1))
            safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
            p = torch.exp(s - safe[..., None])
            rescale = torch.exp(m - safe)
            l = l * rescale + p.sum(dim=-1)
            acc = acc * rescale[..., None] + p @ v[..., j0:j1, :]
            m = m_new
        out[..., i0:i1, :] = acc / l[..., None]  # slip: no guard: a query with no key gives 0 / 0 = NaN
        lse[..., i0:i1] = m + torch.log(l)
    return out, lse


def tiled_lse_without_m(q, k, v, block_q, block_k, causal=False, mask=None):
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    out, lse = q.new_zeros(*lead, T_q, d_v), q.new_zeros(*lead, T_q)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        q_i = q[..., i0:i1, :] / math.sqrt(d_k)
        m = q.new_full((*lead, i1 - i0), NEG_INF)
        l = q.new_zeros(*lead, i1 - i0)
        acc = q.new_zeros(*lead, i1 - i0, d_v)
        for j0 in range(0, T_k, block_k):
            j1 = min(j0 + block_k, T_k)
            if causal and j0 > i1 - 1:
                continue
            s = q_i @ k[..., j0:j1, :].transpose(-2, -1)
            keep = None
            if causal and j1 - 1 > i0:
                keep = torch.arange(j0, j1)[None, :] <= torch.arange(i0, i1)[:, None]
            if mask is not None:
                keep = mask[..., i0:i1, j0:j1] if keep is None else keep & mask[..., i0:i1, j0:j1]
            if keep is not None:
                s = s.masked_fill(~keep, NEG_INF)
            m_new = torch.maximum(m, s.amax(dim=-1))
            safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
            p = torch.exp(s - safe[..., None])
            rescale = torch.exp(m - safe)
            l = l * rescale + p.sum(dim=-1)
            acc = acc * rescale[..., None] + p @ v[..., j0:j1, :]
            m = m_new
        seen = l > 0
        out[..., i0:i1, :] = torch.where(seen[..., None], acc / torch.where(seen, l, 1.0)[..., None], 0.0)
        lse[..., i0:i1] = torch.where(seen, torch.log(l), NEG_INF)  # slip: log(l) alone, the maximum m not added back
    return out, lse


def tiled_float32_buffers(q, k, v, block_q, block_k, causal=False, mask=None):
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    out, lse = torch.zeros(*lead, T_q, d_v), torch.zeros(*lead, T_q)  # slip: default float32, not q's dtype
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        q_i = q[..., i0:i1, :] / math.sqrt(d_k)
        m = q.new_full((*lead, i1 - i0), NEG_INF)
        l = q.new_zeros(*lead, i1 - i0)
        acc = q.new_zeros(*lead, i1 - i0, d_v)
        for j0 in range(0, T_k, block_k):
            j1 = min(j0 + block_k, T_k)
            if causal and j0 > i1 - 1:
                continue
            s = q_i @ k[..., j0:j1, :].transpose(-2, -1)
            keep = None
            if causal and j1 - 1 > i0:
                keep = torch.arange(j0, j1)[None, :] <= torch.arange(i0, i1)[:, None]
            if mask is not None:
                keep = mask[..., i0:i1, j0:j1] if keep is None else keep & mask[..., i0:i1, j0:j1]
            if keep is not None:
                s = s.masked_fill(~keep, NEG_INF)
            m_new = torch.maximum(m, s.amax(dim=-1))
            safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
            p = torch.exp(s - safe[..., None])
            rescale = torch.exp(m - safe)
            l = l * rescale + p.sum(dim=-1)
            acc = acc * rescale[..., None] + p @ v[..., j0:j1, :]
            m = m_new
        out[..., i0:i1, :], lse[..., i0:i1] = _finish(acc, l, m)
    return out, lse


# ---- right answers -------------------------------------------------------------------------
def tiled_merge_tiles(q, k, v, block_q, block_k, causal=False, mask=None):
    """Each tile's own statistics (max, sum, unnormalised output) merged into the running ones; the
    outputs of the blocks of queries collected in lists and concatenated; division guarded by l >= 1."""
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    scale = d_k ** -0.5
    if mask is not None:
        mask = mask.expand(*lead, T_q, T_k)
    outs, lses = [], []
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        rows = torch.arange(i0, i1, device=q.device)
        m = q.new_full((*lead, i1 - i0), NEG_INF)
        l = q.new_zeros(*lead, i1 - i0)
        acc = q.new_zeros(*lead, i1 - i0, d_v)
        for j0 in range(0, T_k, block_k):
            j1 = min(j0 + block_k, T_k)
            if causal and j0 >= i1:                                   # every key after every query
                continue
            s = torch.einsum("...id,...jd->...ij", q[..., i0:i1, :], k[..., j0:j1, :]) * scale
            if causal and j1 > i0 + 1:
                cols = torch.arange(j0, j1, device=q.device)
                s = torch.where(cols[None, :] > rows[:, None], NEG_INF, s)
            if mask is not None:
                s = torch.where(mask[..., i0:i1, j0:j1], s, NEG_INF)
            tm = s.amax(dim=-1)
            ts = torch.where(torch.isneginf(tm), 0.0, tm)
            p = (s - ts[..., None]).exp()
            tl, tacc = p.sum(dim=-1), p @ v[..., j0:j1, :]
            new = torch.maximum(m, tm)
            ns = torch.where(torch.isneginf(new), 0.0, new)
            a, b = (m - ns).exp(), (tm - ns).exp()
            l = l * a + tl * b
            acc = acc * a[..., None] + tacc * b[..., None]
            m = new
        outs.append(acc / l.clamp(min=1.0)[..., None])               # l >= 1 wherever a key was seen
        lses.append(m + l.log())                                      # -inf + log(0) = -inf for no key
    return torch.cat(outs, dim=-2), torch.cat(lses, dim=-1)


def tiled_pattern_first(q, k, v, block_q, block_k, causal=False, mask=None):
    """The tiles to visit listed first (ranges of keys per block of queries); -inf added as a bias."""
    T_q, d_k = q.shape[-2:]
    T_k = k.shape[-2]
    lead = q.shape[:-2]
    if mask is not None:
        mask = torch.broadcast_to(mask, lead + (T_q, T_k))
    out = torch.zeros_like(q[..., :1]).expand(*lead, T_q, v.shape[-1]).clone()
    lse = torch.full_like(q[..., 0], NEG_INF)
    starts_q = list(range(0, T_q, block_q))
    for i0 in starts_q:
        i1 = min(i0 + block_q, T_q)
        last_key = min(T_k, i1) if causal else T_k                    # keys from last_key on: never visible
        qs = q[..., i0:i1, :] * (1.0 / math.sqrt(d_k))
        m = torch.full_like(qs[..., 0], NEG_INF)
        l = torch.zeros_like(m)
        acc = torch.zeros_like(out[..., i0:i1, :])
        for j0 in range(0, last_key, block_k):
            j1 = min(j0 + block_k, T_k)
            s = qs @ k[..., j0:j1, :].mT
            bias = torch.zeros_like(s[..., :1, :1]).expand_as(s)
            if causal and j1 - 1 > i0:
                hidden = (torch.arange(j0, j1) - torch.arange(i0, i1)[:, None]) > 0
                bias = bias.masked_fill(hidden, NEG_INF)
            if mask is not None:
                bias = bias.masked_fill(~mask[..., i0:i1, j0:j1], NEG_INF)
            s = s + bias
            m_new = torch.max(m, s.max(dim=-1).values)
            shift = torch.nan_to_num(m_new, neginf=0.0)
            p = torch.exp(s - shift.unsqueeze(-1))
            r = torch.exp(m - shift)
            l = r * l + p.sum(-1)
            acc = r.unsqueeze(-1) * acc + p @ v[..., j0:j1, :]
            m = m_new
        has = l > 0
        out[..., i0:i1, :] = acc / torch.where(has, l, torch.ones_like(l)).unsqueeze(-1)
        lse[..., i0:i1] = torch.where(has, m + torch.log(torch.where(has, l, torch.ones_like(l))), lse[..., i0:i1])
    return out, lse


# =============================================================================================
# Exercise 3: tiled_attention_backward
# =============================================================================================
def bwd_D_without_out(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    T_q, T_k, d_k = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1 / math.sqrt(d_k)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    D = grad_out.sum(dim=-1)  # slip: D = rowsum(dO), the output O left out of the product
    for j0 in range(0, T_k, block_k):
        j1 = min(j0 + block_k, T_k)
        k_j, v_j = k[..., j0:j1, :], v[..., j0:j1, :]
        for i0 in range(0, T_q, block_q):
            i1 = min(i0 + block_q, T_q)
            if causal and j0 > i1 - 1:
                continue
            q_i, do_i = q[..., i0:i1, :], grad_out[..., i0:i1, :]
            s = q_i @ k_j.transpose(-2, -1) * scale
            if causal and j1 - 1 > i0:
                s = s.masked_fill(torch.arange(j0, j1)[None, :] > torch.arange(i0, i1)[:, None], NEG_INF)
            p = torch.exp(s - lse[..., i0:i1, None])
            dv[..., j0:j1, :] += p.transpose(-2, -1) @ do_i
            dp = do_i @ v_j.transpose(-2, -1)
            ds = p * (dp - D[..., i0:i1, None])
            dq[..., i0:i1, :] += ds @ k_j * scale
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i * scale
    return dq, dk, dv


def bwd_no_D(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    T_q, T_k, d_k = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1 / math.sqrt(d_k)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    for j0 in range(0, T_k, block_k):
        j1 = min(j0 + block_k, T_k)
        k_j, v_j = k[..., j0:j1, :], v[..., j0:j1, :]
        for i0 in range(0, T_q, block_q):
            i1 = min(i0 + block_q, T_q)
            if causal and j0 > i1 - 1:
                continue
            q_i, do_i = q[..., i0:i1, :], grad_out[..., i0:i1, :]
            s = q_i @ k_j.transpose(-2, -1) * scale
            if causal and j1 - 1 > i0:
                s = s.masked_fill(torch.arange(j0, j1)[None, :] > torch.arange(i0, i1)[:, None], NEG_INF)
            p = torch.exp(s - lse[..., i0:i1, None])
            dv[..., j0:j1, :] += p.transpose(-2, -1) @ do_i
            dp = do_i @ v_j.transpose(-2, -1)
            ds = p * dp  # slip: the softmax term D is left out of dS
            dq[..., i0:i1, :] += ds @ k_j * scale
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i * scale
    return dq, dk, dv


def bwd_D_per_tile(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    T_q, T_k, d_k = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1 / math.sqrt(d_k)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    for j0 in range(0, T_k, block_k):
        j1 = min(j0 + block_k, T_k)
        k_j, v_j = k[..., j0:j1, :], v[..., j0:j1, :]
        for i0 in range(0, T_q, block_q):
            i1 = min(i0 + block_q, T_q)
            if causal and j0 > i1 - 1:
                continue
            q_i, do_i = q[..., i0:i1, :], grad_out[..., i0:i1, :]
            s = q_i @ k_j.transpose(-2, -1) * scale
            if causal and j1 - 1 > i0:
                s = s.masked_fill(torch.arange(j0, j1)[None, :] > torch.arange(i0, i1)[:, None], NEG_INF)
            p = torch.exp(s - lse[..., i0:i1, None])
            dv[..., j0:j1, :] += p.transpose(-2, -1) @ do_i
            dp = do_i @ v_j.transpose(-2, -1)
            ds = p * (dp - (p * dp).sum(dim=-1, keepdim=True))  # slip: D = rowsum(P * dP) over this tile only, not the whole row
            dq[..., i0:i1, :] += ds @ k_j * scale
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i * scale
    return dq, dk, dv


def bwd_tile_softmax(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    T_q, T_k, d_k = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1 / math.sqrt(d_k)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    D = (grad_out * out).sum(dim=-1)
    for j0 in range(0, T_k, block_k):
        j1 = min(j0 + block_k, T_k)
        k_j, v_j = k[..., j0:j1, :], v[..., j0:j1, :]
        for i0 in range(0, T_q, block_q):
            i1 = min(i0 + block_q, T_q)
            if causal and j0 > i1 - 1:
                continue
            q_i, do_i = q[..., i0:i1, :], grad_out[..., i0:i1, :]
            s = q_i @ k_j.transpose(-2, -1) * scale
            if causal and j1 - 1 > i0:
                s = s.masked_fill(torch.arange(j0, j1)[None, :] > torch.arange(i0, i1)[:, None], NEG_INF)
            p = torch.softmax(s, dim=-1)  # slip: softmax within the tile instead of exp(S - L) from the whole row's lse
            dv[..., j0:j1, :] += p.transpose(-2, -1) @ do_i
            dp = do_i @ v_j.transpose(-2, -1)
            ds = p * (dp - D[..., i0:i1, None])
            dq[..., i0:i1, :] += ds @ k_j * scale
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i * scale
    return dq, dk, dv


def bwd_dq_unscaled(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    T_q, T_k, d_k = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1 / math.sqrt(d_k)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    D = (grad_out * out).sum(dim=-1)
    for j0 in range(0, T_k, block_k):
        j1 = min(j0 + block_k, T_k)
        k_j, v_j = k[..., j0:j1, :], v[..., j0:j1, :]
        for i0 in range(0, T_q, block_q):
            i1 = min(i0 + block_q, T_q)
            if causal and j0 > i1 - 1:
                continue
            q_i, do_i = q[..., i0:i1, :], grad_out[..., i0:i1, :]
            s = q_i @ k_j.transpose(-2, -1) * scale
            if causal and j1 - 1 > i0:
                s = s.masked_fill(torch.arange(j0, j1)[None, :] > torch.arange(i0, i1)[:, None], NEG_INF)
            p = torch.exp(s - lse[..., i0:i1, None])
            dv[..., j0:j1, :] += p.transpose(-2, -1) @ do_i
            dp = do_i @ v_j.transpose(-2, -1)
            ds = p * (dp - D[..., i0:i1, None])
            dq[..., i0:i1, :] += ds @ k_j  # slip: dq misses the 1/sqrt(d_k) factor
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i * scale
    return dq, dk, dv


def bwd_dv_overwritten(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    T_q, T_k, d_k = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1 / math.sqrt(d_k)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    D = (grad_out * out).sum(dim=-1)
    for j0 in range(0, T_k, block_k):
        j1 = min(j0 + block_k, T_k)
        k_j, v_j = k[..., j0:j1, :], v[..., j0:j1, :]
        for i0 in range(0, T_q, block_q):
            i1 = min(i0 + block_q, T_q)
            if causal and j0 > i1 - 1:
                continue
            q_i, do_i = q[..., i0:i1, :], grad_out[..., i0:i1, :]
            s = q_i @ k_j.transpose(-2, -1) * scale
            if causal and j1 - 1 > i0:
                s = s.masked_fill(torch.arange(j0, j1)[None, :] > torch.arange(i0, i1)[:, None], NEG_INF)
            p = torch.exp(s - lse[..., i0:i1, None])
            dv[..., j0:j1, :] = p.transpose(-2, -1) @ do_i  # slip: = instead of +=, only the last block of queries counts
            dp = do_i @ v_j.transpose(-2, -1)
            ds = p * (dp - D[..., i0:i1, None])
            dq[..., i0:i1, :] += ds @ k_j * scale
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i * scale
    return dq, dk, dv


def bwd_no_diagonal_mask(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    T_q, T_k, d_k = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1 / math.sqrt(d_k)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    D = (grad_out * out).sum(dim=-1)
    for j0 in range(0, T_k, block_k):
        j1 = min(j0 + block_k, T_k)
        k_j, v_j = k[..., j0:j1, :], v[..., j0:j1, :]
        for i0 in range(0, T_q, block_q):
            i1 = min(i0 + block_q, T_q)
            if causal and j0 > i1 - 1:
                continue
            q_i, do_i = q[..., i0:i1, :], grad_out[..., i0:i1, :]
            s = q_i @ k_j.transpose(-2, -1) * scale  # slip: diagonal tiles not masked element-wise: future keys get weight
            p = torch.exp(s - lse[..., i0:i1, None])
            dv[..., j0:j1, :] += p.transpose(-2, -1) @ do_i
            dp = do_i @ v_j.transpose(-2, -1)
            ds = p * (dp - D[..., i0:i1, None])
            dq[..., i0:i1, :] += ds @ k_j * scale
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i * scale
    return dq, dk, dv


def bwd_no_tile_skipping(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    T_q, T_k, d_k = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1 / math.sqrt(d_k)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    D = (grad_out * out).sum(dim=-1)
    for j0 in range(0, T_k, block_k):
        j1 = min(j0 + block_k, T_k)
        k_j, v_j = k[..., j0:j1, :], v[..., j0:j1, :]
        for i0 in range(0, T_q, block_q):  # slip: no skip: tiles above the diagonal are computed, then fully masked
            i1 = min(i0 + block_q, T_q)
            q_i, do_i = q[..., i0:i1, :], grad_out[..., i0:i1, :]
            s = q_i @ k_j.transpose(-2, -1) * scale
            if causal and j1 - 1 > i0:
                s = s.masked_fill(torch.arange(j0, j1)[None, :] > torch.arange(i0, i1)[:, None], NEG_INF)
            p = torch.exp(s - lse[..., i0:i1, None])
            dv[..., j0:j1, :] += p.transpose(-2, -1) @ do_i
            dp = do_i @ v_j.transpose(-2, -1)
            ds = p * (dp - D[..., i0:i1, None])
            dq[..., i0:i1, :] += ds @ k_j * scale
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i * scale
    return dq, dk, dv


def bwd_full_P(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    T_q, T_k, d_k = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1 / math.sqrt(d_k)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    D = (grad_out * out).sum(dim=-1)
    S = q @ k.transpose(-2, -1) * scale  # slip: all T x T scores recomputed at once, then sliced per tile
    for j0 in range(0, T_k, block_k):
        j1 = min(j0 + block_k, T_k)
        k_j, v_j = k[..., j0:j1, :], v[..., j0:j1, :]
        for i0 in range(0, T_q, block_q):
            i1 = min(i0 + block_q, T_q)
            if causal and j0 > i1 - 1:
                continue
            q_i, do_i = q[..., i0:i1, :], grad_out[..., i0:i1, :]
            s = S[..., i0:i1, j0:j1]
            if causal and j1 - 1 > i0:
                s = s.masked_fill(torch.arange(j0, j1)[None, :] > torch.arange(i0, i1)[:, None], NEG_INF)
            p = torch.exp(s - lse[..., i0:i1, None])
            dv[..., j0:j1, :] += p.transpose(-2, -1) @ do_i
            dp = do_i @ v_j.transpose(-2, -1)
            ds = p * (dp - D[..., i0:i1, None])
            dq[..., i0:i1, :] += ds @ k_j * scale
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i * scale
    return dq, dk, dv


def bwd_float32_grads(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    T_q, T_k, d_k = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1 / math.sqrt(d_k)
    dq, dk, dv = torch.zeros(q.shape), torch.zeros(k.shape), torch.zeros(v.shape)  # slip: default float32, not q's dtype
    D = (grad_out * out).sum(dim=-1)
    for j0 in range(0, T_k, block_k):
        j1 = min(j0 + block_k, T_k)
        k_j, v_j = k[..., j0:j1, :], v[..., j0:j1, :]
        for i0 in range(0, T_q, block_q):
            i1 = min(i0 + block_q, T_q)
            if causal and j0 > i1 - 1:
                continue
            q_i, do_i = q[..., i0:i1, :], grad_out[..., i0:i1, :]
            s = q_i @ k_j.transpose(-2, -1) * scale
            if causal and j1 - 1 > i0:
                s = s.masked_fill(torch.arange(j0, j1)[None, :] > torch.arange(i0, i1)[:, None], NEG_INF)
            p = torch.exp(s - lse[..., i0:i1, None])
            dv[..., j0:j1, :] += p.transpose(-2, -1) @ do_i
            dp = do_i @ v_j.transpose(-2, -1)
            ds = p * (dp - D[..., i0:i1, None])
            dq[..., i0:i1, :] += ds @ k_j * scale
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i * scale
    return dq, dk, dv


# ---- right answers -------------------------------------------------------------------------
def bwd_queries_outside(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    """Blocks of queries outside (each dq block finished in one go), P masked after the exponential,
    the scale folded into q once."""
    T_q, T_k, d_k = q.shape[-2], k.shape[-2], q.shape[-1]
    c = d_k ** -0.5
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    D = torch.einsum("...td,...td->...t", grad_out, out)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        qs, do_i, L_i, D_i = q[..., i0:i1, :] * c, grad_out[..., i0:i1, :], lse[..., i0:i1], D[..., i0:i1]
        dq_i = torch.zeros_like(qs)
        stop = min(T_k, i1) if causal else T_k
        for j0 in range(0, stop, block_k):
            j1 = min(j0 + block_k, T_k)
            p = torch.exp(qs @ k[..., j0:j1, :].mT - L_i.unsqueeze(-1))
            if causal and j1 > i0 + 1:
                p = torch.where(torch.arange(j0, j1)[None, :] <= torch.arange(i0, i1)[:, None], p, 0.0)
            dv[..., j0:j1, :] += p.mT @ do_i
            ds = p * (do_i @ v[..., j0:j1, :].mT - D_i.unsqueeze(-1))
            dq_i += ds @ k[..., j0:j1, :]
            dk[..., j0:j1, :] += ds.mT @ qs
        dq[..., i0:i1, :] = dq_i * c
    return dq, dk, dv


def bwd_einsum(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    """Keys outside, every product as an einsum, per-block gradients collected and concatenated."""
    T_q, T_k, d_k = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1.0 / math.sqrt(d_k)
    dq = torch.zeros_like(q)
    D = (grad_out * out).sum(-1, keepdim=True)                        # (..., T_q, 1)
    dks, dvs = [], []
    for j0 in range(0, T_k, block_k):
        j1 = min(j0 + block_k, T_k)
        k_j, v_j = k[..., j0:j1, :], v[..., j0:j1, :]
        dk_j, dv_j = torch.zeros_like(k_j), torch.zeros_like(v_j)
        for i0 in range(0, T_q, block_q):
            i1 = min(i0 + block_q, T_q)
            if causal and j0 >= i1:
                continue
            s = torch.einsum("...id,...jd->...ij", q[..., i0:i1, :], k_j) * scale
            if causal and j1 - 1 > i0:
                s = torch.where(torch.arange(j0, j1) > torch.arange(i0, i1)[:, None], NEG_INF, s)
            p = (s - lse[..., i0:i1].unsqueeze(-1)).exp()
            do_i = grad_out[..., i0:i1, :]
            dv_j = dv_j + torch.einsum("...ij,...ie->...je", p, do_i)
            ds = p * (torch.einsum("...ie,...je->...ij", do_i, v_j) - D[..., i0:i1, :])
            dq[..., i0:i1, :] += torch.einsum("...ij,...jd->...id", ds, k_j) * scale
            dk_j = dk_j + torch.einsum("...ij,...id->...jd", ds, q[..., i0:i1, :]) * scale
        dks.append(dk_j)
        dvs.append(dv_j)
    return dq, torch.cat(dks, dim=-2), torch.cat(dvs, dim=-2)


# =============================================================================================
# Exercise 4: linear_attention
# =============================================================================================
def linear_quadratic(q, k, v):
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    a = phi_q @ phi_k.transpose(-2, -1)  # slip: forms the T_q x T_k kernel matrix (the quadratic form)
    return (a / a.sum(dim=-1, keepdim=True)) @ v


def linear_denominator_quadratic(q, k, v):
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    S = phi_k.transpose(-2, -1) @ v
    den = (phi_q @ phi_k.transpose(-2, -1)).sum(dim=-1, keepdim=True)  # slip: denominator through the T_q x T_k matrix
    return (phi_q @ S) / den


def linear_elu_without_one(q, k, v):
    phi_q, phi_k = F.elu(q), F.elu(k)  # slip: phi = elu(x), the +1 forgotten (features can be negative)
    S = phi_k.transpose(-2, -1) @ v
    z = phi_k.sum(dim=-2)
    return (phi_q @ S) / (phi_q @ z[..., None])


def linear_elu_of_x_plus_one(q, k, v):
    phi_q, phi_k = F.elu(q + 1), F.elu(k + 1)  # slip: elu(x + 1) instead of elu(x) + 1
    S = phi_k.transpose(-2, -1) @ v
    z = phi_k.sum(dim=-2)
    return (phi_q @ S) / (phi_q @ z[..., None])


def linear_no_normaliser(q, k, v):
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    S = phi_k.transpose(-2, -1) @ v
    return phi_q @ S  # slip: numerator only, never divided by phi(q) . z


def linear_phi_only_on_k(q, k, v):
    phi_q, phi_k = q, F.elu(k) + 1  # slip: the feature map applied to k but not to q
    S = phi_k.transpose(-2, -1) @ v
    z = phi_k.sum(dim=-2)
    return (phi_q @ S) / (phi_q @ z[..., None])


def linear_softmax_scale(q, k, v):
    q = q / math.sqrt(q.shape[-1])  # slip: softmax's 1/sqrt(d_k) carried over into the kernel
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    S = phi_k.transpose(-2, -1) @ v
    z = phi_k.sum(dim=-2)
    return (phi_q @ S) / (phi_q @ z[..., None])


def linear_z_mean(q, k, v):
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    S = phi_k.transpose(-2, -1) @ v
    z = phi_k.mean(dim=-2)  # slip: mean over the keys instead of the sum, for z only
    return (phi_q @ S) / (phi_q @ z[..., None])


def linear_inplace_elu(q, k, v):
    phi_q, phi_k = F.elu(q, inplace=True) + 1, F.elu(k, inplace=True) + 1  # slip: elu in place overwrites the inputs q and k
    S = phi_k.transpose(-2, -1) @ v
    z = phi_k.sum(dim=-2)
    return (phi_q @ S) / (phi_q @ z[..., None])


# ---- right answers -------------------------------------------------------------------------
def linear_einsum(q, k, v):
    """S and z by einsum; the denominator as an element-wise product summed over d_k."""
    phi_q = torch.where(q > 0, q + 1, torch.exp(q))                   # elu(x) + 1, written out
    phi_k = torch.where(k > 0, k + 1, torch.exp(k))
    S = torch.einsum("...jd,...je->...de", phi_k, v)                  # (..., d_k, d_v)
    z = torch.einsum("...jd->...d", phi_k)                            # (..., d_k)
    num = torch.einsum("...td,...de->...te", phi_q, S)
    den = (phi_q * z.unsqueeze(-2)).sum(dim=-1, keepdim=True)
    return num / den


def linear_ones_column(q, k, v):
    """A column of ones appended to v: its output column is the denominator."""
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    v1 = torch.cat([v, v.new_ones(*v.shape[:-1], 1)], dim=-1)          # (..., T_k, d_v + 1)
    res = phi_q @ (phi_k.mT @ v1)                                     # (..., T_q, d_v + 1)
    return res[..., :-1] / res[..., -1:]


def linear_normalise_queries(q, k, v):
    """Each phi(q_t) divided by its denominator first, then multiplied by S."""
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    z = phi_k.sum(dim=-2, keepdim=True)                               # (..., 1, d_k)
    w = phi_q / (phi_q * z).sum(dim=-1, keepdim=True)                 # (..., T_q, d_k)
    return w @ (phi_k.mT @ v)


SLIPS = [
    ("online_softmax", "the old normaliser is not rescaled when the maximum grows", online_no_rescale),
    ("online_softmax", "the running maximum is overwritten before the rescale, so the old normaliser is never rescaled",
     online_m_updated_first),
    ("online_softmax", "the rescale factor is inverted: exp(m_new - m) instead of exp(m - m_new)",
     online_rescale_inverted),
    ("online_softmax", "no safe maximum: a fully masked block with nothing seen before gives NaN", online_no_safe_max),
    ("online_softmax", "the safe maximum is used for the block's exponentials but not in the rescale factor",
     online_safe_only_in_block_term),
    ("online_softmax", "no safe maximum; the NaN is replaced by 0 at the end, losing the blocks after a masked first block",
     online_nan_patched_at_end),
    ("online_softmax", "the running maximum starts at 0 instead of -inf", online_m_starts_at_zero),
    ("online_softmax", "the block's exponentials are summed over all rows at once, not per row", online_sum_whole_block),
    ("online_softmax", "the safe maximum clamps every negative maximum to 0, not only -inf", online_safe_clamped),
    ("online_softmax", "two passes: keeps the blocks, concatenates them, then takes the maximum and the sum",
     online_two_passes),

    ("merge_softmax_stats", "no safe maximum: two empty parts give NaN", merge_no_safe_max),
    ("merge_softmax_stats", "the normalisers are added without rescaling them to the common maximum", merge_no_rescale),
    ("merge_softmax_stats", "only the first part's normaliser is rescaled", merge_rescale_one_side),
    ("merge_softmax_stats", "the rescale exponents have the wrong sign: exp(m - m_i)", merge_sign_flipped),
    ("merge_softmax_stats", "the merged maximum is the minimum of the two", merge_minimum),
    ("merge_softmax_stats", "the safe maximum clamps every negative maximum to 0, not only -inf", merge_safe_clamped),
    ("merge_softmax_stats", "picks the larger part with torch.where but does not guard two empty parts (NaN)",
     merge_where_unguarded),
    ("merge_softmax_stats", "returns log(l) instead of l", merge_l_in_log_space),

    ("tiled_attention", "the scores are not divided by sqrt(d_k)", tiled_no_scale),
    ("tiled_attention", "the accumulator is not rescaled when the maximum grows (only l is)", tiled_acc_not_rescaled),
    ("tiled_attention", "the diagonal tile's causal mask uses positions within the tile, not in the sequence",
     tiled_tile_local_positions),
    ("tiled_attention", "no causal tile skipping: tiles above the diagonal are computed and masked", tiled_no_tile_skipping),
    ("tiled_attention", "builds the whole T x T causal mask and slices its tiles", tiled_whole_causal_mask),
    ("tiled_attention", "the boolean mask is inverted (True read as masked)", tiled_mask_inverted),
    ("tiled_attention", "the mask is sliced without broadcasting it to (..., T_q, T_k) first", tiled_mask_not_broadcast),
    ("tiled_attention", "the final division is not guarded: a query with no key gives NaN", tiled_unguarded_division),
    ("tiled_attention", "the log-sum-exp returned is log(l), without adding m", tiled_lse_without_m),
    ("tiled_attention", "out and lse are created in the default float32, not in q's dtype", tiled_float32_buffers),

    ("tiled_attention_backward", "D = rowsum(dO) without the output O", bwd_D_without_out),
    ("tiled_attention_backward", "dS = P * dP, the D term left out", bwd_no_D),
    ("tiled_attention_backward", "D is computed per tile as rowsum(P * dP) instead of once from dO and O", bwd_D_per_tile),
    ("tiled_attention_backward", "P is recomputed as a softmax within the tile instead of exp(S - L)", bwd_tile_softmax),
    ("tiled_attention_backward", "dq misses the 1/sqrt(d_k) factor", bwd_dq_unscaled),
    ("tiled_attention_backward", "dv is assigned (=) instead of accumulated (+=) over blocks of queries", bwd_dv_overwritten),
    ("tiled_attention_backward", "the diagonal tiles get no element-wise causal mask", bwd_no_diagonal_mask),
    ("tiled_attention_backward", "no causal tile skipping: tiles above the diagonal are computed and masked",
     bwd_no_tile_skipping),
    ("tiled_attention_backward", "recomputes all T x T scores at once and slices them per tile", bwd_full_P),
    ("tiled_attention_backward", "the gradients are created in the default float32, not in q's dtype", bwd_float32_grads),

    ("linear_attention", "forms the T_q x T_k kernel matrix (the quadratic form)", linear_quadratic),
    ("linear_attention", "the denominator goes through the T_q x T_k matrix", linear_denominator_quadratic),
    ("linear_attention", "feature map elu(x) without the +1", linear_elu_without_one),
    ("linear_attention", "feature map elu(x + 1) instead of elu(x) + 1", linear_elu_of_x_plus_one),
    ("linear_attention", "no normalisation: the numerator is returned without dividing by phi(q) . z",
     linear_no_normaliser),
    ("linear_attention", "the feature map is applied to k but not to q", linear_phi_only_on_k),
    ("linear_attention", "q is divided by sqrt(d_k) before the feature map", linear_softmax_scale),
    ("linear_attention", "z is the mean of phi(k) over the keys instead of the sum", linear_z_mean),
    ("linear_attention", "elu applied in place overwrites the inputs q and k", linear_inplace_elu),
]

CORRECT = [
    ("online_softmax", "m and l created from the first block, safe maximum through masked_fill", online_first_block_init),
    ("online_softmax", "each block's own statistics merged into the running ones", online_merge_block_stats),

    ("merge_softmax_stats", "plain formula, the NaN of two empty parts mapped to 0 with nan_to_num", merge_nan_to_num),
    ("merge_softmax_stats", "larger part keeps its l, the other scaled by exp(small - big), guarded", merge_big_small),

    ("tiled_attention", "per-tile statistics merged into the running ones, outputs concatenated, division by l clamped at 1",
     tiled_merge_tiles),
    ("tiled_attention", "causal limit as a range of keys per block of queries, masks added as a -inf bias",
     tiled_pattern_first),

    ("tiled_attention_backward", "blocks of queries outside, P masked after the exponential, scale folded into q",
     bwd_queries_outside),
    ("tiled_attention_backward", "keys outside, every product an einsum, dk and dv blocks concatenated", bwd_einsum),

    ("linear_attention", "einsum for S, z and the output, elu(x) + 1 written out with torch.where", linear_einsum),
    ("linear_attention", "a column of ones appended to v gives the denominator", linear_ones_column),
    ("linear_attention", "each phi(q_t) normalised first, then multiplied by S", linear_normalise_queries),
]

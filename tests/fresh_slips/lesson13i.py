"""Typical learner slips (and right answers written differently) for lesson 13, attention at scale.

Exercises (the `exercise` key): online_softmax, merge_softmax_stats, tiled_attention,
tiled_attention_backward, linear_attention.

Each entry of SLIPS / CORRECT is (exercise, description, answer); `answer` has the signature of the
lesson's function:
    online_softmax(blocks) -> (m, l)                       blocks: ea.column_blocks(x, b), each (R, b)
    merge_softmax_stats(m1, l1, m2, l2) -> (m, l)
    tiled_attention(q, k, v, block_q, block_k, causal=False, mask=None) -> (out, lse)
    tiled_attention_backward(q, k, v, out, lse, grad_out, block_q, block_k, causal=False) -> (dq, dk, dv)
    linear_attention(q, k, v) -> out
Every slip has one mistake, marked `# slip:` on its line.
"""
import math

import torch
import torch.nn.functional as F

from course_utils.masks import causal_mask

NEG_INF = float("-inf")


# =============================================================================================
# Exercise 1a: online_softmax
# =============================================================================================
def online_softmax_no_rescale(blocks):
    m, l = torch.tensor(NEG_INF), torch.tensor(0.0)
    for block in blocks:
        m_new = torch.maximum(m, block.amax(dim=-1))
        safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
        l = l + torch.exp(block - safe[..., None]).sum(dim=-1)  # slip: old l not rescaled by exp(m - m_new)
        m = m_new
    return m, l


def online_softmax_rescale_after_update(blocks):
    m, l = torch.tensor(NEG_INF), torch.tensor(0.0)
    for block in blocks:
        m = torch.maximum(m, block.amax(dim=-1))
        safe = torch.where(torch.isneginf(m), 0.0, m)
        l = l * torch.exp(m - safe) + torch.exp(block - safe[..., None]).sum(dim=-1)  # slip: m already overwritten, factor is exp(m_new - m_new)
    return m, l


def online_softmax_no_safe_max(blocks):
    m, l = torch.tensor(NEG_INF), torch.tensor(0.0)
    for block in blocks:
        m_new = torch.maximum(m, block.amax(dim=-1))
        l = l * torch.exp(m - m_new) + torch.exp(block - m_new[..., None]).sum(dim=-1)  # slip: no safe maximum, -inf - (-inf) = NaN
        m = m_new
    return m, l


def online_softmax_two_passes(blocks):
    kept = [block for block in blocks]  # slip: keeps the blocks and computes the statistics in a second pass
    x = torch.cat(kept, dim=-1)
    m = x.amax(dim=-1)
    safe = torch.where(torch.isneginf(m), 0.0, m)
    l = torch.exp(x - safe[..., None]).sum(dim=-1)
    return m, l


def online_softmax_global_max(blocks):
    m, l = torch.tensor(NEG_INF), torch.tensor(0.0)
    for block in blocks:
        m_new = torch.maximum(m, block.amax())  # slip: maximum over the whole block (all rows), not per row
        safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
        l = l * torch.exp(m - safe) + torch.exp(block - safe[..., None]).sum(dim=-1)
        m = m_new
    return m, l


def online_softmax_m_not_updated(blocks):
    m, l = torch.tensor(NEG_INF), torch.tensor(0.0)
    for block in blocks:
        m_new = torch.maximum(m, block.amax(dim=-1))
        safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
        l = l * torch.exp(m - safe) + torch.exp(block - safe[..., None]).sum(dim=-1)
        # slip: forgets m = m_new here, the running maximum never moves
    return m, l


def online_softmax_init_zero(blocks):
    m, l = torch.tensor(0.0), torch.tensor(0.0)  # slip: running maximum started at 0 instead of -inf
    for block in blocks:
        m_new = torch.maximum(m, block.amax(dim=-1))
        safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
        l = l * torch.exp(m - safe) + torch.exp(block - safe[..., None]).sum(dim=-1)
        m = m_new
    return m, l


def online_softmax_sum_all(blocks):
    m, l = torch.tensor(NEG_INF), torch.tensor(0.0)
    for block in blocks:
        m_new = torch.maximum(m, block.amax(dim=-1))
        safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
        l = l * torch.exp(m - safe) + torch.exp(block - safe[..., None]).sum()  # slip: sums over every row and column of the block
        m = m_new
    return m, l


def online_softmax_inplace_safe(blocks):
    m, l = torch.tensor(NEG_INF), torch.tensor(0.0)
    for block in blocks:
        m_new = torch.maximum(m, block.amax(dim=-1))
        m_new[torch.isneginf(m_new)] = 0.0  # slip: the safe maximum is written into m itself, an empty row ends with m = 0
        l = l * torch.exp(m - m_new) + torch.exp(block - m_new[..., None]).sum(dim=-1)
        m = m_new
    return m, l


def online_softmax_old_max_for_block(blocks):
    m, l = torch.tensor(NEG_INF), torch.tensor(0.0)
    for block in blocks:
        m_new = torch.maximum(m, block.amax(dim=-1))
        safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
        safe_old = torch.where(torch.isneginf(m), 0.0, m)
        l = l * torch.exp(m - safe) + torch.exp(block - safe_old[..., None]).sum(dim=-1)  # slip: new block measured from the old maximum
        m = m_new
    return m, l


# right answers
def online_softmax_logaddexp(blocks):
    """Keeps the running log-sum-exp instead of l; l = exp(lse - m) at the end."""
    m, lse = None, None
    for block in blocks:
        block_m, block_lse = block.amax(dim=-1), torch.logsumexp(block, dim=-1)
        if m is None:
            m, lse = block_m, block_lse
        else:
            m, lse = torch.maximum(m, block_m), torch.logaddexp(lse, block_lse)
    safe = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
    return m, torch.exp(lse - safe)


def online_softmax_guarded_terms(blocks):
    """Guards every exponential with torch.where instead of a safe maximum."""
    m = l = None
    for block in blocks:
        if m is None:
            m = torch.full(block.shape[:-1], NEG_INF, dtype=block.dtype)
            l = torch.zeros(block.shape[:-1], dtype=block.dtype)
        m_new = torch.maximum(m, block.max(dim=-1).values)
        rescale = torch.where(torch.isneginf(m), torch.zeros_like(m), torch.exp(m - m_new))
        terms = torch.where(torch.isneginf(block), torch.zeros_like(block), torch.exp(block - m_new.unsqueeze(-1)))
        l = rescale * l + terms.sum(dim=-1)
        m = m_new
    return m, l


# =============================================================================================
# Exercise 1b: merge_softmax_stats
# =============================================================================================
def merge_no_safe(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    return m, l1 * torch.exp(m1 - m) + l2 * torch.exp(m2 - m)  # slip: no safe maximum, two empty parts give NaN


def merge_no_rescale(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    return m, l1 + l2  # slip: adds the normalisers without moving them to the common maximum


def merge_rescale_one(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    safe = torch.where(torch.isneginf(m), 0.0, m)
    return m, l1 * torch.exp(m1 - safe) + l2  # slip: only the first part is rescaled


def merge_sign_flipped(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    safe = torch.where(torch.isneginf(m), 0.0, m)
    return m, l1 * torch.exp(safe - m1) + l2 * torch.exp(safe - m2)  # slip: exponent sign flipped, exp(m - m_i)


def merge_inplace_safe(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    m[torch.isneginf(m)] = 0.0  # slip: safe maximum written into m, two empty parts return m = 0
    return m, l1 * torch.exp(m1 - m) + l2 * torch.exp(m2 - m)


def merge_swapped_return(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    safe = torch.where(torch.isneginf(m), 0.0, m)
    return l1 * torch.exp(m1 - safe) + l2 * torch.exp(m2 - safe), m  # slip: returns (l, m) instead of (m, l)


def merge_first_is_max(m1, l1, m2, l2):
    m = m1  # slip: assumes the first part holds the maximum
    safe = torch.where(torch.isneginf(m), 0.0, m)
    return m, l1 * torch.exp(m1 - safe) + l2 * torch.exp(m2 - safe)


# right answers
def merge_logaddexp(m1, l1, m2, l2):
    """Merges the two log-sum-exps, then measures l from the common maximum."""
    m = torch.max(m1, m2)
    lse = torch.logaddexp(m1 + torch.log(l1), m2 + torch.log(l2))
    return m, torch.exp(lse - torch.where(torch.isneginf(m), torch.zeros_like(m), m))


def merge_guarded(m1, l1, m2, l2):
    """Each part's term is zero where the part is empty, without a safe maximum."""
    m = torch.maximum(m1, m2)
    t1 = torch.where(l1 > 0, l1 * torch.exp(m1 - m), torch.zeros_like(l1))
    t2 = torch.where(l2 > 0, l2 * torch.exp(m2 - m), torch.zeros_like(l2))
    return m, t1 + t2


# =============================================================================================
# Exercise 2: tiled_attention
# =============================================================================================
def tiled_no_scale(q, k, v, block_q, block_k, causal=False, mask=None):
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    out = q.new_zeros(*lead, T_q, d_v)
    lse = q.new_zeros(*lead, T_q)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        q_i = q[..., i0:i1, :]  # slip: scores not divided by sqrt(d_k)
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
        lse[..., i0:i1] = torch.where(seen, m + torch.log(l), NEG_INF)
    return out, lse


def tiled_local_causal_indices(q, k, v, block_q, block_k, causal=False, mask=None):
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    out = q.new_zeros(*lead, T_q, d_v)
    lse = q.new_zeros(*lead, T_q)
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
        seen = l > 0
        out[..., i0:i1, :] = torch.where(seen[..., None], acc / torch.where(seen, l, 1.0)[..., None], 0.0)
        lse[..., i0:i1] = torch.where(seen, m + torch.log(l), NEG_INF)
    return out, lse


def tiled_no_skip(q, k, v, block_q, block_k, causal=False, mask=None):
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    out = q.new_zeros(*lead, T_q, d_v)
    lse = q.new_zeros(*lead, T_q)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        q_i = q[..., i0:i1, :] / math.sqrt(d_k)
        m = q.new_full((*lead, i1 - i0), NEG_INF)
        l = q.new_zeros(*lead, i1 - i0)
        acc = q.new_zeros(*lead, i1 - i0, d_v)
        for j0 in range(0, T_k, block_k):  # slip: tiles above the diagonal are computed (and masked), never skipped
            j1 = min(j0 + block_k, T_k)
            s = q_i @ k[..., j0:j1, :].transpose(-2, -1)
            keep = None
            if causal:
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
        lse[..., i0:i1] = torch.where(seen, m + torch.log(l), NEG_INF)
    return out, lse


def tiled_full_causal_mask(q, k, v, block_q, block_k, causal=False, mask=None):
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    full = causal_mask(max(T_q, T_k))[:T_q, :T_k] if causal else None  # slip: builds the whole T x T causal mask, then slices tiles of it
    out = q.new_zeros(*lead, T_q, d_v)
    lse = q.new_zeros(*lead, T_q)
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
                keep = full[i0:i1, j0:j1]
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
        lse[..., i0:i1] = torch.where(seen, m + torch.log(l), NEG_INF)
    return out, lse


def tiled_acc_not_rescaled(q, k, v, block_q, block_k, causal=False, mask=None):
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    out = q.new_zeros(*lead, T_q, d_v)
    lse = q.new_zeros(*lead, T_q)
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
        seen = l > 0
        out[..., i0:i1, :] = torch.where(seen[..., None], acc / torch.where(seen, l, 1.0)[..., None], 0.0)
        lse[..., i0:i1] = torch.where(seen, m + torch.log(l), NEG_INF)
    return out, lse


def tiled_lse_without_max(q, k, v, block_q, block_k, causal=False, mask=None):
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    out = q.new_zeros(*lead, T_q, d_v)
    lse = q.new_zeros(*lead, T_q)
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
        lse[..., i0:i1] = torch.where(seen, torch.log(l), NEG_INF)  # slip: log l without adding the maximum m
    return out, lse


def tiled_no_safe_max(q, k, v, block_q, block_k, causal=False, mask=None):
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    out = q.new_zeros(*lead, T_q, d_v)
    lse = q.new_zeros(*lead, T_q)
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
            p = torch.exp(s - m_new[..., None])  # slip: no safe maximum, a fully masked row gives exp(-inf + inf) = NaN
            rescale = torch.exp(m - m_new)
            l = l * rescale + p.sum(dim=-1)
            acc = acc * rescale[..., None] + p @ v[..., j0:j1, :]
            m = m_new
        seen = l > 0
        out[..., i0:i1, :] = torch.where(seen[..., None], acc / torch.where(seen, l, 1.0)[..., None], 0.0)
        lse[..., i0:i1] = torch.where(seen, m + torch.log(l), NEG_INF)
    return out, lse


def tiled_mask_inverted(q, k, v, block_q, block_k, causal=False, mask=None):
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    out = q.new_zeros(*lead, T_q, d_v)
    lse = q.new_zeros(*lead, T_q)
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
                s = s.masked_fill(keep, NEG_INF)  # slip: fills the pairs that may attend (mask read inverted)
            m_new = torch.maximum(m, s.amax(dim=-1))
            safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
            p = torch.exp(s - safe[..., None])
            rescale = torch.exp(m - safe)
            l = l * rescale + p.sum(dim=-1)
            acc = acc * rescale[..., None] + p @ v[..., j0:j1, :]
            m = m_new
        seen = l > 0
        out[..., i0:i1, :] = torch.where(seen[..., None], acc / torch.where(seen, l, 1.0)[..., None], 0.0)
        lse[..., i0:i1] = torch.where(seen, m + torch.log(l), NEG_INF)
    return out, lse


def tiled_float32_outputs(q, k, v, block_q, block_k, causal=False, mask=None):
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    out = torch.zeros(*lead, T_q, d_v)  # slip: torch.zeros is float32, float64 inputs come back in float32
    lse = torch.zeros(*lead, T_q)
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
        lse[..., i0:i1] = torch.where(seen, m + torch.log(l), NEG_INF)
    return out, lse


def tiled_mask_not_broadcast(q, k, v, block_q, block_k, causal=False, mask=None):
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    out = q.new_zeros(*lead, T_q, d_v)
    lse = q.new_zeros(*lead, T_q)
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
                keep = mask[..., i0:i1, j0:j1] if keep is None else keep & mask[..., i0:i1, j0:j1]  # slip: slices the mask as given, never broadcast to (..., T_q, T_k) first
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
        lse[..., i0:i1] = torch.where(seen, m + torch.log(l), NEG_INF)
    return out, lse


# right answers
def tiled_range_bound(q, k, v, block_q, block_k, causal=False, mask=None):
    """The loop over keys simply stops at the diagonal; scores scaled after the product; the output
    gathered as a list of blocks; lse = m + log l needs no guard (-inf + -inf = -inf)."""
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = mask.expand(*lead, T_q, T_k)                      # a view, as broadcast_to
    outs, lses = [], []
    scale = d_k ** -0.5
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        rows = torch.arange(i0, i1)
        m = torch.full((*lead, i1 - i0), NEG_INF, dtype=q.dtype)
        l = torch.zeros((*lead, i1 - i0), dtype=q.dtype)
        acc = torch.zeros((*lead, i1 - i0, d_v), dtype=q.dtype)
        stop = min(T_k, i1) if causal else T_k                    # keys after the last query: never reached
        for j0 in range(0, stop, block_k):
            j1 = min(j0 + block_k, T_k)
            s = torch.matmul(q[..., i0:i1, :], k[..., j0:j1, :].transpose(-1, -2)) * scale
            if causal:
                s = s.masked_fill(torch.arange(j0, j1)[None, :] > rows[:, None], NEG_INF)
            if mask is not None:
                s = s.masked_fill(~mask[..., i0:i1, j0:j1], NEG_INF)
            m_new = torch.max(m, s.max(dim=-1).values)
            ref = torch.nan_to_num(m_new, neginf=0.0)
            alpha = torch.exp(m - ref)
            p = torch.exp(s - ref.unsqueeze(-1))
            l = alpha * l + p.sum(-1)
            acc = alpha.unsqueeze(-1) * acc + torch.matmul(p, v[..., j0:j1, :])
            m = m_new
        outs.append(acc / l.clamp_min(torch.finfo(q.dtype).tiny).unsqueeze(-1))   # l = 0 only where acc = 0
        lses.append(m + torch.log(l))
    return torch.cat(outs, dim=-2), torch.cat(lses, dim=-1)


def tiled_keep_list(q, k, v, block_q, block_k, causal=False, mask=None):
    """Builds each tile's visibility as one boolean (bq, bk) tile (all True when nothing hides), skips by
    comparing the tile's first key with its last query, and normalises with torch.where."""
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    full_mask = None if mask is None else torch.broadcast_to(mask, (*lead, T_q, T_k))
    out = q.new_empty(*lead, T_q, d_v)
    lse = q.new_empty(*lead, T_q)
    for i0 in range(0, T_q, block_q):
        i1 = min(T_q, i0 + block_q)
        q_i = q[..., i0:i1, :]
        m = q.new_full(q_i.shape[:-1], NEG_INF)
        l = q.new_zeros(q_i.shape[:-1])
        acc = q.new_zeros(*q_i.shape[:-1], d_v)
        for j0 in range(0, T_k, block_k):
            if causal and j0 >= i1:
                continue
            j1 = min(T_k, j0 + block_k)
            s = (q_i @ k[..., j0:j1, :].mT) / math.sqrt(d_k)
            visible = torch.ones(i1 - i0, j1 - j0, dtype=torch.bool)
            if causal:
                visible = visible & (torch.arange(j0, j1)[None, :] <= torch.arange(i0, i1)[:, None])
            if full_mask is not None:
                visible = visible & full_mask[..., i0:i1, j0:j1]
            s = torch.where(visible, s, torch.full_like(s, NEG_INF))
            m_new = torch.maximum(m, s.amax(-1))
            base = torch.where(m_new == NEG_INF, torch.zeros_like(m_new), m_new)
            p = (s - base[..., None]).exp()
            factor = (m - base).exp()
            l = factor * l + p.sum(-1)
            acc = factor[..., None] * acc + p @ v[..., j0:j1, :]
            m = m_new
        has_key = l > 0
        out[..., i0:i1, :] = torch.where(has_key[..., None], acc / torch.where(has_key, l, torch.ones_like(l))[..., None],
                                         torch.zeros_like(acc))
        lse[..., i0:i1] = torch.where(has_key, m + torch.log(torch.where(has_key, l, torch.ones_like(l))),
                                      torch.full_like(m, NEG_INF))
    return out, lse


# =============================================================================================
# Exercise 3: tiled_attention_backward
# =============================================================================================
def backward_no_D(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
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
            ds = p * dp  # slip: the softmax's D term (rowsum(dO * O)) is left out
            dq[..., i0:i1, :] += ds @ k_j * scale
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i * scale
    return dq, dk, dv


def backward_grad_unscaled(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
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
            dq[..., i0:i1, :] += ds @ k_j  # slip: dQ and dK without the 1/sqrt(d_k) of the scores
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i
    return dq, dk, dv


def backward_tile_softmax(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
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
            p = torch.softmax(s, dim=-1)  # slip: softmax within the tile instead of exp(S - L) from the stored lse
            dv[..., j0:j1, :] += p.transpose(-2, -1) @ do_i
            dp = do_i @ v_j.transpose(-2, -1)
            ds = p * (dp - D[..., i0:i1, None])
            dq[..., i0:i1, :] += ds @ k_j * scale
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i * scale
    return dq, dk, dv


def backward_local_causal_indices(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
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
                s = s.masked_fill(torch.arange(j1 - j0)[None, :] > torch.arange(i1 - i0)[:, None], NEG_INF)  # slip: causal mask in tile coordinates
            p = torch.exp(s - lse[..., i0:i1, None])
            dv[..., j0:j1, :] += p.transpose(-2, -1) @ do_i
            dp = do_i @ v_j.transpose(-2, -1)
            ds = p * (dp - D[..., i0:i1, None])
            dq[..., i0:i1, :] += ds @ k_j * scale
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i * scale
    return dq, dk, dv


def backward_no_skip(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    T_q, T_k, d_k = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1 / math.sqrt(d_k)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    D = (grad_out * out).sum(dim=-1)
    for j0 in range(0, T_k, block_k):
        j1 = min(j0 + block_k, T_k)
        k_j, v_j = k[..., j0:j1, :], v[..., j0:j1, :]
        for i0 in range(0, T_q, block_q):  # slip: tiles above the diagonal are computed and masked, not skipped
            i1 = min(i0 + block_q, T_q)
            q_i, do_i = q[..., i0:i1, :], grad_out[..., i0:i1, :]
            s = q_i @ k_j.transpose(-2, -1) * scale
            if causal:
                s = s.masked_fill(torch.arange(j0, j1)[None, :] > torch.arange(i0, i1)[:, None], NEG_INF)
            p = torch.exp(s - lse[..., i0:i1, None])
            dv[..., j0:j1, :] += p.transpose(-2, -1) @ do_i
            dp = do_i @ v_j.transpose(-2, -1)
            ds = p * (dp - D[..., i0:i1, None])
            dq[..., i0:i1, :] += ds @ k_j * scale
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i * scale
    return dq, dk, dv


def backward_sign_flipped(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
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
            ds = p * (D[..., i0:i1, None] - dp)  # slip: dS = P * (D - dP), sign flipped
            dq[..., i0:i1, :] += ds @ k_j * scale
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i * scale
    return dq, dk, dv


def backward_float32_grads(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    T_q, T_k, d_k = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1 / math.sqrt(d_k)
    dq, dk, dv = torch.zeros(q.shape), torch.zeros(k.shape), torch.zeros(v.shape)  # slip: torch.zeros(shape) is float32 whatever q's dtype
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


def backward_assign_not_accumulate(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
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
            dq[..., i0:i1, :] = ds @ k_j * scale  # slip: dQ assigned, not accumulated over the blocks of keys
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i * scale
    return dq, dk, dv


def backward_full_P(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    T_q, T_k, d_k = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1 / math.sqrt(d_k)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    D = (grad_out * out).sum(dim=-1)
    P = torch.exp(q @ k.transpose(-2, -1) * scale - lse[..., None])  # slip: recomputes the whole T x T P at once, then slices tiles
    for j0 in range(0, T_k, block_k):
        j1 = min(j0 + block_k, T_k)
        k_j, v_j = k[..., j0:j1, :], v[..., j0:j1, :]
        for i0 in range(0, T_q, block_q):
            i1 = min(i0 + block_q, T_q)
            if causal and j0 > i1 - 1:
                continue
            q_i, do_i = q[..., i0:i1, :], grad_out[..., i0:i1, :]
            p = P[..., i0:i1, j0:j1]
            if causal and j1 - 1 > i0:
                p = p.masked_fill(torch.arange(j0, j1)[None, :] > torch.arange(i0, i1)[:, None], 0.0)
            dv[..., j0:j1, :] += p.transpose(-2, -1) @ do_i
            dp = do_i @ v_j.transpose(-2, -1)
            ds = p * (dp - D[..., i0:i1, None])
            dq[..., i0:i1, :] += ds @ k_j * scale
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i * scale
    return dq, dk, dv


def backward_recompute_unscaled(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
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
            s = q_i @ k_j.transpose(-2, -1)  # slip: recomputed scores not divided by sqrt(d_k)
            if causal and j1 - 1 > i0:
                s = s.masked_fill(torch.arange(j0, j1)[None, :] > torch.arange(i0, i1)[:, None], NEG_INF)
            p = torch.exp(s - lse[..., i0:i1, None])
            dv[..., j0:j1, :] += p.transpose(-2, -1) @ do_i
            dp = do_i @ v_j.transpose(-2, -1)
            ds = p * (dp - D[..., i0:i1, None])
            dq[..., i0:i1, :] += ds @ k_j * scale
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i * scale
    return dq, dk, dv


# right answers
def backward_queries_outside(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    """Blocks of queries outside; dQ_i gathered in a local tensor; the scale folded into q; the causal
    mask applied to P (zeros) after the exponential."""
    T_q, T_k, d_k = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = d_k ** -0.5
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    D = torch.einsum("...td,...td->...t", grad_out, out)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        q_i = q[..., i0:i1, :] * scale
        do_i, L_i, D_i = grad_out[..., i0:i1, :], lse[..., i0:i1].unsqueeze(-1), D[..., i0:i1].unsqueeze(-1)
        dq_i = torch.zeros_like(q_i)
        last_key = min(T_k, i1) if causal else T_k
        for j0 in range(0, last_key, block_k):
            j1 = min(j0 + block_k, T_k)
            k_j, v_j = k[..., j0:j1, :], v[..., j0:j1, :]
            p = torch.exp(q_i @ k_j.mT - L_i)
            if causal:
                p = torch.where(torch.arange(j0, j1)[None, :] <= torch.arange(i0, i1)[:, None], p, 0.0)
            dv[..., j0:j1, :] += p.mT @ do_i
            ds = p * (do_i @ v_j.mT - D_i)
            dq_i += ds @ k_j
            dk[..., j0:j1, :] += ds.mT @ q_i                       # q_i already carries the scale
        dq[..., i0:i1, :] = dq_i * scale
    return dq, dk, dv


def backward_pds_expanded(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    """Keys outside as FlashAttention-2; dS = P*dP - P*D written out; the skip test j0 >= i1."""
    T_q, T_k = q.shape[-2], k.shape[-2]
    inv = 1.0 / math.sqrt(q.size(-1))
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    D = (grad_out * out).sum(-1, keepdim=True)                      # (..., T_q, 1)
    for j0 in range(0, T_k, block_k):
        j1 = min(j0 + block_k, T_k)
        dk_j, dv_j = torch.zeros_like(k[..., j0:j1, :]), torch.zeros_like(v[..., j0:j1, :])
        for i0 in range(0, T_q, block_q):
            i1 = min(i0 + block_q, T_q)
            if causal and j0 >= i1:
                continue
            s = torch.matmul(q[..., i0:i1, :], k[..., j0:j1, :].transpose(-1, -2)) * inv
            if causal:
                hidden = torch.arange(j0, j1).view(1, -1) > torch.arange(i0, i1).view(-1, 1)
                s = s.masked_fill(hidden, NEG_INF)
            p = (s - lse[..., i0:i1, None]).exp()
            dp = torch.matmul(grad_out[..., i0:i1, :], v[..., j0:j1, :].transpose(-1, -2))
            ds = p * dp - p * D[..., i0:i1, :]
            dv_j += torch.matmul(p.transpose(-1, -2), grad_out[..., i0:i1, :])
            dk_j += torch.matmul(ds.transpose(-1, -2), q[..., i0:i1, :]) * inv
            dq[..., i0:i1, :] += torch.matmul(ds, k[..., j0:j1, :]) * inv
        dk[..., j0:j1, :], dv[..., j0:j1, :] = dk_j, dv_j
    return dq, dk, dv


# =============================================================================================
# Exercise 4: linear_attention
# =============================================================================================
def linear_no_feature_map(q, k, v):
    phi_q, phi_k = q, k  # slip: no feature map, raw q and k (not positive)
    S = phi_k.transpose(-2, -1) @ v
    z = phi_k.sum(dim=-2)
    return (phi_q @ S) / (phi_q @ z[..., None])


def linear_elu_without_one(q, k, v):
    phi_q, phi_k = F.elu(q), F.elu(k)  # slip: elu(x) without the + 1
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
    return phi_q @ S  # slip: never divides by phi(q) . z


def linear_quadratic(q, k, v):
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    a = phi_q @ phi_k.transpose(-2, -1)  # slip: forms the T_q x T_k kernel matrix (quadratic form)
    return (a / a.sum(dim=-1, keepdim=True)) @ v


def linear_S_transposed(q, k, v):
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    S = v.transpose(-2, -1) @ phi_k  # slip: S = vᵀ phi(k), (d_v, d_k), transposed
    z = phi_k.sum(dim=-2)
    return (phi_q @ S) / (phi_q @ z[..., None])


def linear_scaled_queries(q, k, v):
    phi_q, phi_k = F.elu(q / math.sqrt(q.size(-1))) + 1, F.elu(k) + 1  # slip: softmax's 1/sqrt(d_k) carried into the feature map
    S = phi_k.transpose(-2, -1) @ v
    z = phi_k.sum(dim=-2)
    return (phi_q @ S) / (phi_q @ z[..., None])


def linear_mean_S_sum_z(q, k, v):
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    S = phi_k.transpose(-2, -1) @ v / k.size(-2)  # slip: S averaged over the keys while z is summed
    z = phi_k.sum(dim=-2)
    return (phi_q @ S) / (phi_q @ z[..., None])


def linear_z_from_queries(q, k, v):
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    S = phi_k.transpose(-2, -1) @ v
    z = phi_q.sum(dim=-2)  # slip: normaliser summed over the queries' features, not the keys'
    return (phi_q @ S) / (phi_q @ z[..., None])


# right answers
def linear_einsum(q, k, v):
    """The same sums written with einsum."""
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    S = torch.einsum("...jd,...je->...de", phi_k, v)
    z = torch.einsum("...jd->...d", phi_k)
    num = torch.einsum("...td,...de->...te", phi_q, S)
    den = torch.einsum("...td,...d->...t", phi_q, z)
    return num / den.unsqueeze(-1)


def linear_ones_column(q, k, v):
    """Appends a column of ones to v: the last column of phi(q) (phi(k)ᵀ [v, 1]) is the normaliser."""
    phi_q = torch.where(q > 0, q + 1, torch.exp(q))               # elu(x) + 1, written out
    phi_k = torch.where(k > 0, k + 1, torch.exp(k))
    v1 = torch.cat([v, torch.ones_like(v[..., :1])], dim=-1)      # (..., T_k, d_v + 1)
    both = phi_q @ (phi_k.transpose(-2, -1) @ v1)                  # (..., T_q, d_v + 1)
    return both[..., :-1] / both[..., -1:]


# =============================================================================================
SLIPS = [
    ("online_softmax", "The old normaliser is not rescaled by exp(m_old - m_new) when the maximum grows.",
     online_softmax_no_rescale),
    ("online_softmax", "m is overwritten with the new maximum before the rescale factor is computed, so the factor is always 1.",
     online_softmax_rescale_after_update),
    ("online_softmax", "No safe maximum: a row or first block of -inf gives exp(-inf - (-inf)) = NaN.",
     online_softmax_no_safe_max),
    ("online_softmax", "Keeps the blocks in a list and takes the maximum and sum of their concatenation afterwards (two passes).",
     online_softmax_two_passes),
    ("online_softmax", "The block's maximum is taken over all rows at once instead of per row.",
     online_softmax_global_max),
    ("online_softmax", "Forgets to store the new maximum (m = m_new), so m stays -inf.",
     online_softmax_m_not_updated),
    ("online_softmax", "The running maximum starts at 0 instead of -inf.",
     online_softmax_init_zero),
    ("online_softmax", "The block's exponentials are summed over the whole block, not per row.",
     online_softmax_sum_all),
    ("online_softmax", "The safe maximum (0 for -inf) is written into m itself, so a fully masked row returns m = 0.",
     online_softmax_inplace_safe),
    ("online_softmax", "The new block's exponentials are measured from the old maximum instead of the new one.",
     online_softmax_old_max_for_block),

    ("merge_softmax_stats", "No safe maximum: two empty parts give exp(-inf - (-inf)) = NaN.", merge_no_safe),
    ("merge_softmax_stats", "Adds l1 + l2 without rescaling them to the common maximum.", merge_no_rescale),
    ("merge_softmax_stats", "Rescales only the first part's normaliser; the second is added as is.", merge_rescale_one),
    ("merge_softmax_stats", "Exponent sign flipped: multiplies by exp(m - m_i) instead of exp(m_i - m).", merge_sign_flipped),
    ("merge_softmax_stats", "Writes the safe 0 into m itself, so two empty parts return m = 0 instead of -inf.",
     merge_inplace_safe),
    ("merge_softmax_stats", "Returns (l, m) in the wrong order.", merge_swapped_return),
    ("merge_softmax_stats", "Assumes the first part holds the larger maximum: m = m1.", merge_first_is_max),

    ("tiled_attention", "Scores are not divided by sqrt(d_k).", tiled_no_scale),
    ("tiled_attention", "The causal mask of a diagonal tile compares positions within the tile instead of in the whole sequence.",
     tiled_local_causal_indices),
    ("tiled_attention", "Tiles above the diagonal are computed and masked instead of skipped.", tiled_no_skip),
    ("tiled_attention", "Builds the whole T x T causal mask and slices its tiles.", tiled_full_causal_mask),
    ("tiled_attention", "The normaliser l is rescaled as the maximum grows but the accumulator is not.",
     tiled_acc_not_rescaled),
    ("tiled_attention", "Returns log l as the log-sum-exp, forgetting to add the maximum m.", tiled_lse_without_max),
    ("tiled_attention", "No safe maximum: a fully masked row (padding) gives NaN.", tiled_no_safe_max),
    ("tiled_attention", "Mask read inverted: fills the allowed pairs with -inf instead of the hidden ones.",
     tiled_mask_inverted),
    ("tiled_attention", "Creates out and lse with torch.zeros (float32) instead of in q's dtype.", tiled_float32_outputs),
    ("tiled_attention", "Slices the given mask without broadcasting it first, so a (B, 1, 1, T) padding mask breaks past the first block of queries.",
     tiled_mask_not_broadcast),

    ("tiled_attention_backward", "Leaves out D: dS = P * dP.", backward_no_D),
    ("tiled_attention_backward", "dQ and dK miss the 1/sqrt(d_k) factor of the scores.", backward_grad_unscaled),
    ("tiled_attention_backward", "Recomputes P as a softmax within each tile instead of exp(S - L).", backward_tile_softmax),
    ("tiled_attention_backward", "The causal mask of a diagonal tile uses positions within the tile.",
     backward_local_causal_indices),
    ("tiled_attention_backward", "Tiles above the diagonal are computed and masked instead of skipped.", backward_no_skip),
    ("tiled_attention_backward", "Sign flipped in dS: P * (D - dP).", backward_sign_flipped),
    ("tiled_attention_backward", "Gradients created with torch.zeros(shape), float32 whatever the inputs' dtype.",
     backward_float32_grads),
    ("tiled_attention_backward", "dQ is assigned for each tile instead of accumulated over the blocks of keys.",
     backward_assign_not_accumulate),
    ("tiled_attention_backward", "Recomputes the whole T x T matrix P at once and slices tiles of it.", backward_full_P),
    ("tiled_attention_backward", "The recomputed scores are not divided by sqrt(d_k).", backward_recompute_unscaled),

    ("linear_attention", "No feature map: uses q and k directly.", linear_no_feature_map),
    ("linear_attention", "Feature map elu(x) without the + 1.", linear_elu_without_one),
    ("linear_attention", "Feature map elu(x + 1) instead of elu(x) + 1.", linear_elu_of_x_plus_one),
    ("linear_attention", "Forgets the normaliser phi(q) . z.", linear_no_normaliser),
    ("linear_attention", "Computes the T_q x T_k kernel matrix phi(q) phi(k)ᵀ (the quadratic form).", linear_quadratic),
    ("linear_attention", "S built as vᵀ phi(k) (transposed) instead of phi(k)ᵀ v.", linear_S_transposed),
    ("linear_attention", "Divides q by sqrt(d_k) inside the feature map, as in softmax attention.", linear_scaled_queries),
    ("linear_attention", "S is averaged over the keys while z is summed.", linear_mean_S_sum_z),
    ("linear_attention", "The normaliser z is summed from the queries' features instead of the keys'.", linear_z_from_queries),
]

CORRECT = [
    ("online_softmax", "Keeps a running log-sum-exp (logaddexp) and the maximum; l = exp(lse - m) at the end.",
     online_softmax_logaddexp),
    ("online_softmax", "Starts m, l from the first block's shape and guards every exponential with torch.where.",
     online_softmax_guarded_terms),
    ("merge_softmax_stats", "Merges the parts' log-sum-exps with logaddexp.", merge_logaddexp),
    ("merge_softmax_stats", "Each part's term zeroed with torch.where where the part is empty.", merge_guarded),
    ("tiled_attention", "Key loop bounded at the diagonal, mask applied on every tile, list of blocks concatenated, clamped division.",
     tiled_range_bound),
    ("tiled_attention", "One boolean visibility tile per tile, torch.where for the masking and the final division.",
     tiled_keep_list),
    ("tiled_attention_backward", "Blocks of queries outside, scale folded into q, causal mask applied to P after the exponential.",
     backward_queries_outside),
    ("tiled_attention_backward", "Keys outside with local dK, dV blocks; dS = P*dP - P*D.", backward_pds_expanded),
    ("linear_attention", "The same sums written with einsum.", linear_einsum),
    ("linear_attention", "A column of ones appended to v gives the normaliser; elu + 1 written with torch.where.",
     linear_ones_column),
]

"""Lesson 13 (attention at scale): an independent catalogue of learner slips and unusual correct answers.

Written from the notebook's text and the reference solution only. Every function is a learner's whole answer,
with the exercise's signature; in a slip exactly one thing is wrong, marked by a trailing `# slip: ...`.
Descriptions starting with "u: " are the less textbook slips.
"""
import math

import torch
import torch.nn.functional as F

NEG = float("-inf")


# ====================================================================== online_softmax
def os_u_max_wrong_axis(blocks):
    m, l = torch.tensor(NEG), torch.tensor(0.0)
    for block in blocks:
        m_new = torch.maximum(m, block.amax(dim=0))                           # slip: max over the rows, not the columns
        safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
        l = l * torch.exp(m - safe) + torch.exp(block - safe[..., None]).sum(dim=-1)
        m = m_new
    return m, l


def os_u_safe_not_unsqueezed(blocks):
    m, l = torch.tensor(NEG), torch.tensor(0.0)
    for block in blocks:
        m_new = torch.maximum(m, block.amax(dim=-1))
        safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
        l = l * torch.exp(m - safe) + torch.exp(block - safe).sum(dim=-1)   # slip: (R, b) - (R,) broadcasts along columns
        m = m_new
    return m, l


def os_u_keepdim_max(blocks):
    m, l = torch.tensor(NEG), torch.tensor(0.0)
    for block in blocks:
        m_new = torch.maximum(m, block.amax(dim=-1, keepdim=True))           # slip: keepdim: m (R, 1), then (R, R)
        safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
        l = l * torch.exp(m - safe) + torch.exp(block - safe).sum(dim=-1)
        m = m_new
    return m, l


def os_u_exp_split(blocks):
    m, l = torch.tensor(NEG), torch.tensor(0.0)
    for block in blocks:
        m_new = torch.maximum(m, block.amax(dim=-1))
        safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
        l = l * torch.exp(m - safe) + torch.exp(block).sum(dim=-1) / torch.exp(safe)   # slip: e^x / e^m overflows
        m = m_new
    return m, l


def os_u_clamp_safe(blocks):
    m, l = torch.tensor(NEG), torch.tensor(0.0)
    for block in blocks:
        m_new = torch.maximum(m, block.amax(dim=-1))
        safe = m_new.clamp(min=0.0)                                           # slip: also moves negative maxima to 0
        l = l * torch.exp(m - safe) + torch.exp(block - safe[..., None]).sum(dim=-1)
        m = m_new
    return m, l



def os_u_l_starts_neginf(blocks):
    m, l = torch.tensor(NEG), torch.tensor(NEG)                              # slip: l started at -inf (copy of m)
    for block in blocks:
        m_new = torch.maximum(m, block.amax(dim=-1))
        safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
        l = l * torch.exp(m - safe) + torch.exp(block - safe[..., None]).sum(dim=-1)
        m = m_new
    return m, l


def os_rescale_on_block_term(blocks):
    m, l = torch.tensor(NEG), torch.tensor(0.0)
    for block in blocks:
        m_new = torch.maximum(m, block.amax(dim=-1))
        safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
        l = l + torch.exp(m - safe) * torch.exp(block - safe[..., None]).sum(dim=-1)   # slip: factor on the new term
        m = m_new
    return m, l


def os_ok_nan_to_num(blocks):
    """Raw formula, then the NaN of exp(-inf - (-inf)) cleaned: l * e^(m - m_new) is 0 * NaN only in rows
    where l is 0 anyway."""
    m, l = torch.tensor(NEG), torch.tensor(0.0)
    for block in blocks:
        m_new = torch.maximum(m, block.amax(dim=-1))
        old = (l * torch.exp(m - m_new)).nan_to_num(nan=0.0)
        new = torch.exp(block - m_new[..., None]).nan_to_num(nan=0.0).sum(dim=-1)
        l, m = old + new, m_new
    return m, l


def os_ok_m_as_column(blocks):
    """The running maximum rides along as an extra column of every block; state made from the first block."""
    m = l = None
    for block in blocks:
        if m is None:
            m = block.new_full(block.shape[:-1], NEG)
            l = block.new_zeros(block.shape[:-1])
        m_new = torch.cat([m[..., None], block], dim=-1).amax(dim=-1)
        safe = torch.nan_to_num(m_new, neginf=0.0)
        l = l * torch.exp(m - safe) + torch.exp(block - safe.unsqueeze(-1)).sum(-1)
        m = m_new
    return m, l


# ====================================================================== merge_softmax_stats
def mg_u_safe_aliases_m(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    safe = m                                                                  # slip: no clone: the next line edits m
    safe[torch.isneginf(safe)] = 0.0
    return m, l1 * torch.exp(m1 - safe) + l2 * torch.exp(m2 - safe)


def mg_u_stack_wrong_axis(m1, l1, m2, l2):
    ms, ls = torch.stack([m1, m2]), torch.stack([l1, l2])                    # (2, R)
    m = ms.amax(dim=-1)                                                       # slip: max over the rows, not the parts
    safe = torch.where(torch.isneginf(m), 0.0, m)
    return m, (ls * torch.exp(ms - safe)).sum(dim=0)


def mg_u_math_exp(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    safe = torch.where(torch.isneginf(m), 0.0, m)
    return m, l1 * math.exp(m1 - safe) + l2 * math.exp(m2 - safe)            # slip: math.exp needs one number


def mg_u_params_order(m1, m2, l1, l2):                                        # slip: parameters in the order m1, m2, l1, l2
    m = torch.maximum(m1, m2)
    safe = torch.where(torch.isneginf(m), 0.0, m)
    return m, l1 * torch.exp(m1 - safe) + l2 * torch.exp(m2 - safe)


def mg_u_returns_lse(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    return m, torch.logaddexp(m1 + torch.log(l1), m2 + torch.log(l2))       # slip: log-sum-exp returned as l



def mg_mean(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    safe = torch.where(torch.isneginf(m), 0.0, m)
    return m, (l1 * torch.exp(m1 - safe) + l2 * torch.exp(m2 - safe)) / 2   # slip: averaged, not summed


def mg_product(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    safe = torch.where(torch.isneginf(m), 0.0, m)
    return m, (l1 * torch.exp(m1 - safe)) * (l2 * torch.exp(m2 - safe))    # slip: product instead of sum


def mg_ok_nan_to_num_lowest(m1, l1, m2, l2):
    """nan_to_num's default turns -inf into the lowest finite float: exp(-inf - lowest) is still 0."""
    m = torch.maximum(m1, m2)
    safe = torch.nan_to_num(m)
    return m, l1 * torch.exp(m1 - safe) + l2 * torch.exp(m2 - safe)


def mg_ok_stack(m1, l1, m2, l2):
    ms, ls = torch.stack([m1, m2], dim=-1), torch.stack([l1, l2], dim=-1)   # (R, 2)
    m = ms.amax(dim=-1, keepdim=True)
    safe = m.masked_fill(torch.isneginf(m), 0.0)
    return m.squeeze(-1), (ls * torch.exp(ms - safe)).sum(dim=-1)


# ====================================================================== tiled_attention
def ta_fill_zero(q, k, v, block_q, block_k, causal=False, mask=None):
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    out = q.new_zeros(*lead, T_q, d_v)
    lse = q.new_zeros(*lead, T_q)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        q_i = q[..., i0:i1, :] / math.sqrt(d_k)
        m = q.new_full((*lead, i1 - i0), NEG)
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
                s = s.masked_fill(~keep, 0.0)                                 # slip: hidden scores set to 0, not -inf
            m_new = torch.maximum(m, s.amax(dim=-1))
            safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
            p = torch.exp(s - safe[..., None])
            rescale = torch.exp(m - safe)
            l = l * rescale + p.sum(dim=-1)
            acc = acc * rescale[..., None] + p @ v[..., j0:j1, :]
            m = m_new
        seen = l > 0
        out[..., i0:i1, :] = torch.where(seen[..., None], acc / torch.where(seen, l, 1.0)[..., None], 0.0)
        lse[..., i0:i1] = torch.where(seen, m + torch.log(l), NEG)
    return out, lse


def ta_never_divides(q, k, v, block_q, block_k, causal=False, mask=None):
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    out = q.new_zeros(*lead, T_q, d_v)
    lse = q.new_zeros(*lead, T_q)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        q_i = q[..., i0:i1, :] / math.sqrt(d_k)
        m = q.new_full((*lead, i1 - i0), NEG)
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
                s = s.masked_fill(~keep, NEG)
            m_new = torch.maximum(m, s.amax(dim=-1))
            safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
            p = torch.exp(s - safe[..., None])
            rescale = torch.exp(m - safe)
            l = l * rescale + p.sum(dim=-1)
            acc = acc * rescale[..., None] + p @ v[..., j0:j1, :]
            m = m_new
        seen = l > 0
        out[..., i0:i1, :] = acc                                              # slip: the final division by l forgotten
        lse[..., i0:i1] = torch.where(seen, m + torch.log(l), NEG)
    return out, lse


def ta_u_full_key_blocks_only(q, k, v, block_q, block_k, causal=False, mask=None):
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    out = q.new_zeros(*lead, T_q, d_v)
    lse = q.new_zeros(*lead, T_q)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        q_i = q[..., i0:i1, :] / math.sqrt(d_k)
        m = q.new_full((*lead, i1 - i0), NEG)
        l = q.new_zeros(*lead, i1 - i0)
        acc = q.new_zeros(*lead, i1 - i0, d_v)
        for jb in range(T_k // block_k):                                      # slip: the last, shorter key block dropped
            j0 = jb * block_k
            j1 = j0 + block_k
            if causal and j0 > i1 - 1:
                continue
            s = q_i @ k[..., j0:j1, :].transpose(-2, -1)
            keep = None
            if causal and j1 - 1 > i0:
                keep = torch.arange(j0, j1)[None, :] <= torch.arange(i0, i1)[:, None]
            if mask is not None:
                keep = mask[..., i0:i1, j0:j1] if keep is None else keep & mask[..., i0:i1, j0:j1]
            if keep is not None:
                s = s.masked_fill(~keep, NEG)
            m_new = torch.maximum(m, s.amax(dim=-1))
            safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
            p = torch.exp(s - safe[..., None])
            rescale = torch.exp(m - safe)
            l = l * rescale + p.sum(dim=-1)
            acc = acc * rescale[..., None] + p @ v[..., j0:j1, :]
            m = m_new
        seen = l > 0
        out[..., i0:i1, :] = torch.where(seen[..., None], acc / torch.where(seen, l, 1.0)[..., None], 0.0)
        lse[..., i0:i1] = torch.where(seen, m + torch.log(l), NEG)
    return out, lse


def ta_u_j1_unclipped(q, k, v, block_q, block_k, causal=False, mask=None):
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    out = q.new_zeros(*lead, T_q, d_v)
    lse = q.new_zeros(*lead, T_q)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        q_i = q[..., i0:i1, :] / math.sqrt(d_k)
        m = q.new_full((*lead, i1 - i0), NEG)
        l = q.new_zeros(*lead, i1 - i0)
        acc = q.new_zeros(*lead, i1 - i0, d_v)
        for j0 in range(0, T_k, block_k):
            j1 = j0 + block_k                                                 # slip: not clipped to T_k (arange too long)
            if causal and j0 > i1 - 1:
                continue
            s = q_i @ k[..., j0:j1, :].transpose(-2, -1)
            keep = None
            if causal and j1 - 1 > i0:
                keep = torch.arange(j0, j1)[None, :] <= torch.arange(i0, i1)[:, None]
            if mask is not None:
                keep = mask[..., i0:i1, j0:j1] if keep is None else keep & mask[..., i0:i1, j0:j1]
            if keep is not None:
                s = s.masked_fill(~keep, NEG)
            m_new = torch.maximum(m, s.amax(dim=-1))
            safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
            p = torch.exp(s - safe[..., None])
            rescale = torch.exp(m - safe)
            l = l * rescale + p.sum(dim=-1)
            acc = acc * rescale[..., None] + p @ v[..., j0:j1, :]
            m = m_new
        seen = l > 0
        out[..., i0:i1, :] = torch.where(seen[..., None], acc / torch.where(seen, l, 1.0)[..., None], 0.0)
        lse[..., i0:i1] = torch.where(seen, m + torch.log(l), NEG)
    return out, lse


def ta_u_mask_query_slice_twice(q, k, v, block_q, block_k, causal=False, mask=None):
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    out = q.new_zeros(*lead, T_q, d_v)
    lse = q.new_zeros(*lead, T_q)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        q_i = q[..., i0:i1, :] / math.sqrt(d_k)
        m = q.new_full((*lead, i1 - i0), NEG)
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
                tile = mask[..., i0:i1, i0:i1]                                # slip: key columns sliced with the query range
                keep = tile if keep is None else keep & tile
            if keep is not None:
                s = s.masked_fill(~keep, NEG)
            m_new = torch.maximum(m, s.amax(dim=-1))
            safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
            p = torch.exp(s - safe[..., None])
            rescale = torch.exp(m - safe)
            l = l * rescale + p.sum(dim=-1)
            acc = acc * rescale[..., None] + p @ v[..., j0:j1, :]
            m = m_new
        seen = l > 0
        out[..., i0:i1, :] = torch.where(seen[..., None], acc / torch.where(seen, l, 1.0)[..., None], 0.0)
        lse[..., i0:i1] = torch.where(seen, m + torch.log(l), NEG)
    return out, lse


def ta_u_mask_not_broadcast(q, k, v, block_q, block_k, causal=False, mask=None):
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    out = q.new_zeros(*lead, T_q, d_v)
    lse = q.new_zeros(*lead, T_q)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        q_i = q[..., i0:i1, :] / math.sqrt(d_k)
        m = q.new_full((*lead, i1 - i0), NEG)
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
                keep = mask[..., i0:i1, j0:j1] if keep is None else keep & mask[..., i0:i1, j0:j1]   # slip: mask not broadcast first
            if keep is not None:
                s = s.masked_fill(~keep, NEG)
            m_new = torch.maximum(m, s.amax(dim=-1))
            safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
            p = torch.exp(s - safe[..., None])
            rescale = torch.exp(m - safe)
            l = l * rescale + p.sum(dim=-1)
            acc = acc * rescale[..., None] + p @ v[..., j0:j1, :]
            m = m_new
        seen = l > 0
        out[..., i0:i1, :] = torch.where(seen[..., None], acc / torch.where(seen, l, 1.0)[..., None], 0.0)
        lse[..., i0:i1] = torch.where(seen, m + torch.log(l), NEG)
    return out, lse


def ta_u_scale_by_dv(q, k, v, block_q, block_k, causal=False, mask=None):
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    out = q.new_zeros(*lead, T_q, d_v)
    lse = q.new_zeros(*lead, T_q)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        q_i = q[..., i0:i1, :] / math.sqrt(d_v)                               # slip: the width of v, not of q and k
        m = q.new_full((*lead, i1 - i0), NEG)
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
                s = s.masked_fill(~keep, NEG)
            m_new = torch.maximum(m, s.amax(dim=-1))
            safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
            p = torch.exp(s - safe[..., None])
            rescale = torch.exp(m - safe)
            l = l * rescale + p.sum(dim=-1)
            acc = acc * rescale[..., None] + p @ v[..., j0:j1, :]
            m = m_new
        seen = l > 0
        out[..., i0:i1, :] = torch.where(seen[..., None], acc / torch.where(seen, l, 1.0)[..., None], 0.0)
        lse[..., i0:i1] = torch.where(seen, m + torch.log(l), NEG)
    return out, lse


def ta_u_mask_or(q, k, v, block_q, block_k, causal=False, mask=None):
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    out = q.new_zeros(*lead, T_q, d_v)
    lse = q.new_zeros(*lead, T_q)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        q_i = q[..., i0:i1, :] / math.sqrt(d_k)
        m = q.new_full((*lead, i1 - i0), NEG)
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
                keep = mask[..., i0:i1, j0:j1] if keep is None else keep | mask[..., i0:i1, j0:j1]   # slip: | instead of &
            if keep is not None:
                s = s.masked_fill(~keep, NEG)
            m_new = torch.maximum(m, s.amax(dim=-1))
            safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
            p = torch.exp(s - safe[..., None])
            rescale = torch.exp(m - safe)
            l = l * rescale + p.sum(dim=-1)
            acc = acc * rescale[..., None] + p @ v[..., j0:j1, :]
            m = m_new
        seen = l > 0
        out[..., i0:i1, :] = torch.where(seen[..., None], acc / torch.where(seen, l, 1.0)[..., None], 0.0)
        lse[..., i0:i1] = torch.where(seen, m + torch.log(l), NEG)
    return out, lse


def ta_u_diag_only_when_j0_eq_i0(q, k, v, block_q, block_k, causal=False, mask=None):
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    out = q.new_zeros(*lead, T_q, d_v)
    lse = q.new_zeros(*lead, T_q)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        q_i = q[..., i0:i1, :] / math.sqrt(d_k)
        m = q.new_full((*lead, i1 - i0), NEG)
        l = q.new_zeros(*lead, i1 - i0)
        acc = q.new_zeros(*lead, i1 - i0, d_v)
        for j0 in range(0, T_k, block_k):
            j1 = min(j0 + block_k, T_k)
            if causal and j0 > i1 - 1:
                continue
            s = q_i @ k[..., j0:j1, :].transpose(-2, -1)
            keep = None
            if causal and j0 == i0:                                           # slip: "the diagonal tile" assumes square tiles
                keep = torch.arange(j0, j1)[None, :] <= torch.arange(i0, i1)[:, None]
            if mask is not None:
                keep = mask[..., i0:i1, j0:j1] if keep is None else keep & mask[..., i0:i1, j0:j1]
            if keep is not None:
                s = s.masked_fill(~keep, NEG)
            m_new = torch.maximum(m, s.amax(dim=-1))
            safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
            p = torch.exp(s - safe[..., None])
            rescale = torch.exp(m - safe)
            l = l * rescale + p.sum(dim=-1)
            acc = acc * rescale[..., None] + p @ v[..., j0:j1, :]
            m = m_new
        seen = l > 0
        out[..., i0:i1, :] = torch.where(seen[..., None], acc / torch.where(seen, l, 1.0)[..., None], 0.0)
        lse[..., i0:i1] = torch.where(seen, m + torch.log(l), NEG)
    return out, lse


def ta_u_out_like_q(q, k, v, block_q, block_k, causal=False, mask=None):
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    out = torch.zeros_like(q)                                                 # slip: d_k wide, not d_v
    lse = q.new_zeros(*lead, T_q)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        q_i = q[..., i0:i1, :] / math.sqrt(d_k)
        m = q.new_full((*lead, i1 - i0), NEG)
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
                s = s.masked_fill(~keep, NEG)
            m_new = torch.maximum(m, s.amax(dim=-1))
            safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
            p = torch.exp(s - safe[..., None])
            rescale = torch.exp(m - safe)
            l = l * rescale + p.sum(dim=-1)
            acc = acc * rescale[..., None] + p @ v[..., j0:j1, :]
            m = m_new
        seen = l > 0
        out[..., i0:i1, :] = torch.where(seen[..., None], acc / torch.where(seen, l, 1.0)[..., None], 0.0)
        lse[..., i0:i1] = torch.where(seen, m + torch.log(l), NEG)
    return out, lse


def ta_u_lse_is_m(q, k, v, block_q, block_k, causal=False, mask=None):
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    out = q.new_zeros(*lead, T_q, d_v)
    lse = q.new_zeros(*lead, T_q)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        q_i = q[..., i0:i1, :] / math.sqrt(d_k)
        m = q.new_full((*lead, i1 - i0), NEG)
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
                s = s.masked_fill(~keep, NEG)
            m_new = torch.maximum(m, s.amax(dim=-1))
            safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
            p = torch.exp(s - safe[..., None])
            rescale = torch.exp(m - safe)
            l = l * rescale + p.sum(dim=-1)
            acc = acc * rescale[..., None] + p @ v[..., j0:j1, :]
            m = m_new
        seen = l > 0
        out[..., i0:i1, :] = torch.where(seen[..., None], acc / torch.where(seen, l, 1.0)[..., None], 0.0)
        lse[..., i0:i1] = m                                                   # slip: the running maximum kept as L
    return out, lse


def ta_ok_keepdim_bias(q, k, v, block_q, block_k, causal=False, mask=None):
    """Statistics kept as (..., bq, 1) columns throughout; masks added as a 0 / -inf bias; while loops."""
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = mask.expand(*lead, T_q, T_k)
    outs, lses = [], []
    i0 = 0
    while i0 < T_q:
        i1 = min(i0 + block_q, T_q)
        q_i = q[..., i0:i1, :] * d_k ** -0.5
        m = q.new_full((*lead, i1 - i0, 1), NEG)
        l = q.new_zeros(*lead, i1 - i0, 1)
        acc = q.new_zeros(*lead, i1 - i0, d_v)
        j0 = 0
        while j0 < T_k and not (causal and j0 >= i1):                        # tiles above the diagonal never reached
            j1 = min(j0 + block_k, T_k)
            s = q_i @ k[..., j0:j1, :].mT
            if causal and j1 > i0 + 1:
                hidden = torch.arange(j0, j1).view(1, -1) > torch.arange(i0, i1).view(-1, 1)
                s = s + q.new_zeros(hidden.shape).masked_fill(hidden, NEG)
            if mask is not None:
                s = s + torch.where(mask[..., i0:i1, j0:j1], 0.0, NEG).to(s.dtype)
            m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
            safe = m_new.masked_fill(torch.isneginf(m_new), 0.0)
            p = (s - safe).exp()
            r = (m - safe).exp()
            l = l * r + p.sum(dim=-1, keepdim=True)
            acc = acc * r + p @ v[..., j0:j1, :]
            m = m_new
            j0 = j1
        empty = l == 0
        outs.append((acc / l.masked_fill(empty, 1.0)).masked_fill(empty, 0.0))
        lses.append((m + l.log()).masked_fill(empty, NEG).squeeze(-1))
        i0 = i1
    return torch.cat(outs, dim=-2), torch.cat(lses, dim=-1)


def ta_ok_exp2(q, k, v, block_q, block_k, causal=False, mask=None):
    """Base-2 exponentials as the GPU kernels do: log2(e) folded into the scale, m and l kept in base 2,
    L converted back to natural log at the end."""
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    LOG2E = 1.0 / math.log(2.0)
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    out = q.new_zeros(*lead, T_q, d_v)
    lse = q.new_zeros(*lead, T_q)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        q_i = q[..., i0:i1, :] * (LOG2E / math.sqrt(d_k))                    # scores in base 2
        m2 = q.new_full((*lead, i1 - i0), NEG)
        l = q.new_zeros(*lead, i1 - i0)
        acc = q.new_zeros(*lead, i1 - i0, d_v)
        for j0 in range(0, T_k, block_k):
            j1 = min(j0 + block_k, T_k)
            if causal and j0 >= i1:
                continue
            s2 = q_i @ k[..., j0:j1, :].transpose(-2, -1)
            if causal and j1 > i0 + 1:
                s2 = s2.masked_fill(torch.arange(j0, j1) > torch.arange(i0, i1)[:, None], NEG)
            if mask is not None:
                s2 = s2.masked_fill(~mask[..., i0:i1, j0:j1], NEG)
            m_new = torch.maximum(m2, s2.amax(dim=-1))
            safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
            p = torch.exp2(s2 - safe[..., None])
            r = torch.exp2(m2 - safe)
            l = l * r + p.sum(dim=-1)
            acc = acc * r[..., None] + p @ v[..., j0:j1, :]
            m2 = m_new
        seen = l > 0
        out[..., i0:i1, :] = torch.where(seen[..., None], acc / torch.where(seen, l, 1.0)[..., None], 0.0)
        lse[..., i0:i1] = torch.where(seen, (m2 + torch.log2(l)) / LOG2E, NEG)
    return out, lse


def bw_u_tile_softmax(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
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
                s = s.masked_fill(torch.arange(j0, j1)[None, :] > torch.arange(i0, i1)[:, None], NEG)
            p = torch.softmax(s, dim=-1)                                      # slip: normalised over the tile, not by L
            dv[..., j0:j1, :] += p.transpose(-2, -1) @ do_i
            dp = do_i @ v_j.transpose(-2, -1)
            ds = p * (dp - D[..., i0:i1, None])
            dq[..., i0:i1, :] += ds @ k_j * scale
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i * scale
    return dq, dk, dv


def bw_u_D_from_tile(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
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
                s = s.masked_fill(torch.arange(j0, j1)[None, :] > torch.arange(i0, i1)[:, None], NEG)
            p = torch.exp(s - lse[..., i0:i1, None])
            dv[..., j0:j1, :] += p.transpose(-2, -1) @ do_i
            dp = do_i @ v_j.transpose(-2, -1)
            D_i = (do_i * (p @ v_j)).sum(dim=-1)                              # slip: the tile's share of O, not O
            ds = p * (dp - D_i[..., None])
            dq[..., i0:i1, :] += ds @ k_j * scale
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i * scale
    return dq, dk, dv


def bw_u_dv_no_transpose(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
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
                s = s.masked_fill(torch.arange(j0, j1)[None, :] > torch.arange(i0, i1)[:, None], NEG)
            p = torch.exp(s - lse[..., i0:i1, None])
            dv[..., j0:j1, :] += p @ do_i                                     # slip: Pᵀ forgotten (runs on square tiles)
            dp = do_i @ v_j.transpose(-2, -1)
            ds = p * (dp - D[..., i0:i1, None])
            dq[..., i0:i1, :] += ds @ k_j * scale
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i * scale
    return dq, dk, dv



def bw_u_D_keepdim(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    T_q, T_k, d_k = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1 / math.sqrt(d_k)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    D = (grad_out * out).sum(dim=-1, keepdim=True)                            # slip: (..., T_q, 1), later sliced as (..., T_q)
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
                s = s.masked_fill(torch.arange(j0, j1)[None, :] > torch.arange(i0, i1)[:, None], NEG)
            p = torch.exp(s - lse[..., i0:i1, None])
            dv[..., j0:j1, :] += p.transpose(-2, -1) @ do_i
            dp = do_i @ v_j.transpose(-2, -1)
            ds = p * (dp - D[..., i0:i1, None])
            dq[..., i0:i1, :] += ds @ k_j * scale
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i * scale
    return dq, dk, dv


def bw_diagonal_hidden(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
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
                s = s.masked_fill(torch.arange(j0, j1)[None, :] >= torch.arange(i0, i1)[:, None], NEG)   # slip: >= hides key i from query i
            p = torch.exp(s - lse[..., i0:i1, None])
            dv[..., j0:j1, :] += p.transpose(-2, -1) @ do_i
            dp = do_i @ v_j.transpose(-2, -1)
            ds = p * (dp - D[..., i0:i1, None])
            dq[..., i0:i1, :] += ds @ k_j * scale
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i * scale
    return dq, dk, dv


def bw_u_float32_grads(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    T_q, T_k, d_k = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1 / math.sqrt(d_k)
    dq, dk, dv = torch.zeros(q.shape), torch.zeros(k.shape), torch.zeros(v.shape)   # slip: float32 whatever q's dtype
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
                s = s.masked_fill(torch.arange(j0, j1)[None, :] > torch.arange(i0, i1)[:, None], NEG)
            p = torch.exp(s - lse[..., i0:i1, None])
            dv[..., j0:j1, :] += p.transpose(-2, -1) @ do_i
            dp = do_i @ v_j.transpose(-2, -1)
            ds = p * (dp - D[..., i0:i1, None])
            dq[..., i0:i1, :] += ds @ k_j * scale
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i * scale
    return dq, dk, dv


def bw_u_lse_not_unsqueezed(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
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
                s = s.masked_fill(torch.arange(j0, j1)[None, :] > torch.arange(i0, i1)[:, None], NEG)
            p = torch.exp(s - lse[..., i0:i1])                                # slip: L_i broadcast along the keys
            dv[..., j0:j1, :] += p.transpose(-2, -1) @ do_i
            dp = do_i @ v_j.transpose(-2, -1)
            ds = p * (dp - D[..., i0:i1, None])
            dq[..., i0:i1, :] += ds @ k_j * scale
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i * scale
    return dq, dk, dv


def bw_ds_minus_D_outside(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
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
                s = s.masked_fill(torch.arange(j0, j1)[None, :] > torch.arange(i0, i1)[:, None], NEG)
            p = torch.exp(s - lse[..., i0:i1, None])
            dv[..., j0:j1, :] += p.transpose(-2, -1) @ do_i
            dp = do_i @ v_j.transpose(-2, -1)
            ds = p * dp - D[..., i0:i1, None]                                 # slip: D not multiplied by P
            dq[..., i0:i1, :] += ds @ k_j * scale
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i * scale
    return dq, dk, dv


def bw_u_key_loop_short(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    T_q, T_k, d_k = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1 / math.sqrt(d_k)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    D = (grad_out * out).sum(dim=-1)
    for j0 in range(0, T_k - block_k, block_k):                               # slip: bound T_k - block_k: last key block never visited
        j1 = min(j0 + block_k, T_k)
        k_j, v_j = k[..., j0:j1, :], v[..., j0:j1, :]
        for i0 in range(0, T_q, block_q):
            i1 = min(i0 + block_q, T_q)
            if causal and j0 > i1 - 1:
                continue
            q_i, do_i = q[..., i0:i1, :], grad_out[..., i0:i1, :]
            s = q_i @ k_j.transpose(-2, -1) * scale
            if causal and j1 - 1 > i0:
                s = s.masked_fill(torch.arange(j0, j1)[None, :] > torch.arange(i0, i1)[:, None], NEG)
            p = torch.exp(s - lse[..., i0:i1, None])
            dv[..., j0:j1, :] += p.transpose(-2, -1) @ do_i
            dp = do_i @ v_j.transpose(-2, -1)
            ds = p * (dp - D[..., i0:i1, None])
            dq[..., i0:i1, :] += ds @ k_j * scale
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i * scale
    return dq, dk, dv


def bw_dv_from_ds(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
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
                s = s.masked_fill(torch.arange(j0, j1)[None, :] > torch.arange(i0, i1)[:, None], NEG)
            p = torch.exp(s - lse[..., i0:i1, None])
            dp = do_i @ v_j.transpose(-2, -1)
            ds = p * (dp - D[..., i0:i1, None])
            dv[..., j0:j1, :] += ds.transpose(-2, -1) @ do_i                  # slip: dS where P belongs
            dq[..., i0:i1, :] += ds @ k_j * scale
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i * scale
    return dq, dk, dv


def bw_ok_local_kv_accumulators(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    """FlashAttention-2 as written: dK_j, dV_j accumulated in locals over the query blocks (starting at the
    diagonal when causal), written once; dS pre-scaled; D computed once."""
    T_q, T_k, d_k = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = d_k ** -0.5
    dq = torch.zeros_like(q)
    dk_blocks, dv_blocks = [], []
    D = torch.einsum("...ic,...ic->...i", grad_out, out)
    for j0 in range(0, T_k, block_k):
        j1 = min(j0 + block_k, T_k)
        k_j, v_j = k[..., j0:j1, :], v[..., j0:j1, :]
        dk_j, dv_j = torch.zeros_like(k_j), torch.zeros_like(v_j)
        first = (j0 // block_q) * block_q if causal else 0                   # first query block that sees key j0
        for i0 in range(first, T_q, block_q):
            i1 = min(i0 + block_q, T_q)
            q_i, do_i = q[..., i0:i1, :], grad_out[..., i0:i1, :]
            s = (q_i @ k_j.mT) * scale
            if causal and j1 - 1 > i0:
                s = s.masked_fill(torch.arange(j0, j1) > torch.arange(i0, i1).unsqueeze(-1), NEG)
            p = (s - lse[..., i0:i1].unsqueeze(-1)).exp()
            dv_j = dv_j + p.mT @ do_i
            ds = p * (do_i @ v_j.mT - D[..., i0:i1].unsqueeze(-1)) * scale
            dq[..., i0:i1, :] += ds @ k_j
            dk_j = dk_j + ds.mT @ q_i
        dk_blocks.append(dk_j)
        dv_blocks.append(dv_j)
    return dq, torch.cat(dk_blocks, dim=-2), torch.cat(dv_blocks, dim=-2)


def bw_ok_flat_tile_list(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    """One loop over a list of the tiles that exist (those above the diagonal never enter it);
    gradients accumulated in place with add_(..., alpha=scale)."""
    T_q, T_k, d_k = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1 / math.sqrt(d_k)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    D = (grad_out * out).sum(dim=-1, keepdim=True)                            # (..., T_q, 1)
    tiles = [(i0, min(i0 + block_q, T_q), j0, min(j0 + block_k, T_k))
             for j0 in range(0, T_k, block_k) for i0 in range(0, T_q, block_q)
             if not (causal and j0 >= min(i0 + block_q, T_q))]
    for i0, i1, j0, j1 in tiles:
        q_i, do_i, k_j, v_j = q[..., i0:i1, :], grad_out[..., i0:i1, :], k[..., j0:j1, :], v[..., j0:j1, :]
        s = torch.matmul(q_i, k_j.transpose(-1, -2)).mul(scale)
        if causal:
            s = s.masked_fill(torch.arange(i0, i1)[:, None] < torch.arange(j0, j1)[None, :], NEG)
        p = (s - lse[..., i0:i1].unsqueeze(-1)).exp()
        dv[..., j0:j1, :].add_(p.transpose(-1, -2) @ do_i)
        ds = p * (do_i @ v_j.transpose(-1, -2) - D[..., i0:i1, :])
        dq[..., i0:i1, :].add_(ds @ k_j, alpha=scale)
        dk[..., j0:j1, :].add_(ds.transpose(-1, -2) @ q_i, alpha=scale)
    return dq, dk, dv


def la_u_denominator_not_unsqueezed(q, k, v):
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    S = phi_k.transpose(-2, -1) @ v
    z = phi_k.sum(dim=-2)
    return (phi_q @ S) / (phi_q @ z)                                          # slip: (..., T_q) broadcast along d_v


def la_u_inplace_elu(q, k, v):
    phi_q, phi_k = F.elu(q, inplace=True) + 1, F.elu(k, inplace=True) + 1    # slip: inplace=True overwrites the caller's q, k
    S = phi_k.transpose(-2, -1) @ v
    z = phi_k.sum(dim=-2)
    return (phi_q @ S) / (phi_q @ z[..., None])


def la_u_product_of_sums(q, k, v):
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    S = phi_k.transpose(-2, -1) @ v
    z = phi_k.sum(dim=-2)
    return (phi_q @ S) / (phi_q.sum(dim=-1, keepdim=True) * z.sum(dim=-1)[..., None, None])   # slip: (Σφ(q))(Σz), not φ(q)·z


def la_u_state_over_batch(q, k, v):
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    S = torch.einsum("...td,...te->de", phi_k, v)                             # slip: leading axes summed too: one S for the batch
    z = phi_k.sum(dim=-2)
    return (phi_q @ S) / (phi_q @ z[..., None])


def la_u_phi_on_q_only(q, k, v):
    phi_q, phi_k = F.elu(q) + 1, k                                            # slip: φ forgotten on k
    S = phi_k.transpose(-2, -1) @ v
    z = phi_k.sum(dim=-2)
    return (phi_q @ S) / (phi_q @ z[..., None])


def la_softmax_features(q, k, v):
    phi_q, phi_k = torch.softmax(q, dim=-1), torch.softmax(k, dim=-1)         # slip: softmax feature map, not elu + 1
    S = phi_k.transpose(-2, -1) @ v
    z = phi_k.sum(dim=-2)
    return (phi_q @ S) / (phi_q @ z[..., None])


def la_u_state_transposed(q, k, v):
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    S = v.transpose(-2, -1) @ phi_k                                           # slip: Vᵀφ(K), (d_v, d_k), used as φ(K)ᵀV
    z = phi_k.sum(dim=-2)
    return (phi_q @ S) / (phi_q @ z[..., None])


def la_relu_features(q, k, v):
    phi_q, phi_k = F.relu(q), F.relu(k)                                       # slip: relu: zero features, 0/0 possible
    S = phi_k.transpose(-2, -1) @ v
    z = phi_k.sum(dim=-2)
    return (phi_q @ S) / (phi_q @ z[..., None])


def la_no_feature_map(q, k, v):
    phi_q, phi_k = q, k                                                       # slip: no feature map (phi = identity)
    S = phi_k.transpose(-2, -1) @ v
    z = phi_k.sum(dim=-2)
    return (phi_q @ S) / (phi_q @ z[..., None])


def la_ok_flatten_bmm(q, k, v):
    """Leading axes flattened into one batch axis for torch.bmm, then restored."""
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    pq = (F.elu(q) + 1).reshape(-1, T_q, d_k)
    pk = (F.elu(k) + 1).expand(*lead, T_k, d_k).reshape(-1, T_k, d_k)
    vv = v.expand(*lead, T_k, d_v).reshape(-1, T_k, d_v)
    S = torch.bmm(pk.transpose(1, 2), vv)                                     # (N, d_k, d_v)
    z = pk.sum(dim=1, keepdim=True).transpose(1, 2)                           # (N, d_k, 1)
    return (torch.bmm(pq, S) / torch.bmm(pq, z)).reshape(*lead, T_q, d_v)


def la_ok_running_sums(q, k, v):
    """S and z accumulated over chunks of keys (as a stream would), then read by every query."""
    pq, pk = F.elu(q) + 1, F.elu(k) + 1
    S = z = 0
    for j0 in range(0, k.shape[-2], 7):
        pk_j = pk[..., j0:j0 + 7, :]
        S = S + pk_j.transpose(-2, -1) @ v[..., j0:j0 + 7, :]
        z = z + pk_j.sum(dim=-2, keepdim=True)                                # (..., 1, d_k)
    return (pq @ S) / (pq * z).sum(dim=-1, keepdim=True)


SLIPS = [
    ("online_softmax", "u: running max taken over the rows (amax dim=0)", os_u_max_wrong_axis),
    ("online_softmax", "u: safe max not unsqueezed in exp(block - safe)", os_u_safe_not_unsqueezed),
    ("online_softmax", "u: keepdim=True on the block max (m becomes (R,1) -> (R,R))", os_u_keepdim_max),
    ("online_softmax", "u: exp(block).sum() / exp(safe) (overflow at large scores)", os_u_exp_split),
    ("online_softmax", "u: safe max as m_new.clamp(min=0)", os_u_clamp_safe),
    ("online_softmax", "u: l initialised to -inf (copy of the m line)", os_u_l_starts_neginf),
    ("online_softmax", "rescale factor applied to the new block's sum, not the old l", os_rescale_on_block_term),
    ("merge_softmax_stats", "u: safe = m without clone; masked assignment turns m=-inf into 0", mg_u_safe_aliases_m),
    ("merge_softmax_stats", "u: stack the parts, amax over the wrong axis (rows)", mg_u_stack_wrong_axis),
    ("merge_softmax_stats", "u: math.exp on (R,) tensors", mg_u_math_exp),
    ("merge_softmax_stats", "u: parameters declared (m1, m2, l1, l2)", mg_u_params_order),
    ("merge_softmax_stats", "u: returns the merged log-sum-exp as l", mg_u_returns_lse),
    ("merge_softmax_stats", "rescaled normalisers averaged, not summed", mg_mean),
    ("merge_softmax_stats", "rescaled normalisers multiplied, not summed", mg_product),
    ("tiled_attention", "hidden scores masked_fill(0.0) instead of -inf", ta_fill_zero),
    ("tiled_attention", "final division by l forgotten (acc returned)", ta_never_divides),
    ("tiled_attention", "u: key loop over T_k // block_k full blocks (last short block dropped)", ta_u_full_key_blocks_only),
    ("tiled_attention", "u: j1 = j0 + block_k not clipped (causal arange too long)", ta_u_j1_unclipped),
    ("tiled_attention", "u: mask tile sliced [i0:i1, i0:i1] (query range twice)", ta_u_mask_query_slice_twice),
    ("tiled_attention", "u: mask sliced without broadcast_to (size-1 query axis)", ta_u_mask_not_broadcast),
    ("tiled_attention", "u: scores scaled by 1/sqrt(d_v)", ta_u_scale_by_dv),
    ("tiled_attention", "u: causal and padding masks combined with |", ta_u_mask_or),
    ("tiled_attention", "u: element-wise mask only when j0 == i0 (square-tile assumption)", ta_u_diag_only_when_j0_eq_i0),
    ("tiled_attention", "u: out = torch.zeros_like(q) (d_k wide)", ta_u_out_like_q),
    ("tiled_attention", "u: lse stores the running max m", ta_u_lse_is_m),
    ("tiled_attention_backward", "u: P recomputed with a softmax over the tile", bw_u_tile_softmax),
    ("tiled_attention_backward", "u: D from the tile's partial output (dO_i . P_ij V_j)", bw_u_D_from_tile),
    ("tiled_attention_backward", "u: dV += P dO (transpose forgotten)", bw_u_dv_no_transpose),
    ("tiled_attention_backward", "u: D with keepdim=True, then sliced as (..., T_q)", bw_u_D_keepdim),
    ("tiled_attention_backward", "causal mask with >= (query hides its own key)", bw_diagonal_hidden),
    ("tiled_attention_backward", "u: gradients created with torch.zeros (float32)", bw_u_float32_grads),
    ("tiled_attention_backward", "u: lse tile not unsqueezed (broadcast along keys)", bw_u_lse_not_unsqueezed),
    ("tiled_attention_backward", "dS = P*dP - D (D not multiplied by P)", bw_ds_minus_D_outside),
    ("tiled_attention_backward", "u: key loop bound T_k - block_k (last key block skipped)", bw_u_key_loop_short),
    ("tiled_attention_backward", "dV accumulated with dS instead of P", bw_dv_from_ds),
    ("linear_attention", "u: denominator (..., T_q) not unsqueezed", la_u_denominator_not_unsqueezed),
    ("linear_attention", "u: F.elu(..., inplace=True) edits the caller's q and k", la_u_inplace_elu),
    ("linear_attention", "u: denominator (sum phi(q)) * (sum z)", la_u_product_of_sums),
    ("linear_attention", "u: einsum '...td,...te->de' sums S over the batch", la_u_state_over_batch),
    ("linear_attention", "u: phi applied to q only", la_u_phi_on_q_only),
    ("linear_attention", "softmax feature map", la_softmax_features),
    ("linear_attention", "u: state built as V^T phi(K) (transposed)", la_u_state_transposed),
    ("linear_attention", "relu feature map (no +1)", la_relu_features),
    ("linear_attention", "no feature map (phi = identity)", la_no_feature_map),
]

CORRECT = [
    ("online_softmax", "raw formula, NaN cleaned with nan_to_num", os_ok_nan_to_num),
    ("online_softmax", "running max as an extra column; lazy state from the first block", os_ok_m_as_column),
    ("merge_softmax_stats", "nan_to_num(m) default: -inf -> lowest finite float", mg_ok_nan_to_num_lowest),
    ("merge_softmax_stats", "stack the parts on a last axis, amax/sum over it", mg_ok_stack),
    ("tiled_attention", "keepdim (bq,1) stats, 0/-inf additive bias, while loops, cat of blocks", ta_ok_keepdim_bias),
    ("tiled_attention", "base-2 exponentials (exp2, log2 e folded into the scale), L converted back", ta_ok_exp2),
    ("tiled_attention_backward", "FA-2 local dK_j/dV_j accumulators, causal query loop starts at the diagonal", bw_ok_local_kv_accumulators),
    ("tiled_attention_backward", "one loop over a list of the existing tiles, add_(alpha=scale), D keepdim", bw_ok_flat_tile_list),
    ("linear_attention", "flatten leading axes, bmm, reshape back", la_ok_flatten_bmm),
    ("linear_attention", "S and z as running sums over chunks of keys", la_ok_running_sums),
]

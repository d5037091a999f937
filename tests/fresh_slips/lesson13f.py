"""Lesson 13 (attention at scale): an independent catalogue of learner slips and unusual correct answers.

Written from the notebook's text and the reference solution only (the checks were not read or run). Every
function is a learner's whole answer, with the exercise's signature; in a slip exactly one thing is wrong,
marked by a trailing `# slip: ...` (on the wrong line, or where the missing line belongs). Descriptions
starting with "u: " are the less textbook slips. None repeats a slip of lesson13.py .. lesson13e.py.
"""
import math

import torch
import torch.nn.functional as F

NEG = float("-inf")


# ====================================================================== online_softmax
def os_m_never_updated(blocks):
    m, l = torch.tensor(NEG), torch.tensor(0.0)
    for block in blocks:
        m_new = torch.maximum(m, block.amax(dim=-1))
        safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
        l = l * torch.exp(m - safe) + torch.exp(block - safe[..., None]).sum(dim=-1)   # slip: `m = m_new` never written: m stays -inf, old l wiped by exp(-inf)
    return m, l


def os_return_in_loop(blocks):
    m, l = torch.tensor(NEG), torch.tensor(0.0)
    for block in blocks:
        m_new = torch.maximum(m, block.amax(dim=-1))
        safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
        l = l * torch.exp(m - safe) + torch.exp(block - safe[..., None]).sum(dim=-1)
        m = m_new
        return m, l                                                             # slip: return indented into the loop: only the first block is read


def os_python_float_start(blocks):
    m, l = float("-inf"), 0.0                                                   # slip: Python floats, not 0-d tensors: torch.maximum(float, tensor) raises TypeError
    for block in blocks:
        m_new = torch.maximum(m, block.amax(dim=-1))
        safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
        l = l * torch.exp(m - safe) + torch.exp(block - safe[..., None]).sum(dim=-1)
        m = m_new
    return m, l


def os_rescale_after_adding(blocks):
    m, l = torch.tensor(NEG), torch.tensor(0.0)
    for block in blocks:
        m_new = torch.maximum(m, block.amax(dim=-1))
        safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
        l = (l + torch.exp(block - safe[..., None]).sum(dim=-1)) * torch.exp(m - safe)   # slip: parenthesis: the new block's sum is rescaled too
        m = m_new
    return m, l


def os_u_keeps_safe_as_m(blocks):
    m, l = torch.tensor(NEG), torch.tensor(0.0)
    for block in blocks:
        m_new = torch.maximum(m, block.amax(dim=-1))
        safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
        l = l * torch.exp(m - safe) + torch.exp(block - safe[..., None]).sum(dim=-1)
        m = safe                                                                # slip: keeps the safe max: a masked row's m becomes 0, later blocks below 0 are measured from 0
    return m, l


def os_u_inplace_on_scalar_start(blocks):
    m, l = torch.tensor(NEG), torch.tensor(0.0)
    for block in blocks:
        m_new = torch.maximum(m, block.amax(dim=-1))
        safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
        l *= torch.exp(m - safe)                                                # slip: in place on the 0-d start: cannot grow to (R,) (RuntimeError)
        l = l + torch.exp(block - safe[..., None]).sum(dim=-1)
        m = m_new
    return m, l


def os_u_safe_tests_block_max(blocks):
    m, l = torch.tensor(NEG), torch.tensor(0.0)
    for block in blocks:
        m_new = torch.maximum(m, block.amax(dim=-1))
        safe = torch.where(torch.isneginf(block.amax(dim=-1)), 0.0, m_new)    # slip: tests the block's max, not m_new: a masked block after finite ones uses 0
        l = l * torch.exp(m - safe) + torch.exp(block - safe[..., None]).sum(dim=-1)
        m = m_new
    return m, l


# ====================================================================== merge_softmax_stats
def mg_returns_only_l(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    safe = torch.where(torch.isneginf(m), 0.0, m)
    return l1 * torch.exp(m1 - safe) + l2 * torch.exp(m2 - safe)               # slip: returns l alone, m forgotten


def mg_l1_twice(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    safe = torch.where(torch.isneginf(m), 0.0, m)
    return m, l1 * torch.exp(m1 - safe) + l1 * torch.exp(m2 - safe)           # slip: copy-paste: l1 in the second term


def mg_unshifted_exponentials(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    return m, (l1 * torch.exp(m1) + l2 * torch.exp(m2)) / torch.exp(m)         # slip: unshifted exponentials: overflow (inf/inf), 0/0 for empty parts


def mg_u_returns_safe_as_m(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    m = torch.where(torch.isneginf(m), 0.0, m)                                  # slip: the safe max overwrites m: two empty parts give m = 0
    return m, l1 * torch.exp(m1 - m) + l2 * torch.exp(m2 - m)


def mg_u_logaddexp_as_max(m1, l1, m2, l2):
    m = torch.logaddexp(m1, m2)                                                 # slip: a soft maximum, not max(m1, m2)
    safe = torch.where(torch.isneginf(m), 0.0, m)
    return m, l1 * torch.exp(m1 - safe) + l2 * torch.exp(m2 - safe)


def mg_u_maximum_out_m1(m1, l1, m2, l2):
    m = torch.maximum(m1, m2, out=m1)                                           # slip: out=m1 overwrites m1 before its factor e^(m1 - m) is taken
    safe = torch.where(torch.isneginf(m), 0.0, m)
    return m, l1 * torch.exp(m1 - safe) + l2 * torch.exp(m2 - safe)


def mg_u_factors_crossed(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    safe = torch.where(torch.isneginf(m), 0.0, m)
    return m, l1 * torch.exp(m2 - safe) + l2 * torch.exp(m1 - safe)           # slip: factors crossed: l1 with e^(m2 - m), l2 with e^(m1 - m)


# ====================================================================== tiled_attention
def ta_scale_by_dk(q, k, v, block_q, block_k, causal=False, mask=None):
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    out = q.new_zeros(*lead, T_q, d_v)
    lse = q.new_zeros(*lead, T_q)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        q_i = q[..., i0:i1, :] / d_k                                            # slip: divides by d_k, not sqrt(d_k)
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


def ta_causal_strict(q, k, v, block_q, block_k, causal=False, mask=None):
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
                keep = torch.arange(j0, j1)[None, :] < torch.arange(i0, i1)[:, None]   # slip: j < i: a query may not see its own key
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


def ta_values_not_sliced(q, k, v, block_q, block_k, causal=False, mask=None):
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
            acc = acc * rescale[..., None] + p @ v                              # slip: all of v, not the key block's v[..., j0:j1, :] (shape error)
            m = m_new
        seen = l > 0
        out[..., i0:i1, :] = torch.where(seen[..., None], acc / torch.where(seen, l, 1.0)[..., None], 0.0)
        lse[..., i0:i1] = torch.where(seen, m + torch.log(l), NEG)
    return out, lse


def ta_returns_out_only(q, k, v, block_q, block_k, causal=False, mask=None):
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
        lse[..., i0:i1] = torch.where(seen, m + torch.log(l), NEG)
    return out                                                                  # slip: the log-sum-exp is computed but not returned


def ta_u_keys_sliced_with_query_range(q, k, v, block_q, block_k, causal=False, mask=None):
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
            s = q_i @ k[..., i0:i1, :].transpose(-2, -1)                        # slip: keys sliced with the query range i0:i1
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


def ta_u_mask_sliced_on_keys_only(q, k, v, block_q, block_k, causal=False, mask=None):
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
                keep = mask[..., j0:j1] if keep is None else keep & mask[..., j0:j1]   # slip: mask sliced on the keys only (right for padding masks, not for (T_q, T_k) masks)
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


def ta_u_query_loop_steps_block_k(q, k, v, block_q, block_k, causal=False, mask=None):
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    out = q.new_zeros(*lead, T_q, d_v)
    lse = q.new_zeros(*lead, T_q)
    for i0 in range(0, T_q, block_k):                                           # slip: the query loop steps by block_k (gaps when block_k > block_q)
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


def ta_u_final_division_not_unsqueezed(q, k, v, block_q, block_k, causal=False, mask=None):
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
        out[..., i0:i1, :] = torch.where(seen[..., None], acc / torch.where(seen, l, 1.0), 0.0)   # slip: l (..., bq) not unsqueezed: divides along d_v (error, or silent when bq == d_v)
        lse[..., i0:i1] = torch.where(seen, m + torch.log(l), NEG)
    return out, lse


# ====================================================================== tiled_attention_backward
def bw_dq_uses_v(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
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
            ds = p * (dp - D[..., i0:i1, None])
            dq[..., i0:i1, :] += ds @ v_j * scale                               # slip: dQ = dS V: the values' block instead of the keys'
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i * scale
    return dq, dk, dv


def bw_dp_from_out(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
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
            dp = out[..., i0:i1, :] @ v_j.transpose(-2, -1)                     # slip: dP from the output O, not from dO
            ds = p * (dp - D[..., i0:i1, None])
            dq[..., i0:i1, :] += ds @ k_j * scale
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i * scale
    return dq, dk, dv


def bw_dv_scaled(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
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
            dv[..., j0:j1, :] += p.transpose(-2, -1) @ do_i * scale               # slip: 1/sqrt(d_k) in dV too (it belongs to dQ and dK only)
            dp = do_i @ v_j.transpose(-2, -1)
            ds = p * (dp - D[..., i0:i1, None])
            dq[..., i0:i1, :] += ds @ k_j * scale
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i * scale
    return dq, dk, dv


def bw_dv_zeros_like_q(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    T_q, T_k, d_k = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1 / math.sqrt(d_k)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(q)   # slip: copy-paste: dv shaped like q (wrong when d_v != d_k or T_k != T_q)
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


def bw_u_prescaled_q_dk_scaled_again(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
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
            q_i, do_i = q[..., i0:i1, :] * scale, grad_out[..., i0:i1, :]       # q pre-scaled once for the scores
            s = q_i @ k_j.transpose(-2, -1)
            if causal and j1 - 1 > i0:
                s = s.masked_fill(torch.arange(j0, j1)[None, :] > torch.arange(i0, i1)[:, None], NEG)
            p = torch.exp(s - lse[..., i0:i1, None])
            dv[..., j0:j1, :] += p.transpose(-2, -1) @ do_i
            dp = do_i @ v_j.transpose(-2, -1)
            ds = p * (dp - D[..., i0:i1, None])
            dq[..., i0:i1, :] += ds @ k_j * scale
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i * scale             # slip: q_i is already scaled: dK gets 1/d_k
    return dq, dk, dv


def bw_u_dv_at_query_rows(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
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
            dv[..., i0:i1, :] += p.transpose(-2, -1) @ do_i                     # slip: dV added at the query block's rows i0:i1
            dp = do_i @ v_j.transpose(-2, -1)
            ds = p * (dp - D[..., i0:i1, None])
            dq[..., i0:i1, :] += ds @ k_j * scale
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i * scale
    return dq, dk, dv


def bw_u_break_instead_of_continue(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
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
                break                                                           # slip: break (as in the forward): with keys outside, the later, visible query blocks are lost
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


def bw_u_skip_on_last_key(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    T_q, T_k, d_k = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1 / math.sqrt(d_k)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    D = (grad_out * out).sum(dim=-1)
    for j0 in range(0, T_k, block_k):
        j1 = min(j0 + block_k, T_k)
        k_j, v_j = k[..., j0:j1, :], v[..., j0:j1, :]
        for i0 in range(0, T_q, block_q):
            i1 = min(i0 + block_q, T_q)
            if causal and j1 > i1:                                              # slip: skips when the LAST key is after the last query (drops straddling tiles when block_q != block_k)
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


# ====================================================================== linear_attention
def la_dot_T_on_batches(q, k, v):
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    S = phi_k.T @ v                                                             # slip: .T reverses EVERY axis of a batched tensor (fine only in 2-D)
    z = phi_k.sum(dim=-2)
    return (phi_q @ S) / (phi_q @ z[..., None])


def la_divides_by_z(q, k, v):
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    S = phi_k.transpose(-2, -1) @ v
    z = phi_k.sum(dim=-2)
    return (phi_q @ S) / z[..., None, :]                                        # slip: divides by z itself, not by phi(q)·z (error, or wrong when d_k == d_v)


def la_denominator_raw_q(q, k, v):
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    S = phi_k.transpose(-2, -1) @ v
    z = phi_k.sum(dim=-2)
    return (phi_q @ S) / (q @ z[..., None])                                     # slip: q, not phi(q), in the denominator


def la_u_normalised_over_features(q, k, v):
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    S = phi_k.transpose(-2, -1) @ v
    num = phi_q @ S
    return num / num.sum(dim=-1, keepdim=True)                                 # slip: normalises each output over its d_v features (softmax habit), z never used


def la_u_state_from_raw_k(q, k, v):
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    S = k.transpose(-2, -1) @ v                                                 # slip: S from k, not phi(k) (z uses phi(k))
    z = phi_k.sum(dim=-2)
    return (phi_q @ S) / (phi_q @ z[..., None])


def la_u_state_mean_z_sum(q, k, v):
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    S = phi_k.transpose(-2, -1) @ v / k.shape[-2]                               # slip: S averaged over the keys while z is summed (off by T_k)
    z = phi_k.sum(dim=-2)
    return (phi_q @ S) / (phi_q @ z[..., None])


def la_u_z_keepdim_then_unsqueezed(q, k, v):
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    S = phi_k.transpose(-2, -1) @ v
    z = phi_k.sum(dim=-2, keepdim=True)                                         # slip: keepdim (..., 1, d_k), then [..., None] adds a second axis
    return (phi_q @ S) / (phi_q @ z[..., None])


# ====================================================================== correct answers
def ok_os_block_logsumexp(blocks):
    """l rescaled as usual; each block's own sum read off its logsumexp: exp(logsumexp(block) - safe)."""
    m, l = torch.tensor(NEG), torch.tensor(0.0)
    for block in blocks:
        m_new = torch.maximum(m, block.amax(dim=-1))
        safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
        l = l * torch.exp(m - safe) + torch.exp(torch.logsumexp(block, dim=-1) - safe)
        m = m_new
    return m, l


def ok_mg_exponents_cleaned(m1, l1, m2, l2):
    """No safe maximum: the exponents m_i - m are cleaned with nan_to_num (NaN -> 0, -inf -> lowest float)."""
    m = torch.maximum(m1, m2)
    return m, l1 * torch.exp((m1 - m).nan_to_num(nan=0.0)) + l2 * torch.exp((m2 - m).nan_to_num(nan=0.0))


def ok_ta_tril_offset(q, k, v, block_q, block_k, causal=False, mask=None):
    """Diagonal tiles masked with tril(diagonal=i0 - j0); lse = m + log l unguarded (-inf + -inf = -inf);
    the masked rows' 0/0 cleaned by nan_to_num; outputs collected in lists and concatenated."""
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = mask.expand(*lead, T_q, T_k)
    outs, lses = [], []
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        q_i = q[..., i0:i1, :] * d_k ** -0.5
        m = q.new_full((*lead, i1 - i0), NEG)
        l = q.new_zeros(*lead, i1 - i0)
        acc = q.new_zeros(*lead, i1 - i0, d_v)
        for j0 in range(0, T_k, block_k):
            if causal and j0 >= i1:
                continue
            j1 = min(j0 + block_k, T_k)
            s = q_i @ k[..., j0:j1, :].mT
            if causal:
                s = s.masked_fill(~torch.ones(i1 - i0, j1 - j0, dtype=torch.bool).tril(i0 - j0), NEG)
            if mask is not None:
                s = s.masked_fill(~mask[..., i0:i1, j0:j1], NEG)
            m_new = torch.maximum(m, s.amax(dim=-1))
            safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
            p = torch.exp(s - safe[..., None])
            rescale = torch.exp(m - safe)
            l = l * rescale + p.sum(dim=-1)
            acc = acc * rescale[..., None] + p @ v[..., j0:j1, :]
            m = m_new
        outs.append(torch.nan_to_num(acc / l[..., None], nan=0.0, posinf=math.inf, neginf=-math.inf))
        lses.append(m + torch.log(l))
    return torch.cat(outs, dim=-2), torch.cat(lses, dim=-1)


def ok_ta_split_k_merge(q, k, v, block_q, block_k, causal=False, mask=None):
    """Every tile gets its own (m_t, l_t, acc_t), merged into the running state with exercise 1b's rule
    (split-K style)."""
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    out = q.new_zeros(*lead, T_q, d_v)
    lse = q.new_full((*lead, T_q), NEG)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        q_i = q[..., i0:i1, :]
        m = q.new_full((*lead, i1 - i0), NEG)
        l = q.new_zeros(*lead, i1 - i0)
        acc = q.new_zeros(*lead, i1 - i0, d_v)
        for j0 in range(0, T_k, block_k):
            j1 = min(j0 + block_k, T_k)
            if causal and j0 > i1 - 1:
                continue
            s = (q_i @ k[..., j0:j1, :].transpose(-2, -1)) / math.sqrt(d_k)
            if causal and j1 - 1 > i0:
                s = s.masked_fill(torch.arange(j0, j1)[None, :] > torch.arange(i0, i1)[:, None], NEG)
            if mask is not None:
                s = s.masked_fill(~mask[..., i0:i1, j0:j1], NEG)
            m_t = s.amax(dim=-1)                                          # the tile's own statistics
            safe_t = torch.where(torch.isneginf(m_t), 0.0, m_t)
            p = torch.exp(s - safe_t[..., None])
            l_t, acc_t = p.sum(dim=-1), p @ v[..., j0:j1, :]
            m_new = torch.maximum(m, m_t)                                 # merged with the running ones
            safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
            a, b = torch.exp(m - safe), torch.exp(m_t - safe)
            l, acc, m = l * a + l_t * b, acc * a[..., None] + acc_t * b[..., None], m_new
        seen = l > 0
        out[..., i0:i1, :] = acc / torch.where(seen, l, 1.0)[..., None]
        lse[..., i0:i1] = torch.where(seen, m + torch.log(torch.where(seen, l, 1.0)), NEG)
    return out, lse


def ok_bw_transposed_tiles(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    """Key-major tiles S_ijᵀ = K_j Q_iᵀ (bk x bq), as a kernel with the keys outside lays them out."""
    T_q, T_k, d_k = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = d_k ** -0.5
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    D = (grad_out * out).sum(dim=-1)
    for j0 in range(0, T_k, block_k):
        j1 = min(j0 + block_k, T_k)
        k_j, v_j = k[..., j0:j1, :], v[..., j0:j1, :]
        for i0 in range(0, T_q, block_q):
            i1 = min(i0 + block_q, T_q)
            if causal and j0 >= i1:
                continue
            q_i, do_i = q[..., i0:i1, :], grad_out[..., i0:i1, :]
            sT = (k_j @ q_i.transpose(-2, -1)) * scale                            # (..., bk, bq)
            if causal and j1 - 1 > i0:
                sT = sT.masked_fill(torch.arange(j0, j1)[:, None] > torch.arange(i0, i1)[None, :], NEG)
            pT = torch.exp(sT - lse[..., None, i0:i1])
            dv[..., j0:j1, :] += pT @ do_i
            dsT = pT * (v_j @ do_i.transpose(-2, -1) - D[..., None, i0:i1])
            dk[..., j0:j1, :] += dsT @ q_i * scale
            dq[..., i0:i1, :] += dsT.transpose(-2, -1) @ k_j * scale
    return dq, dk, dv


def ok_bw_mask_after_exp(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    """Queries outside; the causal mask zeroes P after the exponential instead of putting -inf in S."""
    T_q, T_k, d_k = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1 / math.sqrt(d_k)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        q_i, do_i = q[..., i0:i1, :], grad_out[..., i0:i1, :]
        D_i = (do_i * out[..., i0:i1, :]).sum(dim=-1, keepdim=True)            # (..., bq, 1)
        L_i = lse[..., i0:i1].unsqueeze(-1)
        for j0 in range(0, T_k, block_k):
            j1 = min(j0 + block_k, T_k)
            if causal and j0 > i1 - 1:
                break
            p = torch.exp(q_i @ k[..., j0:j1, :].transpose(-2, -1) * scale - L_i)
            if causal and j1 - 1 > i0:
                p = p.masked_fill(torch.arange(j0, j1)[None, :] > torch.arange(i0, i1)[:, None], 0.0)
            dv[..., j0:j1, :] += p.transpose(-2, -1) @ do_i
            ds = p * (do_i @ v[..., j0:j1, :].transpose(-2, -1) - D_i)
            dq[..., i0:i1, :] += ds @ k[..., j0:j1, :] * scale
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i * scale
    return dq, dk, dv


def ok_la_normalised_features_first(q, k, v):
    """Each phi(q_t) divided by phi(q_t)·z first, then multiplied by S."""
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    S = phi_k.transpose(-2, -1) @ v
    z = phi_k.sum(dim=-2)
    return (phi_q / (phi_q * z.unsqueeze(-2)).sum(dim=-1, keepdim=True)) @ S


def ok_la_where_feature_map(q, k, v):
    """phi written out: elu(x) + 1 = x + 1 for x > 0, e^x otherwise; z as phi(k)ᵀ 1."""
    def phi(x):
        return torch.where(x > 0, x + 1, torch.exp(x))
    phi_q, phi_k = phi(q), phi(k)
    S = phi_k.transpose(-2, -1) @ v
    z = phi_k.transpose(-2, -1) @ k.new_ones(k.shape[-2], 1)                  # (..., d_k, 1)
    return (phi_q @ S) / (phi_q @ z)


SLIPS = [
    ("online_softmax", "m = m_new forgotten (m stays -inf, old l wiped)", os_m_never_updated),
    ("online_softmax", "return indented inside the loop (first block only)", os_return_in_loop),
    ("online_softmax", "m, l started as Python floats (torch.maximum TypeError)", os_python_float_start),
    ("online_softmax", "rescale multiplies (old l + block sum): parenthesis misplaced", os_rescale_after_adding),
    ("online_softmax", "u: m = safe (the safe max kept as the running max)", os_u_keeps_safe_as_m),
    ("online_softmax", "u: l *= ... in place on the 0-d start (RuntimeError)", os_u_inplace_on_scalar_start),
    ("online_softmax", "u: safe max tests the block's max, not m_new", os_u_safe_tests_block_max),
    ("merge_softmax_stats", "returns l only (m forgotten)", mg_returns_only_l),
    ("merge_softmax_stats", "l1 in both terms (copy-paste)", mg_l1_twice),
    ("merge_softmax_stats", "unshifted exponentials (l1 e^m1 + l2 e^m2) / e^m", mg_unshifted_exponentials),
    ("merge_softmax_stats", "u: safe max overwrites m (two empty parts give m = 0)", mg_u_returns_safe_as_m),
    ("merge_softmax_stats", "u: m = logaddexp(m1, m2) (soft maximum)", mg_u_logaddexp_as_max),
    ("merge_softmax_stats", "u: torch.maximum(m1, m2, out=m1) overwrites m1 before its factor", mg_u_maximum_out_m1),
    ("merge_softmax_stats", "u: factors crossed (l1 e^(m2-m) + l2 e^(m1-m))", mg_u_factors_crossed),
    ("tiled_attention", "scores divided by d_k, not sqrt(d_k)", ta_scale_by_dk),
    ("tiled_attention", "causal keep j < i (strict: a query hides its own key)", ta_causal_strict),
    ("tiled_attention", "p @ v with all of v, not the key block (shape error)", ta_values_not_sliced),
    ("tiled_attention", "returns out only (lse forgotten)", ta_returns_out_only),
    ("tiled_attention", "u: key tile sliced with the query range k[..., i0:i1, :]", ta_u_keys_sliced_with_query_range),
    ("tiled_attention", "u: mask sliced on the keys only, no broadcast (right for padding masks only)", ta_u_mask_sliced_on_keys_only),
    ("tiled_attention", "u: query loop steps by block_k (gaps when block_k > block_q)", ta_u_query_loop_steps_block_k),
    ("tiled_attention", "u: final acc / l with l not unsqueezed", ta_u_final_division_not_unsqueezed),
    ("tiled_attention_backward", "dQ = dS V (values' block instead of keys')", bw_dq_uses_v),
    ("tiled_attention_backward", "dP = O V^T (out instead of grad_out)", bw_dp_from_out),
    ("tiled_attention_backward", "1/sqrt(d_k) applied to dV too", bw_dv_scaled),
    ("tiled_attention_backward", "dv = zeros_like(q) (copy-paste)", bw_dv_zeros_like_q),
    ("tiled_attention_backward", "u: q pre-scaled for S, then dK scaled again (1/d_k)", bw_u_prescaled_q_dk_scaled_again),
    ("tiled_attention_backward", "u: dV accumulated at the query block's rows", bw_u_dv_at_query_rows),
    ("tiled_attention_backward", "u: break instead of continue with keys outside (visible tiles lost)", bw_u_break_instead_of_continue),
    ("tiled_attention_backward", "u: causal skip tests the last key, j1 > i1", bw_u_skip_on_last_key),
    ("linear_attention", "phi_k.T on batched tensors (reverses every axis)", la_dot_T_on_batches),
    ("linear_attention", "divides by z, not by phi(q)·z", la_divides_by_z),
    ("linear_attention", "raw q, not phi(q), in the denominator", la_denominator_raw_q),
    ("linear_attention", "u: output normalised over its d_v features (z unused)", la_u_normalised_over_features),
    ("linear_attention", "u: S from raw k, z from phi(k)", la_u_state_from_raw_k),
    ("linear_attention", "u: S averaged over keys, z summed", la_u_state_mean_z_sum),
    ("linear_attention", "u: z with keepdim, then unsqueezed again", la_u_z_keepdim_then_unsqueezed),
]

CORRECT = [
    ("online_softmax", "block's own sum as exp(logsumexp(block) - safe)", ok_os_block_logsumexp),
    ("merge_softmax_stats", "no safe max: exponents m_i - m cleaned with nan_to_num", ok_mg_exponents_cleaned),
    ("tiled_attention", "diagonal mask via tril(i0 - j0), unguarded lse, nan_to_num output, lists + cat", ok_ta_tril_offset),
    ("tiled_attention", "per-tile (m, l, acc) merged with the 1b rule (split-K style)", ok_ta_split_k_merge),
    ("tiled_attention_backward", "key-major transposed tiles S^T = K_j Q_i^T", ok_bw_transposed_tiles),
    ("tiled_attention_backward", "queries outside, causal mask applied to P after the exponential", ok_bw_mask_after_exp),
    ("linear_attention", "phi(q) normalised by phi(q)·z first, then times S", ok_la_normalised_features_first),
    ("linear_attention", "phi as where(x > 0, x + 1, exp(x)), z = phi(k)^T 1", ok_la_where_feature_map),
]

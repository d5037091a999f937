"""Lesson 13 (attention at scale): an independent catalogue of learner slips and unusual correct answers.

Written from the notebook's text and the reference solution only (the checks were not read or run). Every
function is a learner's whole answer, with the exercise's signature; in a slip exactly one thing is wrong,
marked by a trailing `# slip: ...` (on the wrong line, or where the missing line belongs). Descriptions
starting with "u: " are the less textbook slips. None repeats a slip of lesson13.py .. lesson13f.py.
"""
import math

import torch
import torch.nn.functional as F

NEG = float("-inf")


# ====================================================================== online_softmax
def os_safe_in_rescale_only(blocks):
    m, l = torch.tensor(NEG), torch.tensor(0.0)
    for block in blocks:
        m_new = torch.maximum(m, block.amax(dim=-1))
        safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
        l = l * torch.exp(m - safe) + torch.exp(block - m_new[..., None]).sum(dim=-1)   # slip: block term shifted by the raw m_new: a masked first block gives exp(-inf + inf) = NaN
        m = m_new
    return m, l


def os_argmax(blocks):
    m, l = torch.tensor(NEG), torch.tensor(0.0)
    for block in blocks:
        m_new = torch.maximum(m, block.argmax(dim=-1))                          # slip: argmax (a column index), not amax (the value)
        safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
        l = l * torch.exp(m - safe) + torch.exp(block - safe[..., None]).sum(dim=-1)
        m = m_new
    return m, l


def os_safe_tests_old_m(blocks):
    m, l = torch.tensor(NEG), torch.tensor(0.0)
    for block in blocks:
        m_new = torch.maximum(m, block.amax(dim=-1))
        safe = torch.where(torch.isneginf(m), 0.0, m_new)                      # slip: tests the old m: the first block is always measured from 0, not from its max
        l = l * torch.exp(m - safe) + torch.exp(block - safe[..., None]).sum(dim=-1)
        m = m_new
    return m, l


def os_u_peeks_first_block(blocks):
    first = next(iter(blocks))                                                  # slip: a peek starts a pass; the for loop below is a second pass (BlocksReadTwice)
    m, l = first.amax(dim=-1), torch.zeros(first.shape[:-1], dtype=first.dtype)
    m = torch.full_like(m, NEG)
    for block in blocks:
        m_new = torch.maximum(m, block.amax(dim=-1))
        safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
        l = l * torch.exp(m - safe) + torch.exp(block - safe[..., None]).sum(dim=-1)
        m = m_new
    return m, l


def os_u_rescale_ratio_of_exps(blocks):
    m, l = torch.tensor(NEG), torch.tensor(0.0)
    for block in blocks:
        m_new = torch.maximum(m, block.amax(dim=-1))
        safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
        l = l * (torch.exp(m) / torch.exp(safe)) + torch.exp(block - safe[..., None]).sum(dim=-1)   # slip: e^m / e^m_new: both overflow to inf for scores above ~88 (float32), inf/inf = NaN
        m = m_new
    return m, l


def os_u_isposinf(blocks):
    m, l = torch.tensor(NEG), torch.tensor(0.0)
    for block in blocks:
        m_new = torch.maximum(m, block.amax(dim=-1))
        safe = torch.where(torch.isposinf(m_new), 0.0, m_new)                  # slip: isposinf: the -inf maximum of a masked block is never replaced (NaN)
        l = l * torch.exp(m - safe) + torch.exp(block - safe[..., None]).sum(dim=-1)
        m = m_new
    return m, l


# ====================================================================== merge_softmax_stats
def mg_safe_first_term_only(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    safe = torch.where(torch.isneginf(m), 0.0, m)
    return m, l1 * torch.exp(m1 - safe) + l2 * torch.exp(m2 - m)               # slip: second term shifted by the raw m: two empty parts give 0 * NaN


def mg_safe_tests_isnan(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    safe = torch.where(torch.isnan(m), 0.0, m)                                 # slip: guards NaN, but m is -inf (never NaN): two empty parts still give NaN
    return m, l1 * torch.exp(m1 - safe) + l2 * torch.exp(m2 - safe)


def mg_u_one_max_for_all_rows(m1, l1, m2, l2):
    m = torch.cat([m1, m2]).max()                                              # slip: one maximum over every row of both parts (a 0-d tensor), not per row
    safe = torch.where(torch.isneginf(m), 0.0, m)
    return m, l1 * torch.exp(m1 - safe) + l2 * torch.exp(m2 - safe)


def mg_u_logaddexp_unguarded(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    lse = torch.logaddexp(m1 + torch.log(l1), m2 + torch.log(l2))
    return m, torch.exp(lse - m)                                               # slip: back from log space with the raw m: two empty parts give exp(-inf + inf) = NaN


# ====================================================================== tiled_attention
def ta_m_never_updated(q, k, v, block_q, block_k, causal=False, mask=None):
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
            acc = acc * rescale[..., None] + p @ v[..., j0:j1, :]              # slip: `m = m_new` never written: m stays -inf, every tile wipes acc and l (only the last tile counts)
        seen = l > 0
        out[..., i0:i1, :] = torch.where(seen[..., None], acc / torch.where(seen, l, 1.0)[..., None], 0.0)
        lse[..., i0:i1] = torch.where(seen, m + torch.log(l), NEG)
    return out, lse


def ta_rescale_not_unsqueezed(q, k, v, block_q, block_k, causal=False, mask=None):
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
            acc = acc * rescale + p @ v[..., j0:j1, :]                          # slip: rescale (..., bq) not unsqueezed: broadcast along d_v (shape error, or wrong axis when bq == d_v)
            m = m_new
        seen = l > 0
        out[..., i0:i1, :] = torch.where(seen[..., None], acc / torch.where(seen, l, 1.0)[..., None], 0.0)
        lse[..., i0:i1] = torch.where(seen, m + torch.log(l), NEG)
    return out, lse


def ta_causal_aranges_swapped(q, k, v, block_q, block_k, causal=False, mask=None):
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
                keep = torch.arange(i0, i1)[None, :] <= torch.arange(j0, j1)[:, None]   # slip: query and key aranges swapped: an anti-causal (bk, bq) pattern, only shape-compatible for square tiles
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


def ta_i1_unclipped(q, k, v, block_q, block_k, causal=False, mask=None):
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    out = q.new_zeros(*lead, T_q, d_v)
    lse = q.new_zeros(*lead, T_q)
    for i0 in range(0, T_q, block_q):
        i1 = i0 + block_q                                                      # slip: not clipped to T_q: the last, shorter block of queries gets block_q-sized m, l, acc (shape error)
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


def ta_u_diag_test_j1_gt_i1(q, k, v, block_q, block_k, causal=False, mask=None):
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
            if causal and j1 > i1:                                             # slip: "the key block sticks out past the query block": misses diagonal tiles narrower than the query block (block_k < block_q)
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


def ta_u_scale_precedence(q, k, v, block_q, block_k, causal=False, mask=None):
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    out = q.new_zeros(*lead, T_q, d_v)
    lse = q.new_zeros(*lead, T_q)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        q_i = q[..., i0:i1, :] * d_k ** -1 / 2                                 # slip: precedence: (d_k ** -1) / 2 = 1 / (2 d_k), not d_k ** (-1/2)
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


# ====================================================================== tiled_attention_backward
def bw_dk_uses_grad_out(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
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
            dq[..., i0:i1, :] += ds @ k_j * scale
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ do_i * scale          # slip: dK = dS^T dO (the dV pattern), not dS^T Q
    return dq, dk, dv


def bw_mask_fill_zero(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
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
                s = s.masked_fill(torch.arange(j0, j1)[None, :] > torch.arange(i0, i1)[:, None], 0.0)   # slip: hidden scores set to 0, not -inf: P = e^(0 - L) > 0 for hidden keys
            p = torch.exp(s - lse[..., i0:i1, None])
            dv[..., j0:j1, :] += p.transpose(-2, -1) @ do_i
            dp = do_i @ v_j.transpose(-2, -1)
            ds = p * (dp - D[..., i0:i1, None])
            dq[..., i0:i1, :] += ds @ k_j * scale
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i * scale
    return dq, dk, dv


def bw_scale_is_sqrt(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    T_q, T_k, d_k = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = math.sqrt(d_k)                                                     # slip: scale = sqrt(d_k), then multiplied everywhere (scores and dq, dk d_k times too large)
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
            dq[..., i0:i1, :] += ds @ k_j * scale
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i * scale
    return dq, dk, dv


def bw_u_skip_on_block_indices(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    T_q, T_k, d_k = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1 / math.sqrt(d_k)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    D = (grad_out * out).sum(dim=-1)
    for jb, j0 in enumerate(range(0, T_k, block_k)):
        j1 = min(j0 + block_k, T_k)
        k_j, v_j = k[..., j0:j1, :], v[..., j0:j1, :]
        for ib, i0 in enumerate(range(0, T_q, block_q)):
            i1 = min(i0 + block_q, T_q)
            if causal and jb > ib:                                             # slip: compares block numbers: right only when block_q == block_k (skips visible tiles, or computes hidden ones)
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


def bw_u_one_zeros_tensor(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    T_q, T_k, d_k = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1 / math.sqrt(d_k)
    dq, dk, dv = [torch.zeros_like(q)] * 3                                     # slip: one tensor under three names: dq, dk and dv all accumulate into it
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


# ====================================================================== linear_attention
def la_plus_one_on_q_only(q, k, v):
    phi_q, phi_k = F.elu(q) + 1, F.elu(k)                                      # slip: the + 1 written for q only: phi(k) = elu(k) can be negative
    S = phi_k.transpose(-2, -1) @ v
    z = phi_k.sum(dim=-2)
    return (phi_q @ S) / (phi_q @ z[..., None])


def la_gelu(q, k, v):
    phi_q, phi_k = F.gelu(q) + 1, F.gelu(k) + 1                                # slip: gelu, not elu
    S = phi_k.transpose(-2, -1) @ v
    z = phi_k.sum(dim=-2)
    return (phi_q @ S) / (phi_q @ z[..., None])


def la_denominator_phi_k(q, k, v):
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    S = phi_k.transpose(-2, -1) @ v
    z = phi_k.sum(dim=-2)
    return (phi_q @ S) / (phi_k @ z[..., None])                                # slip: phi(k) in the denominator (runs when T_q == T_k, wrong values)


def la_u_softplus(q, k, v):
    phi_q, phi_k = F.softplus(q), F.softplus(k)                                # slip: softplus (another positive map), not elu + 1
    S = phi_k.transpose(-2, -1) @ v
    z = phi_k.sum(dim=-2)
    return (phi_q @ S) / (phi_q @ z[..., None])


def la_u_state_divided_by_z(q, k, v):
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    S = phi_k.transpose(-2, -1) @ v
    z = phi_k.sum(dim=-2)
    return phi_q @ (S / z[..., None])                                          # slip: each row of S divided by its z_d before the product: not the ratio phi(q)S / phi(q)z


# ====================================================================== correct, unusual
def ok_os_clamp_to_lowest(blocks):
    m, l = None, None
    for block in blocks:
        block_max = block.amax(dim=-1)
        m_new = block_max if m is None else torch.maximum(m, block_max)
        shift = m_new.clamp(min=torch.finfo(block.dtype).min)                  # -inf -> the lowest finite float: exp(-inf - lowest) = 0
        term = torch.exp(block - shift[..., None]).sum(dim=-1)
        l = term if l is None else l * torch.exp(m - shift) + term
        m = m_new
    return m, l


def ok_mg_guard_on_l(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    part1 = torch.where(l1 > 0, l1 * torch.exp(m1 - m), 0.0)                   # an empty part (l = 0) adds nothing; NaN of the
    part2 = torch.where(l2 > 0, l2 * torch.exp(m2 - m), 0.0)                   # branch not taken is discarded by where
    return m, part1 + part2


def ok_ta_break_keys_ascending(q, k, v, block_q, block_k, causal=False, mask=None):
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = mask.expand(*lead, T_q, T_k)                                    # a view, as broadcast_to
    scale = d_k ** -0.5
    out, lse = q.new_zeros(*lead, T_q, d_v), q.new_full((*lead, T_q), NEG)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        q_i = q[..., i0:i1, :] * scale
        m = q.new_full((*lead, i1 - i0), NEG)
        l = q.new_zeros(*lead, i1 - i0)
        acc = q.new_zeros(*lead, i1 - i0, d_v)
        rows = torch.arange(i0, i1)[:, None]
        for j0 in range(0, T_k, block_k):
            if causal and j0 >= i1:                                            # keys ascend: every later tile is above the diagonal too
                break
            j1 = min(j0 + block_k, T_k)
            s = torch.einsum("...qd,...kd->...qk", q_i, k[..., j0:j1, :])
            if causal and j1 > i0 + 1:
                s = s.masked_fill(torch.arange(j0, j1)[None, :] > rows, NEG)
            if mask is not None:
                s = s.masked_fill(~mask[..., i0:i1, j0:j1], NEG)
            m_new = torch.maximum(m, s.amax(dim=-1))
            safe = m_new.nan_to_num(neginf=0.0)
            alpha = torch.exp(m - safe)
            p = torch.exp(s - safe[..., None])
            l = alpha * l + p.sum(dim=-1)
            acc = alpha[..., None] * acc + torch.einsum("...qk,...kd->...qd", p, v[..., j0:j1, :])
            m = m_new
        seen = l > 0
        l_safe = torch.where(seen, l, torch.ones_like(l))
        out[..., i0:i1, :] = (acc / l_safe[..., None]) * seen[..., None]
        lse[..., i0:i1] = torch.where(seen, m + torch.log(l_safe), lse[..., i0:i1])
    return out, lse


def ok_bw_tile_autograd_surrogate(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    T_q, T_k, d_k = q.shape[-2], k.shape[-2], q.shape[-1]
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    D = (grad_out * out).sum(dim=-1)
    with torch.enable_grad():
        for i0 in range(0, T_q, block_q):
            i1 = min(i0 + block_q, T_q)
            q_i = q[..., i0:i1, :].detach().requires_grad_()
            do_i, L_i, D_i = grad_out[..., i0:i1, :].detach(), lse[..., i0:i1, None].detach(), D[..., i0:i1, None].detach()
            for j0 in range(0, T_k, block_k):
                if causal and j0 >= i1:
                    continue
                j1 = min(j0 + block_k, T_k)
                k_j = k[..., j0:j1, :].detach().requires_grad_()
                v_j = v[..., j0:j1, :].detach().requires_grad_()
                s = q_i @ k_j.transpose(-2, -1) / math.sqrt(d_k)
                if causal and j1 - 1 > i0:
                    s = s.masked_fill(torch.arange(j0, j1)[None, :] > torch.arange(i0, i1)[:, None], NEG)
                p = torch.exp(s - L_i)                                         # L held constant: d/dS of the surrogate below
                surrogate = (do_i * (p @ v_j)).sum() - (D_i * p).sum()        # is P * (dP - D), d/dV is P^T dO
                g_q, g_k, g_v = torch.autograd.grad(surrogate, (q_i, k_j, v_j))
                dq[..., i0:i1, :] += g_q
                dk[..., j0:j1, :] += g_k
                dv[..., j0:j1, :] += g_v
    return dq, dk, dv


def ok_la_means_cancel(q, k, v):
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    S = phi_k.transpose(-2, -1) @ v / k.shape[-2]                              # the mean of phi(k_j) v_j^T ...
    z = phi_k.mean(dim=-2)                                                     # ... and of phi(k_j): the 1/T_k cancels
    return (phi_q @ S) / (phi_q @ z[..., None])


def ok_la_celu_elementwise_denominator(q, k, v):
    phi_q, phi_k = F.celu(q) + 1, F.celu(k) + 1                                # celu with alpha = 1 is elu
    S = torch.einsum("...kd,...ke->...de", phi_k, v)                           # (..., d_k, d_v)
    z = phi_k.sum(dim=-2)                                                      # (..., d_k)
    den = (phi_q * z[..., None, :]).sum(dim=-1, keepdim=True)                  # (..., T_q, 1): T_q x d_k, not T_q x T_k
    return torch.einsum("...td,...de->...te", phi_q, S) / den


SLIPS = [
    ("online_softmax", "block term shifted by the raw m_new (safe max in the rescale only)", os_safe_in_rescale_only),
    ("online_softmax", "argmax instead of amax", os_argmax),
    ("online_softmax", "safe max tests the old m (first block measured from 0)", os_safe_tests_old_m),
    ("online_softmax", "u: first block peeked with next(iter(blocks)), then a for loop (second pass)", os_u_peeks_first_block),
    ("online_softmax", "u: rescale as exp(m) / exp(m_new) (overflow at large scores)", os_u_rescale_ratio_of_exps),
    ("online_softmax", "u: safe max tests isposinf (the -inf max never replaced)", os_u_isposinf),
    ("merge_softmax_stats", "safe max used in the first term only", mg_safe_first_term_only),
    ("merge_softmax_stats", "safe max tests isnan(m) (m is -inf, never NaN)", mg_safe_tests_isnan),
    ("merge_softmax_stats", "u: one maximum over every row (cat(...).max())", mg_u_one_max_for_all_rows),
    ("merge_softmax_stats", "u: logaddexp of the log-normalisers, exp(lse - m) unguarded", mg_u_logaddexp_unguarded),
    ("tiled_attention", "m = m_new forgotten (each tile wipes acc and l)", ta_m_never_updated),
    ("tiled_attention", "acc rescale factor not unsqueezed", ta_rescale_not_unsqueezed),
    ("tiled_attention", "causal keep with the query and key aranges swapped", ta_causal_aranges_swapped),
    ("tiled_attention", "i1 = i0 + block_q not clipped (last query block)", ta_i1_unclipped),
    ("tiled_attention", "u: diagonal-tile test j1 > i1 (misses tiles when block_k < block_q)", ta_u_diag_test_j1_gt_i1),
    ("tiled_attention", "u: scale written d_k ** -1 / 2 (precedence: 1/(2 d_k))", ta_u_scale_precedence),
    ("tiled_attention_backward", "dK = dS^T dO instead of dS^T Q", bw_dk_uses_grad_out),
    ("tiled_attention_backward", "hidden scores filled with 0, not -inf", bw_mask_fill_zero),
    ("tiled_attention_backward", "scale = sqrt(d_k), multiplied", bw_scale_is_sqrt),
    ("tiled_attention_backward", "u: causal skip on block numbers jb > ib (square tiles only)", bw_u_skip_on_block_indices),
    ("tiled_attention_backward", "u: dq, dk, dv = [zeros_like(q)] * 3 (one shared tensor)", bw_u_one_zeros_tensor),
    ("linear_attention", "phi(k) = elu(k) (+1 on q only)", la_plus_one_on_q_only),
    ("linear_attention", "gelu + 1 instead of elu + 1", la_gelu),
    ("linear_attention", "phi(k) instead of phi(q) in the denominator", la_denominator_phi_k),
    ("linear_attention", "u: softplus feature map", la_u_softplus),
    ("linear_attention", "u: S divided by z row-wise before the product", la_u_state_divided_by_z),
]

CORRECT = [
    ("online_softmax", "lazy state from the first block, -inf clamped to the lowest finite float", ok_os_clamp_to_lowest),
    ("merge_softmax_stats", "empty parts recognised by l = 0, torch.where on each term", ok_mg_guard_on_l),
    ("tiled_attention", "break at the first tile above the diagonal, einsum, expand, nan_to_num safe max", ok_ta_break_keys_ascending),
    ("tiled_attention_backward", "per-tile autograd of the surrogate sum(dO * PV) - sum(D * P), L constant", ok_bw_tile_autograd_surrogate),
    ("linear_attention", "S and z both averaged over keys (the 1/T_k cancels)", ok_la_means_cancel),
    ("linear_attention", "celu(x) + 1 (alpha = 1), einsums, denominator as an element-wise product over d_k", ok_la_celu_elementwise_denominator),
]

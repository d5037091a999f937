"""Exercise 2's right answers written other ways than the reference (tiled_attention.py's `right=`): the blocks of
keys outside, with running statistics for every query; FlashAttention-1's form, the output kept normalised."""
import math

import torch


def keys_outside(q, k, v, block_q, block_k, causal=False, mask=None):
    """A right answer: the blocks of keys outside, the running statistics of every query kept in tensors of T_q."""
    *lead, T_q, d = q.shape
    T_k = k.shape[-2]
    mask = None if mask is None else torch.broadcast_to(mask, (*lead, T_q, T_k))
    m, ell = q.new_full((*lead, T_q), float("-inf")), q.new_zeros(*lead, T_q)
    acc = q.new_zeros(*lead, T_q, v.shape[-1])
    for j0 in range(0, T_k, block_k):
        j1 = min(j0 + block_k, T_k)
        for i0 in range(0, T_q, block_q):
            i1 = min(i0 + block_q, T_q)
            if causal and j0 >= i1:
                continue
            s = (q[..., i0:i1, :] / d ** 0.5) @ k[..., j0:j1, :].transpose(-2, -1)
            keep = torch.arange(j0, j1)[None] <= torch.arange(i0, i1)[:, None] if causal else \
                torch.ones(i1 - i0, j1 - j0, dtype=torch.bool)
            keep = keep & mask[..., i0:i1, j0:j1] if mask is not None else keep
            s = s.masked_fill(~keep, float("-inf"))
            m_new = torch.maximum(m[..., i0:i1], s.amax(-1))
            shift = torch.where(torch.isneginf(m_new), 0.0, m_new)
            p, rescale = torch.exp(s - shift[..., None]), torch.exp(m[..., i0:i1] - shift)
            ell[..., i0:i1] = ell[..., i0:i1] * rescale + p.sum(-1)
            acc[..., i0:i1, :] = acc[..., i0:i1, :] * rescale[..., None] + p @ v[..., j0:j1, :]
            m[..., i0:i1] = m_new
    seen = ell > 0
    out = torch.where(seen[..., None], acc / torch.where(seen, ell, 1.0)[..., None], 0.0)
    return out, torch.where(seen, m + torch.log(ell), float("-inf"))


def flash1(q, k, v, block_q, block_k, causal=False, mask=None):
    """FlashAttention-1's form: the output kept normalised, rescaled by l_old e^(m_old − m_new) / l_new; the tiles
    above the diagonal skipped, each tile's causal mask built from its positions."""
    *lead, T_q, _ = q.shape
    T_k = k.shape[-2]
    mask = None if mask is None else torch.broadcast_to(mask, (*lead, T_q, T_k))
    out, lse = q.new_zeros(*lead, T_q, v.shape[-1]), q.new_zeros(*lead, T_q)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        m, ell = q.new_full((*lead, i1 - i0), -math.inf), q.new_zeros(*lead, i1 - i0)
        o = q.new_zeros(*lead, i1 - i0, v.shape[-1])
        for j0 in range(0, T_k, block_k):
            j1 = min(j0 + block_k, T_k)
            if causal and j0 >= i1:
                continue
            s = q[..., i0:i1, :] @ k[..., j0:j1, :].transpose(-2, -1) / math.sqrt(q.shape[-1])
            keep = torch.ones(i1 - i0, j1 - j0, dtype=torch.bool)
            if causal:
                keep = torch.arange(j0, j1)[None, :] <= torch.arange(i0, i1)[:, None]
            if mask is not None:
                keep = keep & mask[..., i0:i1, j0:j1]
            s = s.masked_fill(~keep, -math.inf)
            m_new = torch.maximum(m, s.amax(-1))
            shift = torch.where(torch.isinf(m_new), 0.0, m_new)
            p = torch.exp(s - shift[..., None])
            l_new = ell * torch.exp(m - shift) + p.sum(-1)
            denom = torch.where(l_new > 0, l_new, 1.0)[..., None]
            o = (o * (ell * torch.exp(m - shift))[..., None] + p @ v[..., j0:j1, :]) / denom
            m, ell = m_new, l_new
        out[..., i0:i1, :] = o
        lse[..., i0:i1] = m + torch.log(ell)
    return out, lse

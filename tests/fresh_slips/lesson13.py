"""Learner-style wrong answers (and correct-but-unusual ones) for lesson 13, written from the notebook text only."""
import math

import torch
import torch.nn.functional as F

from course_utils.masks import causal_mask

SLIPS, CORRECT = [], []


def slip(exercise, name):
    def deco(fn):
        SLIPS.append((exercise, name, fn))
        return fn
    return deco


def correct(exercise, name):
    def deco(fn):
        CORRECT.append((exercise, name, fn))
        return fn
    return deco


NEG = float("-inf")


# ---------------------------------------------------------------- Exercise 1a: online_softmax
def _online(blocks, rescale="ok", safe=True, update_m_first=False, m0=NEG, block_max=False, log_out=False,
            safe_rescale=True):
    m, l = torch.tensor(m0), torch.tensor(0.0)
    for block in blocks:
        m_new = torch.maximum(m, block.amax(dim=-1))
        s = torch.where(torch.isneginf(m_new), 0.0, m_new) if safe else m_new
        if update_m_first:
            m = m_new
        if block_max:
            bm = block.amax(dim=-1)
            bs = torch.where(torch.isneginf(bm), 0.0, bm)
            term = torch.exp(block - bs[..., None]).sum(-1)
        else:
            term = torch.exp(block - s[..., None]).sum(-1)
        if rescale == "none":
            factor = 1.0
        elif rescale == "flipped":
            factor = torch.exp(s - m)
        else:
            factor = torch.exp(m - s) if safe_rescale else torch.exp(m - m_new)
        l = l * factor + term
        m = m_new
    if log_out:
        return m, m + torch.log(l)
    return m, l


slip("online_softmax", "l never rescaled")(lambda b: _online(b, rescale="none"))
slip("online_softmax", "rescale e^(m_new - m) (flipped)")(lambda b: _online(b, rescale="flipped"))
slip("online_softmax", "no safe maximum (NaN on masked rows)")(lambda b: _online(b, safe=False))
slip("online_softmax", "m updated before the rescale (factor 1)")(lambda b: _online(b, update_m_first=True))
slip("online_softmax", "m started at 0")(lambda b: _online(b, m0=0.0))
slip("online_softmax", "block's own max in the block term")(lambda b: _online(b, block_max=True))
slip("online_softmax", "returns the log-sum-exp m + log l")(lambda b: _online(b, log_out=True))
slip("online_softmax", "safe max in the block term only, rescale e^(m - m_new) raw")(lambda b: _online(b, safe_rescale=False))


@slip("online_softmax", "two passes: list the blocks, cat, max")
def online_two_pass(blocks):
    kept = list(blocks)
    x = torch.cat(kept, dim=-1)
    m = x.amax(-1)
    safe = torch.where(torch.isneginf(m), 0.0, m)
    return m, torch.exp(x - safe[:, None]).sum(-1)


@slip("online_softmax", "m as the max over the blocks' max but l summed from each block's own max")
def online_mixed(blocks):
    m, l = torch.tensor(NEG), torch.tensor(0.0)
    for block in blocks:
        bm = block.amax(-1)
        m = torch.maximum(m, bm)
        bs = torch.where(torch.isneginf(bm), 0.0, bm)
        l = l + torch.exp(block - bs[:, None]).sum(-1)
    return m, l


@correct("online_softmax", "merge each block's own statistics")
def online_merge(blocks):
    m, l = torch.tensor(NEG), torch.tensor(0.0)
    for block in blocks:
        bm = block.amax(-1)
        bs = torch.where(torch.isneginf(bm), 0.0, bm)
        bl = torch.exp(block - bs[:, None]).sum(-1)
        new = torch.maximum(m, bm)
        safe = torch.where(torch.isneginf(new), 0.0, new)
        l = l * torch.exp(m - safe) + bl * torch.exp(bm - safe)
        m = new
    return m, l


@correct("online_softmax", "running log-sum-exp with logaddexp, converted at the end")
def online_lse(blocks):
    lse, m = torch.tensor(NEG), torch.tensor(NEG)
    for block in blocks:
        lse = torch.logaddexp(lse, torch.logsumexp(block, dim=-1))
        m = torch.maximum(m, block.amax(-1))
    safe = torch.where(torch.isneginf(m), 0.0, m)
    return m, torch.exp(lse - safe)


@correct("online_softmax", "clamp-based safe maximum, float64 inside")
def online_clamp(blocks):
    m = l = None
    for block in blocks:
        block = block.double()
        if m is None:
            m = torch.full(block.shape[:-1], NEG, dtype=torch.float64)
            l = torch.zeros(block.shape[:-1], dtype=torch.float64)
        m_new = torch.maximum(m, block.max(dim=-1).values)
        safe = torch.nan_to_num(m_new, neginf=0.0)
        l = l * (m - safe).exp() + (block - safe.unsqueeze(-1)).exp().sum(-1)
        m = m_new
    return m.float(), l.float()


# ---------------------------------------------------------------- Exercise 1b: merge_softmax_stats
def _safe(m):
    return torch.where(torch.isneginf(m), 0.0, m)


slip("merge_softmax_stats", "l = l1 + l2")(lambda m1, l1, m2, l2: (torch.maximum(m1, m2), l1 + l2))
slip("merge_softmax_stats", "no safe maximum")(lambda m1, l1, m2, l2: (
    torch.maximum(m1, m2), l1 * torch.exp(m1 - torch.maximum(m1, m2)) + l2 * torch.exp(m2 - torch.maximum(m1, m2))))
slip("merge_softmax_stats", "rescale flipped e^(m - m_i)")(lambda m1, l1, m2, l2: (
    torch.maximum(m1, m2), l1 * torch.exp(_safe(torch.maximum(m1, m2)) - m1).nan_to_num(0, 0, 0)
    + l2 * torch.exp(_safe(torch.maximum(m1, m2)) - m2).nan_to_num(0, 0, 0)))
slip("merge_softmax_stats", "only l1 rescaled")(lambda m1, l1, m2, l2: (
    torch.maximum(m1, m2), l1 * torch.exp(m1 - _safe(torch.maximum(m1, m2))) + l2))
slip("merge_softmax_stats", "m = m1 + m2")(lambda m1, l1, m2, l2: (
    m1 + m2, l1 * torch.exp(m1 - _safe(torch.maximum(m1, m2))) + l2 * torch.exp(m2 - _safe(torch.maximum(m1, m2)))))
slip("merge_softmax_stats", "safe max only when m1 is -inf")(lambda m1, l1, m2, l2: (
    torch.maximum(m1, m2), l1 * torch.exp(m1 - torch.where(torch.isneginf(m1), 0.0, torch.maximum(m1, m2)))
    + l2 * torch.exp(m2 - torch.where(torch.isneginf(m1), 0.0, torch.maximum(m1, m2)))))
slip("merge_softmax_stats", "returns (l, m)")(lambda m1, l1, m2, l2: (
    l1 * torch.exp(m1 - _safe(torch.maximum(m1, m2))) + l2 * torch.exp(m2 - _safe(torch.maximum(m1, m2))),
    torch.maximum(m1, m2)))
slip("merge_softmax_stats", "m = max(m1, m2) but l from min: e^(m_i - min)")(lambda m1, l1, m2, l2: (
    torch.maximum(m1, m2), l1 * torch.exp(m1 - _safe(torch.minimum(m1, m2))) + l2 * torch.exp(m2 - _safe(torch.minimum(m1, m2)))))

correct("merge_softmax_stats", "torch.max(a, b) and nan_to_num")(lambda m1, l1, m2, l2: (
    torch.max(m1, m2), torch.nan_to_num(l1 * torch.exp(m1 - torch.max(m1, m2)), nan=0.0)
    + torch.nan_to_num(l2 * torch.exp(m2 - torch.max(m1, m2)), nan=0.0)))


@correct("merge_softmax_stats", "via log-sum-exp with logaddexp")
def merge_lse(m1, l1, m2, l2):
    lse = torch.logaddexp(m1 + torch.log(l1), m2 + torch.log(l2))
    m = torch.maximum(m1, m2)
    return m, torch.exp(lse - _safe(m))


# ---------------------------------------------------------------- Exercise 2: tiled_attention
def _tiled(q, k, v, block_q, block_k, causal=False, mask=None, scale=True, rescale_acc=True, normalise_inside=False,
           skip="ok", local_mask=False, no_skip=False, lse_form="ok", guard=True, full_mask=False, use_mask=True,
           dtype_new=True, safe=True):
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if full_mask:
        allowed = torch.ones(T_q, T_k, dtype=torch.bool)
        if causal:
            allowed = causal_mask(T_q) if T_q == T_k else torch.tril(torch.ones(T_q, T_k, dtype=torch.bool))
        if mask is not None:
            allowed = allowed & mask
        mask = torch.broadcast_to(allowed, (*lead, T_q, T_k))
        causal_local = False
    else:
        causal_local = causal
        if mask is not None:
            mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    if not use_mask:
        mask = None
    new_zeros = q.new_zeros if dtype_new else (lambda *s: torch.zeros(*s))
    new_full = q.new_full if dtype_new else (lambda s, f: torch.full(s, f))
    out = new_zeros(*lead, T_q, d_v)
    lse = new_zeros(*lead, T_q)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        q_i = q[..., i0:i1, :] / (math.sqrt(d_k) if scale else 1.0)
        m = new_full((*lead, i1 - i0), NEG)
        l = new_zeros(*lead, i1 - i0)
        acc = new_zeros(*lead, i1 - i0, d_v)
        for j0 in range(0, T_k, block_k):
            j1 = min(j0 + block_k, T_k)
            if causal_local and not no_skip:
                if skip == "ok" and j0 > i1 - 1:
                    continue
                if skip == "j0>i0" and j0 > i0:
                    continue
            s = q_i @ k[..., j0:j1, :].transpose(-2, -1)
            keep = None
            if causal_local and (no_skip or j1 - 1 > i0):
                if local_mask:
                    keep = torch.arange(j1 - j0)[None, :] <= torch.arange(i1 - i0)[:, None]
                else:
                    keep = torch.arange(j0, j1)[None, :] <= torch.arange(i0, i1)[:, None]
            if mask is not None:
                keep = mask[..., i0:i1, j0:j1] if keep is None else keep & mask[..., i0:i1, j0:j1]
            if keep is not None:
                s = s.masked_fill(~keep, NEG)
            m_new = torch.maximum(m, s.amax(dim=-1))
            sm = torch.where(torch.isneginf(m_new), 0.0, m_new) if safe else m_new
            p = torch.exp(s - sm[..., None])
            rescale = torch.exp(m - sm)
            l = l * rescale + p.sum(dim=-1)
            acc = (acc * rescale[..., None] if rescale_acc else acc) + p @ v[..., j0:j1, :]
            if normalise_inside:
                acc = acc / torch.where(l > 0, l, 1.0)[..., None]
            m = m_new
        seen = l > 0
        if guard:
            out[..., i0:i1, :] = torch.where(seen[..., None], acc / torch.where(seen, l, 1.0)[..., None], 0.0)
        else:
            out[..., i0:i1, :] = acc / l[..., None]
        if lse_form == "ok":
            lse[..., i0:i1] = torch.where(seen, m + torch.log(l), NEG)
        elif lse_form == "log_l":
            lse[..., i0:i1] = torch.log(l)
        elif lse_form == "m_plus_l":
            lse[..., i0:i1] = torch.where(seen, m + l, NEG)
    return out, lse


slip("tiled_attention", "no 1/sqrt(d_k)")(lambda *a, **k: _tiled(*a, **k, scale=False))
slip("tiled_attention", "acc not rescaled (l is)")(lambda *a, **k: _tiled(*a, **k, rescale_acc=False))
slip("tiled_attention", "acc divided by l inside the loop")(lambda *a, **k: _tiled(*a, **k, normalise_inside=True))
slip("tiled_attention", "causal skip when j0 > i0 (skips visible tiles)")(lambda *a, **k: _tiled(*a, **k, skip="j0>i0"))
slip("tiled_attention", "causal mask with tile-local indices")(lambda *a, **k: _tiled(*a, **k, local_mask=True))
slip("tiled_attention", "tiles above the diagonal computed and masked")(lambda *a, **k: _tiled(*a, **k, no_skip=True))
slip("tiled_attention", "lse = log l (m forgotten)")(lambda *a, **k: _tiled(*a, **k, lse_form="log_l"))
slip("tiled_attention", "lse = m + l")(lambda *a, **k: _tiled(*a, **k, lse_form="m_plus_l"))
slip("tiled_attention", "no safe maximum")(lambda *a, **k: _tiled(*a, **k, safe=False))
slip("tiled_attention", "whole T x T mask built up front")(lambda *a, **k: _tiled(*a, **k, full_mask=True))
slip("tiled_attention", "mask argument ignored")(lambda *a, **k: _tiled(*a, **k, use_mask=False))
slip("tiled_attention", "acc / l without a guard (0/0 on masked rows)")(lambda *a, **k: _tiled(*a, **k, guard=False))
slip("tiled_attention", "tensors made with torch.zeros (float32 always)")(lambda *a, **k: _tiled(*a, **k, dtype_new=False))


@correct("tiled_attention", "FlashAttention-1 style: output kept normalised, rescaled each step")
def tiled_fa1(q, k, v, block_q, block_k, causal=False, mask=None):
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    out, lse = q.new_zeros(*lead, T_q, d_v), q.new_zeros(*lead, T_q)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        qi = q[..., i0:i1, :]
        m = q.new_full((*lead, i1 - i0), NEG)
        l = q.new_zeros(*lead, i1 - i0)
        o = q.new_zeros(*lead, i1 - i0, d_v)
        for j0 in range(0, T_k, block_k):
            j1 = min(j0 + block_k, T_k)
            if causal and j0 >= i1:
                continue
            s = (qi @ k[..., j0:j1, :].mT) * d_k ** -0.5
            if causal and j1 > i0 + 1:
                s = s + torch.zeros(i1 - i0, j1 - j0, dtype=q.dtype).masked_fill(
                    torch.arange(j0, j1) > torch.arange(i0, i1)[:, None], NEG)
            if mask is not None:
                s = s.masked_fill(~mask[..., i0:i1, j0:j1], NEG)
            m_new = torch.maximum(m, s.amax(-1))
            safe = torch.nan_to_num(m_new, neginf=0.0)
            p = (s - safe[..., None]).exp()
            l_new = l * (m - safe).exp() + p.sum(-1)
            denom = torch.where(l_new > 0, l_new, torch.ones_like(l_new))
            o = (o * (l * (m - safe).exp())[..., None] + p @ v[..., j0:j1, :]) / denom[..., None]
            m, l = m_new, l_new
        out[..., i0:i1, :] = o
        lse[..., i0:i1] = torch.where(l > 0, m + l.log(), torch.full_like(m, NEG))
    return out, lse


@correct("tiled_attention", "logaddexp-tracked lse, keys outside? no: per-query-block lists, j0 >= i1 skip")
def tiled_lse(q, k, v, block_q, block_k, causal=False, mask=None):
    *lead, T_q, d_k = q.shape
    T_k = k.shape[-2]
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    outs, lses = [], []
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        qi = q[..., i0:i1, :] / math.sqrt(d_k)
        m = q.new_full((*lead, i1 - i0), NEG)
        l = q.new_zeros(*lead, i1 - i0)
        acc = q.new_zeros(*lead, i1 - i0, v.shape[-1])
        for j0 in range(0, T_k, block_k):
            j1 = min(j0 + block_k, T_k)
            if causal and j0 >= i1:
                break
            s = torch.einsum("...id,...jd->...ij", qi, k[..., j0:j1, :])
            if causal:
                s = s.masked_fill(torch.arange(j0, j1)[None] > torch.arange(i0, i1)[:, None], NEG)
            if mask is not None:
                s = s.masked_fill(~mask[..., i0:i1, j0:j1], NEG)
            m_new = torch.maximum(m, s.amax(-1))
            safe = m_new.masked_fill(torch.isneginf(m_new), 0.0)
            p = torch.exp(s - safe.unsqueeze(-1))
            r = torch.exp(m - safe)
            l, acc, m = l * r + p.sum(-1), acc * r.unsqueeze(-1) + p @ v[..., j0:j1, :], m_new
        ok = l > 0
        outs.append(torch.where(ok[..., None], acc / l.clamp(min=torch.finfo(q.dtype).tiny)[..., None], 0.0))
        lses.append(torch.where(ok, m + torch.log(l), NEG))
    return torch.cat(outs, dim=-2), torch.cat(lses, dim=-1)


# ---------------------------------------------------------------- Exercise 3: tiled_attention_backward
def _bwd(q, k, v, out, lse, grad_out, block_q, block_k, causal=False, use_D=True, scale_grads="both",
         scale_s=True, diag_mask=True, skip=True, local=False, D_axis=-1, full_P=False):
    T_q, T_k, d_k = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1 / math.sqrt(d_k)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    if D_axis == -1:
        D = (grad_out * out).sum(dim=-1)
    else:
        D = (grad_out * out).sum(dim=-2, keepdim=True).expand_as(out)[..., 0]
    if full_P:
        S = q @ k.transpose(-2, -1) * scale
        if causal:
            S = S.masked_fill(~torch.tril(torch.ones(T_q, T_k, dtype=torch.bool)), NEG)
        P = torch.exp(S - lse[..., None])
    for j0 in range(0, T_k, block_k):
        j1 = min(j0 + block_k, T_k)
        k_j, v_j = k[..., j0:j1, :], v[..., j0:j1, :]
        for i0 in range(0, T_q, block_q):
            i1 = min(i0 + block_q, T_q)
            if causal and skip and j0 > i1 - 1:
                continue
            q_i, do_i = q[..., i0:i1, :], grad_out[..., i0:i1, :]
            if full_P:
                p = P[..., i0:i1, j0:j1]
            else:
                s = q_i @ k_j.transpose(-2, -1) * (scale if scale_s else 1.0)
                if causal and diag_mask and (j1 - 1 > i0 or not skip):
                    if local:
                        hidden = torch.arange(j1 - j0)[None, :] > torch.arange(i1 - i0)[:, None]
                    else:
                        hidden = torch.arange(j0, j1)[None, :] > torch.arange(i0, i1)[:, None]
                    s = s.masked_fill(hidden, NEG)
                p = torch.exp(s - lse[..., i0:i1, None])
            dv[..., j0:j1, :] += p.transpose(-2, -1) @ do_i
            dp = do_i @ v_j.transpose(-2, -1)
            ds = p * (dp - D[..., i0:i1, None]) if use_D else p * dp
            sq = scale if scale_grads in ("both", "dq") else 1.0
            sk = scale if scale_grads in ("both", "dk") else 1.0
            dq[..., i0:i1, :] += ds @ k_j * sq
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i * sk
    return dq, dk, dv


slip("tiled_attention_backward", "D forgotten: dS = P ⊙ dP")(lambda *a, **k: _bwd(*a, **k, use_D=False))
slip("tiled_attention_backward", "no 1/sqrt(d_k) in dq, dk")(lambda *a, **k: _bwd(*a, **k, scale_grads="none"))
slip("tiled_attention_backward", "1/sqrt(d_k) only in dk")(lambda *a, **k: _bwd(*a, **k, scale_grads="dk"))
slip("tiled_attention_backward", "scores recomputed without 1/sqrt(d_k)")(lambda *a, **k: _bwd(*a, **k, scale_s=False))
slip("tiled_attention_backward", "no element-wise mask on diagonal tiles")(lambda *a, **k: _bwd(*a, **k, diag_mask=False))
slip("tiled_attention_backward", "tiles above the diagonal computed (masked)")(lambda *a, **k: _bwd(*a, **k, skip=False))
slip("tiled_attention_backward", "causal mask with tile-local indices")(lambda *a, **k: _bwd(*a, **k, local=True))
slip("tiled_attention_backward", "D summed over the queries (dim=-2)")(lambda *a, **k: _bwd(*a, **k, D_axis=-2))
slip("tiled_attention_backward", "whole P recomputed at once")(lambda *a, **k: _bwd(*a, **k, full_P=True))


@correct("tiled_attention_backward", "queries outside, D per block, einsum")
def bwd_q_outer(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    T_q, T_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        qi, doi = q[..., i0:i1, :], grad_out[..., i0:i1, :]
        Di = torch.einsum("...ic,...ic->...i", doi, out[..., i0:i1, :])
        for j0 in range(0, T_k, block_k):
            j1 = min(j0 + block_k, T_k)
            if causal and j0 >= i1:
                break
            s = torch.einsum("...id,...jd->...ij", qi, k[..., j0:j1, :]) / math.sqrt(d)
            if causal:
                s = s.masked_fill(torch.arange(j0, j1) > torch.arange(i0, i1)[:, None], NEG)
            p = (s - lse[..., i0:i1, None]).exp()
            dv[..., j0:j1, :] += torch.einsum("...ij,...ic->...jc", p, doi)
            ds = p * (torch.einsum("...ic,...jc->...ij", doi, v[..., j0:j1, :]) - Di[..., None])
            dq[..., i0:i1, :] += torch.einsum("...ij,...jd->...id", ds, k[..., j0:j1, :]) / math.sqrt(d)
            dk[..., j0:j1, :] += torch.einsum("...ij,...id->...jd", ds, qi) / math.sqrt(d)
    return dq, dk, dv


@correct("tiled_attention_backward", "q pre-scaled once, scale folded")
def bwd_prescaled(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    scale = q.shape[-1] ** -0.5
    qs = q * scale
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    D = (grad_out * out).sum(-1, keepdim=True)
    for j0 in range(0, k.shape[-2], block_k):
        j1 = min(j0 + block_k, k.shape[-2])
        for i0 in range(0, q.shape[-2], block_q):
            i1 = min(i0 + block_q, q.shape[-2])
            if causal and j0 >= i1:
                continue
            s = qs[..., i0:i1, :] @ k[..., j0:j1, :].mT
            if causal and j1 - 1 > i0:
                s = s.masked_fill(torch.arange(j0, j1) > torch.arange(i0, i1).unsqueeze(1), NEG)
            p = torch.exp(s - lse[..., i0:i1].unsqueeze(-1))
            dv[..., j0:j1, :] += p.mT @ grad_out[..., i0:i1, :]
            ds = p * (grad_out[..., i0:i1, :] @ v[..., j0:j1, :].mT - D[..., i0:i1, :])
            dq[..., i0:i1, :] += (ds @ k[..., j0:j1, :]) * scale
            dk[..., j0:j1, :] += ds.mT @ qs[..., i0:i1, :]
    return dq, dk, dv


# ---------------------------------------------------------------- Exercise 4: linear_attention
def _lin(q, k, v, phi=lambda x: F.elu(x) + 1, normalise=True, z_from_q=False, z_scalar=False, pre_scale=False):
    if pre_scale:
        q = q / math.sqrt(q.shape[-1])
    pq, pk = phi(q), phi(k)
    S = pk.transpose(-2, -1) @ v
    num = pq @ S
    if not normalise:
        return num
    if z_scalar:
        return num / pk.sum(dim=(-2, -1))[..., None, None]
    z = (pq if z_from_q else pk).sum(dim=-2)
    return num / (pq @ z[..., None])


slip("linear_attention", "phi = elu (no + 1)")(lambda q, k, v: _lin(q, k, v, phi=F.elu))
slip("linear_attention", "no normalisation")(lambda q, k, v: _lin(q, k, v, normalise=False))
slip("linear_attention", "z summed over phi(q)")(lambda q, k, v: _lin(q, k, v, z_from_q=True))
slip("linear_attention", "phi = elu(x + 1)")(lambda q, k, v: _lin(q, k, v, phi=lambda x: F.elu(x + 1)))
slip("linear_attention", "divides by Σ of all phi(k) (a scalar)")(lambda q, k, v: _lin(q, k, v, z_scalar=True))
slip("linear_attention", "q scaled by 1/sqrt(d) first (softmax habit)")(lambda q, k, v: _lin(q, k, v, pre_scale=True))
slip("linear_attention", "phi = relu + 1")(lambda q, k, v: _lin(q, k, v, phi=lambda x: F.relu(x) + 1))


@slip("linear_attention", "quadratic form (T_q x T_k weights)")
def lin_quadratic(q, k, v):
    a = (F.elu(q) + 1) @ (F.elu(k) + 1).transpose(-2, -1)
    return (a / a.sum(-1, keepdim=True)) @ v


@slip("linear_attention", "normaliser by a broadcast product over queries and keys")
def lin_broadcast(q, k, v):
    pq, pk = F.elu(q) + 1, F.elu(k) + 1
    S = pk.transpose(-2, -1) @ v
    denom = (pq[..., :, None, :] * pk[..., None, :, :]).sum(dim=(-2, -1))
    return (pq @ S) / denom[..., None]


@correct("linear_attention", "means instead of sums (cancels)")
def lin_mean(q, k, v):
    pq, pk = F.elu(q) + 1, F.elu(k) + 1
    S = pk.transpose(-2, -1) @ v / k.shape[-2]
    z = pk.mean(-2)
    return (pq @ S) / (pq * z[..., None, :]).sum(-1, keepdim=True)


@correct("linear_attention", "einsum")
def lin_einsum(q, k, v):
    pq, pk = F.elu(q) + 1, F.elu(k) + 1
    S = torch.einsum("...jk,...jv->...kv", pk, v)
    z = pk.sum(-2)
    num = torch.einsum("...tk,...kv->...tv", pq, S)
    den = torch.einsum("...tk,...k->...t", pq, z)
    return num / den.unsqueeze(-1)

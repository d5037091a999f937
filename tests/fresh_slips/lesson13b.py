"""Lesson 13: new slips (one mistake each) and unusual right answers."""
import math

import torch
import torch.nn.functional as F

from course_utils.masks import causal_mask

NEG = float("-inf")

# ---------------------------------------------------------------- online_softmax


def os_no_safe(blocks):
    m, l = torch.tensor(NEG), torch.tensor(0.0)
    for b in blocks:
        m_new = torch.maximum(m, b.amax(-1))
        l = l * torch.exp(m - m_new) + torch.exp(b - m_new[:, None]).sum(-1)   # slip: -inf - -inf = NaN
        m = m_new
    return m, l


def os_no_rescale(blocks):
    m, l = torch.tensor(NEG), torch.tensor(0.0)
    for b in blocks:
        m_new = torch.maximum(m, b.amax(-1))
        safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
        l = l + torch.exp(b - safe[:, None]).sum(-1)           # slip: old l not rescaled
        m = m_new
    return m, l


def os_rescale_inverted(blocks):
    m, l = torch.tensor(NEG), torch.tensor(0.0)
    for b in blocks:
        m_new = torch.maximum(m, b.amax(-1))
        safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
        safe_old = torch.where(torch.isneginf(m), 0.0, m)
        l = l * torch.exp(safe - safe_old) + torch.exp(b - safe[:, None]).sum(-1)   # slip: e^(m_new - m_old)
        m = m_new
    return m, l


def os_two_pass(blocks):
    x = torch.cat(list(blocks), dim=-1)                        # slip: keeps the blocks, whole-row max
    m = x.amax(-1)
    safe = torch.where(torch.isneginf(m), 0.0, m)
    return m, torch.exp(x - safe[:, None]).sum(-1)


def os_l_starts_at_one(blocks):
    m, l = torch.tensor(NEG), torch.tensor(1.0)                # slip: l starts at 1
    for b in blocks:
        m_new = torch.maximum(m, b.amax(-1))
        safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
        l = l * torch.exp(m - safe) + torch.exp(b - safe[:, None]).sum(-1)
        m = m_new
    return m, l


def os_m_updated_first(blocks):
    m, l = torch.tensor(NEG), torch.tensor(0.0)
    for b in blocks:
        m = torch.maximum(m, b.amax(-1))                       # slip: m overwritten before the rescale
        safe = torch.where(torch.isneginf(m), 0.0, m)
        l = l * torch.exp(m - safe) + torch.exp(b - safe[:, None]).sum(-1)
    return m, l


def os_block_max_only(blocks):
    m, l = torch.tensor(NEG), torch.tensor(0.0)
    for b in blocks:
        bm = b.amax(-1)
        m_new = torch.maximum(m, bm)
        safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
        safe_b = torch.where(torch.isneginf(bm), 0.0, bm)
        l = l * torch.exp(m - safe) + torch.exp(b - safe_b[:, None]).sum(-1)   # slip: block summed at its own max
        m = m_new
    return m, l


def os_python_floats(blocks):
    ms, ls = None, None
    for b in blocks:
        bm = b.amax(-1)
        if ms is None:
            ms, ls = bm, torch.exp(b - bm[:, None]).sum(-1)   # slip: fully -inf first block -> NaN; no safe max
            continue
        m_new = torch.maximum(ms, bm)
        safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
        ls = ls * torch.exp(ms - safe) + torch.exp(b - safe[:, None]).sum(-1)
        ms = m_new
    return ms, ls


# ---------------------------------------------------------------- merge_softmax_stats


def mg_no_rescale(m1, l1, m2, l2):
    return torch.maximum(m1, m2), l1 + l2                      # slip


def mg_no_safe(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    return m, l1 * torch.exp(m1 - m) + l2 * torch.exp(m2 - m)  # slip: two empty parts -> NaN


def mg_inverted(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    safe = torch.where(torch.isneginf(m), 0.0, m)
    s1 = torch.where(torch.isneginf(m1), 0.0, m1)
    s2 = torch.where(torch.isneginf(m2), 0.0, m2)
    return m, l1 * torch.exp(safe - s1) + l2 * torch.exp(safe - s2)   # slip: e^(m - m_i)


def mg_swapped_return(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    safe = torch.where(torch.isneginf(m), 0.0, m)
    return l1 * torch.exp(m1 - safe) + l2 * torch.exp(m2 - safe), m   # slip: returns l, m


def mg_min(m1, l1, m2, l2):
    m = torch.minimum(m1, m2)                                  # slip: minimum (overflow-prone, and m wrong)
    safe = torch.where(torch.isneginf(m), 0.0, m)
    return m, l1 * torch.exp(m1 - safe) + l2 * torch.exp(m2 - safe)


def mg_first_wins(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    safe = torch.where(torch.isneginf(m), 0.0, m)
    l = torch.where(m1 >= m2, l1 + l2 * torch.exp(m2 - safe), l2 + l1 * torch.exp(m1 - safe))
    return m, l                                                # right? (case split) -> see CORRECT


# ---------------------------------------------------------------- tiled_attention


def _tiled(q, k, v, block_q, block_k, causal=False, mask=None, *, scale=True, local_diag=False,
           compute_above=False, lse_no_m=False, no_acc_rescale=False, no_safe_rows=False, full_mask=False,
           mask_transposed=False, skip_off_by_one=False, float32=False):
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    big = causal_mask(max(T_q, T_k)) if full_mask else None
    zeros = (lambda *s: torch.zeros(*s)) if float32 else (lambda *s: q.new_zeros(*s))
    full = (lambda s, x: torch.full(s, x)) if float32 else (lambda s, x: q.new_full(s, x))
    out, lse = zeros(*lead, T_q, d_v), zeros(*lead, T_q)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        q_i = q[..., i0:i1, :] / (math.sqrt(d_k) if scale else 1.0)
        m = full((*lead, i1 - i0), NEG)
        l = zeros(*lead, i1 - i0)
        acc = zeros(*lead, i1 - i0, d_v)
        for j0 in range(0, T_k, block_k):
            j1 = min(j0 + block_k, T_k)
            if causal and not compute_above:
                if (j0 >= i1 - 1) if skip_off_by_one else (j0 > i1 - 1):
                    continue
            s = q_i @ k[..., j0:j1, :].transpose(-2, -1)
            keep = None
            if causal:
                if full_mask:
                    keep = big[i0:i1, j0:j1]
                elif local_diag:
                    keep = torch.arange(j1 - j0)[None, :] <= torch.arange(i1 - i0)[:, None]
                else:
                    keep = torch.arange(j0, j1)[None, :] <= torch.arange(i0, i1)[:, None]
            if mask is not None:
                mt = mask[..., j0:j1, i0:i1].transpose(-2, -1) if mask_transposed else mask[..., i0:i1, j0:j1]
                keep = mt if keep is None else keep & mt
            if keep is not None:
                s = s.masked_fill(~keep, NEG)
            m_new = torch.maximum(m, s.amax(-1))
            safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
            p = torch.exp(s - safe[..., None])
            r = torch.exp(m - safe)
            l = l * r + p.sum(-1)
            acc = (acc if no_acc_rescale else acc * r[..., None]) + p @ v[..., j0:j1, :]
            m = m_new
        if no_safe_rows:
            out[..., i0:i1, :] = acc / l[..., None]
            lse[..., i0:i1] = m + torch.log(l)
            continue
        seen = l > 0
        out[..., i0:i1, :] = torch.where(seen[..., None], acc / torch.where(seen, l, 1.0)[..., None], 0.0)
        lse[..., i0:i1] = torch.where(seen, (0 if lse_no_m else m) + torch.log(l), NEG)
    return out, lse


def ta_no_scale(q, k, v, block_q, block_k, causal=False, mask=None):
    return _tiled(q, k, v, block_q, block_k, causal, mask, scale=False)


def ta_local_diag(q, k, v, block_q, block_k, causal=False, mask=None):
    return _tiled(q, k, v, block_q, block_k, causal, mask, local_diag=True)


def ta_compute_above(q, k, v, block_q, block_k, causal=False, mask=None):
    return _tiled(q, k, v, block_q, block_k, causal, mask, compute_above=True)


def ta_lse_no_m(q, k, v, block_q, block_k, causal=False, mask=None):
    return _tiled(q, k, v, block_q, block_k, causal, mask, lse_no_m=True)


def ta_no_acc_rescale(q, k, v, block_q, block_k, causal=False, mask=None):
    return _tiled(q, k, v, block_q, block_k, causal, mask, no_acc_rescale=True)


def ta_no_safe_rows(q, k, v, block_q, block_k, causal=False, mask=None):
    return _tiled(q, k, v, block_q, block_k, causal, mask, no_safe_rows=True)


def ta_full_causal_mask(q, k, v, block_q, block_k, causal=False, mask=None):
    return _tiled(q, k, v, block_q, block_k, causal, mask, full_mask=True)


def ta_mask_transposed(q, k, v, block_q, block_k, causal=False, mask=None):
    return _tiled(q, k, v, block_q, block_k, causal, mask, mask_transposed=True)


def ta_skip_off_by_one(q, k, v, block_q, block_k, causal=False, mask=None):
    return _tiled(q, k, v, block_q, block_k, causal, mask, skip_off_by_one=True)


def ta_float32(q, k, v, block_q, block_k, causal=False, mask=None):
    return _tiled(q, k, v, block_q, block_k, causal, mask, float32=True)


def ta_swapped_block_sizes(q, k, v, block_q, block_k, causal=False, mask=None):
    return _tiled(q, k, v, block_k, block_q, causal, mask)     # slip: block sizes passed swapped: right values


# ---------------------------------------------------------------- tiled_attention_backward


def _bwd(q, k, v, out, lse, grad_out, block_q, block_k, causal=False, *, no_D=False, no_scale=False,
         s_unscaled=False, compute_above=False, local_diag=False, dk_no_T=False, D_from_v=False,
         lse_recomputed_badly=False, dq_scale_twice=False):
    T_q, T_k, d_k = q.shape[-2], k.shape[-2], q.shape[-1]
    sc = 1 / math.sqrt(d_k)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    D = (grad_out * out).sum(-1)
    for j0 in range(0, T_k, block_k):
        j1 = min(j0 + block_k, T_k)
        k_j, v_j = k[..., j0:j1, :], v[..., j0:j1, :]
        for i0 in range(0, T_q, block_q):
            i1 = min(i0 + block_q, T_q)
            if causal and not compute_above and j0 > i1 - 1:
                continue
            q_i, do_i = q[..., i0:i1, :], grad_out[..., i0:i1, :]
            s = q_i @ k_j.transpose(-2, -1) * (1.0 if s_unscaled else sc)
            if causal:
                if local_diag:
                    s = s.masked_fill(torch.arange(j1 - j0)[None, :] > torch.arange(i1 - i0)[:, None], NEG)
                else:
                    s = s.masked_fill(torch.arange(j0, j1)[None, :] > torch.arange(i0, i1)[:, None], NEG)
            p = torch.exp(s - lse[..., i0:i1, None])
            dv[..., j0:j1, :] += p.transpose(-2, -1) @ do_i
            dp = do_i @ v_j.transpose(-2, -1)
            ds = p * dp if no_D else p * (dp - D[..., i0:i1, None])
            f = 1.0 if no_scale else sc
            dq[..., i0:i1, :] += ds @ k_j * (f * f if dq_scale_twice else f)
            if dk_no_T:
                dk[..., j0:j1, :] += ds @ q_i * f                     # needs bq == bk, else it raises
            else:
                dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i * f
    return dq, dk, dv


def tb_no_D(*a, **kw):
    return _bwd(*a, **kw, no_D=True)


def tb_no_scale(*a, **kw):
    return _bwd(*a, **kw, no_scale=True)


def tb_s_unscaled(*a, **kw):
    return _bwd(*a, **kw, s_unscaled=True)


def tb_compute_above(*a, **kw):
    return _bwd(*a, **kw, compute_above=True)


def tb_local_diag(*a, **kw):
    return _bwd(*a, **kw, local_diag=True)


def tb_dk_no_transpose(*a, **kw):
    return _bwd(*a, **kw, dk_no_T=True)


def tb_dq_scale_twice(*a, **kw):
    return _bwd(*a, **kw, dq_scale_twice=True)


def tb_D_over_queries(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    # slip: D summed over the wrong axis then broadcast back: D = rowsum over queries, per feature -> mean
    T_q, T_k, d_k = q.shape[-2], k.shape[-2], q.shape[-1]
    sc = 1 / math.sqrt(d_k)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    D = (grad_out * out).sum(-1).sum(-1, keepdim=True).expand(*out.shape[:-1])   # slip: one number for all queries
    for j0 in range(0, T_k, block_k):
        j1 = min(j0 + block_k, T_k)
        for i0 in range(0, T_q, block_q):
            i1 = min(i0 + block_q, T_q)
            if causal and j0 > i1 - 1:
                continue
            s = q[..., i0:i1, :] @ k[..., j0:j1, :].transpose(-2, -1) * sc
            if causal:
                s = s.masked_fill(torch.arange(j0, j1)[None, :] > torch.arange(i0, i1)[:, None], NEG)
            p = torch.exp(s - lse[..., i0:i1, None])
            dv[..., j0:j1, :] += p.transpose(-2, -1) @ grad_out[..., i0:i1, :]
            ds = p * (grad_out[..., i0:i1, :] @ v[..., j0:j1, :].transpose(-2, -1) - D[..., i0:i1, None])
            dq[..., i0:i1, :] += ds @ k[..., j0:j1, :] * sc
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q[..., i0:i1, :] * sc
    return dq, dk, dv


def tb_autograd(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    # slip: recomputes the full attention with autograd (stores P)
    with torch.enable_grad():
        qq, kk, vv = (t.detach().requires_grad_() for t in (q, k, v))
        s = qq @ kk.transpose(-2, -1) / math.sqrt(q.size(-1))
        if causal:
            s = s.masked_fill(~causal_mask(q.size(-2))[: q.size(-2), : k.size(-2)], NEG)
        o = s.softmax(-1) @ vv
        return torch.autograd.grad(o, (qq, kk, vv), grad_out)


# ---------------------------------------------------------------- linear_attention


def la_elu_only(q, k, v):
    pq, pk = F.elu(q), F.elu(k)                               # slip: forgot the +1
    S = pk.transpose(-2, -1) @ v
    z = pk.sum(-2)
    return (pq @ S) / (pq @ z[..., None])


def la_no_denominator(q, k, v):
    pq, pk = F.elu(q) + 1, F.elu(k) + 1
    return pq @ (pk.transpose(-2, -1) @ v)                     # slip: not normalised


def la_quadratic(q, k, v):
    pq, pk = F.elu(q) + 1, F.elu(k) + 1
    w = pq @ pk.transpose(-2, -1)                              # slip: the T_q x T_k matrix
    return (w / w.sum(-1, keepdim=True)) @ v


def la_denominator_phi_q_sum(q, k, v):
    pq, pk = F.elu(q) + 1, F.elu(k) + 1
    S = pk.transpose(-2, -1) @ v
    return (pq @ S) / pq.sum(-1, keepdim=True)                 # slip: forgot z in the denominator


def la_exp_map(q, k, v):
    pq, pk = torch.exp(q), torch.exp(k)                        # slip: exp feature map
    S = pk.transpose(-2, -1) @ v
    return (pq @ S) / (pq @ pk.sum(-2)[..., None])


def la_broadcast_product(q, k, v):
    pq, pk = F.elu(q) + 1, F.elu(k) + 1
    w = (pq[..., :, None, :] * pk[..., None, :, :]).sum(-1)    # slip: broadcast over queries and keys
    return (w @ v) / w.sum(-1, keepdim=True)


def la_z_mean(q, k, v):
    pq, pk = F.elu(q) + 1, F.elu(k) + 1
    S = pk.transpose(-2, -1) @ v
    z = pk.mean(-2)                                            # slip: mean instead of sum
    return (pq @ S) / (pq @ z[..., None])


def la_scaled(q, k, v):
    pq, pk = F.elu(q / math.sqrt(q.size(-1))) + 1, F.elu(k) + 1   # slip: softmax habit, q scaled by 1/sqrt(d)
    S = pk.transpose(-2, -1) @ v
    return (pq @ S) / (pq @ pk.sum(-2)[..., None])


# ================================================================ right answers


def ok_os_logaddexp(blocks):
    m, lse = torch.tensor(NEG), torch.tensor(NEG)
    for b in blocks:
        m = torch.maximum(m, b.amax(-1))
        lse = torch.logaddexp(lse, torch.logsumexp(b, -1))
    l = torch.where(torch.isneginf(m), 0.0, torch.exp(lse - torch.where(torch.isneginf(m), 0.0, m)))
    return m, l


def ok_os_merge_each(blocks):
    m, l = torch.tensor(NEG), torch.tensor(0.0)
    for b in blocks:
        bm = b.amax(-1)
        sb = torch.where(torch.isneginf(bm), 0.0, bm)
        bl = torch.exp(b - sb[:, None]).sum(-1)
        m2 = torch.maximum(m, bm)
        s = torch.where(torch.isneginf(m2), 0.0, m2)
        l = l * torch.exp(m - s) + bl * torch.exp(bm - s)
        m = m2
    return m, l


def ok_mg_logaddexp(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    lse = torch.logaddexp(m1 + torch.log(l1), m2 + torch.log(l2))
    return m, torch.nan_to_num(torch.exp(lse - m), nan=0.0)


def ok_mg_nan_to_num(m1, l1, m2, l2):
    m = torch.max(m1, m2)
    return m, torch.nan_to_num(l1 * torch.exp(m1 - m)) + torch.nan_to_num(l2 * torch.exp(m2 - m))


def ok_ta_normalised_running(q, k, v, block_q, block_k, causal=False, mask=None):
    # FlashAttention-1 style: keeps the output normalised at every step, and lse instead of (m, l)
    *lead, T_q, d = q.shape
    T_k = k.shape[-2]
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    outs, lses = [], []
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        qi = q[..., i0:i1, :] * d ** -0.5
        o = q.new_zeros(*lead, i1 - i0, v.shape[-1])
        L = q.new_full((*lead, i1 - i0), NEG)
        for j0 in range(0, min(T_k, i1) if causal else T_k, block_k):
            j1 = min(j0 + block_k, T_k)
            s = qi @ k[..., j0:j1, :].transpose(-2, -1)
            keep = torch.ones(i1 - i0, j1 - j0, dtype=torch.bool)
            if causal:
                keep = torch.arange(j0, j1) <= torch.arange(i0, i1)[:, None]
            if mask is not None:
                keep = keep & mask[..., i0:i1, j0:j1]
            s = s.masked_fill(~keep, NEG)
            Lb = torch.logsumexp(s, -1)                                   # (..., bq), -inf if all masked
            L_new = torch.logaddexp(L, Lb)
            Ls = torch.where(torch.isneginf(L_new), 0.0, L_new)
            pb = torch.exp(s - Ls[..., None])
            o = o * torch.exp(L - Ls)[..., None] + pb @ v[..., j0:j1, :]
            L = L_new
        outs.append(o)
        lses.append(L)
    return torch.cat(outs, -2), torch.cat(lses, -1)


def ok_tb_query_outer(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    # FlashAttention-1 loop order: queries outside, einsum
    T_q, T_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    c = d ** -0.5
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    D = torch.einsum("...td,...td->...t", grad_out, out)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        for j0 in range(0, T_k, block_k):
            j1 = min(j0 + block_k, T_k)
            if causal and j0 >= i1:
                break
            s = torch.einsum("...id,...jd->...ij", q[..., i0:i1, :], k[..., j0:j1, :]) * c
            if causal:
                s = torch.where(torch.arange(j0, j1) <= torch.arange(i0, i1)[:, None], s, NEG)
            p = (s - lse[..., i0:i1, None]).exp()
            dO = grad_out[..., i0:i1, :]
            dv[..., j0:j1, :] += torch.einsum("...ij,...id->...jd", p, dO)
            ds = p * (torch.einsum("...id,...jd->...ij", dO, v[..., j0:j1, :]) - D[..., i0:i1, None]) * c
            dq[..., i0:i1, :] += ds @ k[..., j0:j1, :]
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q[..., i0:i1, :]
    return dq, dk, dv


def ok_la_einsum(q, k, v):
    pq, pk = F.elu(q) + 1, F.elu(k) + 1
    S = torch.einsum("...jk,...jv->...kv", pk, v)
    z = torch.einsum("...jk->...k", pk)
    num = torch.einsum("...tk,...kv->...tv", pq, S)
    den = torch.einsum("...tk,...k->...t", pq, z)
    return num / den[..., None]


def ok_la_augmented(q, k, v):
    # one product: append a column of ones to v, the last output column is the denominator
    pq, pk = F.elu(q) + 1, F.elu(k) + 1
    v1 = torch.cat([v, torch.ones_like(v[..., :1])], -1)
    o = pq @ (pk.transpose(-2, -1) @ v1)
    return o[..., :-1] / o[..., -1:]


SLIPS = [
    ("online_softmax", "no safe max (NaN on -inf rows)", os_no_safe),
    ("online_softmax", "old l not rescaled", os_no_rescale),
    ("online_softmax", "rescale e^(m_new - m_old) (inverted)", os_rescale_inverted),
    ("online_softmax", "cat all blocks (two passes)", os_two_pass),
    ("online_softmax", "m overwritten before the rescale", os_m_updated_first),
    ("online_softmax", "block summed at its own max, not rescaled", os_block_max_only),
    ("online_softmax", "first block initialises without safe max", os_python_floats),
    ("merge_softmax_stats", "l1 + l2, no rescale", mg_no_rescale),
    ("merge_softmax_stats", "no safe max (two empty -> NaN)", mg_no_safe),
    ("merge_softmax_stats", "e^(m - m_i) inverted", mg_inverted),
    ("merge_softmax_stats", "returns (l, m)", mg_swapped_return),
    ("merge_softmax_stats", "minimum instead of maximum", mg_min),
    ("tiled_attention", "no 1/sqrt(d_k)", ta_no_scale),
    ("tiled_attention", "diagonal mask with in-tile indices", ta_local_diag),
    ("tiled_attention", "tiles above diagonal computed then masked", ta_compute_above),
    ("tiled_attention", "lse = log(l) without m", ta_lse_no_m),
    ("tiled_attention", "acc not rescaled", ta_no_acc_rescale),
    ("tiled_attention", "fully masked rows: 0/0 NaN, no guard", ta_no_safe_rows),
    ("tiled_attention", "builds full causal_mask(T) and slices", ta_full_causal_mask),
    ("tiled_attention", "padding mask tile sliced transposed", ta_mask_transposed),
    ("tiled_attention", "skip condition j0 >= i1-1 (off by one)", ta_skip_off_by_one),
    ("tiled_attention", "torch.zeros: float32 tensors regardless of q", ta_float32),
    ("tiled_attention_backward", "D forgotten (dS = P*dP)", tb_no_D),
    ("tiled_attention_backward", "dq, dk without 1/sqrt(d)", tb_no_scale),
    ("tiled_attention_backward", "S recomputed without 1/sqrt(d)", tb_s_unscaled),
    ("tiled_attention_backward", "tiles above the diagonal computed", tb_compute_above),
    ("tiled_attention_backward", "diagonal mask with in-tile indices", tb_local_diag),
    ("tiled_attention_backward", "dk = dS @ Q (no transpose when square)", tb_dk_no_transpose),
    ("tiled_attention_backward", "dq scaled twice", tb_dq_scale_twice),
    ("tiled_attention_backward", "D one number for all queries", tb_D_over_queries),
    ("tiled_attention_backward", "autograd through full attention", tb_autograd),
    ("linear_attention", "phi = elu (no +1)", la_elu_only),
    ("linear_attention", "no denominator", la_no_denominator),
    ("linear_attention", "quadratic T_q x T_k weights", la_quadratic),
    ("linear_attention", "denominator phi_q.sum (z forgotten)", la_denominator_phi_q_sum),
    ("linear_attention", "exp feature map", la_exp_map),
    ("linear_attention", "broadcast product over queries x keys", la_broadcast_product),
    ("linear_attention", "z = mean instead of sum", la_z_mean),
    ("linear_attention", "q scaled by 1/sqrt(d) inside phi", la_scaled),
]

CORRECT = [
    ("online_softmax", "l starts at 1 (planted as slip; harmless: l*exp(-inf)=0 at the first block)", os_l_starts_at_one),
    ("online_softmax", "logaddexp of block logsumexps", ok_os_logaddexp),
    ("online_softmax", "merge each block's own stats", ok_os_merge_each),
    ("merge_softmax_stats", "logaddexp + nan_to_num", ok_mg_logaddexp),
    ("merge_softmax_stats", "torch.max + nan_to_num", ok_mg_nan_to_num),
    ("merge_softmax_stats", "case split on which max is larger", mg_first_wins),
    ("tiled_attention", "normalised running output, lse via logaddexp", ok_ta_normalised_running),
    ("tiled_attention_backward", "query blocks outside, einsum, break", ok_tb_query_outer),
    ("linear_attention", "einsum", ok_la_einsum),
    ("linear_attention", "ones column appended to v", ok_la_augmented),
]


# ================================================================ batch 2: less textbook slips


def b2_os_max_namedtuple(blocks):
    m, l = torch.tensor(NEG), torch.tensor(0.0)
    for b in blocks:
        m_new = torch.maximum(m, b.max(-1))                    # slip: .max(-1) is (values, indices)
        safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
        l = l * torch.exp(m - safe) + torch.exp(b - safe[:, None]).sum(-1)
        m = m_new
    return m, l


def b2_os_inplace_block(blocks):
    m, l = torch.tensor(NEG), torch.tensor(0.0)
    for b in blocks:
        m_new = torch.maximum(m, b.amax(-1))
        safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
        b -= safe[:, None]                                     # slip: edits the block (a view of the caller's x)
        l = l * torch.exp(m - safe) + b.exp().sum(-1)
        m = m_new
    return m, l


def b2_os_returns_l_m(blocks):
    m, l = torch.tensor(NEG), torch.tensor(0.0)
    for b in blocks:
        m_new = torch.maximum(m, b.amax(-1))
        safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
        l = l * torch.exp(m - safe) + torch.exp(b - safe[:, None]).sum(-1)
        m = m_new
    return l, m                                                # slip


def b2_os_logsumexp_as_l(blocks):
    m, L = torch.tensor(NEG), torch.tensor(NEG)
    for b in blocks:
        m = torch.maximum(m, b.amax(-1))
        L = torch.logaddexp(L, torch.logsumexp(b, -1))
    return m, L                                                # slip: returns log l (+m), not l


def b2_os_sum_whole_block(blocks):
    m, l = torch.tensor(NEG), torch.tensor(0.0)
    for b in blocks:
        m_new = torch.maximum(m, b.amax())                     # slip: max over the whole block, all rows
        safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
        l = l * torch.exp(m - safe) + torch.exp(b - safe[..., None]).sum(-1)
        m = m_new
    return m, l


def b2_mg_python_max(m1, l1, m2, l2):
    m = max(m1, m2)                                            # slip: Python's max on tensors
    safe = torch.where(torch.isneginf(m), 0.0, m)
    return m, l1 * torch.exp(m1 - safe) + l2 * torch.exp(m2 - safe)


def b2_mg_from_m1(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    s1 = torch.where(torch.isneginf(m1), 0.0, m1)
    return m, l1 + l2 * torch.exp(m2 - s1)                     # slip: measured from m1, not from m


def b2_mg_inplace(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    safe = torch.where(torch.isneginf(m), 0.0, m)
    l1 *= torch.exp(m1 - safe)                                 # slip: rescales the caller's l1 in place
    return m, l1 + l2 * torch.exp(m2 - safe)


def b2_ta_lse_keepdim(q, k, v, block_q, block_k, causal=False, mask=None):
    out, lse = _tiled(q, k, v, block_q, block_k, causal, mask)
    return out, lse[..., None]                                 # slip: lse (..., T_q, 1)


def b2_ta_scale_inplace(q, k, v, block_q, block_k, causal=False, mask=None):
    q.mul_(1 / math.sqrt(q.size(-1)))                          # slip: scales the caller's q in place
    return _tiled(q, k, v, block_q, block_k, causal, mask, scale=False)


def b2_ta_mask_polarity(q, k, v, block_q, block_k, causal=False, mask=None):
    return _tiled(q, k, v, block_q, block_k, causal, None if mask is None else ~mask)   # slip: ~mask


def b2_ta_block_q_everywhere(q, k, v, block_q, block_k, causal=False, mask=None):
    return _tiled(q, k, v, block_q, block_q, causal, mask)     # slip: block_k ignored (values still right)


def b2_ta_Tk_from_q(q, k, v, block_q, block_k, causal=False, mask=None):
    # slip: T_k read from q (fine for self-attention, wrong when T_q != T_k)
    T = q.shape[-2]
    return _tiled(q, k[..., :T, :], v[..., :T, :], block_q, block_k, causal,
                  None if mask is None else torch.broadcast_to(mask, (*q.shape[:-1], k.shape[-2]))[..., :T])


def b2_ta_lse_zero_masked(q, k, v, block_q, block_k, causal=False, mask=None):
    out, lse = _tiled(q, k, v, block_q, block_k, causal, mask)
    return out, torch.where(torch.isneginf(lse), 0.0, lse)     # slip: L = 0 for a query that sees no key


def b2_tb_dq_overwritten(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    T_q, T_k, d_k = q.shape[-2], k.shape[-2], q.shape[-1]
    sc = 1 / math.sqrt(d_k)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    D = (grad_out * out).sum(-1)
    for j0 in range(0, T_k, block_k):
        j1 = min(j0 + block_k, T_k)
        for i0 in range(0, T_q, block_q):
            i1 = min(i0 + block_q, T_q)
            if causal and j0 > i1 - 1:
                continue
            s = q[..., i0:i1, :] @ k[..., j0:j1, :].transpose(-2, -1) * sc
            if causal:
                s = s.masked_fill(torch.arange(j0, j1)[None, :] > torch.arange(i0, i1)[:, None], NEG)
            p = torch.exp(s - lse[..., i0:i1, None])
            dv[..., j0:j1, :] += p.transpose(-2, -1) @ grad_out[..., i0:i1, :]
            ds = p * (grad_out[..., i0:i1, :] @ v[..., j0:j1, :].transpose(-2, -1) - D[..., i0:i1, None])
            dq[..., i0:i1, :] = ds @ k[..., j0:j1, :] * sc      # slip: = instead of +=
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q[..., i0:i1, :] * sc
    return dq, dk, dv


def b2_tb_D_typo(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    return _bwd(q, k, v, out * 0 + grad_out, lse, grad_out, block_q, block_k, causal)   # slip: D = rowsum(dO∘dO)


def b2_tb_returns_dq_dv_dk(*a, **kw):
    dq, dk, dv = _bwd(*a, **kw)
    return dq, dv, dk                                          # slip: order


def b2_tb_no_diag_mask(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    T_q, T_k, d_k = q.shape[-2], k.shape[-2], q.shape[-1]
    sc = 1 / math.sqrt(d_k)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    D = (grad_out * out).sum(-1)
    for j0 in range(0, T_k, block_k):
        j1 = min(j0 + block_k, T_k)
        for i0 in range(0, T_q, block_q):
            i1 = min(i0 + block_q, T_q)
            if causal and j0 > i1 - 1:
                continue                                       # slip: skips above, but no element-wise mask on the diagonal
            s = q[..., i0:i1, :] @ k[..., j0:j1, :].transpose(-2, -1) * sc
            p = torch.exp(s - lse[..., i0:i1, None])
            dv[..., j0:j1, :] += p.transpose(-2, -1) @ grad_out[..., i0:i1, :]
            ds = p * (grad_out[..., i0:i1, :] @ v[..., j0:j1, :].transpose(-2, -1) - D[..., i0:i1, None])
            dq[..., i0:i1, :] += ds @ k[..., j0:j1, :] * sc
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q[..., i0:i1, :] * sc
    return dq, dk, dv


def b2_tb_lse_sign(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    return _bwd(q, k, v, out, -lse, grad_out, block_q, block_k, causal)   # slip: P = exp(S + L)


def b2_la_elu_paren(q, k, v):
    pq, pk = F.elu(q + 1), F.elu(k + 1)                        # slip: elu(x + 1), not elu(x) + 1
    S = pk.transpose(-2, -1) @ v
    return (pq @ S) / (pq @ pk.sum(-2)[..., None])


def b2_la_causal_prefix(q, k, v):
    pq, pk = F.elu(q) + 1, F.elu(k) + 1
    S = torch.cumsum(pk[..., :, None] * v[..., None, :], dim=-3)   # slip: causal prefix sums (T, d_k, d_v)
    z = torch.cumsum(pk, dim=-2)
    num = (pq[..., None, :] @ S)[..., 0, :]
    return num / (pq * z).sum(-1, keepdim=True)


def b2_la_phi_on_v(q, k, v):
    pq, pk, pv = F.elu(q) + 1, F.elu(k) + 1, F.elu(v) + 1      # slip: φ on the values too
    S = pk.transpose(-2, -1) @ pv
    return (pq @ S) / (pq @ pk.sum(-2)[..., None])


def b2_ok_os_per_column(blocks):
    m, l = torch.tensor(NEG), torch.tensor(0.0)
    for b in blocks:
        for x in b.unbind(-1):                                 # element by element, the scalar online softmax
            m_new = torch.maximum(m, x)
            safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
            l = l * torch.exp(m - safe) + torch.exp(x - safe)
            m = m_new
    return m, l


SLIPS += [
    ("online_softmax", "b2: torch.maximum(m, b.max(-1)) namedtuple", b2_os_max_namedtuple),
    ("online_softmax", "b2: returns (l, m)", b2_os_returns_l_m),
    ("online_softmax", "b2: returns log-sum-exp instead of l", b2_os_logsumexp_as_l),
    ("online_softmax", "b2: max over whole block (all rows)", b2_os_sum_whole_block),
    ("merge_softmax_stats", "b2: Python max() on tensors", b2_mg_python_max),
    ("merge_softmax_stats", "b2: l measured from m1, not m", b2_mg_from_m1),
    ("merge_softmax_stats", "b2: l1 *= ... in place", b2_mg_inplace),
    ("tiled_attention", "b2: lse keepdim (..., T_q, 1)", b2_ta_lse_keepdim),
    ("tiled_attention", "b2: q scaled in place", b2_ta_scale_inplace),
    ("tiled_attention", "b2: mask polarity inverted", b2_ta_mask_polarity),
    ("tiled_attention", "b2: block_q used for keys too", b2_ta_block_q_everywhere),
    ("tiled_attention", "b2: T_k taken from q", b2_ta_Tk_from_q),
    ("tiled_attention", "b2: lse 0 for fully masked queries", b2_ta_lse_zero_masked),
    ("tiled_attention_backward", "b2: dq = (overwrite) instead of +=", b2_tb_dq_overwritten),
    ("tiled_attention_backward", "b2: D = rowsum(dO*dO) typo", b2_tb_D_typo),
    ("tiled_attention_backward", "b2: returns dq, dv, dk", b2_tb_returns_dq_dv_dk),
    ("tiled_attention_backward", "b2: no element-wise mask on diagonal tiles", b2_tb_no_diag_mask),
    ("tiled_attention_backward", "b2: P = exp(S + L) sign", b2_tb_lse_sign),
    ("linear_attention", "b2: elu(x + 1)", b2_la_elu_paren),
    ("linear_attention", "b2: causal prefix sums", b2_la_causal_prefix),
    ("linear_attention", "b2: phi on v too", b2_la_phi_on_v),
]
CORRECT += [
    ("online_softmax", "b2: scalar online softmax per column", b2_ok_os_per_column),
    ("online_softmax", "b2: b -= m in place (harmless: the blocks handed out are copies)", b2_os_inplace_block),
]

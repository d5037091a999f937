import math

import torch
import torch.nn.functional as F

from course_utils.masks import causal_mask

NINF = float("-inf")


# ---------------- online_softmax ----------------
def _online(blocks, rescale=True, safe=True, inverted=False, m_block_only=False, sum_dim=-1, old_m=False):
    m, l = torch.tensor(NINF), torch.tensor(0.0)
    for block in blocks:
        bm = block.amax(dim=-1)
        m_new = bm if m_block_only else torch.maximum(m, bm)
        s = torch.where(torch.isneginf(m_new), 0.0, m_new) if safe else m_new
        ref = m if old_m else s
        if old_m:
            ref = torch.where(torch.isneginf(m), 0.0, m) * torch.ones_like(bm)
        fac = torch.exp(m - s) if not inverted else torch.exp(s - m)
        if not rescale:
            fac = 1.0
        l = l * fac + torch.exp(block - ref[..., None]).sum(dim=sum_dim)
        m = m_new
    return m, l

def os_no_rescale(blocks):
    return _online(blocks, rescale=False)

def os_no_safe_max(blocks):
    return _online(blocks, safe=False)

def os_factor_inverted(blocks):
    return _online(blocks, inverted=True)

def os_m_is_block_max(blocks):
    return _online(blocks, m_block_only=True)

def os_sum_over_rows(blocks):
    m, l = torch.tensor(NINF), torch.tensor(0.0)
    for block in blocks:
        m_new = torch.maximum(m, block.amax(dim=-1))
        s = torch.where(torch.isneginf(m_new), 0.0, m_new)
        l = l * torch.exp(m - s) + torch.exp(block - s[..., None]).sum(dim=0).sum() / block.size(0)
        m = m_new
    return m, l

def os_exp_from_old_m(blocks):   # the block's terms measured from the previous maximum
    return _online(blocks, old_m=True)

def os_keeps_blocks(blocks):     # two passes: concatenates the blocks, then max
    kept = [b for b in blocks]
    x = torch.cat(kept, -1)
    m = x.amax(-1)
    s = torch.where(torch.isneginf(m), 0.0, m)
    return m, torch.exp(x - s[..., None]).sum(-1)


# ---------------- merge_softmax_stats ----------------
def mg_no_rescale(m1, l1, m2, l2):
    return torch.maximum(m1, m2), l1 + l2

def mg_no_safe(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    return m, l1 * torch.exp(m1 - m) + l2 * torch.exp(m2 - m)

def mg_m1_twice(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    s = torch.where(torch.isneginf(m), 0.0, m)
    return m, l1 * torch.exp(m1 - s) + l2 * torch.exp(m1 - s)

def mg_inplace_inputs(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    s = torch.where(torch.isneginf(m), 0.0, m)
    l1 *= torch.exp(m1 - s)
    l2 *= torch.exp(m2 - s)
    l1 += l2
    return m, l1

def mg_factor_inverted(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    s = torch.where(torch.isneginf(m), 0.0, m)
    return m, l1 * torch.exp(s - m1) + l2 * torch.exp(s - m2)

def mg_mean_of_maxima(m1, l1, m2, l2):    # "merged max" as the larger ℓ's m
    m = torch.where(l1 >= l2, m1, m2)
    s = torch.where(torch.isneginf(m), 0.0, m)
    return m, l1 * torch.exp(m1 - s) + l2 * torch.exp(m2 - s)


# ---------------- tiled_attention ----------------
def _tiled(q, k, v, block_q, block_k, causal=False, mask=None, local_idx=False, scale=True,
           skip_cond="ok", rescale_acc=True, normalise_each=False, lse_no_m=False, drop_last_qblock=False,
           full_mask=False, l_outside=False, float32=False, safe=True, m_first=False):
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    new_zeros = (lambda *s: torch.zeros(*s)) if float32 else q.new_zeros
    new_full = (lambda s, x: torch.full(s, x)) if float32 else q.new_full
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    if full_mask and causal:
        cm = causal_mask(max(T_q, T_k))[:T_q, :T_k]
    out = new_zeros(*lead, T_q, d_v)
    lse = new_zeros(*lead, T_q)
    if l_outside:
        l_shared = new_zeros(*lead, block_q)
    last = T_q - block_q if drop_last_qblock and T_q > block_q else T_q
    for i0 in range(0, last, block_q):
        i1 = min(i0 + block_q, T_q)
        q_i = q[..., i0:i1, :] / (math.sqrt(d_k) if scale else 1.0)
        m = new_full((*lead, i1 - i0), NINF)
        l = l_shared[..., :i1 - i0] if l_outside else new_zeros(*lead, i1 - i0)
        acc = new_zeros(*lead, i1 - i0, d_v)
        for j0 in range(0, T_k, block_k):
            j1 = min(j0 + block_k, T_k)
            if causal:
                if skip_cond == "ok" and j0 > i1 - 1:
                    continue
                if skip_cond == "off" and j0 > i1:
                    continue
            s = q_i @ k[..., j0:j1, :].transpose(-2, -1)
            keep = None
            if causal and (full_mask or j1 - 1 > i0):
                if full_mask:
                    keep = cm[i0:i1, j0:j1]
                elif local_idx:
                    keep = torch.arange(j1 - j0)[None, :] <= torch.arange(i1 - i0)[:, None]
                else:
                    keep = torch.arange(j0, j1)[None, :] <= torch.arange(i0, i1)[:, None]
            if mask is not None:
                mk = mask[..., i0:i1, j0:j1]
                keep = mk if keep is None else keep & mk
            if keep is not None:
                s = s.masked_fill(~keep, NINF)
            m_new = torch.maximum(m, s.amax(dim=-1))
            sf = torch.where(torch.isneginf(m_new), 0.0, m_new) if safe else m_new
            p = torch.exp(s - sf[..., None])
            if m_first:
                m = m_new
            r = torch.exp(m - sf)
            l = l * r + p.sum(dim=-1)
            acc = (acc * r[..., None] if rescale_acc else acc) + p @ v[..., j0:j1, :]
            if normalise_each:
                acc = acc / torch.where(l > 0, l, 1.0)[..., None]
                l = torch.where(l > 0, torch.ones_like(l), l)
            m = m_new
        if l_outside:
            l_shared = l
        seen = l > 0
        out[..., i0:i1, :] = torch.where(seen[..., None], acc / torch.where(seen, l, 1.0)[..., None], 0.0)
        lse[..., i0:i1] = torch.where(seen, (0 if lse_no_m else m) + torch.log(l), NINF)
    return out, lse

def ta_local_indices(q, k, v, block_q, block_k, causal=False, mask=None):
    return _tiled(q, k, v, block_q, block_k, causal, mask, local_idx=True)

def ta_no_scale(q, k, v, block_q, block_k, causal=False, mask=None):
    return _tiled(q, k, v, block_q, block_k, causal, mask, scale=False)

def ta_skip_off_by_one(q, k, v, block_q, block_k, causal=False, mask=None):
    return _tiled(q, k, v, block_q, block_k, causal, mask, skip_cond="off")

def ta_acc_not_rescaled(q, k, v, block_q, block_k, causal=False, mask=None):
    return _tiled(q, k, v, block_q, block_k, causal, mask, rescale_acc=False)

def ta_normalise_every_tile(q, k, v, block_q, block_k, causal=False, mask=None):
    return _tiled(q, k, v, block_q, block_k, causal, mask, normalise_each=True)

def ta_lse_without_m(q, k, v, block_q, block_k, causal=False, mask=None):
    return _tiled(q, k, v, block_q, block_k, causal, mask, lse_no_m=True)

def ta_last_query_block_missing(q, k, v, block_q, block_k, causal=False, mask=None):
    return _tiled(q, k, v, block_q, block_k, causal, mask, drop_last_qblock=True)

def ta_whole_causal_mask(q, k, v, block_q, block_k, causal=False, mask=None):
    return _tiled(q, k, v, block_q, block_k, causal, mask, full_mask=True)

def ta_l_not_reset(q, k, v, block_q, block_k, causal=False, mask=None):
    return _tiled(q, k, v, block_q, block_k, causal, mask, l_outside=True)

def ta_m_updated_first(q, k, v, block_q, block_k, causal=False, mask=None):
    return _tiled(q, k, v, block_q, block_k, causal, mask, m_first=True)

def ta_float32_tensors(q, k, v, block_q, block_k, causal=False, mask=None):
    return _tiled(q, k, v, block_q, block_k, causal, mask, float32=True)

def ta_no_safe_max(q, k, v, block_q, block_k, causal=False, mask=None):
    return _tiled(q, k, v, block_q, block_k, causal, mask, safe=False)


# ---------------- tiled_attention_backward ----------------
def _bwd(q, k, v, out, lse, grad_out, block_q, block_k, causal=False, no_D=False, dk_scale=True,
         s_scale=True, D_slice_j=False, local_idx=False, do_slice_j=False, dq_assign=False, D_from_v=False):
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
            s = q_i @ k_j.transpose(-2, -1) * (scale if s_scale else 1.0)
            if causal and j1 - 1 > i0:
                if local_idx:
                    hid = torch.arange(j1 - j0)[None, :] > torch.arange(i1 - i0)[:, None]
                else:
                    hid = torch.arange(j0, j1)[None, :] > torch.arange(i0, i1)[:, None]
                s = s.masked_fill(hid, NINF)
            p = torch.exp(s - lse[..., i0:i1, None])
            do_v = grad_out[..., j0:j1, :] if do_slice_j else do_i
            dv[..., j0:j1, :] += p.transpose(-2, -1) @ do_v
            dp = do_i @ v_j.transpose(-2, -1)
            if no_D:
                ds = p * dp
            else:
                Dsl = D[..., j0:j1] if D_slice_j else D[..., i0:i1]
                ds = p * (dp - Dsl[..., None])
            if dq_assign:
                dq[..., i0:i1, :] = ds @ k_j * scale
            else:
                dq[..., i0:i1, :] += ds @ k_j * scale
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i * (scale if dk_scale else 1.0)
    return dq, dk, dv

def bw_no_D(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    return _bwd(q, k, v, out, lse, grad_out, block_q, block_k, causal, no_D=True)

def bw_dk_unscaled(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    return _bwd(q, k, v, out, lse, grad_out, block_q, block_k, causal, dk_scale=False)

def bw_scores_unscaled(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    return _bwd(q, k, v, out, lse, grad_out, block_q, block_k, causal, s_scale=False)

def bw_D_key_slice(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    return _bwd(q, k, v, out, lse, grad_out, block_q, block_k, causal, D_slice_j=True)

def bw_local_indices(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    return _bwd(q, k, v, out, lse, grad_out, block_q, block_k, causal, local_idx=True)

def bw_dO_key_slice(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    return _bwd(q, k, v, out, lse, grad_out, block_q, block_k, causal, do_slice_j=True)

def bw_dq_assigned(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    return _bwd(q, k, v, out, lse, grad_out, block_q, block_k, causal, dq_assign=True)


# ---------------- linear_attention ----------------
def la_elu_only(q, k, v):
    pq, pk = F.elu(q), F.elu(k)
    return (pq @ (pk.transpose(-2, -1) @ v)) / (pq @ pk.sum(-2)[..., None])

def la_no_normaliser(q, k, v):
    pq, pk = F.elu(q) + 1, F.elu(k) + 1
    return pq @ (pk.transpose(-2, -1) @ v)

def la_z_over_features(q, k, v):
    pq, pk = F.elu(q) + 1, F.elu(k) + 1
    return (pq @ (pk.transpose(-2, -1) @ v)) / pk.sum(-1, keepdim=True).sum(-2, keepdim=True)

def la_phi_on_v(q, k, v):
    pq, pk, pv = F.elu(q) + 1, F.elu(k) + 1, F.elu(v) + 1
    return (pq @ (pk.transpose(-2, -1) @ pv)) / (pq @ pk.sum(-2)[..., None])

def la_quadratic(q, k, v):
    w = (F.elu(q) + 1) @ (F.elu(k) + 1).transpose(-2, -1)
    return (w / w.sum(-1, keepdim=True)) @ v

def la_scaled_q(q, k, v):
    pq, pk = F.elu(q / math.sqrt(q.size(-1))) + 1, F.elu(k) + 1
    return (pq @ (pk.transpose(-2, -1) @ v)) / (pq @ pk.sum(-2)[..., None])

# ---------------- right answers ----------------
def os_first_block_init(blocks):
    m = l = None
    for block in blocks:
        bm = block.amax(-1)
        if m is None:
            s = torch.where(torch.isneginf(bm), 0.0, bm)
            m, l = bm, torch.exp(block - s[..., None]).sum(-1)
            continue
        m_new = torch.maximum(m, bm)
        s = torch.where(torch.isneginf(m_new), 0.0, m_new)
        l = l * torch.exp(m - s) + torch.exp(block - s[..., None]).sum(-1)
        m = m_new
    return m, l

def os_logsumexp(blocks):
    m, lse = torch.tensor(NINF), torch.tensor(NINF)
    for block in blocks:
        m = torch.maximum(m, block.amax(-1))
        lse = torch.logaddexp(lse, torch.logsumexp(block, -1))
    s = torch.where(torch.isneginf(m), 0.0, m)
    return m, torch.exp(lse - s)

def mg_logaddexp(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    s = torch.where(torch.isneginf(m), 0.0, m)
    return m, torch.exp(torch.logaddexp(m1 + l1.log(), m2 + l2.log()) - s)

def mg_nan_to_num(m1, l1, m2, l2):
    m = torch.max(m1, m2)
    a = torch.nan_to_num(torch.exp(m1 - m), nan=0.0)
    b = torch.nan_to_num(torch.exp(m2 - m), nan=0.0)
    return m, l1 * a + l2 * b

def ta_explicit_loops_lists(q, k, v, block_q, block_k, causal=False, mask=None):
    *lead, T_q, d_k = q.shape
    T_k = k.shape[-2]
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    outs, lses = [], []
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        qi = q[..., i0:i1, :] * d_k ** -0.5
        m = torch.full_like(qi[..., 0], NINF)
        l = torch.zeros_like(m)
        acc = torch.zeros_like(qi[..., :1]) * v[..., :1, :]
        acc = acc.expand(*acc.shape[:-2], i1 - i0, v.shape[-1]).clone()
        for j0 in range(0, min(T_k, i1) if causal else T_k, block_k):
            j1 = min(j0 + block_k, T_k)
            s = qi @ k[..., j0:j1, :].mT
            if causal:
                s = torch.where(torch.arange(j0, j1) <= torch.arange(i0, i1)[:, None], s, NINF)
            if mask is not None:
                s = torch.where(mask[..., i0:i1, j0:j1], s, NINF)
            m_new = torch.maximum(m, s.amax(-1))
            sf = m_new.nan_to_num(neginf=0.0)
            p = (s - sf[..., None]).exp()
            r = (m - sf).exp()
            l = l * r + p.sum(-1)
            acc = acc * r[..., None] + p @ v[..., j0:j1, :]
            m = m_new
        good = l > 0
        outs.append(torch.where(good[..., None], acc / l.clamp_min(1e-300 if q.dtype == torch.float64 else 1e-30)[..., None], 0.0))
        lses.append(torch.where(good, m + l.log(), NINF))
    return torch.cat(outs, -2), torch.cat(lses, -1)

def bw_query_outer(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    T_q, T_k, d_k = q.shape[-2], k.shape[-2], q.shape[-1]
    c = d_k ** -0.5
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    D = torch.einsum("...td,...td->...t", grad_out, out)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        for j0 in range(0, T_k, block_k):
            j1 = min(j0 + block_k, T_k)
            if causal and j0 >= i1:
                continue
            s = torch.einsum("...id,...jd->...ij", q[..., i0:i1, :], k[..., j0:j1, :]) * c
            if causal:
                s = s.masked_fill(torch.arange(j0, j1) > torch.arange(i0, i1)[:, None], NINF)
            p = (s - lse[..., i0:i1, None]).exp()
            dv[..., j0:j1, :] += p.mT @ grad_out[..., i0:i1, :]
            ds = p * (grad_out[..., i0:i1, :] @ v[..., j0:j1, :].mT - D[..., i0:i1, None]) * c
            dq[..., i0:i1, :] += ds @ k[..., j0:j1, :]
            dk[..., j0:j1, :] += ds.mT @ q[..., i0:i1, :]
    return dq, dk, dv

def la_einsum(q, k, v):
    pq, pk = F.elu(q) + 1, F.elu(k) + 1
    S = torch.einsum("...jk,...jv->...kv", pk, v)
    z = pk.sum(-2)
    return torch.einsum("...tk,...kv->...tv", pq, S) / torch.einsum("...tk,...k->...t", pq, z)[..., None]

def la_augmented_v(q, k, v):   # ones column appended to v: numerator and denominator in one product
    pq, pk = F.elu(q) + 1, F.elu(k) + 1
    va = torch.cat([v, torch.ones_like(v[..., :1])], -1)
    r = pq @ (pk.mT @ va)
    return r[..., :-1] / r[..., -1:]


SLIPS = [
    ("online_softmax", "l not rescaled by exp(m - m_new)", os_no_rescale),
    ("online_softmax", "no safe maximum (NaN on masked first block)", os_no_safe_max),
    ("online_softmax", "rescale factor inverted exp(m_new - m)", os_factor_inverted),
    ("online_softmax", "u: m = block max (running max forgotten)", os_m_is_block_max),
    ("online_softmax", "u: block sum taken over rows (dim 0) and averaged", os_sum_over_rows),
    ("online_softmax", "u: block terms measured from the previous maximum", os_exp_from_old_m),
    ("online_softmax", "u: keeps the blocks, concatenates, then max (two passes)", os_keeps_blocks),
    ("merge_softmax_stats", "l1 + l2 without rescaling", mg_no_rescale),
    ("merge_softmax_stats", "no safe maximum (two empty parts -> NaN)", mg_no_safe),
    ("merge_softmax_stats", "rescale factors inverted", mg_factor_inverted),
    ("merge_softmax_stats", "u: exp(m1 - m) used for both parts (copy-paste)", mg_m1_twice),
    ("merge_softmax_stats", "u: in-place edits of l1 and l2 (inputs mutated)", mg_inplace_inputs),
    ("merge_softmax_stats", "u: m taken from the part with the larger l", mg_mean_of_maxima),
    ("tiled_attention", "diagonal mask with indices within the tile", ta_local_indices),
    ("tiled_attention", "no 1/sqrt(d_k) scaling", ta_no_scale),
    ("tiled_attention", "skip test j0 > i1 (one tile above the diagonal computed)", ta_skip_off_by_one),
    ("tiled_attention", "acc not rescaled", ta_acc_not_rescaled),
    ("tiled_attention", "u: normalises acc at every tile", ta_normalise_every_tile),
    ("tiled_attention", "u: lse = log(l), m forgotten", ta_lse_without_m),
    ("tiled_attention", "u: query loop bound T_q - block_q (last block missing)", ta_last_query_block_missing),
    ("tiled_attention", "u: whole causal_mask(T) built once", ta_whole_causal_mask),
    ("tiled_attention", "u: m = m_new before the rescale factor is computed", ta_m_updated_first),
    ("tiled_attention", "u: torch.zeros/full (float32) instead of q.new_*", ta_float32_tensors),
    ("tiled_attention", "no safe maximum", ta_no_safe_max),
    ("tiled_attention_backward", "D term missing (dS = P * dP)", bw_no_D),
    ("tiled_attention_backward", "dK without the 1/sqrt(d_k)", bw_dk_unscaled),
    ("tiled_attention_backward", "scores recomputed without 1/sqrt(d_k)", bw_scores_unscaled),
    ("tiled_attention_backward", "u: D sliced with the key block", bw_D_key_slice),
    ("tiled_attention_backward", "diagonal mask with indices within the tile", bw_local_indices),
    ("tiled_attention_backward", "u: dV uses grad_out sliced with the key block", bw_dO_key_slice),
    ("tiled_attention_backward", "u: dq assigned (=) instead of accumulated", bw_dq_assigned),
    ("linear_attention", "phi = elu (no +1)", la_elu_only),
    ("linear_attention", "no normaliser", la_no_normaliser),
    ("linear_attention", "u: z summed over features and keys", la_z_over_features),
    ("linear_attention", "u: phi applied to v too", la_phi_on_v),
    ("linear_attention", "u: quadratic form (T x T weights)", la_quadratic),
    ("linear_attention", "q scaled by 1/sqrt(d) before phi (softmax habit)", la_scaled_q),
]

CORRECT = [
    ("online_softmax", "first block initialises m, l", os_first_block_init),
    ("online_softmax", "running logsumexp, l = exp(lse - m) at the end", os_logsumexp),
    ("merge_softmax_stats", "logaddexp of the log-normalisers", mg_logaddexp),
    ("merge_softmax_stats", "nan_to_num of the factors", mg_nan_to_num),
    ("tiled_attention", "lists of blocks, key loop bounded by i1, torch.where masks", ta_explicit_loops_lists),
    ("tiled_attention", "l not reset per query block (zeroed by the first rescale: equivalent)", ta_l_not_reset),
    ("tiled_attention_backward", "query blocks outside, einsum, j0 >= i1", bw_query_outer),
    ("linear_attention", "einsum", la_einsum),
    ("linear_attention", "ones column appended to v", la_augmented_v),
]

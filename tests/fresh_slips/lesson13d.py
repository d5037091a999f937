import math

import torch
import torch.nn.functional as F


# ---------------- online_softmax ----------------
def os_no_rescale(blocks):
    m, l = torch.tensor(float("-inf")), torch.tensor(0.0)
    for b in blocks:
        m_new = torch.maximum(m, b.amax(-1))
        safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
        l = l + torch.exp(b - safe[..., None]).sum(-1)                 # slip: old l not rescaled
        m = m_new
    return m, l


def os_no_safe(blocks):
    m, l = torch.tensor(float("-inf")), torch.tensor(0.0)
    for b in blocks:
        m_new = torch.maximum(m, b.amax(-1))
        l = l * torch.exp(m - m_new) + torch.exp(b - m_new[..., None]).sum(-1)   # slip: -inf - -inf = NaN
        m = m_new
    return m, l


def os_u_m_updated_first(blocks):
    m, l = torch.tensor(float("-inf")), torch.tensor(0.0)
    for b in blocks:
        m = torch.maximum(m, b.amax(-1))                               # slip: m overwritten before the rescale
        safe = torch.where(torch.isneginf(m), 0.0, m)
        l = l * torch.exp(m - safe) + torch.exp(b - safe[..., None]).sum(-1)
    return m, l


def os_u_cat(blocks):
    x = torch.cat(list(blocks), dim=-1)                                # slip: keeps every block, then one max
    m = x.amax(-1)
    safe = torch.where(torch.isneginf(m), 0.0, m)
    return m, torch.exp(x - safe[..., None]).sum(-1)


def os_ok_logaddexp(blocks):
    lse, m = torch.tensor(float("-inf")), torch.tensor(float("-inf"))
    for b in blocks:
        lse = torch.logaddexp(lse, torch.logsumexp(b, dim=-1))
        m = torch.maximum(m, b.amax(-1))
    safe = torch.where(torch.isneginf(m), 0.0, m)
    return m, torch.exp(lse - safe)


# ---------------- merge_softmax_stats ----------------
def merge_plain_sum(m1, l1, m2, l2):
    return torch.maximum(m1, m2), l1 + l2                             # slip: no rescale


def merge_u_inverted(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    safe = torch.where(torch.isneginf(m), 0.0, m)
    return m, l1 * torch.exp(safe - m1).nan_to_num(0.0, posinf=0.0) + l2 * torch.exp(safe - m2).nan_to_num(0.0, posinf=0.0)   # slip: e^(m - m_i)


def merge_u_python_max(m1, l1, m2, l2):
    m = max(m1, m2)                                                    # slip: python max on tensors
    safe = torch.where(torch.isneginf(m), 0.0, m)
    return m, l1 * torch.exp(m1 - safe) + l2 * torch.exp(m2 - safe)


def merge_ok_where(m1, l1, m2, l2):
    first = m1 >= m2
    m = torch.where(first, m1, m2)
    lo = torch.where(first, m2, m1)
    big_l, small_l = torch.where(first, l1, l2), torch.where(first, l2, l1)
    d = torch.where(torch.isneginf(lo), torch.full_like(lo, float("-inf")), lo - m)
    return m, big_l + small_l * torch.exp(d)


# ---------------- tiled_attention ----------------
def _tiled(q, k, v, block_q, block_k, causal=False, mask=None, *, local_idx=False, scale=True, skip=True,
           rescale_acc=True, lse_no_m=False, state_outside=False):
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    out = q.new_zeros(*lead, T_q, d_v)
    lse = q.new_zeros(*lead, T_q)
    if state_outside:
        m = q.new_full((*lead, min(block_q, T_q)), float("-inf"))
        l = q.new_zeros(*lead, min(block_q, T_q))
        acc = q.new_zeros(*lead, min(block_q, T_q), d_v)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        q_i = q[..., i0:i1, :] / (math.sqrt(d_k) if scale else 1.0)
        if not state_outside:
            m = q.new_full((*lead, i1 - i0), float("-inf"))
            l = q.new_zeros(*lead, i1 - i0)
            acc = q.new_zeros(*lead, i1 - i0, d_v)
        else:
            m, l, acc = m[..., :i1 - i0], l[..., :i1 - i0], acc[..., :i1 - i0, :]
        for j0 in range(0, T_k, block_k):
            j1 = min(j0 + block_k, T_k)
            if skip and causal and j0 > i1 - 1:
                continue
            s = q_i @ k[..., j0:j1, :].transpose(-2, -1)
            keep = None
            if causal and (j1 - 1 > i0 or not skip):
                if local_idx:
                    keep = torch.arange(j1 - j0)[None, :] <= torch.arange(i1 - i0)[:, None]
                else:
                    keep = torch.arange(j0, j1)[None, :] <= torch.arange(i0, i1)[:, None]
            if mask is not None:
                keep = mask[..., i0:i1, j0:j1] if keep is None else keep & mask[..., i0:i1, j0:j1]
            if keep is not None:
                s = s.masked_fill(~keep, float("-inf"))
            m_new = torch.maximum(m, s.amax(-1))
            safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
            p = torch.exp(s - safe[..., None])
            r = torch.exp(m - safe)
            l = l * r + p.sum(-1)
            acc = (acc * r[..., None] if rescale_acc else acc) + p @ v[..., j0:j1, :]
            m = m_new
        seen = l > 0
        out[..., i0:i1, :] = torch.where(seen[..., None], acc / torch.where(seen, l, 1.0)[..., None], 0.0)
        lse[..., i0:i1] = torch.where(seen, (0 if lse_no_m else m) + torch.log(l), float("-inf"))
    return out, lse


def ta_local_indices(q, k, v, block_q, block_k, causal=False, mask=None):
    return _tiled(q, k, v, block_q, block_k, causal, mask, local_idx=True)      # slip: tile-local positions


def ta_no_scale(q, k, v, block_q, block_k, causal=False, mask=None):
    return _tiled(q, k, v, block_q, block_k, causal, mask, scale=False)         # slip: no 1/sqrt(d_k)


def ta_computes_upper_tiles(q, k, v, block_q, block_k, causal=False, mask=None):
    return _tiled(q, k, v, block_q, block_k, causal, mask, skip=False)          # slip: masks instead of skipping


def ta_acc_not_rescaled(q, k, v, block_q, block_k, causal=False, mask=None):
    return _tiled(q, k, v, block_q, block_k, causal, mask, rescale_acc=False)   # slip: l rescaled, acc not


def ta_u_state_outside(q, k, v, block_q, block_k, causal=False, mask=None):
    return _tiled(q, k, v, block_q, block_k, causal, mask, state_outside=True)  # slip: m, l, acc carried over query blocks


def ta_ok_keys_outside(q, k, v, block_q, block_k, causal=False, mask=None):
    """keys outer, queries inner: running m, l, acc for all queries (T_q-sized, never T_q x T_k)."""
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    m = q.new_full((*lead, T_q), float("-inf"))
    l = q.new_zeros(*lead, T_q)
    acc = q.new_zeros(*lead, T_q, d_v)
    c = d_k ** -0.5
    for j0 in range(0, T_k, block_k):
        j1 = min(j0 + block_k, T_k)
        for i0 in range(0, T_q, block_q):
            i1 = min(i0 + block_q, T_q)
            if causal and j0 >= i1:
                continue
            s = (q[..., i0:i1, :] @ k[..., j0:j1, :].mT) * c
            if causal:
                s = s.masked_fill(torch.arange(j0, j1) > torch.arange(i0, i1)[:, None], float("-inf"))
            if mask is not None:
                s = s.masked_fill(~mask[..., i0:i1, j0:j1], float("-inf"))
            mo = m[..., i0:i1]
            mn = torch.maximum(mo, s.amax(-1))
            sf = mn.nan_to_num(neginf=0.0)
            p = (s - sf[..., None]).exp()
            r = (mo - sf).exp()
            l[..., i0:i1] = l[..., i0:i1] * r + p.sum(-1)
            acc[..., i0:i1, :] = acc[..., i0:i1, :] * r[..., None] + p @ v[..., j0:j1, :]
            m[..., i0:i1] = mn
    seen = l > 0
    out = torch.where(seen[..., None], acc / l.clamp(min=1e-300 if q.dtype == torch.float64 else 1e-30)[..., None], 0.0)
    lse = torch.where(seen, m + l.log(), float("-inf"))
    return out, lse


# ---------------- tiled_attention_backward ----------------
def _bwd(q, k, v, out, lse, grad_out, block_q, block_k, causal=False, *, scale_grads=True, sub_lse=True,
         lse_keys=False, D_mode="ok", inplace_q=False):
    T_q, T_k, d_k = q.shape[-2], k.shape[-2], q.shape[-1]
    sc = 1 / math.sqrt(d_k)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    D = (grad_out * out).sum(-1) if D_mode == "ok" else grad_out.sum(-1)
    for j0 in range(0, T_k, block_k):
        j1 = min(j0 + block_k, T_k)
        k_j, v_j = k[..., j0:j1, :], v[..., j0:j1, :]
        for i0 in range(0, T_q, block_q):
            i1 = min(i0 + block_q, T_q)
            if causal and j0 > i1 - 1:
                continue
            q_i, do_i = q[..., i0:i1, :], grad_out[..., i0:i1, :]
            if inplace_q:
                q_i *= sc                                            # slip: scales q itself, again at each key block
                s = q_i @ k_j.transpose(-2, -1)
            else:
                s = q_i @ k_j.transpose(-2, -1) * sc
            if causal and j1 - 1 > i0:
                s = s.masked_fill(torch.arange(j0, j1)[None, :] > torch.arange(i0, i1)[:, None], float("-inf"))
            L = lse[..., j0:j1, None] if lse_keys else lse[..., i0:i1, None]
            p = torch.exp(s - L) if sub_lse else torch.exp(s)
            dv[..., j0:j1, :] += p.transpose(-2, -1) @ do_i
            dp = do_i @ v_j.transpose(-2, -1)
            ds = p * (dp - D[..., i0:i1, None])
            g = sc if scale_grads else 1.0
            if inplace_q:
                dq[..., i0:i1, :] += ds @ k_j * sc
                dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i
            else:
                dq[..., i0:i1, :] += ds @ k_j * g
                dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i * g
    return dq, dk, dv


def bw_no_scale(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    return _bwd(q, k, v, out, lse, grad_out, block_q, block_k, causal, scale_grads=False)   # slip: dq, dk not / sqrt(d_k)


def bw_p_without_lse(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    return _bwd(q, k, v, out, lse, grad_out, block_q, block_k, causal, sub_lse=False)       # slip: P = exp(S)


def bw_u_lse_key_slice(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    return _bwd(q, k, v, out, lse, grad_out, block_q, block_k, causal, lse_keys=True)       # slip: lse[j0:j1]


def bw_u_D_no_out(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    return _bwd(q, k, v, out, lse, grad_out, block_q, block_k, causal, D_mode="bad")        # slip: D = rowsum(dO)


def bw_u_inplace_q(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    return _bwd(q, k, v, out, lse, grad_out, block_q, block_k, causal, inplace_q=True)      # slip: q_i *= scale in place


def bw_ok_queries_outside(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    T_q, T_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    D = torch.einsum("...td,...td->...t", grad_out, out)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        qi, doi, Li, Di = q[..., i0:i1, :] / math.sqrt(d), grad_out[..., i0:i1, :], lse[..., i0:i1, None], D[..., i0:i1, None]
        for j0 in range(0, min(T_k, i1) if causal else T_k, block_k):
            j1 = min(j0 + block_k, T_k)
            s = qi @ k[..., j0:j1, :].mT
            if causal:
                s = s.masked_fill(torch.arange(j0, j1) > torch.arange(i0, i1)[:, None], float("-inf"))
            p = (s - Li).exp()
            dv[..., j0:j1, :] += p.mT @ doi
            ds = p * (doi @ v[..., j0:j1, :].mT - Di)
            dq[..., i0:i1, :] += ds @ k[..., j0:j1, :] / math.sqrt(d)
            dk[..., j0:j1, :] += ds.mT @ qi
    return dq, dk, dv


# ---------------- linear_attention ----------------
def la_elu_no_plus_one(q, k, v):
    pq, pk = F.elu(q), F.elu(k)                                       # slip: phi = elu, may be negative
    S = pk.transpose(-2, -1) @ v
    z = pk.sum(-2)
    return (pq @ S) / (pq @ z[..., None])


def la_quadratic(q, k, v):
    pq, pk = F.elu(q) + 1, F.elu(k) + 1
    w = pq @ pk.transpose(-2, -1)                                     # slip: the T_q x T_k weights
    return (w / w.sum(-1, keepdim=True)) @ v


def la_u_S_from_q(q, k, v):
    pq, pk = F.elu(q) + 1, F.elu(k) + 1
    S = pq.transpose(-2, -1) @ v                                      # slip: copy-paste, phi(q) in S
    z = pk.sum(-2)
    return (pq @ S) / (pq @ z[..., None])


def la_u_norm_without_q(q, k, v):
    pq, pk = F.elu(q) + 1, F.elu(k) + 1
    S = pk.transpose(-2, -1) @ v
    z = pk.sum(-2)
    return (pq @ S) / z.sum(-1)[..., None, None]                      # slip: denominator forgets phi(q)


def la_ok_einsum(q, k, v):
    pq, pk = F.elu(q) + 1, F.elu(k) + 1
    S = torch.einsum("...jk,...jv->...kv", pk, v)
    num = torch.einsum("...tk,...kv->...tv", pq, S)
    den = torch.einsum("...tk,...k->...t", pq, pk.sum(-2))
    return num / den.unsqueeze(-1)


SLIPS = [
    ("online_softmax", "old l not rescaled", os_no_rescale),
    ("online_softmax", "no safe maximum (NaN on -inf rows)", os_no_safe),
    ("online_softmax", "u: m overwritten before the rescale", os_u_m_updated_first),
    ("online_softmax", "u: concatenates the blocks then one softmax", os_u_cat),
    ("merge_softmax_stats", "l1 + l2 without rescale", merge_plain_sum),
    ("merge_softmax_stats", "u: python max() on tensors", merge_u_python_max),
    ("tiled_attention", "causal mask with tile-local indices", ta_local_indices),
    ("tiled_attention", "tiles above the diagonal computed and masked", ta_computes_upper_tiles),
    ("tiled_attention", "u: m, l, acc not reset per block of queries", ta_u_state_outside),
    ("tiled_attention_backward", "dq, dk not scaled by 1/sqrt(d_k)", bw_no_scale),
    ("tiled_attention_backward", "u: lse sliced with the key block", bw_u_lse_key_slice),
    ("tiled_attention_backward", "u: D = rowsum(dO) without O", bw_u_D_no_out),
    ("tiled_attention_backward", "u: q_i *= scale in place", bw_u_inplace_q),
    ("linear_attention", "phi = elu without +1", la_elu_no_plus_one),
    ("linear_attention", "quadratic form (T x T weights)", la_quadratic),
    ("linear_attention", "u: S built from phi(q) (copy-paste)", la_u_S_from_q),
]
CORRECT = [
    ("online_softmax", "logaddexp of block logsumexps", os_ok_logaddexp),
    ("merge_softmax_stats", "where-based larger/smaller", merge_ok_where),
    ("tiled_attention", "keys outside, T_q-sized running stats", ta_ok_keys_outside),
    ("tiled_attention_backward", "queries outside, pre-scaled q", bw_ok_queries_outside),
    ("linear_attention", "einsum", la_ok_einsum),
]

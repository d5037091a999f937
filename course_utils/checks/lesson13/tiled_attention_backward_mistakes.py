"""Exercise 3's known mistakes, as wrong answers with the exercise's signature: `backward(..., kind)`, the tiled
backward loop with one line wrong (`kind="ok"` is the right loop), the lesson's loop as a learner writes it with one
slip that a probe finds or that makes torch raise (`learner(slip)`), and the answers that miss the point (P and dS
of the whole sequence, the tiles above the diagonal computed). The registry that names them is in
tiled_attention_backward.py."""
import math

import torch

from ...masks import causal_mask
from .naming import Forms
from .softmax_stats import NEG_INF


def backward(q, k, v, out, lse, grad_out, block_q, block_k, causal=False, kind="ok"):
    """The tiled backward loop, right or with one typical mistake: (dq, dk, dv)."""
    T_q, T_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = math.sqrt(d) if kind == "bw_scale_times" else 1 / math.sqrt(d)
    grad_scale = {"no_scale": 1.0, "scale_twice": scale * scale}.get(kind, scale)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    D = (grad_out * (grad_out if kind == "D_dO" else out)).sum(dim=-2 if kind == "D_wrong_axis" else -1)   # (..., T_q)
    if kind == "D_all":                                                       # one number for everything
        D = (grad_out * out).sum().expand(out.shape[:-1])
    if kind == "full_P":                                                      # the whole P at once: T_q x T_k
        s = q @ k.transpose(-2, -1) * scale
        if causal:
            s = s.masked_fill(~torch.ones(T_q, T_k, dtype=torch.bool).tril(), NEG_INF)
        p = torch.exp(s - lse[..., None])
        dp = grad_out @ v.transpose(-2, -1)
        ds = p * (dp - D[..., None])
        return ds @ k * scale, ds.transpose(-2, -1) @ q * scale, p.transpose(-2, -1) @ grad_out
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        q_i, do_i = q[..., i0:i1, :], grad_out[..., i0:i1, :]
        for j0 in range(0, T_k - block_k if kind == "keys_short" else T_k, block_k):
            j1 = min(j0 + block_k, T_k)
            if causal and kind != "all_tiles" and j0 > i1 - 1:
                continue
            s = q_i @ k[..., j0:j1, :].transpose(-2, -1) * (1.0 if kind == "p_no_scale" else scale)
            if causal and kind != "no_diag_mask":
                local = i0 if kind == "local_idx" else 0, j0 if kind == "local_idx" else 0
                s = s.masked_fill(torch.arange(j0, j1)[None, :] - local[1] > torch.arange(i0, i1)[:, None] - local[0],
                                  NEG_INF)
            lse_i = lse[..., i0:i1] if kind == "lse_no_axis" else lse[..., i0:i1, None]   # (no axis: over columns)
            lse_i = lse[..., j0:j1, None] if kind == "lse_keys" else lse_i   # (keys: sliced with the key block)
            lse_i = -lse_i if kind == "lse_sign" else lse_i                   # (sign: P = exp(S + L))
            p = torch.softmax(s, dim=-1) if kind == "p_softmax_tile" else torch.exp(s - lse_i)
            dp = do_i @ v[..., j0:j1, :].transpose(-2, -1)
            if kind == "no_D":
                ds = p * dp
            elif kind == "D_tile":                                           # D from this tile only
                ds = p * (dp - (p * dp).sum(dim=-1, keepdim=True))
            else:
                ds = p * (dp - (D[..., i0:i1] if kind == "D_no_axis" else D[..., i0:i1, None]))
            if kind == "D_plus":
                ds = p * (dp + D[..., i0:i1, None])
            if kind == "ds_D_outside":                                       # P·dP − D: D not multiplied by P
                ds = p * dp - D[..., i0:i1, None]
            dv_tile = (p @ do_i) if kind == "dv_no_transpose" else p.transpose(-2, -1) @ do_i
            if kind == "dv_dO_keys":                                          # dO sliced with the KEY block
                dv_tile = p.transpose(-2, -1) @ grad_out[..., j0:j1, :]
            if kind == "dv_from_ds":
                dv_tile = ds.transpose(-2, -1) @ do_i
            if kind == "dv_from_out":
                dv_tile = p.transpose(-2, -1) @ out[..., i0:i1, :]
            dk_tile = (ds @ q_i if kind == "dk_no_transpose" else ds.transpose(-2, -1) @ q_i) * grad_scale
            if kind == "dk_from_dO":
                dk_tile = ds.transpose(-2, -1) @ do_i * grad_scale
            if kind == "dk_scale_twice":
                dk_tile = dk_tile * scale
            dq_tile = ds @ (v if kind == "dq_from_v" else k)[..., j0:j1, :]
            dq_tile = dq_tile * (1.0 if kind == "dq_no_scale" else grad_scale)
            if kind == "overwrite":
                dq[..., i0:i1, :], dk[..., j0:j1, :], dv[..., j0:j1, :] = dq_tile, dk_tile, dv_tile
            elif kind == "overwrite_dq_dk":                                   # dv accumulated, dq and dk not
                dq[..., i0:i1, :], dk[..., j0:j1, :] = dq_tile, dk_tile
                dv[..., j0:j1, :] += dv_tile
            elif kind in ("overwrite_dq", "overwrite_dk", "overwrite_dv"):    # one of them overwritten, the rest not
                dq[..., i0:i1, :] = dq_tile + (0 if kind == "overwrite_dq" else dq[..., i0:i1, :])
                dk[..., j0:j1, :] = dk_tile + (0 if kind == "overwrite_dk" else dk[..., j0:j1, :])
                dv[..., j0:j1, :] = dv_tile + (0 if kind == "overwrite_dv" else dv[..., j0:j1, :])
            else:
                dq[..., i0:i1, :] += dq_tile
                dk[..., j0:j1, :] += dk_tile
                dv[..., (i0 if kind == "dv_query_rows" else j0):(i1 if kind == "dv_query_rows" else j1), :] += dv_tile
    return dq, dk, dv


FORMS = Forms(backward)


def learner(slip):
    """The lesson's backward loop as a learner writes it, with one slip."""
    def answer(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
        T_q, T_k, scale = q.shape[-2], k.shape[-2], 1 / math.sqrt(q.shape[-1])
        zeros = (lambda t: torch.zeros(t.shape)) if slip == "float32" else torch.zeros_like
        dq, dk = zeros(q), zeros(k)
        dv = zeros(q if slip == "dv_like_q" else v)
        if slip == "shared":                           # one tensor, returned three times
            dq = dk = dv = zeros(q)
        D = (grad_out * out).sum(-1, keepdim=slip == "D_keepdim")
        for i0 in range(0, T_q, block_q):
            i1 = min(i0 + block_q, T_q)
            q_i, do_i = q[..., i0:i1, :], grad_out[..., i0:i1, :]
            for j0 in range(0, T_k, block_k):
                j1 = min(j0 + block_k, T_k)
                if causal and (j0 >= i1 - 1 if slip == "skip_ge" else j0 > i1 - 1):
                    continue
                if slip == "q_in_place":
                    q_i *= scale                       # a view of q: those queries scaled again at every key block
                    s = q_i @ k[..., j0:j1, :].transpose(-2, -1)
                else:
                    s = q_i @ k[..., j0:j1, :].transpose(-2, -1) * scale
                if causal:
                    rows, cols = torch.arange(i0, i1)[:, None], torch.arange(j0, j1)[None, :]
                    s = s.masked_fill(cols >= rows if slip == "diagonal_masked" else cols > rows, NEG_INF)
                p = torch.exp(s - lse[..., i0:i1, None])
                dp = do_i @ v[..., j0:j1, :].transpose(-2, -1)
                ds = p * (dp - (D[..., j0:j1, None] if slip == "D_keys" else D[..., i0:i1, None]))
                dv[..., j0:j1, :] += p.transpose(-2, -1) @ do_i
                dq[..., i0:i1, :] += ds @ k[..., j0:j1, :] * (1.0 if slip == "q_in_place" else scale)
                dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i * (1.0 if slip == "q_in_place" else scale)
        return dq, dk, dv
    return answer


def whole_p(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    """The textbook backward: P and dS of the whole sequence."""
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        s = s.masked_fill(~causal_mask(q.shape[-2]), NEG_INF)
    p = torch.softmax(s, dim=-1)
    ds = p * (grad_out @ v.transpose(-2, -1) - (grad_out * out).sum(-1, keepdim=True))
    scale = 1 / math.sqrt(q.shape[-1])
    return ds @ k * scale, ds.transpose(-2, -1) @ q * scale, p.transpose(-2, -1) @ grad_out


def every_tile(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    """Every tile computed, the causal mask applied element by element: right values, the point missed."""
    return backward(q, k, v, out, lse, grad_out, block_q, block_k, causal, kind="all_tiles")

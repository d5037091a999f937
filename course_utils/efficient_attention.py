"""Attention at scale (lesson 13): the online softmax, tiled (FlashAttention-style) attention, sliding
windows and linear attention, each equal to the formula it replaces.

    m, l = online_softmax(x, block_size)            one pass over x (..., n): running max m, normaliser l
    m, l = merge_softmax_stats(m1, l1, m2, l2)      the statistics of two parts -> those of the whole
    softmax_from_stats(x, m, l)                     exp(x - m) / l (a row with l = 0 -> zeros)
    tiled_attention(q, k, v, block_q, block_k, causal=False, mask=None, window=None, return_lse=False)
    tiled_attention_backward(q, k, v, out, lse, grad_out, block_q, block_k, causal=False)
    block_pattern(T_q, T_k, block_q, block_k, causal, window)   which tiles are computed (SKIP/PARTIAL/FULL)
    sliding_window_mask(T, left, right=0)           (T, T) bool: key j visible from query t iff t-left <= j <= t+right
    linear_attention(q, k, v, causal=False)         phi(q) (phi(k)^T v), normalised; phi(x) = elu(x) + 1
    kernel_attention(q, k, v, causal=False)         the same kernel in quadratic form (T x T weights)
    plain_attention(q, k, v, mask=None)             scores, softmax, weights @ v: every T x T matrix stored
    attention_memory_bytes(...)                     what plain and tiled attention hold in memory, counted
    sdpa_backend(q, k, v, mask, ...)                the kernel torch's fused scaled_dot_product_attention picks

Shapes are batch-first with any leading axes: q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v).
Masks follow the course's rule (`course_utils.masks`): bool, True = may attend, broadcastable to the
scores (..., T_q, T_k); a query with no key left gets a zero output, never NaN. `causal` and `window`
align query i with key i (top-left, as `causal_mask` and torch's `is_causal` do).
"""
import math

import torch
import torch.nn.functional as F

from .attention import scaled_dot_product_attention
from .masks import check_mask, masked_softmax

__all__ = ["online_softmax", "merge_softmax_stats", "softmax_from_stats", "tiled_attention",
           "tiled_attention_backward", "block_pattern", "SKIP", "PARTIAL", "FULL", "sliding_window_mask",
           "linear_attention", "kernel_attention", "elu_feature_map", "plain_attention",
           "attention_memory_bytes", "sdpa_backend"]

SKIP, PARTIAL, FULL = 0, 1, 2   # a tile never computed / computed with an element-wise mask / all visible


# ---------------------------------------------------------------------------------------------
# Checks of the inputs
# ---------------------------------------------------------------------------------------------
def _check_block(value, name):
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive int (the number of rows or columns of a tile), got {value!r}")


def _check_qkv(q, k, v):
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not torch.is_tensor(t) or t.dim() < 2:
            got = tuple(t.shape) if torch.is_tensor(t) else type(t).__name__
            raise ValueError(f"{name} must be a tensor of shape (..., T, d), got {got}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must have the same head dimension d_k, got q {tuple(q.shape)} (d_k="
                         f"{q.shape[-1]}) and k {tuple(k.shape)} (d_k={k.shape[-1]})")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v must have the same number of keys T_k, got k {tuple(k.shape)} and v "
                         f"{tuple(v.shape)}")
    if not (q.shape[:-2] == k.shape[:-2] == v.shape[:-2]):
        raise ValueError(f"q, k, v must have the same leading (batch, head) axes, got {tuple(q.shape)}, "
                         f"{tuple(k.shape)}, {tuple(v.shape)}")


def _check_window(window):
    if window is None:
        return None
    ok = (isinstance(window, (tuple, list)) and len(window) == 2
          and all(isinstance(w, int) and not isinstance(w, bool) and w >= 0 for w in window))
    if not ok:
        raise ValueError(f"window must be (left, right), two ints >= 0: query t sees keys t-left .. t+right; "
                         f"got {window!r}")
    return tuple(window)


def _safe(m):
    """The running maximum where it is finite, 0 where it is -inf (a row that has seen no key yet):
    exp(-inf - (-inf)) would be NaN, exp(-inf - 0) is the 0 we want."""
    return torch.where(torch.isneginf(m), torch.zeros_like(m), m)


# ---------------------------------------------------------------------------------------------
# The online softmax
# ---------------------------------------------------------------------------------------------
def online_softmax(x, block_size=1):
    """The softmax statistics of every row of x (..., n) in ONE pass over its blocks of columns.

    m = max_j x_j and l = sum_j exp(x_j - m), updated block by block: when a block raises the maximum
    from m_old to m_new, the old normaliser is rescaled by exp(m_old - m_new). Returns (m, l), each (...,).
    A row of -inf only gives m = -inf, l = 0.
    """
    _check_block(block_size, "block_size")
    m = torch.full(x.shape[:-1], float("-inf"), dtype=x.dtype, device=x.device)   # (...,)
    ell = torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)                 # (...,)
    for j0 in range(0, x.shape[-1], block_size):
        block = x[..., j0:j0 + block_size]                                        # (..., b)
        m_new = torch.maximum(m, block.amax(dim=-1))
        ell = ell * torch.exp(m - _safe(m_new)) + torch.exp(block - _safe(m_new)[..., None]).sum(dim=-1)
        m = m_new
    return m, ell


def merge_softmax_stats(m1, l1, m2, l2):
    """(m, l) of two parts of a row merged into those of the whole: m = max(m1, m2),
    l = l1 exp(m1 - m) + l2 exp(m2 - m). Two empty parts (m = -inf, l = 0) give (-inf, 0)."""
    m = torch.maximum(m1, m2)
    return m, l1 * torch.exp(m1 - _safe(m)) + l2 * torch.exp(m2 - _safe(m))


def softmax_from_stats(x, m, ell):
    """exp(x - m) / l along the last axis of x, from the statistics of online_softmax; rows with l = 0
    (nothing allowed) give zeros."""
    p = torch.exp(x - _safe(m)[..., None])
    return torch.where(ell[..., None] > 0, p / torch.where(ell > 0, ell, torch.ones_like(ell))[..., None],
                       torch.zeros_like(p))


# ---------------------------------------------------------------------------------------------
# Which tiles a pattern needs
# ---------------------------------------------------------------------------------------------
def _visible(rows, cols, causal, window):
    """(len(rows), len(cols)) bool: key j visible from query i under the causal/window pattern."""
    i, j = rows[:, None], cols[None, :]
    keep = torch.ones(len(rows), len(cols), dtype=torch.bool, device=rows.device)
    if causal:
        keep &= j <= i
    if window is not None:
        left, right = window
        keep &= (j >= i - left) & (j <= i + right)
    return keep


def block_pattern(T_q, T_k, block_q, block_k=None, causal=False, window=None):
    """(ceil(T_q/block_q), ceil(T_k/block_k)) int tensor: SKIP (0) for a tile whose every key is hidden
    from every query (never computed), PARTIAL (1) for a tile that needs an element-wise mask, FULL (2)
    for a tile whose keys every query sees."""
    block_k = block_q if block_k is None else block_k
    _check_block(block_q, "block_q")
    _check_block(block_k, "block_k")
    window = _check_window(window)
    n_q, n_k = -(-T_q // block_q), -(-T_k // block_k)
    first_q = torch.arange(n_q)[:, None] * block_q                              # (n_q, 1): first query of the tile
    last_q = torch.clamp(first_q + block_q, max=T_q) - 1                         # its last query
    first_k = torch.arange(n_k)[None, :] * block_k                              # (1, n_k): first key
    last_k = torch.clamp(first_k + block_k, max=T_k) - 1
    hidden = torch.zeros(n_q, n_k, dtype=torch.bool)                             # no query sees any key
    full = torch.ones(n_q, n_k, dtype=torch.bool)                                # every query sees every key
    if causal:
        hidden |= first_k > last_q                                               # every key after every query
        full &= last_k <= first_q
    if window is not None:
        left, right = window
        hidden |= (last_k < first_q - left) | (first_k > last_q + right)
        full &= (first_k >= last_q - left) & (last_k <= first_q + right)
    pattern = torch.where(full, FULL, PARTIAL)
    pattern[hidden] = SKIP
    return pattern


def sliding_window_mask(T, left, right=0, device=None):
    """(T, T) bool: query t may attend to keys t-left .. t+right (right=0: a causal window of left+1
    keys; left=right=D: lesson 04's local window |t - j| <= D around p_t = t)."""
    window = _check_window((left, right))
    pos = torch.arange(T, device=device)
    return _visible(pos, pos, False, window)


# ---------------------------------------------------------------------------------------------
# Tiled attention: the FlashAttention forward, in Python
# ---------------------------------------------------------------------------------------------
def tiled_attention(q, k, v, block_q=64, block_k=None, causal=False, mask=None, window=None, return_lse=False):
    """softmax(q k^T / sqrt(d_k)) v, one (block_q x block_k) tile of scores at a time; equal to
    `course_utils.attention.scaled_dot_product_attention` (float32: within 1e-5).

    For every block of queries: running maximum m, normaliser l and the UNNORMALISED output acc; for
    every block of keys, s = q_i k_j^T / sqrt(d_k), m_new = max(m, rowmax(s)), p = exp(s - m_new),
    l = l e^(m - m_new) + rowsum(p), acc = acc e^(m - m_new) + p v_j; once all keys are seen, out = acc / l.
    causal / window: tiles no query of the block may see are skipped (never computed); the tiles on the
    pattern's edge get the element-wise mask. mask: bool, broadcastable to (..., T_q, T_k), True = may attend.
    return_lse: also return lse = m + log l (..., T_q), all the backward pass keeps of the softmax.
    """
    block_k = block_q if block_k is None else block_k
    _check_block(block_q, "block_q")
    _check_block(block_k, "block_k")
    _check_qkv(q, k, v)
    window = _check_window(window)
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = torch.broadcast_to(check_mask(mask, (*lead, T_q, T_k)), (*lead, T_q, T_k))   # a view: no copy
    pattern = block_pattern(T_q, T_k, block_q, block_k, causal, window).tolist()
    scale = 1.0 / math.sqrt(d_k)
    out = torch.empty(*lead, T_q, d_v, dtype=q.dtype, device=q.device)
    lse = torch.empty(*lead, T_q, dtype=q.dtype, device=q.device)
    rows_all = torch.arange(T_q, device=q.device)
    cols_all = torch.arange(T_k, device=q.device)
    for a, i0 in enumerate(range(0, T_q, block_q)):
        i1 = min(i0 + block_q, T_q)
        q_i = q[..., i0:i1, :] * scale                                       # (..., bq, d_k)
        m = torch.full((*lead, i1 - i0), float("-inf"), dtype=q.dtype, device=q.device)  # (..., bq)
        ell = torch.zeros(*lead, i1 - i0, dtype=q.dtype, device=q.device)      # (..., bq)
        acc = torch.zeros(*lead, i1 - i0, d_v, dtype=q.dtype, device=q.device)  # (..., bq, d_v)
        for b, j0 in enumerate(range(0, T_k, block_k)):
            if pattern[a][b] == SKIP:
                continue
            j1 = min(j0 + block_k, T_k)
            s = q_i @ k[..., j0:j1, :].transpose(-2, -1)                     # (..., bq, bk)
            keep = None
            if pattern[a][b] == PARTIAL:
                keep = _visible(rows_all[i0:i1], cols_all[j0:j1], causal, window)   # (bq, bk)
            if mask is not None:
                tile = mask[..., i0:i1, j0:j1]
                keep = tile if keep is None else tile & keep
            if keep is not None:
                s = s.masked_fill(~keep, float("-inf"))
            m_new = torch.maximum(m, s.amax(dim=-1))                          # (..., bq)
            p = torch.exp(s - _safe(m_new)[..., None])                       # (..., bq, bk)
            rescale = torch.exp(m - _safe(m_new))                            # (..., bq): e^(m_old - m_new)
            ell = ell * rescale + p.sum(dim=-1)
            acc = acc * rescale[..., None] + p @ v[..., j0:j1, :]
            m = m_new
        seen = ell > 0                                                         # rows with at least one key
        out[..., i0:i1, :] = torch.where(seen[..., None], acc / torch.where(seen, ell, 1.0)[..., None], 0.0)
        lse[..., i0:i1] = torch.where(seen, m + torch.log(torch.where(seen, ell, 1.0)), float("-inf"))
    return (out, lse) if return_lse else out


def tiled_attention_backward(q, k, v, out, lse, grad_out, block_q=64, block_k=None, causal=False):
    """The gradients (dq, dk, dv) of tiled attention, recomputed tile by tile from q, k, v, the output and
    lse = m + log l (nothing of size T_q x T_k is kept between the passes):

        p = exp(q_i k_j^T / sqrt(d) - lse_i),  dv_j += p^T do_i,  dp = do_i v_j^T,
        ds = p * (dp - D_i) with D_i = rowsum(do_i * out_i),  dq_i += ds k_j / sqrt(d),  dk_j += ds^T q_i / sqrt(d).
    """
    block_k = block_q if block_k is None else block_k
    _check_block(block_q, "block_q")
    _check_block(block_k, "block_k")
    _check_qkv(q, k, v)
    T_q, T_k = q.shape[-2], k.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1])
    pattern = block_pattern(T_q, T_k, block_q, block_k, causal).tolist()
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    D = (grad_out * out).sum(dim=-1)                                         # (..., T_q)
    rows_all, cols_all = torch.arange(T_q, device=q.device), torch.arange(T_k, device=q.device)
    for a, i0 in enumerate(range(0, T_q, block_q)):
        i1 = min(i0 + block_q, T_q)
        q_i, do_i = q[..., i0:i1, :], grad_out[..., i0:i1, :]
        lse_i = _safe(lse[..., i0:i1])[..., None]                            # (..., bq, 1)
        for b, j0 in enumerate(range(0, T_k, block_k)):
            if pattern[a][b] == SKIP:
                continue
            j1 = min(j0 + block_k, T_k)
            s = (q_i @ k[..., j0:j1, :].transpose(-2, -1)) * scale           # (..., bq, bk), recomputed
            p = torch.exp(s - lse_i)
            if pattern[a][b] == PARTIAL:
                p = p.masked_fill(~_visible(rows_all[i0:i1], cols_all[j0:j1], causal, None), 0.0)
            p = torch.where(torch.isneginf(lse[..., i0:i1])[..., None], torch.zeros_like(p), p)
            dv[..., j0:j1, :] += p.transpose(-2, -1) @ do_i
            dp = do_i @ v[..., j0:j1, :].transpose(-2, -1)                   # (..., bq, bk)
            ds = p * (dp - D[..., i0:i1, None])
            dq[..., i0:i1, :] += ds @ k[..., j0:j1, :] * scale
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i * scale
    return dq, dk, dv


# ---------------------------------------------------------------------------------------------
# Plain attention, and the fused kernel's choice
# ---------------------------------------------------------------------------------------------
def plain_attention(q, k, v, mask=None):
    """The formula step by step, every (T_q x T_k) matrix stored: scores, weights, then weights @ v.
    (The same values as `course_utils.attention.scaled_dot_product_attention(..., need_weights=True)`.)"""
    _check_qkv(q, k, v)
    scores = (q / math.sqrt(q.shape[-1])) @ k.transpose(-2, -1)             # (..., T_q, T_k)
    return masked_softmax(scores, mask) @ v                                  # (..., T_q, d_v)


def reference_attention(q, k, v, mask=None):
    """The course's reference (lesson 07), the values every version here must give."""
    return scaled_dot_product_attention(q, k, v, mask)


def sdpa_backend(q, k, v, mask=None, dropout_p=0.0, is_causal=False):
    """The name of the kernel `torch.nn.functional.scaled_dot_product_attention` picks for these inputs
    on their device: "FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION" or "MATH" (the formula
    step by step). Asks torch's own dispatcher (`torch._fused_sdp_choice`, the function the call uses)."""
    try:
        from torch.nn.attention import SDPBackend

        return SDPBackend(torch._fused_sdp_choice(q, k, v, mask, dropout_p, is_causal)).name
    except (AttributeError, ImportError, RuntimeError, ValueError) as error:   # an older or newer torch
        return f"unknown ({type(error).__name__}: this torch does not expose its choice)"


def attention_memory_bytes(T_q, d_k, method="plain", block_q=64, block_k=None, T_k=None, d_v=None,
                           element_size=4, batch_heads=1):
    """The bytes one attention call holds at its peak, counted tensor by tensor (q, k, v included):

    plain: q, k, v, output, plus the scores AND the weights (both T_q x T_k, alive together);
    tiled: q, k, v, output, plus one tile of scores and of probabilities (block_q x block_k), the
           accumulator (block_q x d_v) and m, l (block_q each), whatever T is.
    """
    T_k = T_q if T_k is None else T_k
    d_v = d_k if d_v is None else d_v
    io = T_q * d_k + T_k * (d_k + d_v) + T_q * d_v
    if method == "plain":
        extra = 2 * T_q * T_k
    elif method == "tiled":
        block_k = block_q if block_k is None else block_k
        bq, bk = min(block_q, T_q), min(block_k, T_k)
        extra = 2 * bq * bk + bq * d_v + 2 * bq + bq * d_k
    else:
        raise ValueError(f"method must be 'plain' or 'tiled', got {method!r}")
    return batch_heads * (io + extra) * element_size


# ---------------------------------------------------------------------------------------------
# Linear attention
# ---------------------------------------------------------------------------------------------
def elu_feature_map(x):
    """phi(x) = elu(x) + 1 > 0 (Katharopoulos et al., 2020): a positive feature map for linear attention."""
    return F.elu(x) + 1


def linear_attention(q, k, v, causal=False):
    """Linear attention with phi(x) = elu(x) + 1:  out_t = phi(q_t)^T S / phi(q_t)^T z,
    S = sum_j phi(k_j) v_j^T (d_k x d_v), z = sum_j phi(k_j) (d_k): time and memory linear in T.
    causal: the sums run over j <= t (prefix sums; this simple version keeps S for every t)."""
    _check_qkv(q, k, v)
    phi_q, phi_k = elu_feature_map(q), elu_feature_map(k)                   # (..., T, d_k)
    if not causal:
        S = phi_k.transpose(-2, -1) @ v                                      # (..., d_k, d_v)
        z = phi_k.sum(dim=-2)                                                # (..., d_k)
        return (phi_q @ S) / (phi_q @ z[..., None])                          # (..., T_q, d_v)
    if q.shape[-2] != k.shape[-2]:
        raise ValueError(f"causal linear attention needs T_q == T_k, got {q.shape[-2]} and {k.shape[-2]}")
    S = torch.cumsum(phi_k[..., :, None] * v[..., None, :], dim=-3)          # (..., T, d_k, d_v)
    z = torch.cumsum(phi_k, dim=-2)                                          # (..., T, d_k)
    num = (phi_q[..., None, :] @ S).squeeze(-2)                              # (..., T, d_v)
    return num / (phi_q * z).sum(dim=-1, keepdim=True)


def kernel_attention(q, k, v, causal=False):
    """The quadratic form of the same kernel: weights_tj = phi(q_t).phi(k_j) / sum_j' phi(q_t).phi(k_j'),
    a (T_q x T_k) matrix, then weights @ v. Equal to linear_attention, at quadratic cost."""
    _check_qkv(q, k, v)
    a = elu_feature_map(q) @ elu_feature_map(k).transpose(-2, -1)            # (..., T_q, T_k), > 0
    if causal:
        a = a * torch.ones(a.shape[-2:], dtype=torch.bool, device=a.device).tril()
    return (a / a.sum(dim=-1, keepdim=True)) @ v

"""Attention at scale (lesson 13): the online softmax, tiled attention (FlashAttention-2's forward and
backward passes, in Python), sliding windows and linear attention, each equal to the formula it replaces.

    column_blocks(x, block_size)                    the columns of x (..., n) handed out one block at a time, once
    m, l = online_softmax(blocks)                   ONE pass over the blocks: running max m, normaliser l
    m, l = merge_softmax_stats(m1, l1, m2, l2)      the statistics of two parts -> those of the whole
    softmax_from_stats(x, m, l)                     exp(x - m) / l (a row with l = 0 -> zeros)
    out, lse = tiled_attention(q, k, v, block_q, block_k, causal=False, mask=None)
    dq, dk, dv = tiled_attention_backward(q, k, v, out, lse, grad_out, block_q, block_k, causal=False)
    sliding_window_attention(q, k, v, window, block_q, ...)   tiled, the tiles outside the window never computed
    block_pattern(T_q, T_k, block_q, block_k, causal, window)   which tiles are computed (SKIP/PARTIAL/FULL)
    sliding_window_mask(T, left, right=0)           (T, T) bool: key j visible from query t iff t-left <= j <= t+right
    linear_attention(q, k, v)                       phi(q) (phi(k)^T v), normalised; phi(x) = elu(x) + 1
    causal_linear_attention(q, k, v)                the same with prefix sums (key j <= query t)
    kernel_attention(q, k, v, causal=False)         the same kernel in quadratic form (T x T weights)

Shapes are batch-first with any leading axes: q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v).
Masks follow the course's rule (`course_utils.masks`): bool, True = may attend, broadcastable to the
scores (..., T_q, T_k); a query with no key left gets a zero output (and lse = -inf), never NaN.
`causal` and `window` align query i with key i (top-left, as `causal_mask` and torch's `is_causal` do).
The costs (plain attention, memory counted and measured, the fused kernel's choice): `attention_cost`.
"""
import math

import torch
import torch.nn.functional as F

from .masks import check_mask, sliding_window_mask

__all__ = ["column_blocks", "BlocksReadTwice", "online_softmax", "merge_softmax_stats", "softmax_from_stats",
           "tiled_attention", "tiled_attention_backward", "sliding_window_attention", "block_pattern", "SKIP",
           "PARTIAL", "FULL", "sliding_window_mask", "linear_attention", "causal_linear_attention",
           "kernel_attention", "elu_feature_map"]

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
# The online softmax: the row's blocks arrive one at a time
# ---------------------------------------------------------------------------------------------
class BlocksReadTwice(RuntimeError):
    """A second pass over a `column_blocks` stream: its blocks are handed out once."""


class column_blocks:  # noqa: N801 - used like a function: for block in column_blocks(x, 3)
    """The columns of x (..., n) in blocks of `block_size` (the last may be shorter), handed out ONE AT A
    TIME AND ONCE, as a kernel streams a row of scores through its small fast memory: when the next block
    is asked for, the previous one is gone (overwritten with NaN, as a reused buffer would be), and a
    second pass over the row raises BlocksReadTwice. Keep what you need from a block (m and l), not the block.
    """

    def __init__(self, x, block_size):
        _check_block(block_size, "block_size")
        if not torch.is_tensor(x) or x.dim() < 1 or x.shape[-1] == 0:
            raise ValueError(f"x must be a tensor (..., n) with n >= 1 columns, got "
                             f"{tuple(x.shape) if torch.is_tensor(x) else type(x).__name__}")
        self.x, self.block_size, self.passes = x.detach().clone(), block_size, 0

    def __len__(self):
        return -(-self.x.shape[-1] // self.block_size)

    def __repr__(self):
        return (f"<column_blocks: {len(self)} blocks of up to {self.block_size} columns, rows "
                f"{tuple(self.x.shape[:-1])}; read {self.passes} time(s)>")

    def __iter__(self):
        if self.passes:
            raise BlocksReadTwice("the blocks of a row can be read only once, in ONE pass: update m and l from each "
                                  "block as it arrives (a second loop over the blocks is a second pass)")
        self.passes += 1
        return self._hand_out()

    def _hand_out(self):
        block = None
        for j0 in range(0, self.x.shape[-1], self.block_size):
            if block is not None:
                block.fill_(float("nan"))                   # the previous block is gone
            block = self.x[..., j0:j0 + self.block_size].clone()
            yield block
        if block is not None:
            block.fill_(float("nan"))


def online_softmax(blocks):
    """The softmax statistics of every row, in ONE pass over its blocks of columns (an iterable of
    (..., b) tensors, e.g. `column_blocks(x, b)`).

    m = max_j x_j and l = sum_j exp(x_j - m), updated block by block: when a block raises the maximum
    from m_old to m_new, the old normaliser is rescaled by exp(m_old - m_new). Returns (m, l), each (...,).
    A row of -inf only gives m = -inf, l = 0.
    """
    m = ell = None
    for block in blocks:                                                          # (..., b)
        if m is None:
            m = torch.full(block.shape[:-1], float("-inf"), dtype=block.dtype, device=block.device)   # (...,)
            ell = torch.zeros(block.shape[:-1], dtype=block.dtype, device=block.device)              # (...,)
        m_new = torch.maximum(m, block.amax(dim=-1))
        ell = ell * torch.exp(m - _safe(m_new)) + torch.exp(block - _safe(m_new)[..., None]).sum(dim=-1)
        m = m_new
    if m is None:
        raise ValueError("online_softmax needs at least one block")
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


# ---------------------------------------------------------------------------------------------
# Tiled attention: FlashAttention-2's forward and backward passes, in Python
# ---------------------------------------------------------------------------------------------
def _tiled_forward(q, k, v, block_q, block_k, causal, mask, window):
    """(out, lse) of softmax attention, one tile at a time; the tiles outside causal/window skipped."""
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
    rows_all, cols_all = torch.arange(T_q, device=q.device), torch.arange(T_k, device=q.device)
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
    return out, lse


def tiled_attention(q, k, v, block_q=64, block_k=None, causal=False, mask=None):
    """softmax(q k^T / sqrt(d_k)) v, one (block_q x block_k) tile of scores at a time, and the log-sum-exp
    lse = m + log l of every query (..., T_q): all the backward pass keeps of the softmax. Returns (out, lse);
    out equals `course_utils.attention.scaled_dot_product_attention` (float32: within 1e-5).

    For every block of queries: running maximum m, normaliser l and the UNNORMALISED output acc; for
    every block of keys, s = q_i k_j^T / sqrt(d_k), m_new = max(m, rowmax(s)), p = exp(s - m_new),
    l = l e^(m - m_new) + rowsum(p), acc = acc e^(m - m_new) + p v_j; once all keys are seen, out = acc / l.
    causal: the tiles above the diagonal are skipped (never computed), the diagonal ones masked element-wise.
    mask: bool, broadcastable to (..., T_q, T_k), True = may attend. A query with no key: out 0, lse -inf.
    """
    return _tiled_forward(q, k, v, block_q, block_k, causal, mask, None)


def sliding_window_attention(q, k, v, window, block_q=64, block_k=None, causal=False, mask=None):
    """Tiled attention where query t sees only keys t-left .. t+right (window = (left, right)): the tiles
    outside the band are never computed, the ones on its edges masked element-wise. Returns out."""
    return _tiled_forward(q, k, v, block_q, block_k, causal, mask, _check_window(window))[0]


def tiled_attention_backward(q, k, v, out, lse, grad_out, block_q=64, block_k=None, causal=False):
    """The gradients (dq, dk, dv) of tiled attention, recomputed tile by tile from q, k, v, the output and
    lse = m + log l (nothing of size T_q x T_k is kept between the passes, or built in this one):

        p = exp(q_i k_j^T / sqrt(d) - lse_i),  dv_j += p^T do_i,  dp = do_i v_j^T,
        ds = p * (dp - D_i) with D_i = rowsum(do_i * out_i),  dq_i += ds k_j / sqrt(d),  dk_j += ds^T q_i / sqrt(d).
    causal: the tiles above the diagonal are skipped, as in the forward pass.
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
        empty = torch.isneginf(lse[..., i0:i1])[..., None]                   # queries with no key
        for b, j0 in enumerate(range(0, T_k, block_k)):
            if pattern[a][b] == SKIP:
                continue
            j1 = min(j0 + block_k, T_k)
            s = (q_i @ k[..., j0:j1, :].transpose(-2, -1)) * scale           # (..., bq, bk), recomputed
            p = torch.exp(s - lse_i)
            if pattern[a][b] == PARTIAL:
                p = p.masked_fill(~_visible(rows_all[i0:i1], cols_all[j0:j1], causal, None), 0.0)
            p = p.masked_fill(empty, 0.0)
            dv[..., j0:j1, :] += p.transpose(-2, -1) @ do_i
            dp = do_i @ v[..., j0:j1, :].transpose(-2, -1)                   # (..., bq, bk)
            ds = p * (dp - D[..., i0:i1, None])
            dq[..., i0:i1, :] += ds @ k[..., j0:j1, :] * scale
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i * scale
    return dq, dk, dv


# ---------------------------------------------------------------------------------------------
# Linear attention
# ---------------------------------------------------------------------------------------------
def elu_feature_map(x):
    """phi(x) = elu(x) + 1 > 0 (Katharopoulos et al., 2020): a positive feature map for linear attention."""
    return F.elu(x) + 1


def linear_attention(q, k, v):
    """Linear attention with phi(x) = elu(x) + 1:  out_t = phi(q_t)^T S / phi(q_t)^T z,
    S = sum_j phi(k_j) v_j^T (d_k x d_v), z = sum_j phi(k_j) (d_k): time and memory linear in T."""
    _check_qkv(q, k, v)
    phi_q, phi_k = elu_feature_map(q), elu_feature_map(k)                   # (..., T, d_k)
    S = phi_k.transpose(-2, -1) @ v                                          # (..., d_k, d_v)
    z = phi_k.sum(dim=-2)                                                    # (..., d_k)
    return (phi_q @ S) / (phi_q @ z[..., None])                              # (..., T_q, d_v)


def causal_linear_attention(q, k, v):
    """Causal linear attention: the sums S and z run over j <= t (prefix sums; this simple version keeps
    S for every t, (..., T, d_k, d_v): a recurrent state S_t = S_(t-1) + phi(k_t) v_t^T)."""
    _check_qkv(q, k, v)
    if q.shape[-2] != k.shape[-2]:
        raise ValueError(f"causal linear attention needs T_q == T_k, got {q.shape[-2]} and {k.shape[-2]}")
    phi_q, phi_k = elu_feature_map(q), elu_feature_map(k)
    S = torch.cumsum(phi_k[..., :, None] * v[..., None, :], dim=-3)          # (..., T, d_k, d_v)
    z = torch.cumsum(phi_k, dim=-2)                                          # (..., T, d_k)
    num = (phi_q[..., None, :] @ S).squeeze(-2)                              # (..., T, d_v)
    return num / (phi_q * z).sum(dim=-1, keepdim=True)


def kernel_attention(q, k, v, causal=False):
    """The quadratic form of the same kernel: weights_tj = phi(q_t).phi(k_j) / sum_j' phi(q_t).phi(k_j'),
    a (T_q x T_k) matrix, then weights @ v. Equal to (causal_)linear_attention, at quadratic cost."""
    _check_qkv(q, k, v)
    a = elu_feature_map(q) @ elu_feature_map(k).transpose(-2, -1)            # (..., T_q, T_k), > 0
    if causal:
        a = a * torch.ones(a.shape[-2:], dtype=torch.bool, device=a.device).tril()
    return (a / a.sum(dim=-1, keepdim=True)) @ v

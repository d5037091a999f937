"""Self-attention, multi-head attention and positional encodings (lessons 07 and 08).

    scaled_dot_product_attention(q, k, v, mask)   softmax(q kᵀ / √d_k) v, optional boolean mask
    causal_mask(T)                                (T, T) bool, True on and below the diagonal
    padding_mask(tokens, pad_id)                  (B, 1, 1, T) bool, True at real tokens
    MultiHeadAttention(d_model, num_heads)        equal to torch.nn.MultiheadAttention(batch_first=True)
    sinusoidal_positional_encoding(max_len, d_model, interleaved=True)
    PositionalEncoding / LearnedPositionalEncoding   add positions to embeddings, then dropout

Masks are boolean, True = may attend (keep), False = masked out: the convention of
`torch.nn.functional.scaled_dot_product_attention`. A query whose every key is masked gets zero
weights and a zero output, never NaN.

Without `need_weights` the attention goes through torch's fused kernel (flash / memory-efficient
attention on a GPU), except on a CPU in bf16/fp16 or for a single query, where the explicit formula
is faster; with `need_weights=True` it is computed step by step and the weights are returned (for
plots). For decoding one token at a time, MultiHeadAttention keeps keys and values between steps
(`project_kv`, `attend_cached`, `extend_cache`: a key/value cache, lesson 10).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .masks import check_mask

__all__ = ["scaled_dot_product_attention", "attention_weights", "causal_mask", "padding_mask",
           "split_heads", "merge_heads", "MultiHeadAttention", "sinusoidal_positional_encoding",
           "PositionalEncoding", "LearnedPositionalEncoding"]

_TORCH_VERSION = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
# From torch 2.5 on, the CPU kernels return zeros (and finite gradients) for fully masked rows
# (the "safe softmax" change, see pytorch/pytorch#141128; checked here on 2.13). Elsewhere we guard.
_CPU_SDPA_HANDLES_EMPTY_ROWS = _TORCH_VERSION >= (2, 5)


def _check_qkv(q, k, v):
    if q.dim() < 2 or k.dim() != q.dim() or v.dim() != q.dim():
        raise ValueError(f"q, k, v must have the same number of dimensions (B, ..., T, d), got shapes "
                         f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must have the same last size d_k, got {q.shape[-1]} and {k.shape[-1]}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v must have the same length T_k, got {k.shape[-2]} and {v.shape[-2]}")


def attention_weights(q, k, mask=None):
    """softmax(q kᵀ / √d_k) over the keys, masked positions set to 0; rows with no key allowed -> all 0.

    q: (B, ..., T_q, d_k), k: (B, ..., T_k, d_k), mask: bool, broadcastable to (B, ..., T_q, T_k).
    The softmax runs in float32 (also under bf16 autocast); the weights come back in q's dtype.
    """
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, ..., T_q, T_k)
    mask = check_mask(mask, scores.shape)
    if mask is None:
        return scores.softmax(dim=-1, dtype=torch.float32).to(scores.dtype)
    has_key = mask.any(dim=-1, keepdim=True)                   # rows with at least one key allowed
    scores = scores.masked_fill(~(mask | ~has_key), float("-inf"))  # fully masked rows stay finite...
    return (scores.softmax(dim=-1, dtype=torch.float32) * has_key).to(scores.dtype)  # ...zeroed here (no NaN)


def _fused_kernel_is_slower(q):
    """On a CPU, torch's fused attention kernel (2.13) is slower than the explicit formula in bf16 or
    fp16 (4-6x at Multi30k's lengths, forward and backward, up to T = 256), and for ONE query (a
    decoding step: 2-7x); measured with benchmarks/attention_kernels.py."""
    return q.device.type == "cpu" and (q.dtype in (torch.bfloat16, torch.float16) or q.size(-2) == 1)


def scaled_dot_product_attention(q, k, v, mask=None, dropout_p=0.0, need_weights=False):
    """Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V.

    q: (B, ..., T_q, d_k), k: (B, ..., T_k, d_k), v: (B, ..., T_k, d_v)
    mask: bool, broadcastable to (B, ..., T_q, T_k); True = may attend, False = masked out.
    dropout_p: dropout on the weights (pass 0.0 at evaluation time).
    Returns out (B, ..., T_q, d_v), or (out, weights (B, ..., T_q, T_k)) when need_weights.
    """
    _check_qkv(q, k, v)
    if need_weights or _fused_kernel_is_slower(q):
        weights = attention_weights(q, k, mask)
        dropped = F.dropout(weights, dropout_p) if dropout_p > 0 else weights
        out = dropped @ v
        return (out, weights) if need_weights else out
    scores_shape = q.shape[:-1] + k.shape[-2:-1]
    mask = check_mask(mask, scores_shape)
    if mask is None or (_CPU_SDPA_HANDLES_EMPTY_ROWS and q.device.type == "cpu"):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
    has_key = mask.any(dim=-1, keepdim=True)  # guard fully masked rows on kernels that give NaN there
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask | ~has_key, dropout_p=dropout_p)
    return out * has_key


def causal_mask(T, device=None):
    """(T, T) bool mask, True on and below the diagonal: position t may attend to positions <= t."""
    return ~torch.triu(torch.ones(T, T, dtype=torch.bool, device=device), diagonal=1)


def padding_mask(tokens, pad_id):
    """(B, 1, 1, T) bool mask from token ids (B, T): True at real tokens, False at padding.

    It broadcasts over heads and queries: every query may attend to every real key.
    """
    if not torch.is_tensor(tokens) or tokens.dim() != 2:
        raise ValueError(f"tokens must be a (B, T) tensor of token ids, got "
                         f"{tuple(tokens.shape) if torch.is_tensor(tokens) else type(tokens).__name__}")
    return (tokens != pad_id)[:, None, None, :]


def _rows(bias, start, stop):
    """bias[start:stop], or None for a layer without bias."""
    return None if bias is None else bias[start:stop]


def split_heads(x, num_heads):
    """(B, T, d_model) -> (B, num_heads, T, d_head): head i gets features i*d_head ... (i+1)*d_head-1."""
    B, T, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return x.view(B, T, num_heads, d_model // num_heads).transpose(1, 2)


def merge_heads(x):
    """(B, num_heads, T, d_head) -> (B, T, num_heads * d_head): the inverse of split_heads."""
    B, h, T, d_head = x.shape
    return x.transpose(1, 2).reshape(B, T, h * d_head)


class MultiHeadAttention(nn.Module):
    """h heads of scaled dot-product attention on d_model/h features each, concatenated, then W_O.

    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W_O,  head_i = Attention(Q W_Q^i, K W_K^i, V W_V^i)

    W_Q, W_K, W_V are stacked in one Linear (`in_proj`, rows [W_Q; W_K; W_V]) as in
    torch.nn.MultiheadAttention, whose weights `load_from_torch` copies; with the same weights
    both give the same outputs. The last weights (B, h, T_q, T_k) are kept on `self.attn_weights`
    when `need_weights=True` or `self.store_weights = True` (that path does not use the fused kernel).
    """

    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model} must be divisible by num_heads={num_heads}")
        self.d_model, self.num_heads, self.d_head = d_model, num_heads, d_model // num_heads
        self.dropout = dropout
        self.in_proj = nn.Linear(d_model, 3 * d_model, bias=bias)  # [W_Q; W_K; W_V]
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)     # W_O
        self.store_weights = False
        self.attn_weights = None
        self._reset_parameters()

    def _reset_parameters(self):  # the initialisation of torch.nn.MultiheadAttention
        nn.init.xavier_uniform_(self.in_proj.weight)
        if self.in_proj.bias is not None:
            nn.init.zeros_(self.in_proj.bias)
            nn.init.zeros_(self.out_proj.bias)

    def _project(self, query, key, value):
        w, b = self.in_proj.weight, self.in_proj.bias
        if query is key and key is value:                           # self-attention: one matmul
            return F.linear(query, w, b).chunk(3, dim=-1)
        w_q, w_kv = w.split([self.d_model, 2 * self.d_model])
        b_q, b_kv = b.split([self.d_model, 2 * self.d_model]) if b is not None else (None, None)
        q = F.linear(query, w_q, b_q)
        if key is value:                                            # cross-attention: K, V together
            return (q,) + tuple(F.linear(key, w_kv, b_kv).chunk(2, dim=-1))
        w_k, w_v = w_kv.chunk(2)
        b_k, b_v = b_kv.chunk(2) if b_kv is not None else (None, None)
        return q, F.linear(key, w_k, b_k), F.linear(value, w_v, b_v)

    def forward(self, query, key, value, mask=None, need_weights=False):
        """query (B, T_q, d_model), key/value (B, T_k, d_model); mask bool, broadcastable to
        (B, h, T_q, T_k) (a (B, T_q, T_k) mask is applied to every head). Returns (B, T_q, d_model)."""
        if query.dim() != 3 or query.size(-1) != self.d_model:
            raise ValueError(f"query must be (B, T_q, d_model={self.d_model}), got {tuple(query.shape)}")
        if key.dim() != 3 or key.shape != value.shape or key.size(-1) != self.d_model:
            raise ValueError(f"key and value must both be (B, T_k, d_model={self.d_model}), got "
                             f"{tuple(key.shape)} and {tuple(value.shape)}")
        if mask is not None and torch.is_tensor(mask) and mask.dim() == 3:
            mask = mask.unsqueeze(1)                                 # (B, 1, T_q, T_k): same for all heads
        q, k, v = self._project(query, key, value)                  # each (B, T, d_model)
        q, k, v = (split_heads(t, self.num_heads) for t in (q, k, v))  # each (B, h, T, d_head)
        return self._attend(q, k, v, mask, need_weights)

    def _attend(self, q, k, v, mask=None, need_weights=False):
        """Projected heads q (B, h, T_q, d_head), k and v (B, h, T_k, d_head) -> (B, T_q, d_model) after W_O."""
        dropout_p = self.dropout if self.training else 0.0
        if need_weights or self.store_weights:
            out, weights = scaled_dot_product_attention(q, k, v, mask, dropout_p, need_weights=True)
            self.attn_weights = weights.detach()                    # (B, h, T_q, T_k)
        else:
            out = scaled_dot_product_attention(q, k, v, mask, dropout_p)
        return self.out_proj(merge_heads(out))                      # (B, T_q, d_model)

    # ---- incremental decoding (lesson 10): keys and values kept between steps ------------------
    # At decoding step t a decoder needs the attention of ONE new query. Its keys and values are
    # those of the earlier positions, which do not change (the decoder is causal): keep them (a
    # key/value cache) instead of projecting the whole prefix again at every step.
    def project_kv(self, memory):
        """K, V of `memory` (B, T_k, d_model), each (B, h, T_k, d_head): for a cross-attention, computed
        once per sentence and reused at every decoding step."""
        w_kv, b_kv = self.in_proj.weight[self.d_model:], _rows(self.in_proj.bias, self.d_model, None)
        k, v = F.linear(memory, w_kv, b_kv).chunk(2, dim=-1)        # each (B, T_k, d_model)
        return split_heads(k, self.num_heads), split_heads(v, self.num_heads)

    def attend_cached(self, query, k, v, mask=None):
        """Queries (B, T_q, d_model) against keys and values already projected (project_kv), each
        (B, h, T_k, d_head); mask broadcastable to (B, h, T_q, T_k). Returns (B, T_q, d_model)."""
        w_q, b_q = self.in_proj.weight[:self.d_model], _rows(self.in_proj.bias, 0, self.d_model)
        q = split_heads(F.linear(query, w_q, b_q), self.num_heads)  # (B, h, T_q, d_head)
        return self._attend(q, k, v, mask)

    def extend_cache(self, x, cache=None, mask=None):
        """Self-attention of the NEWEST position x (B, 1, d_model) over itself and the cached earlier ones.

        cache: (K, V), each (B, h, t, d_head), the keys and values of positions 0..t-1 (None at the
        first step). x's key and value are appended; mask, broadcastable to (B, h, 1, t+1), may hide
        some of the t+1 keys. Returns (out (B, 1, d_model), (K, V) each (B, h, t+1, d_head)).
        """
        q, k, v = (split_heads(p, self.num_heads)                   # each (B, h, 1, d_head)
                   for p in F.linear(x, self.in_proj.weight, self.in_proj.bias).chunk(3, dim=-1))
        if cache is not None:
            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)  # (B, h, t+1, d_head)
        return self._attend(q, k, v, mask), (k, v)

    @torch.no_grad()
    def load_from_torch(self, mha):
        """Copy the weights of a torch.nn.MultiheadAttention (same d_model, heads, bias); returns self."""
        if mha.embed_dim != self.d_model or mha.num_heads != self.num_heads:
            raise ValueError(f"torch module has d_model={mha.embed_dim}, num_heads={mha.num_heads}; "
                             f"this one has {self.d_model}, {self.num_heads}")
        if mha.in_proj_weight is None:
            raise ValueError("torch module uses separate q/k/v sizes (kdim/vdim); only the packed form is supported")
        self.in_proj.weight.copy_(mha.in_proj_weight)
        self.out_proj.weight.copy_(mha.out_proj.weight)
        if self.in_proj.bias is not None:
            self.in_proj.bias.copy_(mha.in_proj_bias)
            self.out_proj.bias.copy_(mha.out_proj.bias)
        return self

    def extra_repr(self):
        return f"d_model={self.d_model}, num_heads={self.num_heads}, d_head={self.d_head}, dropout={self.dropout}"


def sinusoidal_positional_encoding(max_len, d_model, interleaved=True):
    """(max_len, d_model) sinusoidal positions of "Attention Is All You Need".

    PE(pos, 2i) = sin(pos / 10000^(2i/d_model)),  PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model)).
    interleaved=True puts sin and cos in alternate columns (the paper's formula);
    interleaved=False puts all sines first, then all cosines (the same features, permuted).
    """
    if d_model % 2:
        raise ValueError(f"d_model must be even for sin/cos pairs, got {d_model}")
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]             # (max_len, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)              # (d_model/2,)
    angle = pos / torch.pow(10000.0, two_i / d_model)                     # (max_len, d_model/2)
    if interleaved:
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(angle), torch.cos(angle)
        return pe
    return torch.cat([torch.sin(angle), torch.cos(angle)], dim=-1)


class PositionalEncoding(nn.Module):
    """x + PE[offset:offset+T], then dropout. x: (B, T, d_model); offset = the position of x's first
    row (0, or t when decoding step t alone). The table is a buffer (saved, not trained)."""

    def __init__(self, d_model, max_len=5000, dropout=0.0, interleaved=True):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model, interleaved),
                             persistent=False)

    def forward(self, x, offset=0):
        T = offset + x.size(1)
        if T > self.pe.size(0):
            raise ValueError(f"sequence length {T} exceeds max_len={self.pe.size(0)}: build the "
                             "PositionalEncoding with a larger max_len (the sinusoids extend to any length)")
        return self.dropout(x + self.pe[offset:T])


class LearnedPositionalEncoding(nn.Module):
    """x + P[:T] with P a trained (max_len, d_model) table (BERT, GPT-2), then dropout.

    Unlike the sinusoids it cannot represent positions >= max_len that it never saw in training.
    """

    def __init__(self, d_model, max_len=512, dropout=0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.pe = nn.Embedding(max_len, d_model)
        nn.init.normal_(self.pe.weight, std=0.02)

    def forward(self, x, offset=0):
        T = offset + x.size(1)
        if T > self.pe.num_embeddings:
            raise ValueError(f"sequence length {T} exceeds max_len={self.pe.num_embeddings}: a learned "
                             "table has no entry for positions it was not built with")
        return self.dropout(x + self.pe.weight[offset:T])

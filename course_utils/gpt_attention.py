"""A GPT's attention (lesson 12): lesson 08's multi-head attention as a decoder-only model uses it, masked
self-attention, with the two options of today's language models.

    repeat_kv_heads(x, h)                    (B, h_kv, T, d) -> (B, h, T, d): each key/value head for its group
    grouped_query_attention(q, k, v, mask)   h query heads share h_kv key/value heads (section 9)
    CausalSelfAttention(d_model, num_heads, num_kv_heads=None, rope=False)
        forward(x, mask)                     x (B, T, d_model) -> (B, T, d_model), as MultiHeadAttention(x, x, x, mask)
        extend_cache(x, cache)               one generation step with a key/value cache (section 7)

The options, both off by default (then it computes lesson 08's MultiHeadAttention(x, x, x, mask)):
num_kv_heads  h_kv key/value heads, each shared by h / h_kv consecutive query heads (grouped-query attention,
              Ainslie et al. 2023; 1 = multi-query, Shazeer 2019): W_K and W_V have h_kv * d_head rows, the
              cache holds h_kv heads.
rope          rotary positions (course_utils.positions.apply_rope): the queries and keys of position m are
              rotated by m θ_i; 0 .. T-1 in `forward`, t (the cache's length) for the newest position in
              `extend_cache`. Nothing is added to the embeddings.
"""
import torch
import torch.nn as nn

from .attention import init_like_torch, merge_heads, scaled_dot_product_attention, split_heads
from .positions import apply_rope

__all__ = ["repeat_kv_heads", "grouped_query_attention", "CausalSelfAttention"]


def repeat_kv_heads(x, num_heads):
    """(B, h_kv, T, d) -> (B, num_heads, T, d): query head j uses key/value head j // (num_heads / h_kv)."""
    h_kv = x.size(1)
    if num_heads % h_kv:
        raise ValueError(f"num_heads={num_heads} must be a multiple of the key/value heads h_kv={h_kv}")
    return x if h_kv == num_heads else x.repeat_interleave(num_heads // h_kv, dim=1)


def grouped_query_attention(q, k, v, mask=None, dropout_p=0.0, need_weights=False):
    """Attention of h query heads q (B, h, T_q, d) over h_kv key/value heads k, v (B, h_kv, T_k, d):
    group g = h / h_kv consecutive query heads share one key/value head (h_kv = h: multi-head attention,
    h_kv = 1: multi-query attention). Returns (B, h, T_q, d) (and the weights (B, h, T_q, T_k))."""
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError(f"q, k, v must be (B, heads, T, d_head), got shapes {tuple(q.shape)}, {tuple(k.shape)}, "
                         f"{tuple(v.shape)}")
    if k.size(1) != v.size(1) or q.size(1) % k.size(1):
        raise ValueError(f"the {q.size(1)} query heads must be a multiple of the key/value heads; got "
                         f"{k.size(1)} key and {v.size(1)} value heads")
    k, v = repeat_kv_heads(k, q.size(1)), repeat_kv_heads(v, q.size(1))  # (B, h, T_k, d)
    return scaled_dot_product_attention(q, k, v, mask, dropout_p, need_weights)


class CausalSelfAttention(nn.Module):
    """Masked multi-head self-attention of a GPT layer, with grouped-query heads and rotary positions as options.

    W_Q, W_K, W_V are stacked in one Linear (`in_proj`, rows [W_Q; W_K; W_V]: d_model, then h_kv d_head
    twice), W_O is `out_proj`; the last weights (B, h, T, T) are kept on `attn_weights` when
    `store_weights` is set (course_utils.attention.store_attention_weights), as in every model of the course.
    """

    def __init__(self, d_model, num_heads, dropout=0.0, num_kv_heads=None, rope=False, rope_base=10000.0):
        super().__init__()
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        if d_model % num_heads or num_kv_heads < 1 or num_heads % num_kv_heads:
            raise ValueError(f"d_model={d_model} must be divisible by num_heads={num_heads}, and num_heads={num_heads} "
                             f"by num_kv_heads={num_kv_heads} (each key/value head serves the same number of "
                             "query heads)")
        self.d_model, self.num_heads, self.d_head = d_model, num_heads, d_model // num_heads
        if rope and self.d_head % 2:
            raise ValueError(f"rope rotates pairs of features: d_head = d_model / num_heads must be even, got "
                             f"{self.d_head}")
        self.num_kv_heads, self.rope, self.rope_base = num_kv_heads, rope, rope_base
        self.d_kv = num_kv_heads * self.d_head                      # rows of W_K and of W_V
        self.dropout = dropout
        self.in_proj = nn.Linear(d_model, d_model + 2 * self.d_kv)  # [W_Q; W_K; W_V]
        self.out_proj = nn.Linear(d_model, d_model)                 # W_O
        self.store_weights, self.attn_weights = False, None        # for plots
        init_like_torch(self)

    def project(self, x, positions):
        """x (B, T, d_model) at `positions` (T,) -> q (B, h, T, d_head), k and v (B, h_kv, T, d_head);
        with rope, q and k rotated by their positions."""
        q, k, v = self.in_proj(x).split([self.d_model, self.d_kv, self.d_kv], dim=-1)
        q = split_heads(q, self.num_heads)                           # (B, h, T, d_head)
        k, v = split_heads(k, self.num_kv_heads), split_heads(v, self.num_kv_heads)   # (B, h_kv, T, d_head)
        if self.rope:
            q, k = apply_rope(q, positions, self.rope_base), apply_rope(k, positions, self.rope_base)
        return q, k, v

    def forward(self, x, mask=None, need_weights=False):
        """x (B, T, d_model), mask bool broadcastable to (B, h, T, T) (the causal mask) -> (B, T, d_model)."""
        if x.dim() != 3 or x.size(-1) != self.d_model:
            raise ValueError(f"x must be (B, T, d_model={self.d_model}), got {tuple(x.shape)}")
        q, k, v = self.project(x, torch.arange(x.size(1), device=x.device))
        return self.attend(q, k, v, mask, need_weights)

    def extend_cache(self, x, cache=None, mask=None):
        """The newest position x (B, 1, d_model) attends over itself and the cache (K, V) of positions 0..t-1
        (each (B, h_kv, t, d_head), keys already rotated; None at the first step): x is at position t, its
        key and value are appended. mask, broadcastable to (B, h, 1, t+1), may hide keys (no causal mask:
        every cached key is in the past). Returns (out (B, 1, d_model), (K, V) with t+1 positions)."""
        t = 0 if cache is None else cache[0].size(2)
        q, k, v = self.project(x, torch.tensor([t], device=x.device))
        if cache is not None:
            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)   # (B, h_kv, t+1, d_head)
        return self.attend(q, k, v, mask), (k, v)

    def attend(self, q, k, v, mask=None, need_weights=False):
        """q (B, h, T_q, d_head) over k, v (B, h_kv, T_k, d_head) -> (B, T_q, d_model) after W_O."""
        dropout_p = self.dropout if self.training else 0.0
        group = self.num_heads // self.num_kv_heads
        keep = need_weights or self.store_weights
        if group > 1 and q.size(2) == 1 and not (keep or dropout_p) and (
                mask is None or (mask.dim() == 4 and mask.size(1) == 1)):
            # one generation step: the g query heads of a group become g queries of their shared key/value
            # head, (B, h, 1, d) -> (B, h_kv, g, d), so the cache is never copied g times
            B, _, _, d_head = q.shape
            out = scaled_dot_product_attention(q.reshape(B, self.num_kv_heads, group, d_head), k, v, mask)
            return self.out_proj(merge_heads(out.reshape(B, self.num_heads, 1, d_head)))   # (B, 1, d_model)
        if keep:                                                     # step by step, the weights kept
            out, weights = grouped_query_attention(q, k, v, mask, dropout_p, need_weights=True)
            self.attn_weights = weights.detach()                     # (B, h, T_q, T_k)
        else:
            out = grouped_query_attention(q, k, v, mask, dropout_p)
        return self.out_proj(merge_heads(out))                       # (B, T_q, d_model)

    def extra_repr(self):
        return (f"d_model={self.d_model}, num_heads={self.num_heads}, num_kv_heads={self.num_kv_heads}, "
                f"d_head={self.d_head}, rope={self.rope}, dropout={self.dropout}")

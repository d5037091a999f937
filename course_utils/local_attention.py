"""Local and global layers, learned sinks, and the ring-buffer cache of a local layer (lesson 15).

    layer_pattern(12, every=6)                         ("local",) * 5 + ("full",), twice: Gemma 3's 5:1
    local_causal_mask(T, window)                       (T, T) bool: query t sees keys t-window+1 .. t
    attention_with_sink(q, k, v, sink, mask)           softmax with a learned logit in the denominator (gpt-oss)
    ring_buffer_append(cache_k, cache_v, slots, k, v, position)   write position t into slot t mod W
    ring_buffer_mask(slots, position, window)          which slots hold one of the last `window` positions

A **local** (sliding-window) layer lets query t see the `window` most recent positions t-window+1 .. t (lesson 07's
causal window, lesson 13's sliding-window attention); a **global** layer sees all of them. Gemma 3 (Gemma Team
2025) interleaves five local layers (window 1,024) for every global one, starting with a local layer; gpt-oss
(OpenAI 2025) alternates banded-window layers (128 tokens) and dense ones. A local layer's cache never needs
more than `window` keys and values: a **ring buffer** of `window` slots, position t written into slot t mod window,
overwriting position t - window, which no later query may see. With rotary positions (lesson 12) a key is rotated
once, at its own position, before it is cached: its slot does not matter to the scores, only which slots hold
visible positions (`ring_buffer_mask`).

A **learned sink** (gpt-oss): each head h has one trained logit s_h that joins the softmax's denominator only,

    weights_tj = exp(e_tj) / (exp(s_h) + sum_j' exp(e_tj')),

so a head may put less than all of its weight on the keys (the rest goes to "nothing"): it is attention with one
extra key whose score is s_h and whose value is zero (Xiao et al. 2023's attention sinks, Miller 2023's
"off-by-one" softmax with s_h = 0). s_h = -inf gives plain attention; a query with every key masked gets zero
weights and a zero output, finite.
"""
import math

import torch

from .masks import check_mask, sliding_window_mask

__all__ = ["layer_pattern", "local_causal_mask", "attention_with_sink", "ring_buffer_append", "ring_buffer_mask",
           "empty_ring_buffer", "kv_bytes"]


def layer_pattern(num_layers, every, other="local", single="full"):
    """The kinds of `num_layers` layers: `every - 1` layers of `other`, then one of `single`, repeated.
    layer_pattern(12, 6) is Gemma 3's 5:1 pattern twice; layer_pattern(8, 4, "gated_deltanet") Qwen3-Next's 3:1."""
    if every < 1 or num_layers < 1:
        raise ValueError(f"num_layers and every must be >= 1, got {num_layers} and {every}")
    return tuple(single if (i + 1) % every == 0 else other for i in range(num_layers))


def local_causal_mask(T, window, device=None):
    """(T, T) bool, True where query t may attend to key j: t - window < j <= t (the `window` newest positions,
    itself included). window >= T: the causal mask."""
    if window < 1:
        raise ValueError(f"window must be >= 1 (the query sees itself), got {window}")
    return sliding_window_mask(T, window - 1, 0, device=device)


def attention_with_sink(q, k, v, sink=None, mask=None):
    """Attention whose softmax has one learned logit per head in its denominator.

    q (B, h, T_q, d), k (B, h, T_k, d), v (B, h, T_k, d_v); sink (h,) logits (None: plain attention);
    mask bool broadcastable to (B, h, T_q, T_k), True = may attend.
    Returns out (B, h, T_q, d_v) and weights (B, h, T_q, T_k): each row sums to 1 - (the sink's share).
    """
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError(f"q, k, v must be (B, h, T, d), got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))                  # (B, h, T_q, T_k)
    mask = check_mask(mask, scores.shape)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    if sink is None:
        sink = torch.full((q.size(1),), float("-inf"), dtype=scores.dtype, device=scores.device)
    if sink.shape != (q.size(1),):
        raise ValueError(f"sink must hold one logit per head, shape ({q.size(1)},), got {tuple(sink.shape)}")
    sink = sink.to(scores.dtype).view(1, -1, 1, 1)                           # the sink as one more "score"
    top = torch.maximum(scores.amax(dim=-1, keepdim=True), sink)             # the largest of the scores and s_h
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))       # a row of -inf only: weights 0
    exp = (scores - top).exp()
    total = exp.sum(dim=-1, keepdim=True) + (sink - top).exp()              # exp(s_h) joins the denominator only
    weights = exp / torch.where(total > 0, total, torch.ones_like(total))
    return weights @ v, weights


# ---- the ring buffer of a local layer -------------------------------------------------------------------------
def empty_ring_buffer(B, h, window, d, d_v=None, dtype=torch.float32, device=None):
    """(cache_k (B, h, window, d), cache_v (B, h, window, d_v), slots (window,) long): zeros, every slot -1 (empty)."""
    d_v = d if d_v is None else d_v
    return (torch.zeros(B, h, window, d, dtype=dtype, device=device),
            torch.zeros(B, h, window, d_v, dtype=dtype, device=device),
            torch.full((window,), -1, dtype=torch.long, device=device))


def ring_buffer_append(cache_k, cache_v, slots, k, v, position):
    """Write the key and value of `position` (k, v (B, h, 1, d)) into slot position mod W of a ring buffer of W
    slots (cache_k, cache_v (B, h, W, d); slots (W,) the position each slot holds, -1 if empty), in place;
    returns (cache_k, cache_v, slots). The buffer never grows: position t overwrites t - W."""
    W = cache_k.size(2)
    if k.dim() != 4 or k.size(2) != 1 or v.size(2) != 1:
        raise ValueError(f"k and v must be ONE position, (B, h, 1, d), got {tuple(k.shape)} and {tuple(v.shape)}")
    if slots.shape != (W,):
        raise ValueError(f"slots must be ({W},): the position held by each of the {W} slots, got {tuple(slots.shape)}")
    slot = position % W
    cache_k[:, :, slot] = k[:, :, 0]
    cache_v[:, :, slot] = v[:, :, 0]
    slots[slot] = position
    return cache_k, cache_v, slots


def ring_buffer_mask(slots, position, window):
    """(W,) bool: the slots a query at `position` may attend to, those holding positions position-window+1 ..
    position (an empty slot, -1, never)."""
    return (slots >= 0) & (slots > position - window) & (slots <= position)


def kv_bytes(num_kv_heads, d_head, tokens, window=None, bytes_per_number=2):
    """Bytes of one attention layer's key/value cache after `tokens` tokens: 2 x h_kv x d_head numbers per cached
    token, min(tokens, window) tokens for a local layer (window None: a global one, every token)."""
    kept = tokens if window is None else min(tokens, window)
    return 2 * num_kv_heads * d_head * kept * bytes_per_number

"""The block of today's open models (lesson 15): RMSNorm, SwiGLU, QK-norm, no biases.

    RMSNorm(d)                                 x / rms(x) * g: no mean subtracted, no bias (Zhang & Sennrich 2019)
    SwiGLU(d_model, d_ff)                      W_2 (SiLU(W_1 x) * W_3 x): a gated feed-forward (Shazeer 2020)
    ModernAttention(d_model, num_heads, num_kv_heads, qk_norm=True, window=None, sinks=False)
        forward(x)                             causal self-attention, x (B, T, d_model) -> (B, T, d_model)
        step(x, cache, position)               one position with a key/value cache (a ring buffer if local)
    ModernBlock(mixer, d_model, d_ff)          x + mixer(RMSNorm(x)), then x + SwiGLU(RMSNorm(x))
    swiglu_width(d_ff)                         the SwiGLU width with the parameters of a d_ff-wide ReLU network

Lesson 12's GPT block is GPT-2's: LayerNorm (mean and variance, a gain and a bias), a ReLU (GPT-2: GELU)
feed-forward network, a bias on every linear map, the output layer tied to the embedding. Llama, Qwen3, Gemma 3,
OLMo 2, DeepSeek-V3 and gpt-oss all changed the same parts:
- RMSNorm: divide by the root mean square only; cheaper, and as good;
- SwiGLU: the hidden layer is a product of two projections, one through SiLU (a gate); 3 matrices instead of 2,
  so d_ff shrinks to 2/3 of 4 d_model for the same parameters (Llama: 8/3 d_model);
- no biases in the linear maps (Qwen3's report: "we remove QKV-bias used in Qwen2");
- QK-norm: an RMSNorm on each head's queries and keys before the scores (Henry et al. 2020; Dehghani et al. 2023
  for ViT-22B's stability; Qwen3, OLMo 2, Gemma 3, where it replaced Gemma 2's soft-capping): the largest
  logit q·k/√d stays bounded by the two norms' gains, whatever the projections grow to;
- untied input and output embeddings (course_utils.open_model.OpenLM, tie=False).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .gpt_attention import repeat_kv_heads
from .local_attention import (
    attention_with_sink,
    empty_ring_buffer,
    local_causal_mask,
    ring_buffer_append,
    ring_buffer_mask,
)
from .masks import causal_mask
from .positions import apply_rope

__all__ = ["RMSNorm", "SwiGLU", "ModernAttention", "ModernBlock", "swiglu_width", "rms_norm"]


def rms_norm(x, weight=None, eps=1e-6):
    """x / sqrt(mean(x^2) + eps) over the last axis, times `weight` (computed in float32)."""
    y = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)
    return (y if weight is None else y * weight.float()).to(x.dtype)


class RMSNorm(nn.Module):
    """RMSNorm(x) = x / rms(x) * g, rms(x) = sqrt(mean_i x_i^2 + eps): LayerNorm without the mean and the bias."""

    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(d)), eps

    def forward(self, x):
        return rms_norm(x, self.weight, self.eps)

    def extra_repr(self):
        return f"{self.weight.numel()}, eps={self.eps}"


class SwiGLU(nn.Module):
    """FFN(x) = W_2 (SiLU(W_1 x) * W_3 x), no biases (Shazeer 2020, "GLU Variants Improve Transformer")."""

    def __init__(self, d_model, d_ff):
        super().__init__()
        self.w1, self.w3 = nn.Linear(d_model, d_ff, bias=False), nn.Linear(d_model, d_ff, bias=False)
        self.w2 = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


def swiglu_width(d_ff, multiple=8):
    """The SwiGLU width whose 3 matrices hold as many weights as a ReLU network's 2 of width d_ff: 2/3 d_ff,
    rounded to a multiple of `multiple` (Llama: 8/3 d_model for d_ff = 4 d_model)."""
    return max(multiple, int(round(2 * d_ff / 3 / multiple)) * multiple)


class ModernAttention(nn.Module):
    """Causal self-attention as today's open models write it: grouped-query heads (lesson 12), rotary positions,
    no biases, an optional QK-norm, an optional window (a local layer) and optional learned sinks (gpt-oss).

    W_Q, W_K, W_V, W_O are `q_proj`, `k_proj`, `v_proj`, `o_proj`; `q_norm`, `k_norm` are RMSNorms over d_head
    (shared by the heads, as Qwen3's), applied before the rotation. `sink` is (h,) logits, initialised at 0.
    Set `track_logits` to keep the largest score q·k/√d of the next forward passes in `max_logit`, and
    `store_weights` to keep the weights in `attn_weights` (B, h, T, T).
    """

    def __init__(self, d_model, num_heads, num_kv_heads=None, qk_norm=True, window=None, sinks=False,
                 rope_base=10000.0, bias=False):
        super().__init__()
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        if d_model % num_heads or num_heads % num_kv_heads:
            raise ValueError(f"d_model={d_model} must be divisible by num_heads={num_heads}, and num_heads by "
                             f"num_kv_heads={num_kv_heads}")
        self.d_model, self.num_heads, self.num_kv_heads = d_model, num_heads, num_kv_heads
        self.d_head = d_model // num_heads
        self.window, self.rope_base = window, rope_base
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, num_kv_heads * self.d_head, bias=bias)
        self.v_proj = nn.Linear(d_model, num_kv_heads * self.d_head, bias=bias)
        self.o_proj = nn.Linear(d_model, d_model, bias=bias)
        self.q_norm = RMSNorm(self.d_head) if qk_norm else None
        self.k_norm = RMSNorm(self.d_head) if qk_norm else None
        self.sink = nn.Parameter(torch.zeros(num_heads)) if sinks else None
        self.track_logits, self.max_logit = False, None
        self.store_weights, self.attn_weights = False, None

    def project(self, x, positions):
        """x (B, T, d_model) at `positions` (T,) -> q (B, h, T, d_head), k, v (B, h_kv, T, d_head); q, k normalised
        (QK-norm) and rotated."""
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.num_heads, self.d_head).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.num_kv_heads, self.d_head).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.num_kv_heads, self.d_head).transpose(1, 2)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        return apply_rope(q, positions, self.rope_base), apply_rope(k, positions, self.rope_base), v

    def attend(self, q, k, v, mask):
        """q (B, h, T_q, d) over k, v (B, h_kv, T_k, d) with a bool mask -> (B, h, T_q, d_head)."""
        k, v = repeat_kv_heads(k, self.num_heads), repeat_kv_heads(v, self.num_heads)
        if self.track_logits:
            scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)
            visible = scores.masked_fill(~mask, float("-inf")) if mask is not None else scores
            value = float(visible.detach().amax())
            self.max_logit = value if self.max_logit is None else max(self.max_logit, value)
        if self.sink is not None or self.store_weights:
            out, weights = attention_with_sink(q, k, v, self.sink, mask)
            if self.store_weights:
                self.attn_weights = weights.detach()
            return out
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    def forward(self, x):
        """x (B, T, d_model) -> (B, T, d_model): causal, and within the window if the layer is local."""
        T = x.size(1)
        q, k, v = self.project(x, torch.arange(T, device=x.device))
        mask = causal_mask(T, x.device) if self.window is None else local_causal_mask(T, self.window, x.device)
        out = self.attend(q, k, v, mask)
        return self.o_proj(out.transpose(1, 2).reshape(x.size(0), T, self.d_model))

    def step(self, x, cache, position):
        """The newest position x (B, 1, d_model) at `position`, its keys and values added to `cache` (None at the
        first step): a global layer's cache grows, (K, V) each (B, h_kv, t, d_head); a local layer's is a ring
        buffer of `window` slots (K, V, slots). Returns (out (B, 1, d_model), cache)."""
        q, k, v = self.project(x, torch.tensor([position], device=x.device))
        if self.window is None:
            if cache is not None:
                k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
            cache, mask = (k, v), None
        else:
            if cache is None:
                cache = empty_ring_buffer(x.size(0), self.num_kv_heads, self.window, self.d_head, dtype=k.dtype,
                                          device=x.device)
            cache = ring_buffer_append(*cache, k, v, position)
            k, v, slots = cache
            mask = ring_buffer_mask(slots, position, self.window)[None]        # (1, W): every head, the query
        out = self.attend(q, k, v, mask)
        return self.o_proj(out.transpose(1, 2).reshape(x.size(0), 1, self.d_model)), cache

    @staticmethod
    def cache_bytes(cache):
        """Bytes of the keys and values a cache holds (a ring buffer's slot table is not counted)."""
        return 0 if cache is None else sum(t.numel() * t.element_size() for t in cache[:2])

    def extra_repr(self):
        return (f"heads={self.num_heads}, kv_heads={self.num_kv_heads}, d_head={self.d_head}, "
                f"qk_norm={self.q_norm is not None}, window={self.window}, sinks={self.sink is not None}")


class ModernBlock(nn.Module):
    """Pre-norm: x + mixer(RMSNorm(x)), then x + SwiGLU(RMSNorm(x)). The mixer is any token mixer of lesson 15
    (ModernAttention, latent attention, a delta-rule layer) with forward(x) and step(x, cache, position)."""

    def __init__(self, mixer, d_model, d_ff):
        super().__init__()
        self.norm1, self.mixer = RMSNorm(d_model), mixer
        self.norm2, self.ff = RMSNorm(d_model), SwiGLU(d_model, d_ff)

    def forward(self, x):
        x = x + self.mixer(self.norm1(x))
        return x + self.ff(self.norm2(x))

    def step(self, x, cache, position):
        out, cache = self.mixer.step(self.norm1(x), cache, position)
        x = x + out
        return x + self.ff(self.norm2(x)), cache

"""Multi-head latent attention (MLA; DeepSeek-V2 §2.1, used in DeepSeek-V3 and Kimi K2) and its absorbed
decoding step (lesson 15).

    latent_attention(q_c, q_r, c, k_r, W_uk, W_uv)          causal attention whose keys and values come from c
    absorbed_step(q_c, q_r, cache_c, cache_kr, W_uk, W_uv, W_o)   one new position, computed in the latent space
    unabsorbed_step(...)                                    the same step with the per-head keys and values rebuilt
    MultiHeadLatentAttention(d_model, num_heads, d_latent, d_rope)   the layer: forward(x), step(x, cache, position)
    cache_numbers(kind, ...)                                numbers a layer caches per token: MHA, GQA, MQA, MLA
    DEEPSEEK_V3                                             DeepSeek-V3's published sizes

Keys and values come from ONE low-rank latent per token, c_t = RMSNorm(W_DKV h_t) (d_c numbers), through
per-head up-projections: k^C_{t,i} = W_UK_i c_t, v_{t,i} = W_UV_i c_t. A cache that holds c_t instead of every
head's key and value is (2 h d_h) / d_c times smaller.

RoPE does not commute with the latent: a rotated key R_j W_UK c_j puts the rotation of key position j between the
query and W_UK, so W_UK cannot be folded into the query once for all positions (q_t^T R_t^T R_j W_UK = q_t^T R_{j-t}
W_UK depends on j - t). DeepSeek-V2 "decouples" positions: every head's query gets d_R more features q^R_{t,i},
rotated, and they meet ONE rotated key k^R_t = RoPE(W_KR h_t) shared by all the heads and cached beside c_t:

    score_{t,j,i} = (q^C_{t,i} . k^C_{j,i} + q^R_{t,i} . k^R_j) / sqrt(d_h + d_R).

Absorbed decoding (DeepSeek-V2 §2.1.2): q^C . (W_UK_i c_j) = (W_UK_i^T q^C) . c_j, so W_UK goes to the QUERY side
(one d_c-wide query per head), and W_O (sum_j a_j W_UV_i c_j) = (W_O_i W_UV_i)(sum_j a_j c_j), so W_UV goes into W_O:
the step attends over the cached latents themselves and never builds a per-head key or value.
"""
import math
import time

import torch
import torch.nn as nn

from .masks import causal_mask
from .modern_block import RMSNorm
from .positions import apply_rope

__all__ = ["latent_attention", "absorbed_step", "unabsorbed_step", "absorbed_weights", "absorbed_attend",
           "MultiHeadLatentAttention", "cache_numbers", "decode_timing", "DEEPSEEK_V3"]

# DeepSeek-V3 (DeepSeek-AI 2024, §2.1 and §4.2): 61 layers, 128 heads of d_h = 128, latent d_c = 512, RoPE key
# d_R = 64 per layer and token (the same sizes as DeepSeek-V2's MLA)
DEEPSEEK_V3 = dict(num_layers=61, num_heads=128, d_head=128, d_latent=512, d_rope=64)


def _check(q_c, q_r, c, k_r, W_uk, W_uv):
    """One clear error for inputs of the wrong shapes (what each must be, and what it is)."""
    B, h, T_q, d_h = q_c.shape if q_c.dim() == 4 else (None,) * 4
    ok = (q_c.dim() == 4 and q_r.dim() == 4 and q_r.shape[:3] == q_c.shape[:3] and c.dim() == 3 and k_r.dim() == 3
          and c.size(0) == B and k_r.shape[:2] == c.shape[:2] and k_r.size(-1) == q_r.size(-1)
          and W_uk.shape == W_uv.shape == (h, d_h, c.size(-1)))
    if not ok:
        raise ValueError("expected q_c (B, h, T_q, d_h), q_r (B, h, T_q, d_R), c (B, T, d_c), k_r (B, T, d_R), "
                         f"W_uk and W_uv (h, d_h, d_c); got {tuple(q_c.shape)}, {tuple(q_r.shape)}, {tuple(c.shape)}, "
                         f"{tuple(k_r.shape)}, {tuple(W_uk.shape)}, {tuple(W_uv.shape)}")


def _per_head_keys(c, W):
    """c (B, T, d_c), W (h, d_h, d_c) -> (B, h, T, d_h): W_i c_t for every head i and position t."""
    return torch.einsum("btc,hdc->bhtd", c, W)


def latent_attention(q_c, q_r, c, k_r, W_uk, W_uv):
    """Causal multi-head latent attention over T positions.

    q_c (B, h, T, d_h) content queries, q_r (B, h, T, d_R) RoPE queries (rotated); c (B, T, d_c) latents,
    k_r (B, T, d_R) the rotated RoPE key shared by the heads; W_uk, W_uv (h, d_h, d_c) per-head up-projections.
    Keys [W_uk_i c_j ; k_r_j], values W_uv_i c_j, scale 1/sqrt(d_h + d_R). Returns (B, h, T, d_h).
    """
    _check(q_c, q_r, c, k_r, W_uk, W_uv)
    if q_c.size(2) != c.size(1):
        raise ValueError(f"causal self-attention needs as many queries as latents, got {q_c.size(2)} and {c.size(1)}")
    T, d_h, d_r = c.size(1), q_c.size(-1), q_r.size(-1)
    k_c, v = _per_head_keys(c, W_uk), _per_head_keys(c, W_uv)                  # (B, h, T, d_h)
    scores = (q_c @ k_c.transpose(-2, -1) + q_r @ k_r[:, None].transpose(-2, -1)) / math.sqrt(d_h + d_r)
    weights = scores.masked_fill(~causal_mask(T, c.device), float("-inf")).softmax(-1)
    return weights @ v                                                          # (B, h, T, d_h)


def absorbed_weights(W_uk, W_uv, W_o):
    """(W_O_i W_UV_i)^T for every head i, stacked as one (h d_c, d_model) matrix: W_UV absorbed into W_O, computed
    once for every step (W_O_i: the columns of W_O that read head i)."""
    h, d_h, d_c = W_uk.shape
    W_ov = torch.einsum("mhd,hdc->hcm", W_o.view(W_o.size(0), h, d_h), W_uv)     # (h, d_c, d_model)
    return W_ov.reshape(h * d_c, W_o.size(0)).contiguous()


def absorbed_attend(q_c, q_r, cache_c, cache_kr, W_uk, W_ov):
    """The absorbed step with W_ov = absorbed_weights(W_uk, W_uv, W_o) computed once (as a decoder does)."""
    B, h, q, _ = q_c.shape
    q_lat = torch.einsum("bhqd,hdc->bhqc", q_c, W_uk)                           # (B, h, 1, d_c): W_UK^T q
    scores = q_lat @ cache_c[:, None].transpose(-2, -1) + q_r @ cache_kr[:, None].transpose(-2, -1)
    weights = (scores / math.sqrt(q_c.size(-1) + q_r.size(-1))).softmax(-1)      # (B, h, 1, t)
    o_lat = weights @ cache_c[:, None]                                           # (B, h, 1, d_c): mixed latents
    return o_lat.transpose(1, 2).reshape(B, q, -1) @ W_ov                        # heads summed: (B, 1, d_model)


def absorbed_step(q_c, q_r, cache_c, cache_kr, W_uk, W_uv, W_o):
    """One decoding step in the latent space (W_UK absorbed into the query, W_UV into W_O).

    q_c (B, h, 1, d_h), q_r (B, h, 1, d_R) the new position's queries (q_r rotated); cache_c (B, t, d_c) and
    cache_kr (B, t, d_R) the latents and rotated RoPE keys of every position up to the new one, included;
    W_uk, W_uv (h, d_h, d_c); W_o (d_model, h d_h), the output projection's weight. Returns (B, 1, d_model).
    """
    _check(q_c, q_r, cache_c, cache_kr, W_uk, W_uv)
    if W_o.dim() != 2 or W_o.size(1) != W_uk.size(0) * W_uk.size(1):
        raise ValueError(f"W_o must be (d_model, h d_h) = (d_model, {W_uk.size(0) * W_uk.size(1)}), the output "
                         f"projection's weight; got {tuple(W_o.shape)}")
    return absorbed_attend(q_c, q_r, cache_c, cache_kr, W_uk, absorbed_weights(W_uk, W_uv, W_o))


def unabsorbed_step(q_c, q_r, cache_c, cache_kr, W_uk, W_uv, W_o):
    """`absorbed_step` computed the plain way: every head's keys and values rebuilt from the cached latents
    ((B, h, t, d_h) each, at every step), attention, then W_O."""
    d_h, d_r = q_c.size(-1), q_r.size(-1)
    k_c, v = _per_head_keys(cache_c, W_uk), _per_head_keys(cache_c, W_uv)       # (B, h, t, d_h)
    scores = (q_c @ k_c.transpose(-2, -1) + q_r @ cache_kr[:, None].transpose(-2, -1)) / math.sqrt(d_h + d_r)
    out = scores.softmax(-1) @ v                                                 # (B, h, 1, d_h)
    return out.transpose(1, 2).reshape(q_c.size(0), 1, -1) @ W_o.T


class MultiHeadLatentAttention(nn.Module):
    """MLA as DeepSeek-V2 defines it, without the query compression (at this size it saves nothing):

    c_t = RMSNorm(W_DKV h_t) (`down`, `latent_norm`), k^R_t = RoPE(W_KR h_t) (`rope_key`),
    [q^C; q^R] = W_Q h_t (`q_proj`, q^R rotated), W_UK, W_UV (`up_k`, `up_v`), W_O (`o_proj`); no biases.
    forward(x) trains on every position; step(x, cache, position) decodes with the cache (c, k^R) and the
    absorbed step (`absorbed=False`: the per-head keys and values rebuilt at every step instead).
    """

    def __init__(self, d_model, num_heads, d_latent, d_rope, d_head=None, rope_base=10000.0):
        super().__init__()
        d_head = d_model // num_heads if d_head is None else d_head
        self.d_model, self.num_heads, self.d_head, self.d_latent, self.d_rope = \
            d_model, num_heads, d_head, d_latent, d_rope
        self.rope_base, self.absorbed = rope_base, True
        self.down = nn.Linear(d_model, d_latent, bias=False)                     # W_DKV
        self.latent_norm = RMSNorm(d_latent)
        self.up_k = nn.Linear(d_latent, num_heads * d_head, bias=False)          # W_UK, heads stacked
        self.up_v = nn.Linear(d_latent, num_heads * d_head, bias=False)          # W_UV
        self.rope_key = nn.Linear(d_model, d_rope, bias=False)                   # W_KR: one key for all heads
        self.q_proj = nn.Linear(d_model, num_heads * (d_head + d_rope), bias=False)
        self.o_proj = nn.Linear(num_heads * d_head, d_model, bias=False)         # W_O

    def heads(self, linear):
        """(h, d_h, d_c): a stacked up-projection's weight, one matrix per head."""
        return linear.weight.view(self.num_heads, self.d_head, self.d_latent)

    def latents(self, x, positions):
        """x (B, T, d_model) -> c (B, T, d_c), k_r (B, T, d_R) rotated: what the cache keeps."""
        return self.latent_norm(self.down(x)), apply_rope(self.rope_key(x), positions, self.rope_base)

    def queries(self, x, positions):
        """x (B, T, d_model) -> q_c (B, h, T, d_h), q_r (B, h, T, d_R) rotated."""
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.num_heads, self.d_head + self.d_rope).transpose(1, 2)
        q_c, q_r = q.split([self.d_head, self.d_rope], dim=-1)
        return q_c, apply_rope(q_r, positions, self.rope_base)

    def forward(self, x):
        positions = torch.arange(x.size(1), device=x.device)
        c, k_r = self.latents(x, positions)
        q_c, q_r = self.queries(x, positions)
        out = latent_attention(q_c, q_r, c, k_r, self.heads(self.up_k), self.heads(self.up_v))
        return self.o_proj(out.transpose(1, 2).reshape(x.size(0), x.size(1), -1))

    def step(self, x, cache, position):
        """x (B, 1, d_model) at `position`; cache (c (B, t, d_c), k_r (B, t, d_R)) or None -> (out, cache)."""
        positions = torch.tensor([position], device=x.device)
        c, k_r = self.latents(x, positions)
        if cache is not None:
            c, k_r = torch.cat([cache[0], c], dim=1), torch.cat([cache[1], k_r], dim=1)
        q_c, q_r = self.queries(x, positions)
        step = absorbed_step if self.absorbed else unabsorbed_step
        return step(q_c, q_r, c, k_r, self.heads(self.up_k), self.heads(self.up_v), self.o_proj.weight), (c, k_r)

    @staticmethod
    def cache_bytes(cache):
        return 0 if cache is None else sum(t.numel() * t.element_size() for t in cache)

    def extra_repr(self):
        return (f"heads={self.num_heads}, d_head={self.d_head}, d_latent={self.d_latent}, d_rope={self.d_rope}, "
                f"absorbed={self.absorbed}")


def cache_numbers(kind, num_heads, d_head, num_kv_heads=None, d_latent=None, d_rope=None):
    """Numbers one layer caches per token: MHA 2 h d_h, GQA 2 h_kv d_h, MQA 2 d_h, MLA d_c + d_R."""
    if kind == "MHA":
        return 2 * num_heads * d_head
    if kind == "GQA":
        return 2 * num_kv_heads * d_head
    if kind == "MQA":
        return 2 * d_head
    if kind == "MLA":
        return d_latent + d_rope
    raise ValueError(f"kind must be one of MHA, GQA, MQA, MLA, got {kind!r}")


@torch.no_grad()
def decode_timing(layer, steps, rounds=3, seed=0):
    """Time `layer` (a MultiHeadLatentAttention) decoding `steps` positions of one sequence, one at a time: the
    absorbed step (W_O W_UV computed once, as a real decoder does) against the step that rebuilds every head's keys
    and values from the cached latents, alternately `rounds` times (a busy machine slows both alike); the fastest
    of each. Returns {"absorbed_ms", "rebuilt_ms" (per step), "speedup", "same" (equal outputs)}."""
    x = torch.randn(1, steps, layer.d_model, generator=torch.Generator().manual_seed(seed))
    positions = torch.arange(steps)
    c, k_r = layer.latents(x, positions)
    q_c, q_r = layer.queries(x, positions)
    W_uk, W_uv, W_o = layer.heads(layer.up_k), layer.heads(layer.up_v), layer.o_proj.weight
    W_ov = absorbed_weights(W_uk, W_uv, W_o)
    runs = {"absorbed": lambda t: absorbed_attend(q_c[:, :, t:t + 1], q_r[:, :, t:t + 1], c[:, :t + 1], k_r[:, :t + 1],
                                            W_uk, W_ov),
            "rebuilt": lambda t: unabsorbed_step(q_c[:, :, t:t + 1], q_r[:, :, t:t + 1], c[:, :t + 1],
                                                 k_r[:, :t + 1], W_uk, W_uv, W_o)}
    seconds, outputs = {name: [] for name in runs}, {}
    for _ in range(rounds):
        for name, step in runs.items():
            start = time.perf_counter()
            outputs[name] = [step(t) for t in range(steps)]
            seconds[name].append(time.perf_counter() - start)
    best = {name: min(s) / steps * 1000 for name, s in seconds.items()}
    same = all(torch.allclose(a, b, atol=1e-4, rtol=1e-4) for a, b in zip(outputs["absorbed"], outputs["rebuilt"]))
    return {"absorbed_ms": best["absorbed"], "rebuilt_ms": best["rebuilt"],
            "speedup": best["rebuilt"] / best["absorbed"], "same": same}

"""Checks for lesson 11 (attention beyond text): SAGAN's 1×1-convolution attention, the γ-residual
block, and SNAIL's causal attention block. References: course_utils.vision, course_utils.snail."""
import math

import torch
import torch.nn as nn

from ..snail import causal_attention_block as _ref_causal_block
from ..snail import causal_mask
from ..vision import conv1x1
from ..vision import self_attention_2d as _ref_attention_2d
from .core import call, exercise, expect, expect_close, expect_distribution, expect_shape, randn, rng


def _pair(result, what):
    expect(isinstance(result, (tuple, list)) and len(result) == 2,
           f"{what} should return a pair (output, weights), got {type(result).__name__}"
           + (" (did you forget to `return`?)" if result is None else "."))
    return result


def _softmax_masked(scores, mask=None, dim=-1):
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=dim)


# --- exercise 1: attention over the pixels of a feature map --------------------------------------
@exercise("self_attention_2d (1×1-convolution attention)")
def self_attention_2d(fn):
    tests = 0
    for seed, (B, C, H, W, d_key, C_v) in enumerate([(2, 8, 3, 5, 4, 6), (1, 4, 4, 4, 2, 4), (3, 6, 2, 7, 3, 5)]):
        g = rng(110 + seed)
        x, W_f, W_g, W_h = randn(g, B, C, H, W), randn(g, d_key, C), randn(g, d_key, C), randn(g, C_v, C)
        o, weights = _pair(call(fn, x, W_f, W_g, W_h), "self_attention_2d")
        N = H * W
        expect_shape(weights, (B, N, N), f"weights (for x of shape {(B, C, H, W)}, N = H·W = {N})")
        expect_shape(o, (B, C_v, H, W), f"o (for x of shape {(B, C, H, W)} and W_h of shape {(C_v, C)})")
        ref_o, ref_w = _ref_attention_2d(x, W_f, W_g, W_h)
        k = conv1x1(x, W_f).flatten(2).transpose(1, 2)              # (B, N, d_key)
        q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
        v = conv1x1(x, W_h).flatten(2).transpose(1, 2)              # (B, N, C_v)
        scores = q @ k.transpose(1, 2)
        expect_close(weights, ref_w, "weights", mistakes={
            "the weights are normalised over the queries (dim 1), not the keys: take the softmax over "
            "the last axis, so that each pixel's row sums to 1.": torch.softmax(scores / math.sqrt(d_key), dim=1),
            "the scores are not divided by √d_key: scale q·k by 1/math.sqrt(d_key) before the softmax.":
                torch.softmax(scores, dim=-1),
            "queries and keys are swapped: the queries are g(x) = W_g x and the keys f(x) = W_f x.":
                torch.softmax(scores.transpose(1, 2) / math.sqrt(d_key), dim=-1),
        })
        expect_distribution(weights, "weights (each query pixel's row)", axis=-1)
        expect_close(o, ref_o, "o", mistakes={
            "o has the right shape but its values are scrambled: weights @ v is (B, N, C_v); transpose it "
            "to (B, C_v, N) before reshaping to (B, C_v, H, W).": (ref_w @ v).reshape(B, C_v, H, W),
            "o uses the transposed weights: o_j = Σ_i weights[j, i] h_i, i.e. weights @ v.":
                (ref_w.transpose(1, 2) @ v).transpose(1, 2).reshape(B, C_v, H, W),
        })
        tests += 1
    return tests


# --- exercise 2: the block y = x + γ·o -------------------------------------------------------------
def _attend_maps(query_map, key_map, value_map):
    """Attention over positions given already projected maps (B, *, H, W)."""
    B, _, H, W = value_map.shape
    q, k, v = (m.flatten(2).transpose(1, 2) for m in (query_map, key_map, value_map))
    weights = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(k.size(-1)), dim=-1)
    return (weights @ v).transpose(1, 2).reshape(B, -1, H, W)


@exercise("SelfAttention2d (γ-residual block)", name="SelfAttention2d")
def self_attention_block(cls):
    channels = 16
    module = call(cls, channels)
    expect(isinstance(module, nn.Module), f"SelfAttention2d({channels}) should be an nn.Module, "
                                          f"got {type(module).__name__}.")
    for name, what in (("f", "keys"), ("g", "queries"), ("h", "values")):
        conv = getattr(module, name, None)
        expect(isinstance(conv, nn.Conv2d) and tuple(conv.kernel_size) == (1, 1) and conv.in_channels == channels,
               f"self.{name} ({what}) should be an nn.Conv2d({channels}, ..., kernel_size=1).")
    expect(module.h.out_channels == channels,
           f"self.h should map {channels} channels to {channels} (o is added to x), got {module.h.out_channels}.")
    gamma = getattr(module, "gamma", None)
    expect(gamma is not None, "the module has no attribute `gamma`: add self.gamma = nn.Parameter(torch.zeros(1)).")
    expect(isinstance(gamma, nn.Parameter),
           f"self.gamma is a {type(gamma).__name__}, not an nn.Parameter: the optimiser would never change it. "
           "Use self.gamma = nn.Parameter(torch.zeros(1)).")
    expect(bool(torch.all(gamma.detach() == 0)),
           f"γ should start at 0 (it starts at {gamma.detach().flatten()[0].item():.3g}): the block must begin "
           "as the identity, y = x, so that the untrained attention adds no noise.")
    g = rng(120)
    x = randn(g, 2, channels, 4, 5)
    with torch.no_grad():
        y0 = call(module, x)
        expect_shape(y0, tuple(x.shape), "y")
        o = _attend_maps(module.g(x), module.f(x), module.h(x))
    expect_close(y0, x, "y at initialisation (γ = 0)", mistakes={
        "y is 0 at initialisation: the residual is missing; return x + self.gamma * o.": torch.zeros_like(x),
        "y = x + o at initialisation: γ is not used; return x + self.gamma * o.": x + o,
        "y = o at initialisation: γ multiplies the wrong term; return x + self.gamma * o.": o,
    })
    with torch.no_grad():
        gamma.fill_(0.5)
        y = call(module, x)
    expect_close(y, x + 0.5 * o, "y with γ = 0.5", mistakes={
        "y = γ·o: the residual is missing; return x + self.gamma * o.": 0.5 * o,
        "y = x + o: γ is not used; return x + self.gamma * o.": x + o,
        "y = γ·x + o: γ multiplies the wrong term; return x + self.gamma * o.": 0.5 * x + o,
    }, atol=1e-4)
    weights = getattr(module, "attn_weights", None)
    expect(weights is not None and tuple(weights.shape) == (2, 20, 20),
           "keep the last attention weights on self.attn_weights, shape (B, N, N) = (2, 20, 20) here, "
           "so that the lesson can plot them.")
    module.zero_grad()
    call(module, x).sum().backward()
    expect(gamma.grad is not None and float(gamma.grad.abs().sum()) > 0,
           "no gradient reaches γ: compute y = x + self.gamma * o with torch operations (no .item(), no .detach()).")
    return 5


# --- exercise 3: SNAIL's causal attention block ----------------------------------------------------
@exercise("causal_attention_block (SNAIL)")
def causal_attention_block(fn):
    tests = 0
    for seed, (B, T, d_in, d_key, d_value) in enumerate([(2, 7, 6, 4, 5), (1, 5, 3, 2, 3), (3, 9, 8, 8, 4)]):
        g = rng(130 + seed)
        x, W_q, W_k, W_v = randn(g, B, T, d_in), randn(g, d_in, d_key), randn(g, d_in, d_key), randn(g, d_in, d_value)
        out, weights = _pair(call(fn, x, W_q, W_k, W_v), "causal_attention_block")
        expect_shape(weights, (B, T, T), "weights")
        ref_out, ref_w = _ref_causal_block(x, W_q, W_k, W_v)
        q, k, v = x @ W_q, x @ W_k, x @ W_v
        scores = q @ k.transpose(1, 2) / math.sqrt(d_key)
        mask = causal_mask(T)
        expect_close(weights, ref_w, "weights", mistakes={
            "the causal mask is flipped: position t attends to the future (s > t). Keep s <= t, i.e. "
            "True on and below the diagonal.": _softmax_masked(scores, ~torch.triu(torch.ones(T, T, dtype=torch.bool), 1).T),
            "no causal mask: position t attends to every position, the future included.": torch.softmax(scores, -1),
            "the scores are not divided by √d_key: scale q·k by 1/math.sqrt(d_key) before the softmax.":
                _softmax_masked(scores * math.sqrt(d_key), mask),
            "masked scores were set to 0 instead of -inf: exp(0) = 1 still gives the future some weight.":
                torch.softmax(scores.masked_fill(~mask, 0.0), -1),
            "the softmax is over the queries (dim 1), not the keys: use dim=-1.": _softmax_masked(scores, mask, dim=1),
        })
        expect_distribution(weights, "weights (each position's row)", axis=-1)
        expect(bool(torch.all(weights.detach()[:, ~mask] == 0)),
               "some position gives weight to a later position: the causal mask is not applied.")
        read = ref_w @ v
        expect_close(out, ref_out, "the block's output", mistakes={
            f"the output should be [x, read] concatenated on the last axis, shape (B, T, d_in + d_value) = "
            f"{(B, T, d_in + d_value)}: return torch.cat([x, weights @ v], dim=-1).": read,
            "x and the read-out are concatenated in the wrong order: torch.cat([x, read], dim=-1).":
                torch.cat([read, x], -1),
        })
        tests += 1
    # causality: changing the future leaves the past unchanged
    g = rng(139)
    x, W_q, W_k, W_v = randn(g, 1, 8, 4), randn(g, 4, 4), randn(g, 4, 4), randn(g, 4, 3)
    t = 3
    changed = x.clone()
    changed[:, t + 1:] = randn(g, 1, 8 - t - 1, 4)
    before, _ = _pair(call(fn, x, W_q, W_k, W_v), "causal_attention_block")
    after, _ = _pair(call(fn, changed, W_q, W_k, W_v), "causal_attention_block")
    expect(torch.allclose(before[:, :t + 1], after[:, :t + 1], atol=1e-5),
           f"the output at positions 0..{t} changed when positions {t + 1}..7 changed: the block looks at the "
           "future; mask the scores of keys s > t with -inf before the softmax.")
    return tests + 1


__all__ = ["self_attention_2d", "self_attention_block", "causal_attention_block"]

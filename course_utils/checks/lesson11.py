"""Checks for lesson 11 (attention beyond text), in the lesson's order: SAGAN's 1×1-convolution
attention, the γ-residual block, SNAIL's dense block (a gated causal dilated convolution) and SNAIL's
causal attention block. References: course_utils.vision and course_utils.snail."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..snail import DenseBlock, causal_mask
from ..snail import causal_attention_block as _ref_causal_block
from ..vision import SelfAttention2d, conv1x1
from ..vision import self_attention_2d as _ref_attention_2d
from .core import (
    ExerciseError,
    call,
    exercise,
    expect,
    expect_close,
    expect_distribution,
    expect_returns,
    expect_shape,
    randn,
    rng,
    single_threaded,
)


def _softmax_masked(scores, mask=None, dim=-1):
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=dim)


def _divided_by_max(scores, mask=None):
    """exp(s) / max exp(s): a "softmax" normalised by the row's maximum instead of its sum."""
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.exp(scores - scores.amax(-1, keepdim=True))


def _wrong_scales(raw, d_key, sizes, mask=None):
    """{symptom: weights} for scores q·k divided by the wrong size; sizes = {name: (size, what it is)}."""
    mistakes = {}
    for name, (size, what) in sizes.items():
        if size != d_key:
            mistakes.setdefault(f"the scores are divided by √{name} ({what}), not by √d_key (the size of a query "
                                "and a key): use math.sqrt(d_key), e.g. math.sqrt(k.size(-1)).",
                                _softmax_masked(raw / math.sqrt(size), mask))
    mistakes["the scores are divided by d_key, not by its square root √d_key."] = _softmax_masked(raw / d_key, mask)
    return mistakes


# --- exercise 1: attention over the pixels of a feature map --------------------------------------
@exercise("self_attention_2d (1×1-convolution attention)", reference=_ref_attention_2d)
@single_threaded
def self_attention_2d(fn):
    tests = 0
    # d_key, C_v, C, N = H·W and d_key² all differ, so that dividing by the wrong size shows
    for seed, (B, C, H, W, d_key, C_v) in enumerate([(2, 8, 3, 5, 4, 6), (1, 5, 4, 4, 2, 3), (3, 6, 2, 7, 3, 5)]):
        g = rng(110 + seed)
        x, W_f, W_g, W_h = randn(g, B, C, H, W), randn(g, d_key, C), randn(g, d_key, C), randn(g, C_v, C)
        N = H * W
        ref_o, ref_w = _ref_attention_2d(x, W_f, W_g, W_h)
        o, weights = expect_returns(call(fn, x, W_f, W_g, W_h), (ref_o, ref_w), ("o", "weights"))
        expect_shape(weights, (B, N, N), f"weights (for x of shape {(B, C, H, W)}, N = H·W = {N})")
        k = conv1x1(x, W_f).flatten(2).transpose(1, 2)              # (B, N, d_key)
        q = conv1x1(x, W_g).flatten(2).transpose(1, 2)              # (B, N, d_key)
        v = conv1x1(x, W_h).flatten(2).transpose(1, 2)              # (B, N, C_v)
        raw = q @ k.transpose(1, 2)                                 # (B, N, N), not yet scaled
        scores = raw / math.sqrt(d_key)
        mistakes = {
            "the weights are normalised over the queries (dim 1), not the keys: take the softmax over "
            "the last axis, so that each pixel's row sums to 1.": torch.softmax(scores, dim=1),
            "queries and keys are swapped: the queries are g(x) = W_g x and the keys f(x) = W_f x.":
                torch.softmax(scores.transpose(1, 2), dim=-1),
            "the weights are divided by their largest value, not by their sum: softmax(s)_i = "
            "exp(s_i) / Σ_i' exp(s_i').": _divided_by_max(scores),
            "the weights are the scores themselves: apply the softmax over the keys (the last axis).": scores,
            "the scores are not divided by √d_key: scale q·k by 1/math.sqrt(d_key) before the softmax.":
                torch.softmax(raw, dim=-1),
        }
        mistakes.update(_wrong_scales(raw, d_key, {"C_v": (C_v, "the size of a value"), "N": (N, "the number of "
                                                   "pixels"), "C": (C, "the channels of x")}))
        expect_close(weights, ref_w, "weights", mistakes=mistakes)
        expect_distribution(weights, "weights (each query pixel's row)", axis=-1)
        expect_close(o, ref_o, "o", mistakes={
            "o has the right shape but its values are scrambled: weights @ v is (B, N, C_v); transpose it "
            "to (B, C_v, N) before reshaping to (B, C_v, H, W).": (ref_w @ v).reshape(B, C_v, H, W),
            f"o is still (B, N, C_v) = {(B, N, C_v)}: transpose it to (B, C_v, N) and reshape to (B, C_v, H, W).":
                ref_w @ v,
            "o uses the transposed weights: o_j = Σ_i weights[j, i] h_i, i.e. weights @ v.":
                (ref_w.transpose(1, 2) @ v).transpose(1, 2).reshape(B, C_v, H, W),
            "o mixes x itself, not the values: the values are h(x) = W_h x (conv1x1(x, W_h)).":
                (ref_w @ x.flatten(2).transpose(1, 2)).transpose(1, 2).reshape(B, C, H, W),
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


@exercise("SelfAttention2d (γ-residual block)", name="SelfAttention2d", reference=SelfAttention2d)
@single_threaded
def self_attention_block(cls):
    channels = 16
    module = call(cls, channels)
    expect(isinstance(module, nn.Module), f"SelfAttention2d({channels}) should be an nn.Module, "
                                          f"got {type(module).__name__}.")
    for name, what in (("f", "keys"), ("g", "queries"), ("h", "values")):
        conv = getattr(module, name, None)
        expect(isinstance(conv, nn.Conv2d) and tuple(conv.kernel_size) == (1, 1) and conv.in_channels == channels,
               f"self.{name} ({what}) should be an nn.Conv2d({channels}, ..., kernel_size=1).")
    expect(module.f.out_channels == module.g.out_channels,
           f"self.f (keys) and self.g (queries) should have the same number of output channels, d_key "
           f"(got {module.f.out_channels} and {module.g.out_channels}): q·k needs vectors of one size.")
    expect(module.h.out_channels == channels,
           f"self.h should map {channels} channels to {channels} (o is added to x), got {module.h.out_channels}.")
    gamma = getattr(module, "gamma", None)
    expect(gamma is not None, "the module has no attribute `gamma`: add self.gamma = nn.Parameter(torch.zeros(1)).")
    expect(isinstance(gamma, nn.Parameter),
           f"self.gamma is a {type(gamma).__name__}, not an nn.Parameter: the optimiser would never change it. "
           "Use self.gamma = nn.Parameter(torch.zeros(1)).")
    expect(gamma.numel() == 1, f"γ is one learned scalar, got a parameter of shape {tuple(gamma.shape)}: "
                               "use self.gamma = nn.Parameter(torch.zeros(1)).")
    expect(bool(torch.all(gamma.detach() == 0)),
           f"γ should start at 0 (it starts at {gamma.detach().flatten()[0].item():.3g}): the block must begin "
           "as the identity, y = x, so that the untrained attention adds no noise.")
    g = rng(120)
    x = randn(g, 2, channels, 4, 5)
    with torch.no_grad():
        y0 = call(module, x)
        expect_shape(y0, tuple(x.shape), "y")
        o = _attend_maps(module.g(x), module.f(x), module.h(x))
        o_swapped = _attend_maps(module.f(x), module.g(x), module.h(x))
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
        "keys and queries are swapped: pass self.f's matrix as W_f (the keys) and self.g's as W_g (the queries).":
            x + 0.5 * o_swapped,
        "y = x + γ·x: o is missing; add the attention output, x + self.gamma * o.": 1.5 * x,
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


# --- exercise 3: SNAIL's dense block (a gated causal dilated convolution) -------------------------
def dense_block_reference(x, W_f, W_g, dilation):
    """The exercise's signature around course_utils.snail.DenseBlock (biases 0).

    x: (B, T, d_in); W_f, W_g: (2, d_in, filters), W[0] on x_t and W[1] on x_{t−d}.
    """
    d_in, filters = W_f.shape[1:]
    with torch.random.fork_rng(devices=[]):          # building the block draws random weights: keep the seed
        block = DenseBlock(d_in, filters, dilation)
    with torch.no_grad():
        for conv, W in ((block.conv_f.conv, W_f), (block.conv_g.conv, W_g)):
            conv.weight.copy_(torch.stack([W[1].T, W[0].T], dim=-1))   # nn.Conv1d's tap 0 is x_{t−d}, tap 1 x_t
            conv.bias.zero_()
        return block(x)                                               # (B, T, d_in + filters)


def _delayed(x, d):
    """x_{t−d} along time (B, T, C), zeros where t − d is outside 0..T−1 (d < 0: the future)."""
    T = x.shape[1]
    if d >= 0:
        return F.pad(x, (0, 0, d, 0))[:, :T]
    return F.pad(x, (0, 0, 0, -d))[:, -d:]


def _gated(x, W_f, W_g, past, present=True, taps=(0, 1), act_f=torch.tanh, act_g=torch.sigmoid):
    """The new features tanh(W_f^(0) x_t + W_f^(1) past_t) ⊙ σ(...), or a mistaken variant of them."""
    def conv(W):
        out = past @ W[taps[1]] if past is not None else 0
        return out + (x @ W[taps[0]] if present else 0)
    return act_f(conv(W_f)) * act_g(conv(W_g))


def _dense_mistakes(x, W_f, W_g, d):
    """{symptom: what a dense block with that mistake returns}, x (B, T, d_in)."""
    past = _delayed(x, d)
    new = _gated(x, W_f, W_g, past)
    cat = lambda features: torch.cat([x, features], dim=-1)
    mistakes = {}
    if d != 1:
        mistakes[f"the dilation is ignored: step t is mixed with x_{{t−1}}, not x_{{t−d}} (d = {d} here); delay x "
                 f"by d steps, with d zeros on the left."] = cat(_gated(x, W_f, W_g, _delayed(x, 1)))
    mistakes.update({
        f"the past tap is off by one: step t is mixed with x_{{t−d+1}}, not x_{{t−d}} (d = {d} here); pad with "
        f"exactly d zeros on the left and keep the first T steps.": cat(_gated(x, W_f, W_g, _delayed(x, d - 1))),
        f"the past tap is off by one: step t is mixed with x_{{t−d−1}}, not x_{{t−d}} (d = {d} here); pad with "
        f"exactly d zeros on the left and keep the first T steps.": cat(_gated(x, W_f, W_g, _delayed(x, d + 1))),
        "the kernel's two taps are swapped: W[0] multiplies the present x_t and W[1] the past x_{t−d} "
        "(with F.conv1d, whose tap 0 is the older input, the kernel is torch.stack([W[1].T, W[0].T], -1)).":
            cat(_gated(x, W_f, W_g, past, taps=(1, 0))),
        "tanh and σ are swapped (or W_f and W_g): the filter W_f goes through tanh, the gate W_g through σ.":
            cat(_gated(x, W_f, W_g, past, act_f=torch.sigmoid, act_g=torch.tanh)),
        "the gate is missing: multiply tanh(filter) by σ(gate), elementwise.":
            cat(_gated(x, W_f, W_g, past, act_g=lambda z: 1.0)),
        "the present step is missing: each convolution is W^(0) x_t + W^(1) x_{t−d}, both taps.":
            cat(_gated(x, W_f, W_g, past, present=False)),
        "the past step is missing: each convolution is W^(0) x_t + W^(1) x_{t−d}, both taps.":
            cat(_gated(x, W_f, W_g, None)),
        "the output should be [x, new features] concatenated on the last axis, shape (B, T, d_in + filters): "
        "return torch.cat([x, new], dim=-1).": new,
        "x and the new features are concatenated in the wrong order: torch.cat([x, new], dim=-1), x first.":
            torch.cat([new, x], dim=-1),
    })
    return mistakes


def _future_mistakes(x, W_f, W_g, d):
    """The dense blocks that look into the future, and what each one returns."""
    T = x.shape[1]
    rolled = torch.roll(x, d, dims=1)                   # x_{(t−d) mod T}: the last d steps wrap to the start
    return {
        f"the block looks into the future: step t is mixed with x_{{t+d}}, not x_{{t−d}}: the d = {d} zeros "
        "are padded on the right; pad on the LEFT (F.pad(x, (0, 0, d, 0)) for x of shape (B, T, C)).":
            torch.cat([x, _gated(x, W_f, W_g, _delayed(x, -d))], -1),
        f"the block looks into the future: torch.roll wraps the last d = {d} steps round to the start, so steps "
        f"0..{d - 1} see the end of the sequence; pad with d zeros on the left instead.":
            torch.cat([x, _gated(x, W_f, W_g, rolled)], -1) if d < T else None,
    }


def _expect_causal(fn, x, W_f, W_g, d, out, t):
    """Changing the inputs after step t leaves the outputs at steps 0..t unchanged; else name the leak."""
    g = rng(1000 + d)
    changed = x.clone()
    changed[:, t + 1:] = randn(g, x.shape[0], x.shape[1] - t - 1, x.shape[2])
    after = call(fn, changed, W_f, W_g, d)
    if not hasattr(after, "shape") or tuple(after.shape) != tuple(out.shape):
        return
    diff = (after[:, :t + 1] - out[:, :t + 1]).detach().abs().amax(dim=(0, 2))     # (t + 1,)
    if not bool(torch.any(diff > 1e-5)):
        return
    for symptom, wrong in _future_mistakes(x, W_f, W_g, d).items():
        if wrong is not None and tuple(wrong.shape) == tuple(out.shape) and torch.allclose(out, wrong, atol=1e-5):
            raise ExerciseError(symptom)
    s = int(torch.nonzero(diff > 1e-5)[0])
    raise ExerciseError(f"the output at step {s} changed when only the inputs after step {t} changed: the block "
                        "looks into the future. Pad with d zeros on the LEFT only (not on the right, not on both "
                        "sides), so that step t mixes x_t with x_{t−d}, zero when t < d.")


@exercise("dense_block (SNAIL's gated causal convolution)", reference=dense_block_reference)
@single_threaded
def dense_block(fn):
    tests = 0
    # d_in ≠ filters (a missing concatenation shows in the shape); dilations 4, 2, 1 with T > d
    for seed, (B, T, d_in, filters, d) in enumerate([(2, 11, 3, 5, 4), (1, 9, 4, 2, 2), (3, 6, 5, 3, 1)]):
        g = rng(125 + seed)
        x = randn(g, B, T, d_in)
        W_f, W_g = randn(g, 2, d_in, filters), randn(g, 2, d_in, filters)
        try:
            out = call(fn, x, W_f, W_g, d)
        except ExerciseError as error:
            if "Sizes of tensors must match" not in str(error):
                raise
            raise ExerciseError(f"x and the new features could not be concatenated: they have different numbers "
                                f"of steps. The convolution must keep all T steps: pad x with d = {d} zeros on the "
                                f"left (and only on the left) before it.\n  {error}") from None
        expect(hasattr(out, "shape"), f"dense_block should return a tensor of shape (B, T, d_in + filters), got "
                                      f"{type(out).__name__}" + (" (did you forget to `return`?)." if out is None
                                                                 else "."))
        if len(out.shape) == 3 and out.shape[1] != T:
            expect(out.shape[1] > T, f"the output has {out.shape[1]} steps, not T = {T}: the convolution "
                                     f"dropped d = {d} steps. Pad x with d zeros on the left first, so that every "
                                     "step t has an x_{t−d} (zero when t < d).")
            raise ExerciseError(f"the output has {out.shape[1]} steps, not T = {T}: padding on both sides adds "
                                f"steps. Pad x with d = {d} zeros on the left only.")
        expected = dense_block_reference(x, W_f, W_g, d)
        mistakes = _dense_mistakes(x, W_f, W_g, d)
        if tuple(out.shape) != tuple(expected.shape):      # names a missing concatenation, else the shapes
            expect_close(out, expected, f"the block's output (x of shape {(B, T, d_in)}, {filters} filters)",
                         mistakes=mistakes)
        _expect_causal(fn, x, W_f, W_g, d, out, t=T // 2)
        expect_close(out, expected, "the block's output", mistakes=mistakes)
        tests += 1
    return tests + 1


# --- exercise 4: SNAIL's causal attention block ----------------------------------------------------
@exercise("causal_attention_block (SNAIL)", reference=_ref_causal_block)
@single_threaded
def causal_attention_block(fn):
    tests = 0
    # d_key, d_value, T, d_in differ (a scale by the wrong size shows); T ≠ d_in + d_value (the two outputs
    # have different shapes, so values returned in the wrong order are named)
    for seed, (B, T, d_in, d_key, d_value) in enumerate([(2, 7, 6, 4, 5), (1, 5, 3, 2, 6), (3, 10, 8, 3, 6)]):
        g = rng(130 + seed)
        x, W_q, W_k, W_v = randn(g, B, T, d_in), randn(g, d_in, d_key), randn(g, d_in, d_key), randn(g, d_in, d_value)
        ref_out, ref_w = _ref_causal_block(x, W_q, W_k, W_v)
        out, weights = expect_returns(call(fn, x, W_q, W_k, W_v), (ref_out, ref_w), ("out", "weights"))
        expect_shape(weights, (B, T, T), "weights")
        q, k, v = x @ W_q, x @ W_k, x @ W_v
        raw = q @ k.transpose(1, 2)
        scores = raw / math.sqrt(d_key)
        mask = causal_mask(T)
        ones = torch.ones(T, T, dtype=torch.bool)
        mistakes = {
            "the causal mask is flipped: position t attends to the future (s > t). Keep s <= t, i.e. "
            "True on and below the diagonal.": _softmax_masked(scores, ~torch.triu(ones, 1).T),
            "no causal mask: position t attends to every position, the future included.": torch.softmax(scores, -1),
            "the mask is off by one: position t also attends to t + 1. Keep s <= t (torch.tril(..., diagonal=0)).":
                _softmax_masked(scores, torch.tril(ones, 1)),
            "the mask leaves out the diagonal: position t may attend to s <= t, itself included (row 0 then has "
            "no key at all and gives NaN).": _softmax_masked(scores, torch.tril(ones, -1)),
            "masked scores were set to 0 instead of -inf: exp(0) = 1 still gives the future some weight.":
                torch.softmax(scores.masked_fill(~mask, 0.0), -1),
            "the mask is applied after the softmax: the rows no longer sum to 1. Set the masked scores to -inf "
            "before the softmax.": torch.softmax(scores, -1) * mask,
            "the softmax is over the queries (dim 1), not the keys: use dim=-1.": _softmax_masked(scores, mask, dim=1),
            "the weights are divided by their largest value, not by their sum: softmax(s)_s = "
            "exp(s_s) / Σ_s' exp(s_s').": _divided_by_max(scores, mask),
            "the scores are not divided by √d_key: scale q·k by 1/math.sqrt(d_key) before the softmax.":
                _softmax_masked(raw, mask),
        }
        mistakes.update(_wrong_scales(raw, d_key, {"d_value": (d_value, "the size of a value"), "T": (T, "the "
                                                   "number of steps"), "d_in": (d_in, "the size of an input")},
                                      mask))
        expect_close(weights, ref_w, "weights", mistakes=mistakes)
        expect_distribution(weights, "weights (each position's row)", axis=-1)
        expect(bool(torch.all(weights.detach()[:, ~mask] == 0)),
               "some position gives weight to a later position: the causal mask is not applied.")
        read = ref_w @ v
        expect_close(out, ref_out, "the block's output", mistakes={
            f"the output should be [x, read] concatenated on the last axis, shape (B, T, d_in + d_value) = "
            f"{(B, T, d_in + d_value)}: return torch.cat([x, weights @ v], dim=-1).": read,
            "x and the read-out are concatenated in the wrong order: torch.cat([x, read], dim=-1).":
                torch.cat([read, x], -1),
            "the read-out mixes x itself, not the values: v = x @ W_v.": torch.cat([x, ref_w @ x], -1),
            "the read-out uses the transposed weights: read_t = Σ_s weights[t, s] v_s, i.e. weights @ v.":
                torch.cat([x, ref_w.transpose(1, 2) @ v], -1),
        })
        tests += 1
    # causality: changing the future leaves the past unchanged
    g = rng(139)
    x, W_q, W_k, W_v = randn(g, 1, 8, 4), randn(g, 4, 4), randn(g, 4, 4), randn(g, 4, 3)
    t = 3
    changed = x.clone()
    changed[:, t + 1:] = randn(g, 1, 8 - t - 1, 4)
    reference = _ref_causal_block(x, W_q, W_k, W_v)
    before, _ = expect_returns(call(fn, x, W_q, W_k, W_v), reference, ("out", "weights"))
    after, _ = expect_returns(call(fn, changed, W_q, W_k, W_v), _ref_causal_block(changed, W_q, W_k, W_v),
                              ("out", "weights"))
    expect(torch.allclose(before[:, :t + 1], after[:, :t + 1], atol=1e-5),
           f"the output at positions 0..{t} changed when positions {t + 1}..7 changed: the block looks at the "
           "future; mask the scores of keys s > t with -inf before the softmax.")
    return tests + 1


__all__ = ["self_attention_2d", "self_attention_block", "dense_block", "causal_attention_block",
           "dense_block_reference"]

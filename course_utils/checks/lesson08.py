"""Checks for lesson 08: splitting and merging heads, multi-head attention, positional encoding."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .. import attention as ref
from .. import masks
from .core import (
    exercise,
    expect,
    expect_distribution,
    expect_shape,
    randn,
    single_threaded,
    to_numpy,
)
from .evaluation import Evaluation


def _x(ev: Evaluation, seed, *shape):
    return randn(ev.rng(seed), *shape)


class ReferenceMultiHeadAttention(nn.Module):
    """The answer to the exercise, written with the course's tested functions (same layers as the notebook's)."""

    def __init__(self, d_model, num_heads):
        super().__init__()
        self.num_heads, self.d_head = num_heads, d_model // num_heads
        self.w_q, self.w_k = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.w_v, self.w_o = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.attn_weights = None

    def forward(self, query, key, value, mask=None):
        q, k, v = (ref.split_heads(w(t), self.num_heads) for w, t in ((self.w_q, query), (self.w_k, key),
                                                                      (self.w_v, value)))
        out, self.attn_weights = ref.scaled_dot_product_attention(q, k, v, mask, need_weights=True)
        return self.w_o(ref.merge_heads(out))


@exercise("split heads", reference=ref.split_heads)
@single_threaded
def split_heads(ev: Evaluation, answer):
    """answer(x (B, T, d_model), num_heads) -> (B, num_heads, T, d_head)."""
    tests = 0
    for seed, (B, T, d_model, h) in enumerate([(2, 5, 12, 3), (1, 7, 16, 4), (3, 4, 8, 2)]):
        x = _x(ev, seed, B, T, d_model)
        d_head = d_model // h
        out = ev.call(answer, x, h)
        ev.expect_close(out, ref.split_heads(x, h), f"split_heads(x {tuple(x.shape)}, num_heads={h})", mistakes={
            "the heads are cut across positions: `x.view(B, num_heads, T, d_head)` mixes time steps; "
            "view as (B, T, num_heads, d_head) first, then `.transpose(1, 2)`": x.reshape(B, h, T, d_head),
            "the heads take every num_heads-th feature: head i must get the CONTIGUOUS block of features "
            "i*d_head ... (i+1)*d_head-1, i.e. view as (B, T, num_heads, d_head)":
                x.view(B, T, d_head, h).permute(0, 3, 1, 2),
            "the result is (B, T, num_heads, d_head): move the head axis in front of time with "
            "`.transpose(1, 2)`": x.view(B, T, h, d_head),
        })
        tests += 1
    return tests


@exercise("merge heads", reference=ref.merge_heads)
@single_threaded
def merge_heads(ev: Evaluation, answer):
    """answer(x (B, num_heads, T, d_head)) -> (B, T, num_heads * d_head), the inverse of split_heads."""
    tests = 0
    for seed, (B, h, T, d_head) in enumerate([(2, 3, 5, 4), (1, 4, 7, 2), (3, 2, 4, 6)]):
        x = _x(ev, seed, B, h, T, d_head)
        out = ev.call(answer, x)
        ev.expect_close(out, ref.merge_heads(x), f"merge_heads(x {tuple(x.shape)})", mistakes={
            "the heads are merged in the wrong order: reshaping (B, num_heads, T, d_head) directly mixes "
            "positions; `.transpose(1, 2)` to (B, T, num_heads, d_head) first, then reshape":
                x.reshape(B, T, h * d_head),
            "the features are interleaved across heads: concatenate head 1's d_head features, then head 2's "
            "... (transpose(1, 2), not a permute that puts d_head before the heads)":
                x.permute(0, 2, 3, 1).reshape(B, T, h * d_head),
            "the result is (B, T, num_heads, d_head): reshape it to (B, T, num_heads * d_head)":
                x.transpose(1, 2),
            "the heads are stacked along time, (B, num_heads * T, d_head): concatenate them along the FEATURES, "
            "(B, T, num_heads * d_head), e.g. `x.transpose(1, 2).reshape(B, T, -1)`": x.reshape(B, h * T, d_head),
        })
        x = _x(ev, seed, B, T, h * d_head)
        ev.expect_close(ev.call(answer, ref.split_heads(x, h)), x,
                        "merge_heads(split_heads(x))", hint="merge_heads must undo split_heads.")
        tests += 1
    return tests


def _multi_head(weights, query, key, value, h, mask=None, scale="d_head", split="ok", merge="ok",
                out_proj=True, dim=-1, projections="qkv", invert=False):
    """Multi-head attention from raw weights, with or without a typical mistake."""
    W_q, W_k, W_v, b_q, b_k, b_v, W_o, b_o = weights
    if projections == "q":  # the query's projection used for all three
        W_k, W_v, b_k, b_v = W_q, W_q, b_q, b_q
    q, k, v = F.linear(query, W_q, b_q), F.linear(key, W_k, b_k), F.linear(value, W_v, b_v)
    B, d_model = q.size(0), q.size(-1)
    d_head = d_model // h
    if split == "ok":
        q, k, v = (ref.split_heads(t, h) for t in (q, k, v))
    else:  # view straight as (B, h, T, d_head)
        q, k, v = (t.reshape(B, h, t.size(1), d_head) for t in (q, k, v))
    scores = q @ k.transpose(-2, -1)
    scores = scores / math.sqrt({"d_head": d_head, "d_model": d_model, "T_k": k.size(-2), "none": 1}[scale])
    if mask is not None:
        keep = mask if mask.dim() != 3 else mask[:, None]
        keep = ~keep if invert else keep
        has_key = keep.any(-1, keepdim=True)                           # as the course's attention: empty rows -> 0
        weights = scores.masked_fill(~(keep | ~has_key), float("-inf")).softmax(dim) * has_key
    else:
        weights = scores.softmax(dim)
    out = weights @ v                                                   # (B, h, T_q, d_head)
    out = ref.merge_heads(out) if merge == "ok" else out.reshape(B, -1, d_model)
    return F.linear(out, W_o, b_o) if out_proj else out


def _copy_weights(module, theirs):
    W_q, W_k, W_v = theirs.in_proj_weight.detach().chunk(3)
    b_q, b_k, b_v = theirs.in_proj_bias.detach().chunk(3)
    with torch.no_grad():
        for name, W, b in (("w_q", W_q, b_q), ("w_k", W_k, b_k), ("w_v", W_v, b_v),
                           ("w_o", theirs.out_proj.weight, theirs.out_proj.bias)):
            layer = getattr(module, name)
            expect(isinstance(layer, nn.Linear) and tuple(layer.weight.shape) == tuple(W.shape),
                   f"self.{name} should be nn.Linear(d_model, d_model) as given in __init__.")
            layer.weight.copy_(W)
            layer.bias.copy_(b)
    return (W_q, W_k, W_v, b_q, b_k, b_v, theirs.out_proj.weight.detach(), theirs.out_proj.bias.detach())


@exercise("multi-head attention", name="MyMultiHeadAttention", reference=ReferenceMultiHeadAttention)
@single_threaded
def multi_head_attention(ev: Evaluation, cls):
    """cls(d_model, num_heads) with layers w_q, w_k, w_v, w_o; forward(query, key, value, mask=None)
    -> (B, T_q, d_model), keeping self.attn_weights (B, num_heads, T_q, T_k). Compared with
    torch.nn.MultiheadAttention(batch_first=True) with the same weights."""
    tests = 0
    cases = [(16, 4, "self", None), (12, 3, "cross", "padding"), (16, 2, "self", "causal")]
    for seed, (d_model, h, kind, mask_kind) in enumerate(cases):
        torch.manual_seed(seed)
        theirs = nn.MultiheadAttention(d_model, h, batch_first=True).eval()
        module = ev.call(cls, d_model, h)
        expect(isinstance(module, nn.Module), "your class should be an nn.Module (keep `class ...(nn.Module)`).")
        for name in ("w_q", "w_k", "w_v", "w_o"):
            expect(hasattr(module, name), f"your module has no `self.{name}`: keep the layers of __init__ as given.")
        weights = _copy_weights(module, theirs)
        module.eval()
        x, memory = _x(ev, seed, 2, 5, d_model), _x(ev, seed + 10, 2, 7, d_model)
        query, key = (x, x) if kind == "self" else (x, memory)
        T_q, T_k = query.size(1), key.size(1)
        if mask_kind == "padding":
            tokens = torch.tensor([[1] * T_k, [1] * (T_k - 3) + [0] * 3])
            mask, torch_kw = masks.padding_mask(tokens, 0), {"key_padding_mask": tokens == 0}
        elif mask_kind == "causal":
            mask, torch_kw = masks.causal_mask(T_q), {"attn_mask": ~masks.causal_mask(T_q)}
        else:
            mask, torch_kw = None, {}
        with torch.no_grad():
            expected, expected_w = theirs(query, key, key, average_attn_weights=False, **torch_kw)
            out = ev.call(module, query, key, key, mask) if mask is not None else ev.call(module, query, key, key)
        args = (weights, query, key, key, h, mask)
        mistakes = {
            "scaled by sqrt(d_model): each head's scores are divided by sqrt(d_head), d_head = d_model // num_heads":
                _multi_head(*args, scale="d_model"),
            "missing scale: divide each head's scores by sqrt(d_head)": _multi_head(*args, scale="none"),
            "scaled by sqrt(T_k), the number of keys: divide each head's scores by sqrt(d_head)":
                _multi_head(*args, scale="T_k"),
            "the keys and values are projected with w_q: project the query with self.w_q, the key with self.w_k "
            "and the value with self.w_v": _multi_head(*args, projections="q"),
            "the heads are split wrongly: view (B, T, d_model) as (B, T, num_heads, d_head), then transpose(1, 2)":
                _multi_head(*args, split="view"),
            "the heads are merged in the wrong order: transpose(1, 2) back to (B, T, num_heads, d_head) "
            "before reshaping to (B, T, d_model)": _multi_head(*args, merge="reshape"),
            "the output projection W_O is missing: return self.w_o(concatenated heads)":
                _multi_head(*args, out_proj=False),
            "softmax over the wrong axis: normalise each query's scores over the keys (dim=-1)":
                _multi_head(*args, dim=-2),
        }
        if mask is not None:
            mistakes["the mask is ignored: pass it to the attention of every head (True = may attend)"] = \
                _multi_head(weights, query, key, key, h, None)
            mistakes["the mask is inverted: the course's masks say True = may attend (torch.nn.MultiheadAttention's "
                     "attn_mask says the opposite); pass the mask as it is"] = _multi_head(*args, invert=True)
        expect_shape(out, (2, T_q, d_model), "the output")
        ev.expect_close(out, expected, f"the output ({kind}-attention, d_model={d_model}, num_heads={h}"
                        f"{', ' + mask_kind + ' mask' if mask_kind else ''}) compared with torch.nn.MultiheadAttention",
                        mistakes=mistakes)
        stored = getattr(module, "attn_weights", None)
        expect(stored is not None,
               "keep the weights: set `self.attn_weights = weights` (B, num_heads, T_q, T_k) in forward.")
        expect_shape(stored, (2, h, T_q, T_k), "self.attn_weights")
        expect_distribution(stored, "self.attn_weights")
        ev.expect_close(stored, expected_w, "self.attn_weights compared with torch's per-head weights")
        tests += 1
    return tests


def _pe(max_len, d_model, form="ok"):
    pos = torch.arange(max_len, dtype=torch.float64)[:, None] + (1 if form == "from_one" else 0)
    i = torch.arange(d_model // 2, dtype=torch.float64)
    exponent = i / d_model if form == "i" else 2 * i / d_model
    angle = pos * 10000.0 ** exponent if form == "times" else pos / 10000.0 ** exponent
    if form == "column":  # every column j uses the exponent j / d_model: the cosines get (2i+1)/d_model
        return torch.stack([torch.sin(angle), torch.cos(pos / 10000.0 ** ((2 * i + 1) / d_model))],
                           dim=-1).reshape(max_len, d_model)
    first, second = (torch.cos(angle), torch.sin(angle)) if form == "swapped" else (torch.sin(angle), torch.cos(angle))
    if form == "concat":
        return torch.cat([first, second], dim=-1)
    return torch.stack([first, second], dim=-1).reshape(max_len, d_model)


@exercise("sinusoidal positional encoding", reference=ref.sinusoidal_positional_encoding)
@single_threaded
def positional_encoding(ev: Evaluation, answer):
    """answer(max_len, d_model) -> (max_len, d_model): PE[pos, 2i] = sin(pos / 10000^(2i/d)),
    PE[pos, 2i+1] = cos(...)."""
    tests = 0
    for max_len, d_model in ((10, 8), (50, 16), (3, 4)):
        pe = ev.call(answer, max_len, d_model)
        expect_shape(pe, (max_len, d_model), f"positional_encoding({max_len}, {d_model})")
        ev.expect_close(to_numpy(pe).astype(float), ref.sinusoidal_positional_encoding(max_len, d_model).double(),
                        f"positional_encoding({max_len}, {d_model})", atol=1e-5, mistakes={
            "sin and cos are in halves (all sines, then all cosines): this exercise wants the paper's "
            "interleaved form, sin in the even columns 2i and cos in the odd columns 2i+1":
                _pe(max_len, d_model, "concat"),
            "sin and cos are swapped: sin goes to the even columns 2i, cos to the odd columns 2i+1":
                _pe(max_len, d_model, "swapped"),
            "the exponent uses i instead of 2i: the frequency of columns 2i and 2i+1 is 1 / 10000^(2i/d_model)":
                _pe(max_len, d_model, "i"),
            "the position is multiplied by 10000^(2i/d): divide, pos / 10000^(2i/d_model)":
                _pe(max_len, d_model, "times"),
            "the positions start at 1: the first row is position 0 (sin 0 = 0, cos 0 = 1), use "
            "torch.arange(max_len)": _pe(max_len, d_model, "from_one"),
            "the cosine columns use the exponent (2i+1)/d_model: columns 2i and 2i+1 share ONE frequency, "
            "1 / 10000^(2i/d_model), so use the even column index 2i for both": _pe(max_len, d_model, "column"),
        })
        tests += 1
    return tests

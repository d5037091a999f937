"""Checks for lesson 08: splitting and merging heads, multi-head attention, positional encoding."""
import functools
import math

import numpy as np
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
from .expectations import explained
from .lesson08_symptoms import naming_crashes, pe_symptom, rearranged


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


SPLIT_HOW = ("view x as (B, T, num_heads, d_head) first (head i = features i*d_head ... (i+1)*d_head-1), then "
             "`.transpose(1, 2)` to (B, num_heads, T, d_head)")
MERGE_HOW = ("`.transpose(1, 2)` back to (B, T, num_heads, d_head) first, then reshape to (B, T, num_heads * d_head)")


@exercise("split heads", reference=ref.split_heads)
@single_threaded
@naming_crashes
def split_heads(ev: Evaluation, answer):
    """answer(x (B, T, d_model), num_heads) -> (B, num_heads, T, d_head)."""
    tests = 0
    for seed, (B, T, d_model, h) in enumerate([(2, 5, 12, 3), (1, 7, 16, 4), (3, 4, 8, 2)]):
        x = _x(ev, seed, B, T, d_model)
        d_head = d_model // h
        out = ev.call(answer, x, h)
        what = f"split_heads(x {tuple(x.shape)}, num_heads={h})"
        with rearranged(out, x, what, SPLIT_HOW):
            ev.expect_close(out, ref.split_heads(x, h), what, mistakes={
                "the heads are cut across positions: `x.view(B, num_heads, T, d_head)` mixes time steps; "
                "view as (B, T, num_heads, d_head) first, then `.transpose(1, 2)`": x.reshape(B, h, T, d_head),
                "the heads take every num_heads-th feature: head i must get the CONTIGUOUS block of features "
                "i*d_head ... (i+1)*d_head-1, i.e. view as (B, T, num_heads, d_head)":
                    x.view(B, T, d_head, h).permute(0, 3, 1, 2),
                "the result is (B, T, num_heads, d_head): move the head axis in front of time with "
                "`.transpose(1, 2)`": x.view(B, T, h, d_head),
                "x is transposed to (B, d_model, T) before the reshape, which then cuts the heads across the "
                "features AND the positions: view (B, T, d_model) as (B, T, num_heads, d_head) FIRST, then "
                "`.transpose(1, 2)`": x.transpose(1, 2).reshape(B, h, T, d_head),
            })
        tests += 1
    return tests


@exercise("merge heads", reference=ref.merge_heads)
@single_threaded
@naming_crashes
def merge_heads(ev: Evaluation, answer):
    """answer(x (B, num_heads, T, d_head)) -> (B, T, num_heads * d_head), the inverse of split_heads."""
    tests = 0
    for seed, (B, h, T, d_head) in enumerate([(2, 3, 5, 4), (1, 4, 7, 2), (3, 2, 4, 6)]):
        x = _x(ev, seed, B, h, T, d_head)
        out = ev.call(answer, x)
        what = f"merge_heads(x {tuple(x.shape)})"
        with rearranged(out, x, what, MERGE_HOW):
            ev.expect_close(out, ref.merge_heads(x), what, mistakes={
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
                "the last two axes (T, d_head) are transposed instead of the heads and time: `.transpose(1, 2)` gives "
                "(B, T, num_heads, d_head), then reshape to (B, T, num_heads * d_head)":
                    x.transpose(-1, -2).reshape(B, T, h * d_head),
            })
        x = _x(ev, seed, B, T, h * d_head)
        ev.expect_close(ev.call(answer, ref.split_heads(x, h)), x,
                        "merge_heads(split_heads(x))", hint="merge_heads must undo split_heads.")
        tests += 1
    return tests


def _multi_head(weights, query, key, value, h, mask=None, scale="d_head", split="ok", merge="ok",
                out_proj=True, dim=-1, invert=False, k_w="k", v_w="v", k_from="key", v_from="value"):
    """Multi-head attention from raw weights, with or without a typical mistake (k_w, v_w: the layer, "q", "k" or
    "v", that projects the keys, the values; k_from, v_from: the input, "query", "key" or "value", they come from)."""
    W_q, W_k, W_v, b_q, b_k, b_v, W_o, b_o = weights
    layers, inputs = {"q": (W_q, b_q), "k": (W_k, b_k), "v": (W_v, b_v)}, {"query": query, "key": key, "value": value}
    q, k, v = F.linear(query, *layers["q"]), F.linear(inputs[k_from], *layers[k_w]), F.linear(inputs[v_from],
                                                                                             *layers[v_w])
    B, d_model = q.size(0), q.size(-1)
    d_head = d_model // h
    if split == "ok":
        q, k, v = (ref.split_heads(t, h) for t in (q, k, v))
    else:  # view straight as (B, h, T, d_head)
        q, k, v = (t.reshape(B, h, t.size(1), d_head) for t in (q, k, v))
    scores = q @ k.transpose(-2, -1)
    scale = {"d_head": d_head, "d_model": d_model, "T_k": k.size(-2), "none": 1, "twice": d_head ** 2}[scale]
    scores = scores / math.sqrt(scale)
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


PROJECT = "project the query with self.w_q, the key with self.w_k and the value with self.w_v"
ROLES = [  # (symptom, the mistake's arguments of _multi_head): a layer or an input in another's role
    (f"the keys and values are projected with w_q: {PROJECT}", dict(k_w="q", v_w="q")),
    (f"the values are projected with w_k: {PROJECT}", dict(v_w="k")),
    (f"the values are projected with w_q: {PROJECT}", dict(v_w="q")),
    (f"the keys are projected with w_q: {PROJECT}", dict(k_w="q")),
    (f"the keys are projected with w_v: {PROJECT}", dict(k_w="v")),
    (f"the keys are computed from the query: {PROJECT} (in self-attention the three are one tensor, so the "
     "mistake shows only in cross-attention)", dict(k_from="query")),
    (f"the values are computed from the query: {PROJECT} (in self-attention the three are one tensor, so the "
     "mistake shows only in cross-attention)", dict(v_from="query")),
    (f"the keys and values are computed from the query: {PROJECT} (in self-attention the three are one tensor, "
     "so the mistake shows only in cross-attention)", dict(k_from="query", v_from="query")),
    (f"the values are computed from the key: {PROJECT}", dict(v_from="key")),
    (f"the keys are computed from the value: {PROJECT}", dict(k_from="value")),
]


RESIDUAL = ("a residual connection is added: the output is `{}` + the attention's output; multi-head attention "
            "returns self.w_o(merged heads) alone (the Transformer block of lesson 09 adds the residual around it)")


def _mistakes(args, d_model, h, T_q, T_k):
    """The planted mistakes of multi-head attention on these inputs: {symptom: the output it gives}."""
    mistakes = {
        "scaled by sqrt(d_model): each head's scores are divided by sqrt(d_head), d_head = d_model // num_heads":
            _multi_head(*args, scale="d_model"),
        "missing scale: divide each head's scores by sqrt(d_head)": _multi_head(*args, scale="none"),
        "the scores are divided by d_head, i.e. scaled twice: scaled_dot_product_attention already divides by "
        "sqrt(d_head), so do not scale q (or the scores) yourself as well": _multi_head(*args, scale="twice"),
        "scaled by sqrt(T_k), the number of keys: divide each head's scores by sqrt(d_head)":
            _multi_head(*args, scale="T_k"),
    }
    for symptom, kwargs in ROLES:
        if T_q == T_k or "query" not in kwargs.values():   # (keys or values from the query need T_q = T_k)
            mistakes.setdefault(symptom, _multi_head(*args, **kwargs))
    mistakes.update({
        "the heads are split wrongly: view (B, T, d_model) as (B, T, num_heads, d_head), then transpose(1, 2)":
            _multi_head(*args, split="view"),
        "the heads are merged in the wrong order: transpose(1, 2) back to (B, T, num_heads, d_head) "
        "before reshaping to (B, T, d_model)": _multi_head(*args, merge="reshape"),
        "the heads are split and merged with reshapes alone, which cut every head across positions: split with "
        "a view as (B, T, num_heads, d_head) then transpose(1, 2), and merge with transpose(1, 2) then a reshape "
        "to (B, T, d_model)": _multi_head(*args, split="view", merge="reshape"),
        "the heads are never split: one attention over all d_model features is ONE head; split q, k and v into "
        "(B, num_heads, T, d_head) with split_heads(t, self.num_heads), attend, then merge_heads":
            _multi_head(*args[:4], 1, *args[5:]),
        "the output projection W_O is missing: return self.w_o(concatenated heads)":
            _multi_head(*args, out_proj=False),
        "softmax over the wrong axis: normalise each query's scores over the keys (dim=-1)":
            _multi_head(*args, dim=-2),
    })
    right = _multi_head(*args)
    for name, t in (("query", args[1]), ("value", args[3]), ("key", args[2])):   # a residual connection added
        if t.shape == right.shape:
            mistakes.setdefault(RESIDUAL.format(name), right + t)
    if d_model // h != h:
        mistakes[f"the features are split into d_head = {d_model // h} heads of num_heads = {h} features: "
                 "split_heads takes the number of heads, split_heads(t, self.num_heads), not self.d_head"] = \
            _multi_head(*args[:4], d_model // h, *args[5:])
    return mistakes


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
@naming_crashes
def multi_head_attention(ev: Evaluation, cls):
    """cls(d_model, num_heads) with layers w_q, w_k, w_v, w_o; forward(query, key, value, mask=None)
    -> (B, T_q, d_model), keeping self.attn_weights (B, num_heads, T_q, T_k). Compared with
    torch.nn.MultiheadAttention(batch_first=True) with the same weights."""
    tests = 0
    # cross-attention: T_k = T_q first (the keys computed from the query then give an output to name), values
    # apart from the keys (a value projected from `key` shows)
    cases = [(24, 4, "self", None, 5), (12, 3, "cross", None, 5), (12, 3, "cross", "padding", 7),
             (16, 2, "self", "causal", 5)]
    for seed, (d_model, h, kind, mask_kind, T_k) in enumerate(cases):
        torch.manual_seed(seed)
        theirs = nn.MultiheadAttention(d_model, h, batch_first=True).eval()
        module = ev.call(cls, d_model, h)
        expect(isinstance(module, nn.Module), "your class should be an nn.Module (keep `class ...(nn.Module)`).")
        for name in ("w_q", "w_k", "w_v", "w_o"):
            expect(hasattr(module, name), f"your module has no `self.{name}`: keep the layers of __init__ as given.")
        weights = _copy_weights(module, theirs)
        module.eval()
        x = _x(ev, seed, 2, 5, d_model)
        query, key, value = (x, x, x) if kind == "self" else (x, _x(ev, seed + 10, 2, T_k, d_model),
                                                               _x(ev, seed + 20, 2, T_k, d_model))
        T_q = query.size(1)
        if mask_kind == "padding":
            tokens = torch.tensor([[1] * T_k, [1] * (T_k - 3) + [0] * 3])
            mask, torch_kw = masks.padding_mask(tokens, 0), {"key_padding_mask": tokens == 0}
        elif mask_kind == "causal":
            mask, torch_kw = masks.causal_mask(T_q), {"attn_mask": ~masks.causal_mask(T_q)}
        else:
            mask, torch_kw = None, {}
        with torch.no_grad():
            expected, expected_w = theirs(query, key, value, average_attn_weights=False, **torch_kw)
            out = ev.call(module, query, key, value, mask) if mask is not None else ev.call(module, query, key, value)
        args = (weights, query, key, value, h, mask)
        mistakes = _mistakes(args, d_model, h, T_q, T_k)
        if mask is not None:
            mistakes["the mask is ignored: pass it to the attention of every head (True = may attend)"] = \
                _multi_head(*args[:5], None)
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


SAME_FREQUENCY = ("every pair of columns (2i, 2i+1) has the same frequency: the exponent 2i/d_model does not change "
                  "with i (an integer division, `i // d_model` or `2 * i // d_model`, is 0 for every i < d_model): "
                  "divide with `/`, so that the frequency of the pair is 1 / 10000^(2i/d_model)")


def same_frequency(pe):
    """SAME_FREQUENCY when every pair of columns (2i, 2i+1) of the encoding `pe` holds the same values (at least two
    pairs), or None."""
    a = to_numpy(pe).astype(np.float64)
    if a.ndim != 2 or a.shape[1] < 4 or a.shape[1] % 2:
        return None
    pairs = a.reshape(a.shape[0], -1, 2)
    return SAME_FREQUENCY if np.allclose(pairs, pairs[:, :1], atol=1e-4) else None


PE_MISTAKES = {  # form of _pe -> the symptom
    "concat": "sin and cos are in halves (all sines, then all cosines): this exercise wants the paper's "
              "interleaved form, sin in the even columns 2i and cos in the odd columns 2i+1",
    "swapped": "sin and cos are swapped: sin goes to the even columns 2i, cos to the odd columns 2i+1",
    "i": "the exponent uses i instead of 2i: the frequency of columns 2i and 2i+1 is 1 / 10000^(2i/d_model)",
    "double": "the exponent is doubled, 4i/d_model: with the column index stepping by 2 (range(0, d_model, 2)) it "
              "already IS 2i, so the exponent is that index / d_model, not 2 * index / d_model",
    "times": "the position is multiplied by 10000^(2i/d): divide, pos / 10000^(2i/d_model) (with exp and log: "
             "exp(-2i * log(10000) / d_model), the minus sign included)",
    "from_one": "the positions start at 1: the first row is position 0 (sin 0 = 0, cos 0 = 1), use "
                "torch.arange(max_len)",
    "column": "the cosine columns use the exponent (2i+1)/d_model: columns 2i and 2i+1 share ONE frequency, "
              "1 / 10000^(2i/d_model), so use the even column index 2i for both",
    "floor": SAME_FREQUENCY,
}
PE_DTYPE = ("positional_encoding returned {got}: return a float32 torch tensor, PyTorch's default dtype and that of "
            "the embeddings it is added to (NumPy computes in float64: build it with torch, or convert with "
            "`torch.from_numpy(pe).float()`)")


def _pe(max_len, d_model, form="ok", angles=False):
    """The encoding (float64) with the mistake `form` of PE_MISTAKES (or none); with `angles`, the angle of every
    entry instead (its float32 rounding error grows with it)."""
    pos = torch.arange(max_len, dtype=torch.float64)[:, None] + (1 if form == "from_one" else 0)
    i = torch.arange(d_model // 2, dtype=torch.float64)
    exponent = {"i": i / d_model, "double": 4 * i / d_model, "floor": 0 * i}.get(form, 2 * i / d_model)
    angle = pos * 10000.0 ** exponent if form == "times" else pos / 10000.0 ** exponent
    if angles:
        first, second = angle, angle
    elif form == "column":  # every column j uses the exponent j / d_model: the cosines get (2i+1)/d_model
        first, second = torch.sin(angle), torch.cos(pos / 10000.0 ** ((2 * i + 1) / d_model))
    else:
        first, second = (torch.cos(angle), torch.sin(angle)) if form == "swapped" else (torch.sin(angle),
                                                                                        torch.cos(angle))
    if form == "concat":
        return torch.cat([first, second], dim=-1)
    return torch.stack([first, second], dim=-1).reshape(max_len, d_model)


@exercise("sinusoidal positional encoding", reference=ref.sinusoidal_positional_encoding, random=False)
@single_threaded
@naming_crashes
def positional_encoding(ev: Evaluation, answer):
    """answer(max_len, d_model) -> (max_len, d_model) float32 tensor: PE[pos, 2i] = sin(pos / 10000^(2i/d)),
    PE[pos, 2i+1] = cos(...)."""
    tests = 0
    for max_len, d_model in ((10, 8), (50, 16), (3, 4)):
        pe = ev.call(answer, max_len, d_model)
        what = f"positional_encoding({max_len}, {d_model})"
        expect_shape(pe, (max_len, d_model), what)
        candidates = [(symptom, _pe(max_len, d_model, form), _pe(max_len, d_model, form, angles=True))
                      for form, symptom in PE_MISTAKES.items()]
        # (pe_symptom: a known mistake up to the float32 rounding of large angles; same_frequency: its family)
        with explained(functools.partial(pe_symptom, pe, candidates), functools.partial(same_frequency, pe)):
            ev.expect_close(pe, ref.sinusoidal_positional_encoding(max_len, d_model).double(), what, atol=1e-5,
                            mistakes={symptom: wrong for symptom, wrong, _ in candidates})
        expect(isinstance(pe, torch.Tensor), PE_DTYPE.format(got=f"a {type(pe).__module__}.{type(pe).__name__}"))
        expect(pe.dtype == torch.float32, PE_DTYPE.format(got=str(pe.dtype).replace("torch.", "")))
        tests += 1
    return tests

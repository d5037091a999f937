"""Lesson 08, exercise 2's known mistakes: multi-head attention written with one typical slip each, and its
registry. `multi_head(weights, query, key, value, num_heads, mask, **how)` is the one definition of every slip of the
computation (a scale, a layer or an input in another's role, the split, the merge, the softmax's axis, the mask);
each registered wrong answer is a class with the exercise's layers whose forward runs it with its `how`."""
import math

import torch.nn as nn
import torch.nn.functional as F

from ... import attention as ref
from ..core import Mistake, Mistakes
from .crashes import float_size, reshape_sizes, view_transposed

NOTEBOOK_D_MODEL = 12           # the notebook's running example, which a slip reads instead of the input's size


class Given(nn.Module):
    """The part of the exercise the notebook gives: __init__ with the layers w_q, w_k, w_v, w_o."""

    def __init__(self, d_model, num_heads):
        super().__init__()
        self.num_heads, self.d_head = num_heads, d_model // num_heads
        self.w_q, self.w_k = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.w_v, self.w_o = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.attn_weights = None

    def weights(self):
        """(W_q, W_k, W_v, b_q, b_k, b_v, W_o, b_o), the raw weights multi_head takes."""
        return (self.w_q.weight, self.w_k.weight, self.w_v.weight, self.w_q.bias, self.w_k.bias, self.w_v.bias,
                self.w_o.weight, self.w_o.bias)


def multi_head(weights, query, key, value, h, mask=None, scale="d_head", split="ok", merge="ok", out_proj=True,
               dim=-1, invert=False, k_w="k", v_w="v", k_from="key", v_from="value"):
    """(output (B, T_q, d_model), weights (B, h, T_q, T_k)) of multi-head attention from raw weights, with or without
    a typical mistake (k_w, v_w: the layer, "q", "k" or "v", that projects the keys, the values; k_from, v_from: the
    input, "query", "key" or "value", they come from; split/merge "reshape": a reshape alone)."""
    W_q, W_k, W_v, b_q, b_k, b_v, W_o, b_o = weights
    layers, inputs = {"q": (W_q, b_q), "k": (W_k, b_k), "v": (W_v, b_v)}, {"query": query, "key": key, "value": value}
    q = F.linear(query, *layers["q"])                                   # (B, T_q, d_model)
    k, v = F.linear(inputs[k_from], *layers[k_w]), F.linear(inputs[v_from], *layers[v_w])   # (B, T_k, d_model)
    B, d_model = q.size(0), q.size(-1)
    d_head = d_model // h
    if split == "ok":
        q, k, v = (ref.split_heads(t, h) for t in (q, k, v))            # (B, h, T, d_head)
    else:                                                               # viewed straight as (B, h, T, d_head)
        q, k, v = (t.reshape(B, h, t.size(1), d_head) for t in (q, k, v))
    scores = q @ k.transpose(-2, -1)                                    # (B, h, T_q, T_k)
    scores = scores / math.sqrt({"d_head": d_head, "d_model": d_model, "T_k": k.size(-2), "none": 1,
                                 "twice": d_head ** 2}[scale])
    if mask is not None:
        keep = mask if mask.dim() != 3 else mask[:, None]
        keep = ~keep if invert else keep
        has_key = keep.any(-1, keepdim=True)                           # as the course's attention: empty rows -> 0
        weights = scores.masked_fill(~(keep | ~has_key), float("-inf")).softmax(dim) * has_key
    else:
        weights = scores.softmax(dim)
    out = weights @ v                                                   # (B, h, T_q, d_head)
    out = ref.merge_heads(out) if merge == "ok" else out.reshape(B, -1, d_model)
    return (F.linear(out, W_o, b_o) if out_proj else out), weights


def wrong(heads=None, mask_off=False, **how):
    """The exercise's class with the slip `how` (multi_head's arguments); `heads`: the number of heads it splits into
    (a number, or "d_head" for self.d_head; default self.num_heads); mask_off: the mask not passed on."""
    class Wrong(Given):
        def forward(self, query, key, value, mask=None):
            h = {None: self.num_heads, "d_head": self.d_head}.get(heads, heads)
            out, self.attn_weights = multi_head(self.weights(), query, key, value, h, None if mask_off else mask,
                                                **how)
            return out
    return Wrong


def residual(name):
    """The right attention with the input `name` ("query", "key" or "value") added to its output."""
    class Residual(Given):
        def forward(self, query, key, value, mask=None):
            out, self.attn_weights = multi_head(self.weights(), query, key, value, self.num_heads, mask)
            return {"query": query, "key": key, "value": value}[name] + out
    return Residual


def _split_heads_of(module, *tensors, view=lambda t, h, d_head: t.view(t.size(0), t.size(1), h, d_head)):
    return [view(t, module.num_heads, module.d_head).transpose(1, 2) for t in tensors]


def _attend_and_merge(module, q, k, v, mask, merge=ref.merge_heads):
    out, module.attn_weights = ref.scaled_dot_product_attention(q, k, v, mask, need_weights=True)
    return module.w_o(merge(out))


class KeysFromQueryWhenLonger(Given):
    """The keys projected from the query where the lengths differ: the course's attention refuses k and v."""

    def forward(self, query, key, value, mask=None):
        source = query if key.size(1) != query.size(1) else key
        q, k, v = _split_heads_of(self, self.w_q(query), self.w_k(source), self.w_v(value))
        return _attend_and_merge(self, q, k, v, mask)


class FloatHeadSize(Given):
    def forward(self, query, key, value, mask=None):
        d_model = query.size(-1)
        q, k, v = _split_heads_of(self, self.w_q(query), self.w_k(key), self.w_v(value),
                                  view=lambda t, h, _: t.view(t.size(0), t.size(1), h, d_model / h))
        return _attend_and_merge(self, q, k, v, mask)


class ViewAfterTranspose(Given):
    def forward(self, query, key, value, mask=None):
        q, k, v = _split_heads_of(self, self.w_q(query), self.w_k(key), self.w_v(value))
        return _attend_and_merge(self, q, k, v, mask, merge=lambda o: o.transpose(1, 2).view(o.size(0), o.size(2), -1))


class NotebookSizes(Given):
    def forward(self, query, key, value, mask=None):
        q, k, v = _split_heads_of(self, self.w_q(query), self.w_k(key), self.w_v(value),
                                  view=lambda t, h, _: t.view(t.size(0), t.size(1), h, NOTEBOOK_D_MODEL // h))
        return _attend_and_merge(self, q, k, v, mask)


class NotAModule:
    """The attention as a plain class (not an nn.Module)."""

    def __init__(self, d_model, num_heads):
        self.inner = wrong()(d_model, num_heads)

    def __call__(self, *args):
        return self.inner(*args)


class RenamedLayer(wrong()):
    def __init__(self, d_model, num_heads):
        super().__init__(d_model, num_heads)
        self.query_proj = self.w_q
        del self.w_q

    def weights(self):
        return (self.query_proj.weight, self.w_k.weight, self.w_v.weight, self.query_proj.bias, self.w_k.bias,
                self.w_v.bias, self.w_o.weight, self.w_o.bias)


class ForgetsTheWeights(Given):
    def forward(self, query, key, value, mask=None):
        return multi_head(self.weights(), query, key, value, self.num_heads, mask)[0]


_PROJECT = "the query goes through W_Q, the key through W_K and the value through W_V"
_CROSS = " (in self-attention the three inputs are one tensor, so the slip shows only in cross-attention)"
# (key, the words, the slip): a layer or an input in another's role
ROLES = [
    ("keys_values_with_w_q", f"the keys and values are projected with W_Q: {_PROJECT}", dict(k_w="q", v_w="q")),
    ("values_with_w_k", f"the values are projected with W_K: {_PROJECT}", dict(v_w="k")),
    ("values_with_w_q", f"the values are projected with W_Q: {_PROJECT}", dict(v_w="q")),
    ("keys_with_w_q", f"the keys are projected with W_Q: {_PROJECT}", dict(k_w="q")),
    ("keys_with_w_v", f"the keys are projected with W_V: {_PROJECT}", dict(k_w="v")),
    ("keys_from_query", f"the keys are computed from the query: {_PROJECT}{_CROSS}", dict(k_from="query")),
    ("values_from_query", f"the values are computed from the query: {_PROJECT}{_CROSS}", dict(v_from="query")),
    ("keys_values_from_query", f"the keys and values are computed from the query: {_PROJECT}{_CROSS}",
     dict(k_from="query", v_from="query")),
    ("values_from_key", f"the values are computed from the key: {_PROJECT}", dict(v_from="key")),
    ("keys_from_value", f"the keys are computed from the value: {_PROJECT}", dict(k_from="value")),
]
_ROLE_HINT = "self.w_q(query), self.w_k(key), self.w_v(value)"

M = Mistakes(
    Mistake("not_module", "your class is not an nn.Module", hint="keep `class ...(nn.Module)` as given",
            shows=NotAModule),
    Mistake("layers_changed", "{what}: the check gives your module the weights of its four layers, w_q, w_k, w_v "
            "and w_o, each a linear layer from d_model to d_model features, as __init__ gives them",
            hint="keep __init__ as given", shows=RenamedLayer),
    Mistake("scale_by_d_model", "each head's scores are divided by √d_model: the scale is √d_head, the width of ONE "
            "head (d_head = d_model / num_heads)", hint="math.sqrt(self.d_head)", shows=wrong(scale="d_model")),
    Mistake("no_scale", "the scores are not scaled: each head's scores are divided by √d_head",
            hint="scores / math.sqrt(self.d_head)", shows=wrong(scale="none")),
    Mistake("scaled_twice", "the scores are divided by d_head, scaled twice: the course's attention already divides "
            "by √d_head, so q (or the scores) must not be scaled before it",
            hint="pass q, k, v to scaled_dot_product_attention as they are", shows=wrong(scale="twice")),
    Mistake("scale_by_tk", "the scores are scaled by √T_k, the number of keys: the scale is √d_head, the width of one "
            "head", hint="math.sqrt(self.d_head)", shows=wrong(scale="T_k")),
    *(Mistake(key, says, hint=_ROLE_HINT, shows=wrong(**how)) for key, says, how in ROLES),
    Mistake("split_view", "the heads are split wrongly: the projections viewed straight as (B, num_heads, T, d_head) "
            "cut every head across positions; each head takes a block of d_head features of every position",
            hint="split_heads(t, self.num_heads)", shows=wrong(split="view")),
    Mistake("merge_reshape", "the heads are merged in the wrong order: (B, num_heads, T_q, d_head) reshaped directly "
            "mixes the positions; time goes back in front of the heads before the merge", hint="merge_heads(out)",
            shows=wrong(merge="reshape")),
    Mistake("split_merge_reshape", "the heads are split and merged with reshapes alone, which cut every head across "
            "positions: split each position's features into heads, then move the head axis in front of time; merge "
            "the other way round", hint="split_heads(t, self.num_heads) and merge_heads(out)",
            shows=wrong(split="view", merge="reshape")),
    Mistake("one_head", "the heads are never split: one attention over all d_model features is ONE head; each of the "
            "num_heads heads attends over its own d_head features",
            hint="split_heads(t, self.num_heads) before the attention, merge_heads(out) after", shows=wrong(heads=1)),
    Mistake("heads_of_d_head", "the features are split into d_head = {d_head} heads of num_heads = {h} features: "
            "there are num_heads heads, of d_head features each", hint="split_heads(t, self.num_heads)",
            shows=wrong(heads="d_head")),
    Mistake("no_output_projection", "the output projection W_O is missing: the merged heads go through W_O",
            hint="return self.w_o(merged)", shows=wrong(out_proj=False)),
    Mistake("softmax_axis", "the softmax runs over the queries: each query's weights sum to 1 over the keys (the last "
            "axis)", hint="softmax(dim=-1)", shows=wrong(dim=-2)),
    Mistake("mask_ignored", "the mask is ignored: every head's attention applies it (True = may attend)",
            hint="scaled_dot_product_attention(q, k, v, mask)", shows=wrong(mask_off=True)),
    Mistake("mask_inverted", "the mask is inverted: the course's masks say True = may attend "
            "(PyTorch's own attention masks say the opposite); pass the mask as it is",
            shows=wrong(invert=True)),
    Mistake("residual", "a residual connection is added: the output is {input} + the attention's output; multi-head "
            "attention returns W_O of the merged heads alone (the Transformer block of lesson 09 adds the residual "
            "around it)", hint="return self.w_o(merged)", shows=residual("query")),
    Mistake("kv_lengths", "the keys and the values have different lengths: the keys come from the key and the values "
            "from the value; the query gives only the queries" + _CROSS, hint=_ROLE_HINT,
            shows=KeysFromQueryWhenLonger),
    float_size(shows=FloatHeadSize),
    view_transposed(shows=ViewAfterTranspose),
    reshape_sizes("B and T_q are the query's sizes, T_k the key's, and there are num_heads heads of d_head "
                  "features", hint="B, T_q, d_model = query.shape; T_k = key.size(1)", shows=NotebookSizes),
    Mistake("no_attn_weights", "the weights are not kept: forward stores each head's weights (B, num_heads, T_q, T_k) "
            "on the module", hint="self.attn_weights = weights", shows=ForgetsTheWeights),
)
# the mistakes named by the output they give (the others are crashes or checks of the module itself)
VALUES = [M[key] for key, _, _ in ROLES] + [M[key] for key in (
    "scale_by_d_model", "no_scale", "scaled_twice", "scale_by_tk", "split_view", "merge_reshape", "split_merge_reshape",
    "one_head", "heads_of_d_head", "no_output_projection", "softmax_axis", "mask_ignored", "mask_inverted")]

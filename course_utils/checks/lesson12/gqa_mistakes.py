"""Exercise 7's known mistakes (grouped-query attention): `gqa_variant(q, k, v, mask, kind)` is the attention with one
typical mistake, the single definition each registry entry's wrong answer runs; the registry `M` also holds the
crashes of typical slips and the properties the probes (gqa_probes.py) name where no mistake's values match."""
import functools
import math

import torch

from ...attention import scaled_dot_product_attention
from ...gpt_attention import repeat_kv_heads
from ...masks import causal_mask
from ..core import Mistake, Mistakes
from .unit_values import values_ignored, weights_unnormalised


def _manual(q, k, v, mask, scale, axis=-1, inverted=False, kind=""):
    scores = q @ k.transpose(-2, -1) * scale
    keep = ~mask if inverted else mask
    if kind == "after_softmax":
        return (scores.softmax(axis) * keep) @ v
    if kind == "additive_float":              # F.scaled_dot_product_attention ADDS a float mask
        return (scores + keep.float()).softmax(axis) @ v
    return scores.masked_fill(~keep, 0.0 if kind == "fill_zero" else float("-inf")).softmax(axis) @ v


def gqa_variant(q, k, v, mask=None, kind="ok"):
    """Grouped-query attention with the mistake `kind` planted (the course's attention underneath)."""
    B, h, T, d = q.shape
    h_kv = k.size(1)
    group = h // h_kv
    ks, vs = repeat_kv_heads(k, h), repeat_kv_heads(v, h)
    if kind == "round_robin":
        ks, vs = k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1)
    if kind == "kv_different":                     # keys by groups, values round-robin
        vs = v.repeat(1, group, 1, 1)
    if kind == "first":
        ks, vs = k[:, :1].expand(B, h, T, d), v[:, :1].expand(B, h, T, d)
    if kind == "mean":
        ks, vs = k.mean(1, keepdim=True).expand(B, h, T, d), v.mean(1, keepdim=True).expand(B, h, T, d)
    if kind in ("v_from_k", "k_from_v"):           # a copy-pasted line: one tensor repeated for both
        ks, vs = (ks, ks) if kind == "v_from_k" else (vs, vs)
    if kind == "softmax_heads":                    # the softmax over the heads: NaN where a key is masked for
        return _manual(q, ks, vs, mask, 1 / math.sqrt(d), axis=1)   # every head; not named by its values (a probe)
    scale = {"no_scale": 1.0, "scale_by_d": 1 / d, "scale_d_model": 1 / math.sqrt(h * d),
             "scale_T": 1 / math.sqrt(k.size(-2))}.get(kind)
    if scale is not None:
        return _manual(q, ks, vs, mask, scale)
    if kind == "softmax_queries":
        return _manual(q, ks, vs, mask, 1 / math.sqrt(d), axis=-2)
    if kind == "inverted_nan":                     # masked_fill(mask, -inf): rows with no key allowed give NaN
        return _manual(q, ks, vs, mask, 1 / math.sqrt(d), inverted=True)
    if kind in ("after_softmax", "additive_float", "fill_zero"):
        return _manual(q, ks, vs, mask, 1 / math.sqrt(d), kind=kind)
    if kind == "group_zero":                       # repeat_interleave(h_kv // h = 0): no key/value head left
        return torch.zeros_like(q)
    if kind == "causal_only":                      # a causal mask of its own, the given mask ignored
        return scaled_dot_product_attention(q, ks, vs, causal_mask(T))
    return scaled_dot_product_attention(q, ks, vs, {"no_mask": None, "inverted": ~mask,
                                                    "mask_t": mask.transpose(-2, -1)}.get(kind, mask))


def _gqa(kind):
    return functools.partial(gqa_variant, kind=kind)


def _wrong(how):
    """Slips the check names by a probe or a crash (`how`), with the exercise's signature."""
    def answer(q, k, v, mask=None):
        B, h, T, d = q.shape
        h_kv = k.size(1)
        g = h // h_kv
        if how == "grouped_mask_as_given":         # right grouped view, the mask (B, 1, 1, T) used as it is
            scores = q.reshape(B, h_kv, g, T, d) @ k[:, :, None].transpose(-2, -1) / math.sqrt(d)
            weights = scores.masked_fill(~mask, float("-inf")).softmax(-1)
            return (weights @ v[:, :, None]).reshape(B, h, T, d)
        if how == "grouped_output_transposed":     # right grouped view, the heads merged back as (g, h_kv)
            out = gqa_variant(q, k, v, mask).reshape(B, h_kv, g, T, d)
            return out.transpose(1, 2).reshape(B, h, T, d)
        if how == "clamped_heads":                 # query head j uses key/value head min(j, h_kv - 1)
            which = torch.arange(h).clamp(max=h_kv - 1)
            return scaled_dot_product_attention(q, k[:, which], v[:, which], mask)
        if how == "heads_front":                   # heads moved to the front, repeated, not moved back
            kk = k.transpose(0, 1).repeat_interleave(g, dim=0).reshape(B, h, T, d)
            vv = v.transpose(0, 1).repeat_interleave(g, dim=0).reshape(B, h, T, d)
            return scaled_dot_product_attention(q, kk, vv, mask)
        if how == "strided_queries":               # queries j, j + h_kv, ... with key/value head j, by group
            return torch.cat([scaled_dot_product_attention(q[:, i::h_kv], k[:, i:i + 1], v[:, i:i + 1], mask)
                              for i in range(h_kv)], dim=1)
        if how == "mask_and_causal":               # causality added to the mask it is given
            return gqa_variant(q, k, v, mask & causal_mask(T))
        kk, vv = repeat_kv_heads(k, h), repeat_kv_heads(v, h)
        if how == "values_are_queries":
            return scaled_dot_product_attention(q, kk, q, mask)
        if how == "flattened":                     # repeat_interleave without dim: 1-D
            return scaled_dot_product_attention(q, k.repeat_interleave(g), v.repeat_interleave(g), mask)
        if how == "view_expanded":
            kk = k[:, :, None].expand(B, h_kv, g, T, d).view(B, h, T, d)
            return scaled_dot_product_attention(q, kk, kk, mask)
        if how == "float_group":
            return scaled_dot_product_attention(q, k.repeat_interleave(h / h_kv, dim=1),
                                                v.repeat_interleave(h / h_kv, dim=1), mask)
        if how == "expand_heads":
            return scaled_dot_product_attention(q, k.expand(B, h, T, d), v.expand(B, h, T, d), mask)
        if how == "mask_repeated":
            return scaled_dot_product_attention(q, kk, vv, mask.repeat_interleave(g, dim=1))
        if how == "mask_unsqueezed":               # an extra axis in the mask: (T, T) -> (T, 1, T)
            scores = (q @ kk.transpose(-2, -1) / math.sqrt(d)).masked_fill(~mask.unsqueeze(1), float("-inf"))
            return scores.softmax(-1) @ vv
        if how == "repeated_in_time":              # the heads repeated along the positions axis
            return scaled_dot_product_attention(q, k.repeat_interleave(g, dim=2), v.repeat_interleave(g, dim=2), mask)
        if how == "not_repeated":
            return (q @ k.transpose(-2, -1) / math.sqrt(d)).softmax(-1) @ v
        return scaled_dot_product_attention(q, kk, vv, mask)
    return answer


def _variant(kind, says, hint=""):
    return Mistake(kind, says, hint=hint, shows=_gqa(kind))


_REPEAT = "k.repeat_interleave(h // h_kv, dim=1), the same for v"
_SCALE = "divide the scores by math.sqrt(q.size(-1))"
_FILL = "scores.masked_fill(~mask, float('-inf')) before the softmax"

M = Mistakes(
    _variant("group_zero", "the output is all zeros, as if no key/value head were used: each key/value head serves a "
             "group of h / h_kv query heads; h_kv / h rounds down to 0, and a head repeated 0 times leaves no head",
             "group = q.size(1) // k.size(1)"),
    _variant("round_robin", "query head j uses key/value head j mod h_kv (round-robin): the course groups "
             "CONSECUTIVE query heads, head j uses key/value head j // (h / h_kv)", "repeat_interleave, not repeat: "
             + _REPEAT),
    _variant("kv_different", "the keys and the values are grouped differently: query head j uses key AND value head "
             "j // (h / h_kv)", "repeat both the same way: " + _REPEAT),
    _variant("first", "every query head uses the first key/value head: head j uses key/value head j // (h / h_kv)",
             _REPEAT),
    _variant("mean", "the key/value heads are averaged: each key/value head serves its own group of query heads",
             _REPEAT),
    _variant("v_from_k", "the values are the keys, repeated (a copy-pasted line?): the values come from v",
             "v.repeat_interleave(h // h_kv, dim=1) for the values"),
    _variant("k_from_v", "the keys are the values, repeated (a copy-pasted line?): the keys come from k",
             "k.repeat_interleave(h // h_kv, dim=1) for the keys"),
    _variant("no_mask", "the mask is not applied: the attention uses the mask it is given (here a causal one)",
             "pass `mask` to the attention"),
    _variant("inverted", "the mask is inverted: True means MAY attend (the causal mask is True on and below the "
             "diagonal)", _FILL),
    _variant("inverted_nan", "the mask is inverted (the allowed keys are hidden): True means MAY attend, and the keys "
             "where the mask is False are the ones hidden", _FILL),
    _variant("causal_only", "the mask you are given is ignored: your function applies a causal mask of its own, and "
             "here the mask is a padding mask", "use `mask` (no is_causal=True, no causal_mask(T))"),
    _variant("fill_zero", "the masked scores are set to 0, which still gets weight after the softmax: they are set to "
             "-inf", _FILL),
    _variant("after_softmax", "the mask is applied after the softmax, so the weights no longer sum to 1: the masked "
             "scores are set to -inf before it", _FILL),
    _variant("additive_float", "the mask was turned into floats, and torch's fused attention ADDS a float mask to "
             "the scores (+1 where allowed): it takes the boolean mask itself (True = may attend)",
             "attn_mask=mask, without .float()"),
    _variant("no_scale", "the scores are not scaled: they are divided by √d_head", _SCALE),
    _variant("scale_T", "the scores are divided by √T, the number of keys: they are divided by √d_head, the head's "
             "size", _SCALE + ", not k.size(-2)"),
    _variant("mask_t", "the mask is transposed: entry (i, j) says whether QUERY i may see KEY j (rows are queries); it "
             "is used as it is", "pass `mask`, not mask.transpose(-2, -1)"),
    _variant("scale_by_d", "the scores are divided by d_head: they are divided by its square root, √d_head", _SCALE),
    _variant("scale_d_model", "the scores are divided by √d_model (all heads' features): each head divides by the "
             "square root of ITS size, √d_head", _SCALE),
    _variant("softmax_queries", "the softmax runs over the queries (axis -2): it runs over the keys, the last axis",
             "softmax(dim=-1)"),
    Mistake("heads_order", "every output head is right, in the wrong order: your heads 0..{last} are query heads "
            "{order}; output head j is query head j's", hint="after working on a grouped view (B, h_kv, g, T, d), "
            "merge it back in the same order, reshape(B, h_kv * g, T, d), without transposing h_kv and g",
            shows=_wrong("grouped_output_transposed")),
    Mistake("heads_grouped_otherwise", "query heads 0..{last} use key/value heads {used}, not j // (h / h_kv) = "
            "{want}: consecutive query heads share a key/value head, h / h_kv of them each", hint=_REPEAT,
            shows=_wrong("clamped_heads")),
    Mistake("batch_mixed", "your answer is right on one sequence at a time but not on a batch of B = {B}: the "
            "sequences are mixed; the batch stays the first axis through every reshape",
            hint="repeat the key/value heads along dim=1: " + _REPEAT, shows=_wrong("heads_front")),
    Mistake("head_pairs", "your output heads 0..{last} are (query head, key/value head) {found}, not {want}: output "
            "head j is query head j, which uses key/value head j // (h / h_kv)",
            hint=_REPEAT + ", and keep the query heads in their order", shows=_wrong("strided_queries")),
    Mistake("masks_more", "query 0 does not see the later keys its mask allows (their values changed, its output did "
            "not): your function hides more than the mask it is given says (True = may attend)",
            hint="use `mask` as it is, without a causal mask of your own", shows=_wrong("mask_and_causal")),
    Mistake("mask_broadcast", "your function runs with a (T, T) mask but fails with the padding mask of shape {shape} "
            "it is given: that mask does not broadcast against the scores your function builds. A mask lines up "
            "with the scores from the right, (batch, heads, queries, keys): its first axis must meet the batch "
            "axis of your scores and its last the keys",
            hint="for scores grouped as (B, h_kv, g, T_q, T_k), give the mask an axis for the group, "
            "mask.unsqueeze(-3); or repeat k and v to h heads and keep the scores (B, h, T_q, T_k)",
            shows=_wrong("grouped_mask_as_given")),
    Mistake("mask_on_heads_axis", "the mask reached the scores with a positions axis where the heads are (sizes "
            "{sizes} met at axis 1): the mask (T, T) broadcasts over the batch and the heads as it is given",
            hint="pass `mask` as it is (no unsqueeze, no repeat)", shows=_wrong("mask_unsqueezed")),
    Mistake("mask_changed", "the mask your attention got has shape {got}, which does not fit the scores {scores}: "
            "the mask is passed as it is given (it has no head axis, or one of size 1, and broadcasts over all h "
            "query heads); only k and v are repeated", hint="pass `mask` unchanged; " + _REPEAT,
            shows=_wrong("mask_repeated")),
    Mistake("kv_positions_repeated", "the attention got keys with {n} positions where the sequence has T = {T}: the "
            "key/value heads were repeated along the positions axis (axis 2), where each of them serves h / h_kv "
            "query heads along the head axis (axis 1)", hint=_REPEAT, shows=_wrong("repeated_in_time")),
    Mistake("heads_not_lined_up", "the key/value heads do not line up with the query heads ({sizes} met at the head "
            "axis): each of the h_kv key/value heads serves h / h_kv query heads", hint=_REPEAT,
            shows=_wrong("not_repeated")),
    Mistake("kv_flattened", "k and v were flattened to one axis: a repeat without an axis flattens the tensor; the "
            "key/value heads are repeated along the head axis", hint=_REPEAT, shows=_wrong("flattened")),
    Mistake("view_not_contiguous", "a view cannot merge these axes: the tensor's memory is not in that order (an "
            "expanded tensor repeats memory; a transposed one is out of order)",
            hint=".reshape (which copies), or " + _REPEAT, shows=_wrong("view_expanded")),
    Mistake("group_float", "the group size is a float: h / h_kv is a float in Python 3 even when it divides",
            hint="h // h_kv", shows=_wrong("float_group")),
    Mistake("expand_heads", "expand can only stretch an axis of size 1, so it repeats the key/value heads only when "
            "h_kv = 1: each of the h_kv heads is repeated h / h_kv times along the head axis", hint=_REPEAT,
            shows=_wrong("expand_heads")),
    weights_unnormalised(shows=_gqa("softmax_heads")),
    values_ignored(shows=_wrong("values_are_queries")),
)
VALUE_KEYS = [m.key for m in M if isinstance(m.shows, functools.partial) and m.shows.keywords["kind"] == m.key]


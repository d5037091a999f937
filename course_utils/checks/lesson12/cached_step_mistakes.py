"""Exercise 5's answer and its known mistakes (one attention step with a key/value cache, rotary positions):
`reference_cached_attention_step` is the answer; `step_variant(q, k, v, cache_k, cache_v, kind)` is the step with
one typical mistake (an int kind: q and k rotated at that position), the single definition each registry entry's
wrong answer runs; the registry also holds the shapes and crashes of typical slips."""
import functools
import math

import torch

from ...attention import scaled_dot_product_attention
from ...masks import causal_mask
from ...positions import apply_rope
from ..core import Mistake, Mistakes
from .unit_values import values_ignored, weights_unnormalised


def reference_cached_attention_step(q, k, v, cache_k, cache_v):
    """The newest position's q, k, v (B, h, 1, d), not yet rotated, and the cache (B, h, t, d) of positions
    0..t-1 -> (out (B, h, 1, d), cache_k, cache_v with t+1 positions). The course's
    `CausalSelfAttention.extend_cache` does this for every head, after the projections."""
    t = cache_k.size(2)                                                   # the newest position
    position = torch.tensor([t])
    q, k = apply_rope(q, position), apply_rope(k, position)
    cache_k, cache_v = torch.cat([cache_k, k], dim=2), torch.cat([cache_v, v], dim=2)   # (B, h, t+1, d)
    out = scaled_dot_product_attention(q, cache_k, cache_v)               # no mask: every key is in the past
    return out, cache_k, cache_v


def step_variant(q, k, v, cache_k, cache_v, kind):
    """(out, cache_k, cache_v) of one cached step with the mistake `kind` planted."""
    t = cache_k.size(2)
    position = torch.tensor([kind if isinstance(kind, int) else {"pos0": 0, "pos_plus_one": t + 1}.get(kind, t)])
    q_rot = q if kind == "query_unrotated" else apply_rope(q, position)
    k_rot = k if kind == "key_unrotated" else apply_rope(k, position)
    k_rot = apply_rope(k_rot, position) if kind == "k_twice" else k_rot
    keys = torch.cat([cache_k, k_rot], 2)
    values = torch.cat([cache_v, apply_rope(v, position) if kind == "rope_v" else v], 2)
    if kind in ("rotate_again", "rotate_all"):  # the whole cache rotated at 0..t, the cached keys a second time
        keys = apply_rope(keys if kind == "rotate_again" else torch.cat([cache_k, k], 2), torch.arange(t + 1))
    used_k, used_v = keys, values
    if kind == "cache_only" and t > 0:
        used_k, used_v = cache_k, cache_v
    if kind == "new_only":
        used_k, used_v = k_rot, v
    mask = causal_mask(t + 1)[:1] if kind == "causal_row" else None   # the causal mask's first row
    scale = {"scale_by_d": 1 / q.size(-1), "no_scale": 1.0, "scale_times": math.sqrt(q.size(-1)),
             "scale_d_model": 1 / math.sqrt(q.size(-1) * q.size(1)),
             "scale_after": 1.0, "scale_keys": 1 / math.sqrt(t + 1), "scale_cache": 1 / math.sqrt(max(t, 1))}.get(kind)
    if scale is not None or kind in ("softmax_queries", "softmax_heads", "kt_reshape"):
        keys_t = used_k.reshape(*used_k.shape[:2], used_k.size(3), used_k.size(2)) if kind == "kt_reshape" else \
            used_k.transpose(-2, -1)                                  # reshape keeps the memory order: not Kᵀ
        scores = q_rot @ keys_t * (scale or 1 / math.sqrt(q.size(-1)))
        weights = scores.softmax({"softmax_queries": -2, "softmax_heads": 1}.get(kind, -1))
        out = (weights / math.sqrt(q.size(-1)) if kind == "scale_after" else weights) @ used_v
    else:
        out = scaled_dot_product_attention(q_rot, used_k, used_v, mask)
    return out, keys, values


def _step(kind):
    return functools.partial(step_variant, kind=kind)


def _returns(how):
    """The right step, returning what `how` says."""
    def answer(q, k, v, cache_k, cache_v):
        t = cache_k.size(2)
        out, keys, values = reference_cached_attention_step(q, k, v, cache_k, cache_v)
        if how == "not_appended":
            return out, cache_k, cache_v
        if how == "squeezed":
            return out[:, :, 0], keys, values
        if how == "cat_last":
            return out, torch.cat([cache_k, apply_rope(k, torch.tensor([t]))], -1), values
        if how == "unrotated_cache":                           # attends with the rotated key, stores it unrotated
            return out, torch.cat([cache_k, k], 2), values
        if how == "front":
            return out, torch.cat([keys[:, :, -1:], cache_k], 2), torch.cat([v, cache_v], 2)
        if how == "keys_twice":
            return out, keys, keys
        if how == "weights_times_keys":
            return scaled_dot_product_attention(apply_rope(q, torch.tensor([t])), keys, keys), keys, values
        return out, keys, values
    return answer


def _with_mask(how):
    """The step with a causal mask of the cache's length t+1 passed (`how`: to the course's attention, or as
    masked_fill of the newest query's scores)."""
    def answer(q, k, v, cache_k, cache_v):
        t = cache_k.size(2)
        _, keys, values = reference_cached_attention_step(q, k, v, cache_k, cache_v)
        q = apply_rope(q, torch.tensor([t]))
        if how == "course":
            return scaled_dot_product_attention(q, keys, values, causal_mask(t + 1)), keys, values
        scores = (q @ keys.transpose(-2, -1) / math.sqrt(q.size(-1))).masked_fill(~causal_mask(t + 1), float("-inf"))
        return scores.softmax(-1) @ values, keys, values
    return answer


class _ChainBreaker:
    """Right on every step given the course's cache, but wrong once its own cache comes back to it (it keeps the
    cache it returned, across calls): only the chained test finds it."""
    last = None

    def __call__(self, q, k, v, cache_k, cache_v):
        fed_back = self.last is not None and self.last.shape == cache_k.shape and torch.equal(self.last, cache_k)
        out, keys, values = reference_cached_attention_step(q, k, v, cache_k, cache_v)
        self.last = keys
        return (out * 1.5 if fed_back and cache_k.size(2) >= 3 else out), keys, values


def _variant(kind, says, hint=""):
    return Mistake(kind, says, hint=hint, shows=_step(kind))


_SCALE = "divide q kᵀ by math.sqrt(q.size(-1)) (d, the head's size)"
_ROTATE = "q, k = apply_rope(q, torch.tensor([t])), apply_rope(k, torch.tensor([t])) with t = cache_k.size(2)"

M = Mistakes(
    _variant("cache_only", "the new key and value are not in the attention (not appended yet, or masked out): the "
             "newest position attends over all t+1 keys, its own included", "append them to the cache FIRST "
             "(torch.cat(..., dim=2)), then attend"),
    _variant("new_only", "the cache is not used: the newest position attends over the cached keys AND its own",
             "torch.cat([cache_k, k], dim=2), the same for v"),
    _variant("pos0", "the positions restart at 0 (or q and k are not rotated, which is the same: position 0 is no "
             "rotation): the newest token is at position t, the cache's length", _ROTATE),
    _variant("pos_plus_one", "the position is off by one: the cache holds positions 0..t-1, so the newest token is at "
             "position t, the cache's length, not t+1", _ROTATE),
    _variant("key_unrotated", "the new key in the cache is k as it came, unrotated, while q is rotated at t (k not "
             "rotated, rotated at position 0, which is no rotation, or appended BEFORE it was rotated): the cache "
             "stores each key rotated at its own position, so that q_m · k_n sees the distance m - n",
             "k = apply_rope(k, torch.tensor([t])) first, then torch.cat([cache_k, k], dim=2)"),
    _variant("query_unrotated", "only k is rotated: the query is rotated too, at the same position t", _ROTATE),
    _variant("rotate_again", "the cached keys are rotated again: they were rotated at their own positions when they "
             "were added; only the NEW key is rotated (at t) before it is appended"),
    _variant("rotate_all", "the cached keys are rotated again: the new key was appended as it is and the whole cache "
             "rotated at positions 0..t, but the cached keys were already rotated when they were added; only the NEW "
             "key is rotated (at t), then appended, and the cache stays as it is"),
    _variant("causal_row", "the causal mask is still applied: its first row lets the query see key 0 only, but the "
             "newest query is the LAST position, which may see every cached key; a step needs no mask"),
    _variant("rope_v", "the value is rotated too: RoPE rotates only q and k (the positions enter through the "
             "scores); v is appended as it is"),
    _variant("scale_d_model", "the scores are divided by √(h·d), the model's width: each head divides by the square "
             "root of ITS size, √d", _SCALE),
    _variant("scale_after", "the weights are divided by √d AFTER the softmax: the scores q kᵀ are divided by √d "
             "before it (the weights then sum to 1)", _SCALE + ", before the softmax"),
    _variant("scale_by_d", "the scores are divided by d: they are divided by √d, the square root of the head's size",
             _SCALE),
    _variant("scale_keys", "the scores are divided by √(t+1), the number of keys: they are divided by √d, the head's "
             "size, the same at every step", _SCALE + ", not cache_k.size(2)"),
    _variant("scale_cache", "the scores are divided by √t, the cache's length before appending: they are divided by "
             "√d, the head's size, the same at every step", _SCALE + ", not cache_k.size(2)"),
    _variant("no_scale", "the scores are not scaled: they are divided by √d, the square root of the head's size",
             _SCALE),
    _variant("softmax_queries", "the softmax runs over the queries (axis -2): it runs over the keys, the last axis, "
             "so that the newest query's weights over the t+1 keys sum to 1", "softmax(dim=-1)"),
    _variant("k_twice", "the new key is rotated twice (by 2t): it is rotated once, at its position t, then appended"),
    _variant("scale_times", "the scores are MULTIPLIED by √d: they are divided by it", _SCALE),
    _variant("kt_reshape", "the keys are reshaped to (B, h, d, t+1), not transposed: a reshape keeps the memory "
             "order, so it is Kᵀ only while there is one key", "keys.transpose(-2, -1)"),
    Mistake("wrong_position", "q and k are rotated at position {p}{aside}, not at the newest position t = {t}, the "
            "cache's length (axis 2 of (B, h, t, d): the cache holds positions 0..t-1)", hint="t = cache_k.size(2)",
            shows=_step(8)),
    Mistake("squeezed", "out has lost its position axis: it is (B, h, 1, d), the ONE newest position (weights "
            "(B, h, 1, t+1) times values (B, h, t+1, d))", hint="no squeeze, no [:, :, 0]",
            shows=_returns("squeezed")),
    Mistake("rows_broadcast", "out has {n} rows, one per position up to t, where the step has ONE query, the newest: "
            "something with t+1 rows was broadcast against the newest query's scores (B, h, 1, t+1), such as a "
            "causal mask of t+1 rows; the newest query may see every cached key, so a step needs no mask",
            hint="attend over the whole cache without a mask", shows=_with_mask("masked_fill")),
    Mistake("causal_mask_in_step", "the step is given a mask of shape {mask}, one row per position, but its scores "
            "{scores} have ONE query, the newest, which may see every cached key: a step needs no mask",
            hint="scaled_dot_product_attention(q, cache_k, cache_v) without a mask", shows=_with_mask("course")),
    Mistake("not_appended", "at step t={t} the {name} cache you return still has {t} positions: the new {name} is "
            "appended (along the positions, axis 2) so that the next step sees it",
            hint="torch.cat([cache_{short}, {short}], dim=2)", shows=_returns("not_appended")),
    Mistake("cat_axis", "the cache and the new key or value were joined along the wrong axis: the positions are "
            "axis 2 of (B, h, t, d)", hint="torch.cat([cache_k, k], dim=2)", shows=_returns("cat_last")),
    Mistake("new_in_front", "the new {name} is put in FRONT of the cache: it is appended at the END, so that "
            "position i stays at index i", hint="torch.cat([cache_k, k], dim=2)", shows=_returns("front")),
    Mistake("values_are_keys", "the value cache you return holds the keys: the new value is appended to the cached "
            "values", hint="torch.cat([cache_v, v], dim=2)", shows=_returns("keys_twice")),
    Mistake("heads_meet_positions", "the heads axis (1) meets the positions axis: the scores take Kᵀ over the LAST "
            "two axes", hint="keys.transpose(-2, -1), not transpose(1, 2)",
            shows=lambda q, k, v, cache_k, cache_v: _transposed_1_2(q, k, v, cache_k, cache_v)),
    Mistake("position_shape", "the positions given to apply_rope have shape {got}: they are a 1-D tensor (T,) with "
            "one position per row of x, here the ONE newest position t", hint="torch.tensor([t]), not torch.tensor(t), "
            "an int or torch.arange(t + 1)", shows=lambda q, k, v, cache_k, cache_v: _position_tensor(
                q, k, v, cache_k, cache_v)),
    Mistake("lengths_differ", "the attention got {keys} keys and {values} values: the keys and the values hold the "
            "same t+1 positions, the new value appended to the cached values as the new key to the cached keys",
            hint="torch.cat([cache_v, v], dim=2)",
            shows=lambda q, k, v, cache_k, cache_v: _stale_values(q, k, v, cache_k, cache_v)),
    Mistake("chain_differs", "each step is right given the course's cache, but with your own cache fed back the "
            "outputs of {T} steps differ from uncached causal attention from step {t} on: the step must give the "
            "same result whatever came before (no state kept between calls)", shows=_ChainBreaker()),
    weights_unnormalised(shows=_step("softmax_heads")),
    values_ignored(shows=_returns("weights_times_keys")),
)
VALUE_KEYS = [m.key for m in M if isinstance(m.shows, functools.partial) and m.shows.keywords["kind"] == m.key]


def _transposed_1_2(q, k, v, cache_k, cache_v):
    t = cache_k.size(2)
    q, k = apply_rope(q, torch.tensor([t])), apply_rope(k, torch.tensor([t]))
    keys, values = torch.cat([cache_k, k], 2), torch.cat([cache_v, v], 2)
    return (q @ keys.transpose(1, 2) / math.sqrt(q.size(-1))).softmax(-1) @ values, keys, values


def _position_tensor(q, k, v, cache_k, cache_v):
    t = cache_k.size(2)
    q, k = apply_rope(q, torch.tensor(t)), apply_rope(k, torch.tensor(t))
    keys, values = torch.cat([cache_k, k], 2), torch.cat([cache_v, v], 2)
    return scaled_dot_product_attention(q, keys, values), keys, values


def _stale_values(q, k, v, cache_k, cache_v):
    t = cache_k.size(2)
    q, k = apply_rope(q, torch.tensor([t])), apply_rope(k, torch.tensor([t]))
    keys = torch.cat([cache_k, k], 2)
    return scaled_dot_product_attention(q, keys, cache_v), keys, torch.cat([cache_v, v], 2)

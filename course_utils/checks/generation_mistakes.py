"""Lesson 12's planted mistakes for the attention of generation: one attention step with a key/value cache
(exercise 5), rotary positions (exercise 6) and grouped-query attention (exercise 7). Each `*_variant` computes
what an answer with one typical mistake returns; the checks (lesson12.py) name the mistake an answer matches
(the sampling distribution's are in lesson12_sampling.py)."""
import math

import torch

from ..attention import merge_heads, scaled_dot_product_attention, split_heads
from ..decoding import generate
from ..gpt import GPT
from ..gpt_attention import grouped_query_attention, repeat_kv_heads
from ..masks import causal_mask
from ..positions import apply_rope
from .core import expect, expect_returns, to_numpy
from .evaluation import Evaluation


# ---------------------------------------------------------------------------------------------
# One attention step with a key/value cache (rotary positions)
# ---------------------------------------------------------------------------------------------
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
    position = torch.tensor([kind if isinstance(kind, int) else {"pos0": 0, "pos+1": t + 1}.get(kind, t)])
    q_rot = q if kind == "k_only" else apply_rope(q, position)
    k_rot = k if kind == "q_only" else apply_rope(k, position)
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
    mask = causal_mask(t + 1)[:1] if kind == "mask_row0" else None   # the causal mask's first row
    scale = {"scale_1/d": 1 / q.size(-1), "no_scale": 1.0, "scale_times": math.sqrt(q.size(-1)),
             "scale_d_model": 1 / math.sqrt(q.size(-1) * q.size(1)),
             "scale_after": 1.0, "scale_keys": 1 / math.sqrt(t + 1), "scale_cache": 1 / math.sqrt(max(t, 1))}.get(kind)
    if scale is not None or kind in ("softmax_queries", "kt_reshape"):
        keys_t = used_k.reshape(*used_k.shape[:2], used_k.size(3), used_k.size(2)) if kind == "kt_reshape" else \
            used_k.transpose(-2, -1)                                  # reshape keeps the memory order: not Kᵀ
        scores = q_rot @ keys_t * (scale or 1 / math.sqrt(q.size(-1)))
        weights = scores.softmax(-2 if kind == "softmax_queries" else -1)
        out = (weights / math.sqrt(q.size(-1)) if kind == "scale_after" else weights) @ used_v
    else:
        out = scaled_dot_product_attention(q_rot, used_k, used_v, mask)
    return out, keys, values


STEP_MISTAKES = {
    "cache_only": "the new key and value are not in the attention (not appended yet, or masked out): append them "
                  "to the cache FIRST, then attend over all t+1 keys (the newest position also attends to itself)",
    "new_only": "the cache is not used: attend over the cached keys AND the new one (torch.cat along dim 2)",
    "pos0": "the positions restart at 0 (or q and k are not rotated, which is the same: position 0 is no "
            "rotation): the newest token is at position t = cache_k.size(2), so rotate q and k with "
            "apply_rope(..., torch.tensor([t]))",
    "pos+1": "the position is off by one: the cache holds positions 0..t-1, so the newest token is at position "
             "t = cache_k.size(2), not t+1",
    "q_only": "the new key you append (and attend to) is k as it came, unrotated, while q is rotated at t: k not "
              "rotated, rotated at position 0 (which is no rotation), or appended BEFORE it was rotated (the "
              "rotated copy then goes unused). Rotate k at position t first, then append the rotated key, "
              "torch.cat([cache_k, apply_rope(k, torch.tensor([t]))], dim=2): the cached keys are stored rotated, "
              "so that q_m · k_n sees the distance m - n",
    "k_only": "only k is rotated: rotate the query too, at the same position t",
    "rotate_again": "the cached keys are rotated again: they were rotated at their own positions when they were "
                    "added, so rotate only the NEW key (at t), then append it",
    "rotate_all": "the cached keys are rotated again: the new key was appended as it is and the whole cache "
                  "rotated at positions 0..t, but the cached keys were already rotated when they were added; rotate "
                  "only the NEW key (at t), append it, and leave the cache as it is",
    "mask_row0": "the causal mask is still applied: its first row lets the query see key 0 only, but the newest "
                 "query is the LAST position, which may see every cached key; a step needs no mask",
    "rope_v": "the value is rotated too: RoPE rotates only q and k (the positions enter through the scores); "
              "append v as it is",
    "scale_d_model": "the scores are divided by √(h·d), the model's width: each head divides by the square root of "
                     "ITS size, √d (d = q.size(-1))",
    "scale_after": "the weights are divided by √d AFTER the softmax: divide the scores q kᵀ by √d before it (the "
                   "weights then sum to 1)",
    "scale_1/d": "the scores are divided by d: divide q kᵀ by √d (d = q.size(-1), the head's size)",
    "scale_keys": "the scores are divided by √(t+1), the number of keys (cache_k.size(2) after appending): divide "
                  "q kᵀ by √d, the head's size (d = q.size(-1)), the same at every step",
    "scale_cache": "the scores are divided by √t, the cache's length (cache_k.size(2) before appending): divide "
                   "q kᵀ by √d, the head's size (d = q.size(-1)), the same at every step",
    "no_scale": "the scores are not scaled: divide q kᵀ by √d (d = q.size(-1), the head's size)",
    "softmax_queries": "the softmax runs over the queries (dim=-2): take it over the keys, the last axis, so that "
                       "the newest query's weights over the t+1 keys sum to 1",
    "k_twice": "the new key is rotated twice (by 2t): rotate it once, at its position t, then append it",
    "scale_times": "the scores are MULTIPLIED by √d: divide q kᵀ by √d (d = q.size(-1), the head's size)",
    "kt_reshape": "the keys are reshaped to (B, h, d, t+1), not transposed: reshape keeps the memory order, so it is "
                  "Kᵀ only while there is one key; use keys.transpose(-2, -1)",
}

def position_mistakes(args, ref):
    """{symptom: out} of q and k rotated at another position than t = cache_k.size(2) (the sizes a learner may take
    for it: a neighbour of t, the heads, the head's size, the batch)."""
    B, h, t, d = args[3].shape                                  # cache_k
    wrong = sorted(p for p in {1, t - 1, t + 2, h, d, B, 2 * t} if p > 0 and p not in (t, t + 1))
    return distinct({f"q and k are rotated at position {p}" + (" (q.size(2), the length of the ONE new position?)"
                                                               if p == 1 else "") +
                     f", not at the newest position t = cache_k.size(2) = {t} (the cache's length, axis 2 of "
                     "(B, h, t, d); the cache holds positions 0..t-1)": step_variant(*args, p)[0] for p in wrong}, ref)


SQUEEZED = ("out has lost its position axis: return out (B, h, 1, d), the ONE newest position (weights (B, h, 1, "
            "t+1) @ values (B, h, t+1, d)); do not squeeze it")
CAT_AXIS = ("torch.cat joined the cache and the new key or value along the wrong axis: the positions are axis 2 "
            "of (B, h, t, d), torch.cat([cache_k, k], dim=2)")
STEP_ERRORS = [
    (r"must match the size of tensor b \(\d+\) at non-singleton dimension 1",
     "the heads axis (dim 1) meets another axis: transpose(1, 2) swaps heads and positions; the scores take Kᵀ "
     "over the LAST two axes, keys.transpose(-2, -1)"),
    (r"Sizes of tensors must match except in dimension [0134]", CAT_AXIS),
    (r"positions must be \(T,\)", "apply_rope takes the positions as a 1-D tensor (T,): for the one newest "
                                  "position, torch.tensor([t]), not torch.tensor(t) or an int"),
    (r"k and v must have the same length|Expected size for first two dimensions of batch2|must match the size of "
     r"tensor b .* at non-singleton dimension 2", "the keys and the values have different lengths: append the new "
                                                  "value to cache_v as well as the new key to cache_k"),
]


def full_attention(q, k, v):
    """Uncached: all T positions at once, rotary positions 0..T-1, causal mask."""
    positions = torch.arange(q.size(2))
    return grouped_query_attention(apply_rope(q, positions), apply_rope(k, positions), v, causal_mask(q.size(2)))


def gpt_step(ev: Evaluation, model, answer, token, caches, t):
    """One generation step of `model` with the learner's cached attention in every layer."""
    x = model.embed_tokens(token[:, None], offset=t)                      # (N, 1, d_model)
    for i, layer in enumerate(model.layers):
        attn = layer.attn
        q, k, v = attn.in_proj(layer.norm1(x)).split([attn.d_model, attn.d_kv, attn.d_kv], -1)
        q, k, v = split_heads(q, attn.num_heads), split_heads(k, attn.num_heads), split_heads(v, attn.num_heads)
        result = ev.call(answer, q, k, v, caches[i][0], caches[i][1])
        out, cache_k, cache_v = expect_returns(result, reference_cached_attention_step(q, k, v, *caches[i]),
                                               ("out", "cache_k", "cache_v"))
        caches[i] = (torch.as_tensor(cache_k), torch.as_tensor(cache_v))
        x = x + attn.out_proj(merge_heads(torch.as_tensor(out)))
        x = x + layer.ff(layer.norm2(x))
    return model.head(model.norm(x))[:, 0]                                # (N, V)



def gpt_generates_with(ev: Evaluation, answer):
    """A small GPT generating greedily with the learner's cached step in every layer gives the logits of the
    model run on the whole prefix, and the same tokens as generation without a cache."""
    torch.manual_seed(1)
    model = GPT(23, d_model=16, num_heads=2, num_layers=2, d_ff=32, max_len=16, positions="rope").eval()
    prompt = torch.as_tensor(ev.rng(1).integers(3, 23, size=(2, 3)))
    with torch.no_grad():
        expected = generate(model, prompt, 8, temperature=0, use_cache=False)
        caches = [(torch.zeros(2, 2, 0, 8), torch.zeros(2, 2, 0, 8)) for _ in model.layers]
        tokens, prefix = [], prompt
        for t in range(prompt.size(1) + expected.size(1) - 1):
            logits = gpt_step(ev, model, answer, prefix[:, t], caches, t)
            if t >= prompt.size(1) - 1:
                ev.expect_close(logits, model(prefix)[:, -1], f"a GPT's next-token logits at position {t} with your "
                                "cached step in every layer, against the model run on the whole prefix", atol=1e-4)
                y = logits.argmax(-1)
                tokens.append(y)
                prefix = torch.cat([prefix, y[:, None]], 1)
        expect(torch.equal(torch.stack(tokens, 1), expected), "greedy generation with your cached step gives other "
                                                              "tokens than generation without a cache.")


# ---------------------------------------------------------------------------------------------
# Rotary positions
# ---------------------------------------------------------------------------------------------
def rope_variant(x, positions, base, kind):
    """apply_rope (float64) with the mistake `kind` planted."""
    d = x.size(-1)
    x = x.double()
    i = torch.arange(d // 2, dtype=torch.float64)
    exponent = {"freq_no_two": -i / d, "freq_sign": 2 * i / d, "freq_full": -2 * i / (d // 2),
                "freq_int": torch.floor(-2 * i / d)}.get(kind, -2 * i / d)
    theta = (10000.0 if kind == "base_ignored" else base) ** exponent
    m = positions.double()
    m = {"pos+1": m + 1, "arange": torch.arange(x.size(-2), dtype=torch.float64),
         "arange1": torch.arange(1, x.size(-2) + 1, dtype=torch.float64)}.get(kind, m)
    angle = m[:, None] * theta
    if kind == "sign":
        angle = -angle
    if kind == "degrees":
        angle = torch.deg2rad(angle)
    cos, sin = angle.cos(), angle.sin()
    if kind == "sin_cos":
        cos, sin = sin, cos
    if kind == "interleaved":              # pairs (2i, 2i+1)
        x1, x2 = x[..., 0::2], x[..., 1::2]
        out = torch.empty_like(x)
        out[..., 0::2], out[..., 1::2] = x1 * cos - x2 * sin, x1 * sin + x2 * cos
        return out
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    halves = [x1 * cos - x2 * sin, x1 * sin + x2 * cos]
    if kind == "neighbours_halves":        # pairs read as neighbours (2i, 2i+1), written back as halves
        n1, n2 = x[..., 0::2], x[..., 1::2]
        return torch.cat([n1 * cos - n2 * sin, n1 * sin + n2 * cos], -1)
    if kind == "stacked":                  # the halves' rotated values written pair by pair
        return torch.stack(halves, -1).flatten(-2)
    return torch.cat(halves[::-1] if kind == "halves_swapped" else halves, -1)


ROPE_MISTAKES = {
    "interleaved": "the pairs are neighbours (2i, 2i+1): this lesson pairs the two HALVES, feature i with feature "
                   "i + d/2 (the GPT-NeoX / Hugging Face Llama convention; the RoFormer paper's neighbours are the "
                   "other one)",
    "sign": "the angle has the wrong sign: (x_i, x_{i+d/2}) -> (x_i cos - x_{i+d/2} sin, x_i sin + x_{i+d/2} cos), "
            "a rotation by +m θ_i",
    "sin_cos": "sin and cos are swapped: the first half becomes x_i cos(mθ_i) - x_{i+d/2} sin(mθ_i), the second "
               "x_i sin(mθ_i) + x_{i+d/2} cos(mθ_i)",
    "neighbours_halves": "the pairs are read as neighbours (x[..., 0::2], x[..., 1::2]) but written back as halves: "
                         "this lesson pairs feature i with feature i + d/2 both ways, x1, x2 = x[..., :d//2], "
                         "x[..., d//2:]",
    "stacked": "the rotated values are written pair by pair (torch.stack([...], -1).flatten(-2) interleaves them): "
               "this lesson keeps the HALVES, torch.cat([x1 cos - x2 sin, x1 sin + x2 cos], dim=-1)",
    "halves_swapped": "the two rotated halves are put back in the wrong order: the rotated x_i go first, then the "
                      "rotated x_{i+d/2}",
    "pos+1": "the positions are off by one: rotate by positions[t] θ_i itself, not (positions[t] + 1) θ_i",
    "arange": "the positions are ignored (0, 1, ..., T-1 used instead): rotate row t by positions[t] θ_i, the "
              "positions the function is given (a cached step gives one position, t)",
    "arange1": "the positions are ignored (1, 2, ..., T used instead): rotate row t by positions[t] θ_i, the "
               "positions the function is given",
    "freq_int": "the exponent -2i/d is computed with integers (// rounds it down to 0 or -1): compute it in floats, "
                "-2 * torch.arange(d // 2).float() / d",
    "base_ignored": "the base argument is ignored (10000 used): θ_i = base^(-2i/d) with the base you are given",
    "freq_no_two": "the frequencies are off: θ_i = base^(-2i/d) for i = 0 .. d/2-1 (you used base^(-i/d))",
    "freq_sign": "the frequencies are off: θ_i = base^(-2i/d), a NEGATIVE exponent (the first pair turns fastest, "
                 "the last slowest)",
    "freq_full": "the frequencies are off: θ_i = base^(-2i/d) with d the full feature size, not d/2",
    "degrees": "the angles are taken as degrees: m θ_i is in radians (torch.cos and torch.sin take radians)",
}


ROPE_DTYPE = ("x is float64 and your rotated x is {dtype}: return x in its own dtype (compute in float32 if you "
              "like, then .to(x.dtype)), so that a model in float64 or bfloat16 gets its dtype back")


def rope_errors(T, d):
    """The crashes of apply_rope's typical slips, for x (..., T, d) (lesson12_setup.call_naming's errors)."""
    def sizes(match):
        got = {int(match[1]), int(match[2])}
        if got == {T, d // 2} and T != d // 2:
            return ("positions (T,) times θ (d/2,) do not broadcast: make the angles a (T, d/2) table, "
                    "positions[:, None] * theta (an outer product)")
        if len(got) == 2 and (sum(got) == d or d // 2 in got and (got - {d // 2}).pop() == T // 2):
            return (f"x is not split into halves of d/2 = {d // 2} features, or θ has not d/2 values: d is the head's "
                    "size, the LAST axis, x.size(-1) (x.size(-2) is T, the number of positions)")
        if got == {d // 2, d}:
            return ("θ has d values: there is one frequency per PAIR, θ_i for i = 0 .. d/2-1 (torch.arange(d // 2)), "
                    "so that cos and sin are (T, d/2) like each half of x")
        return None
    return [(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\)", sizes)]


def rope_complex(x, positions, base):
    """The complex form: z_i = x_i + i x_{i+d/2}, multiplied by e^{i m θ_i}."""
    d = x.size(-1)
    z = torch.complex(x[..., :d // 2].double(), x[..., d // 2:].double())
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)
    z = z * torch.polar(torch.ones(()).double(), positions.double()[:, None] * theta)
    return torch.cat([z.real, z.imag], -1)


def distinct(mistakes, expected, atol=1e-6):
    """The mistakes whose values differ from the right answer's (a mistake that gives the right values on
    this input cannot be named on it)."""
    e = torch.as_tensor(to_numpy(expected)).double()
    return {k: v for k, v in mistakes.items()
            if v.shape != e.shape or not torch.allclose(torch.as_tensor(to_numpy(v)).double(), e, atol=atol)}


# ---------------------------------------------------------------------------------------------
# Exercise 7: grouped-query attention
# ---------------------------------------------------------------------------------------------
def _manual(q, k, v, mask, scale, axis=-1, inverted=False, kind=""):
    scores = q @ k.transpose(-2, -1) * scale
    keep = ~mask if inverted else mask
    if kind == "after_softmax":
        return (scores.softmax(axis) * keep) @ v
    if kind == "additive_float":              # F.scaled_dot_product_attention ADDS a float mask
        return (scores + keep.float()).softmax(axis) @ v
    return scores.masked_fill(~keep, 0.0 if kind == "fill_zero" else float("-inf")).softmax(axis) @ v


def gqa_variant(q, k, v, mask, kind):
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
    scale = {"no_scale": 1.0, "scale_1/d": 1 / d, "scale_d_model": 1 / math.sqrt(h * d),
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


GQA_MISTAKES = {
    "group_zero": "the output is all zeros, as if no key/value head were used: each key/value head serves a group "
                  "of h // h_kv query heads (group = q.size(1) // k.size(1)); h_kv // h is 0, and repeat_interleave(0, "
                  "dim=1) leaves no head at all",
    "round_robin": "query head j uses key/value head j % h_kv (round-robin, k.repeat): the course groups "
                   "CONSECUTIVE query heads, head j uses key/value head j // (h / h_kv) (repeat_interleave)",
    "kv_different": "the keys and the values are grouped differently: query head j must use key AND value head "
                    "j // (h / h_kv); repeat both the same way (repeat_interleave along dim 1)",
    "first": "every query head uses the first key/value head: head j uses key/value head j // (h / h_kv)",
    "mean": "the key/value heads are averaged: each key/value head serves its own group of query heads",
    "v_from_k": "the values are the keys, repeated (a copy-pasted line?): repeat v for the values, "
                "v.repeat_interleave(h // h_kv, dim=1), and k for the keys",
    "k_from_v": "the keys are the values, repeated (a copy-pasted line?): repeat k for the keys, "
                "k.repeat_interleave(h // h_kv, dim=1), and v for the values",
    "no_mask": "the mask is not applied: pass it to the attention (here: causal)",
    "inverted": "the mask is inverted: True means MAY attend (the causal mask is True on and below the diagonal)",
    "inverted_nan": "the mask is inverted (masked_fill(mask, -inf) hides the allowed keys): True means MAY attend; "
                    "hide the keys where the mask is False, masked_fill(~mask, float('-inf'))",
    "causal_only": "the mask you are given is ignored: your function applies a causal mask of its own (is_causal, or "
                   "causal_mask(T)); use `mask` (here a padding mask)",
    "fill_zero": "the masked scores are set to 0, which still gets weight after the softmax: set them to -inf",
    "after_softmax": "the mask is applied after the softmax: the weights no longer sum to 1. Set the masked scores to "
                     "-inf before the softmax",
    "additive_float": "the mask was turned into floats: F.scaled_dot_product_attention ADDS a float mask to the scores "
                      "(+1 where allowed); pass the boolean mask itself (True = may attend)",
    "no_scale": "the scores are not scaled: divide q kᵀ by √d_head (d = q.size(-1))",
    "scale_T": "the scores are divided by √T, the number of keys (k.size(-2)): divide them by √d_head, the head's "
               "size, q.size(-1)",
    "mask_t": "the mask is transposed: mask[..., i, j] says whether QUERY i may see KEY j (rows are queries); pass "
              "it as it is",
    "scale_1/d": "the scores are divided by d_head: divide them by its square root, √d_head",
    "scale_d_model": "the scores are divided by √d_model (all heads' features): each head divides by the square "
                     "root of ITS size, √d_head = √(q.size(-1))",
    "softmax_queries": "the softmax runs over the queries (dim=-2): take it over the keys, the last axis",
}
GQA_ERRORS = [
    (r"got shapes \([\d, ]+\), \(\d+,\)",
     "k and v were flattened: repeat_interleave without dim= flattens the tensor; repeat along the head axis, "
     "k.repeat_interleave(h // h_kv, dim=1)"),
    (r"view size is not compatible", "an expanded tensor is a view that repeats memory: .view cannot merge its axes; "
                                     "use .reshape (which copies), or k.repeat_interleave(h // h_kv, dim=1)"),
    (r"repeat_interleave\(\) received an invalid combination of arguments - got \(float",
     "the group size is a float: h / h_kv is a float in Python 3 even when it divides; use h // h_kv"),
    (r"expanded size of the tensor \((\d+)\) must match the existing size \((\d+)\) at non-singleton dimension 1",
     "expand can only stretch an axis of size 1, so it repeats the key/value heads only when h_kv = 1: repeat "
     "each of the h_kv heads h // h_kv times along dim 1, k.repeat_interleave(h // h_kv, dim=1)"),
    (r"mask of shape \(([\d, ]+)\) does not broadcast to the scores' shape \(([\d, ]+)\)",
     lambda m: f"the mask your attention got has shape ({m[1]}), which does not fit the scores ({m[2]}): pass `mask` "
               "as it is given (it has no head axis, or one of size 1, and broadcasts over all h query heads); only "
               "k and v are repeated, h // h_kv times along dim 1"),
    (r"must match the size of tensor b .* at non-singleton dimension 1|Expected size for first two dimensions",
     "the key/value heads do not line up with the query heads: repeat each of the h_kv heads h / h_kv times "
     "along the head axis (k.repeat_interleave(h // h_kv, dim=1), the same for v)"),
]

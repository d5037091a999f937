"""Lesson 12's planted mistakes for the generation side: the sampling distribution (exercise 4), one attention
step with a key/value cache (exercise 5) and rotary positions (exercise 6). Each `*_variant` computes what an
answer with one typical mistake returns; the checks (lesson12.py) name the mistake an answer matches."""
import math

import torch

from ..attention import merge_heads, scaled_dot_product_attention, split_heads
from ..decoding import generate
from ..decoding import sampling_distribution as ref_sampling
from ..gpt import GPT
from ..gpt_attention import grouped_query_attention
from ..masks import causal_mask
from ..positions import apply_rope
from .core import expect, expect_distribution, expect_returns, expect_shape, to_numpy
from .evaluation import Evaluation


# ---------------------------------------------------------------------------------------------
# Sampling: temperature, top-k, top-p
# ---------------------------------------------------------------------------------------------
def _keep_top_p(probs, top_p, kind="ok"):
    """Mask of the nucleus: the most probable tokens until the mass reaches top_p (ties at the end kept);
    kind "drops_crossing" drops the token that crosses p, "p_ascending" takes the LEAST probable first."""
    if kind == "p_ascending":
        ranked = probs.sort(-1).values
        before = (ranked.cumsum(-1) < top_p).sum(-1, keepdim=True)
        return probs <= ranked.gather(-1, before.clamp(max=probs.size(-1) - 1))
    ranked = probs.sort(-1, descending=True).values
    if kind == "unsorted_mask":              # the mask of the sorted row applied to the row as it is
        return (ranked.cumsum(-1) - ranked) < top_p
    if kind in ("drops_crossing", "drops_crossing_keep1"):   # the tokens whose cumulative mass stays <= p: maybe
        inside = (ranked.cumsum(-1) <= top_p).sum(-1, keepdim=True)          # none (or the first one, kept anyway)
        keep = probs >= ranked.gather(-1, (inside - 1).clamp(min=0))
        return keep if kind == "drops_crossing_keep1" else keep & (inside > 0)
    before = (ranked.cumsum(-1) < top_p).sum(-1, keepdim=True)
    return probs >= ranked.gather(-1, before.clamp(max=probs.size(-1) - 1))


def sampling_variant(logits, temperature, top_k, top_p, kind="ok"):
    """The sampling distribution (float64) with the mistake `kind` planted."""
    z = logits.double()
    if kind == "temperature_times":
        z = z * temperature
    elif kind == "temperature_twice":
        z = z / temperature ** 2
    elif kind not in ("temperature_after", "temperature_after_filters"):
        z = z / temperature
    if top_k is not None:
        k = min(top_k + (kind == "k_plus_one"), z.size(-1))
        kth = z.topk(k, -1, largest=kind not in ("k_smallest", "kthvalue")).values[..., -1:]
        if kind == "kth_is_max":             # compared with the LARGEST value, not the k-th
            kth = z.max(-1, keepdim=True).values
        if kind == "k_smallest":
            z = z.masked_fill(z > kth, float("-inf"))
        elif kind == "k_minus_one":          # z <= kth removed: the k-th itself goes
            z = z.masked_fill(z <= kth, float("-inf"))
        else:
            z = z.masked_fill(z < kth, 0.0 if kind == "fill_zero" else float("-inf"))
    probs = z.softmax(-1)
    if kind == "temperature_after":          # the probabilities divided by T: undone by the renormalisation
        probs = probs / temperature
    if top_p is not None and top_p < 1:
        base = logits.double().div(temperature).softmax(-1) if kind == "top_p_unfiltered" else probs
        probs = probs * _keep_top_p(base, top_p, kind)
    if kind == "temperature_after_filters":  # the filters chose the tokens at T = 1; T applied to what they kept
        kept = probs > 0
        probs = logits.double().div(temperature).softmax(-1) * kept
    if kind == "sorted_out":                 # left in the sort's order
        probs = probs.sort(-1, descending=True).values
    if kind == "no_renorm":
        return probs
    if kind == "whole_sum":                  # divided by the sum of the whole tensor, not of each row
        return probs / probs.sum()
    if kind == "softmax_renorm":             # a softmax where a division by the sum was asked
        return probs.softmax(-1)
    return probs / probs.sum(-1, keepdim=True)


def _unnormalised(logits, temperature, top_k, top_p):
    """What forgetting the renormalisation gives: the softmax's values where the token is kept, else 0."""
    kept = sampling_variant(logits, temperature, top_k, top_p) > 0
    return logits.double().div(temperature).softmax(-1) * kept


_UNSORT = ("put it back at each token's position (scatter with the sort's indices), or keep the tokens at least as "
           "probable as the last one the sorted row keeps")
SAMPLING_MISTAKES = {
    "temperature_after": "the temperature has no effect: divide the LOGITS by T before the softmax (dividing "
                         "the probabilities by T is undone when they are renormalised)",
    "temperature_times": "the logits are multiplied by the temperature: divide them by T (T > 1 flattens the "
                         "distribution, T < 1 sharpens it)",
    "temperature_after_filters": "the temperature is applied after the filters: top-p chose its tokens from the "
                                 "distribution at T = 1. Divide the logits by T FIRST, then top-k, then top-p",
    "temperature_twice": "the temperature is applied twice (the logits divided by T²): divide the logits by T once",
    "kthvalue": "top-k compares with the k-th SMALLEST logit (torch.kthvalue counts from the smallest): the threshold "
                "is the k-th largest, torch.topk(z, k).values[..., -1:]",
    "k_plus_one": "top-k keeps k+1 tokens: the k-th largest logit is sorted[..., k-1] (counting from 0), the last of "
                  "the k values torch.topk returns (values[..., -1:])",
    "k_minus_one": "top-k keeps k-1 tokens: it removes the k-th largest logit itself; remove only the logits BELOW it "
                   "(z < kth), so that the k-th is kept",
    "unsorted_mask": "top-p's mask is in SORTED order (computed on the sorted row and applied to the row as it is, or "
                     "the sorted probabilities returned): " + _UNSORT,
    "sorted_out": "top-p's result is in SORTED order (the sorted probabilities returned, or the sorted row's mask "
                  "applied to the row as it is): " + _UNSORT,
    "k_smallest": "top-k keeps the k SMALLEST logits: keep the k largest (torch.topk(z, k) gives the largest)",
    "kth_is_max": "top-k compares every logit with the LARGEST one (topk(...).values[..., 0]): compare with the "
                  "k-th largest, the last of the k values topk returns",
    "fill_zero": "top-k sets the removed logits to 0, which still gets probability after the softmax: set them "
                 "to -inf (masked_fill(..., float('-inf')))",
    "drops_crossing": "top-p drops the token that crosses p: keep the smallest set of most probable tokens whose "
                      "mass REACHES p, the token that takes the cumulative sum to p or beyond included",
    "top_p_unfiltered": "top-p is computed on the distribution before top-k (or applied before top-k, which "
                        "gives the same): apply it to the distribution top-k left, renormalised, as the order "
                        "temperature -> top-k -> top-p says",
    "drops_crossing_keep1": "top-p drops the token that crosses p (keeping only the tokens whose cumulative mass "
                            "stays <= p): keep the smallest set of most probable tokens whose mass REACHES p, the "
                            "token that takes the cumulative sum to p or beyond included",
    "whole_sum": "the probabilities are divided by the sum of the whole tensor: each ROW must sum to 1, divide by "
                 "probs.sum(-1, keepdim=True)",
    "p_ascending": "top-p keeps the LEAST probable tokens: sort the probabilities in descending order "
                   "(sort(descending=True)) and keep the most probable ones until their mass reaches p",
    "softmax_renorm": "the kept probabilities are renormalised with a softmax, which gives the removed tokens "
                      "probability again: divide the kept probabilities by their sum",
}


def expect_sampling(ev: Evaluation, got, logits, temperature, top_k, top_p, what):
    """The learner's distribution `got` equals the reference's, or the mistake it matches is named."""
    expect_shape(got, tuple(logits.shape), what)
    expected = ref_sampling(logits, temperature, top_k, top_p)
    mistakes = {text: sampling_variant(logits, temperature, top_k, top_p, kind)
                for kind, text in SAMPLING_MISTAKES.items()}
    mistakes["the kept probabilities are not renormalised: after zeroing the filtered tokens, divide by the sum "
             "of what is kept so that the distribution sums to 1"] = _unnormalised(logits, temperature, top_k, top_p)
    mistakes["the probabilities top-p keeps are not renormalised: after zeroing the tokens outside the nucleus, "
             "divide by the sum of what is kept so that the distribution sums to 1"] = \
        sampling_variant(logits, temperature, top_k, top_p, "no_renorm")
    mistakes = {k: v for k, v in mistakes.items() if not torch.allclose(v.float(), expected, atol=1e-5,
                                                                         equal_nan=True)}
    ev.expect_close(got, expected, what, mistakes=mistakes, atol=1e-5, rtol=1e-4)
    expect_distribution(got, what)


SAMPLING_ERRORS = [
    (r"size of tensor a \(\d+\) must match the size of tensor b \(\d+\) at non-singleton dimension 1",
     "a value of each row (the k-th largest logit, the probability that reaches p, or the row's sum) lost its last "
     "axis: shape (N,) does not line up with the rows (N, V); keep it, values[..., -1:], sum(-1, keepdim=True)"),
]


def designed_logits(temperature=0.7):
    """Two rows on which every planted sampling mistake of the combined test (T = 0.7, top_k = 5, top_p = 0.8)
    gives values of its own (p_ascending coincides with top_p_unfiltered here: the top-p tests before name it):
    p at T = 0.7 is [.30, .25, .15, .09, .06, then .15 over 5 tokens]; top-5 keeps .85, top-p on it keeps 3
    tokens, top-p on the unfiltered distribution 5, top-p at T = 1 on top-5's 4; and the row's mirror image."""
    p = torch.tensor([0.30, 0.25, 0.15, 0.09, 0.06, 0.045, 0.035, 0.03, 0.025, 0.015], dtype=torch.float64)
    row = p.log() * temperature
    return torch.stack([row, row.flip(0)]).float()


def top_k_ties(tokens_kept, what):
    """A property: the tied logits at the k-th place are all kept (or all dropped)."""
    expect(tokens_kept, f"{what}: a tie at the k-th largest logit, and your answer keeps only some of the tied "
                        "tokens. Keep every token whose logit is at least the k-th largest (z >= kth), so that the "
                        "result does not depend on how torch.topk orders equal values.")


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
    scale = {"scale_1/d": 1 / q.size(-1), "no_scale": 1.0, "scale_d_model": 1 / math.sqrt(q.size(-1) * q.size(1)),
             "scale_after": 1.0}.get(kind)
    if scale is not None or kind == "softmax_queries":
        scores = q_rot @ used_k.transpose(-2, -1) * (scale or 1 / math.sqrt(q.size(-1)))
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
    "q_only": "only q is rotated: rotate the new key too, at the same position t (the cached keys are stored "
              "rotated, and q_m · k_n must see the distance m - n)",
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
    "no_scale": "the scores are not scaled: divide q kᵀ by √d (d = q.size(-1), the head's size)",
    "softmax_queries": "the softmax runs over the queries (dim=-2): take it over the keys, the last axis, so that "
                       "the newest query's weights over the t+1 keys sum to 1",
}

def position_mistakes(args, ref):
    """{symptom: out} of q and k rotated at another position than t = cache_k.size(2) (the sizes a learner may take
    for it: a neighbour of t, the heads, the head's size, the batch)."""
    B, h, t, d = args[3].shape                                  # cache_k
    wrong = sorted(p for p in {t - 1, t + 2, h, d, B, 2 * t} if p > 0 and p not in (t, t + 1))
    return distinct({f"q and k are rotated at position {p}, not at the newest position t = cache_k.size(2) = {t} "
                     "(the cache's length, axis 2 of (B, h, t, d); the cache holds positions 0..t-1)":
                     step_variant(*args, p)[0] for p in wrong}, ref)


SQUEEZED = ("out has lost its position axis: return out (B, h, 1, d), the ONE newest position (weights (B, h, 1, "
            "t+1) @ values (B, h, t+1, d)); do not squeeze it")
CAT_AXIS = ("torch.cat joined the cache and the new key or value along the wrong axis: the positions are axis 2 "
            "of (B, h, t, d), torch.cat([cache_k, k], dim=2)")
STEP_ERRORS = [
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
    return torch.cat(halves[::-1] if kind == "halves_swapped" else halves, -1)


ROPE_MISTAKES = {
    "interleaved": "the pairs are neighbours (2i, 2i+1): this lesson pairs the two HALVES, feature i with feature "
                   "i + d/2 (the GPT-NeoX / Hugging Face Llama convention; the RoFormer paper's neighbours are the "
                   "other one)",
    "sign": "the angle has the wrong sign: (x_i, x_{i+d/2}) -> (x_i cos - x_{i+d/2} sin, x_i sin + x_{i+d/2} cos), "
            "a rotation by +m θ_i",
    "sin_cos": "sin and cos are swapped: the first half becomes x_i cos(mθ_i) - x_{i+d/2} sin(mθ_i), the second "
               "x_i sin(mθ_i) + x_{i+d/2} cos(mθ_i)",
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


def rope_errors(T, d):
    """The crashes of apply_rope's typical slips, for x (..., T, d) (lesson12_setup.call_naming's errors)."""
    def sizes(match):
        got = {int(match[1]), int(match[2])}
        if got == {T, d // 2} and T != d // 2:
            return ("positions (T,) times θ (d/2,) do not broadcast: make the angles a (T, d/2) table, "
                    "positions[:, None] * theta (an outer product)")
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

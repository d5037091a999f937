"""Checks for lesson 12 (a GPT from scratch): the next-token loss, the sampling distribution, one attention
step with a key/value cache, rotary positions, and grouped-query attention. Each compares the learner's
function with the course's reference (gpt.next_token_loss, decoding.sampling_distribution,
attention.apply_rope, attention.grouped_query_attention; the cached step's reference is below) on seeded
random inputs, and names the lesson's typical mistakes."""
import math

import numpy as np
import torch
import torch.nn.functional as F

from ..attention import apply_rope as ref_apply_rope
from ..attention import grouped_query_attention as ref_gqa
from ..attention import merge_heads, repeat_kv_heads, scaled_dot_product_attention, split_heads
from ..decoding import generate
from ..decoding import sampling_distribution as ref_sampling
from ..gpt import GPT
from ..gpt import next_token_loss as ref_loss
from ..masks import causal_mask
from .core import (
    exercise,
    expect,
    expect_returns,
    expect_shape,
    randn,
    single_threaded,
    to_numpy,
)
from .evaluation import Evaluation
from .gpt_mistakes import _expect_sampling, _rope_complex, _rope_variant  # noqa: F401

__all__ = ["next_token_loss", "sampling_distribution", "cached_attention_step", "apply_rope",
           "grouped_query_attention", "reference_cached_attention_step"]


def _t(x):
    return torch.as_tensor(to_numpy(x)).double() if not torch.is_tensor(x) else x.detach().double()


# ---------------------------------------------------------------------------------------------
# Exercise 1: next-token targets and the loss
# ---------------------------------------------------------------------------------------------
def _ce(logits, targets, pad_id, reduction="mean"):
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), ignore_index=pad_id,
                           reduction=reduction)


@exercise("next-token targets and the loss", reference=ref_loss)
@single_threaded
def next_token_loss(ev: Evaluation, answer):
    """answer(logits (B, T, V), tokens (B, T), pad_id) -> the mean cross-entropy of logits[:, :-1] against
    tokens[:, 1:] over the targets that are not padding."""
    tests = 0
    for seed, (B, T, V, pad_id) in enumerate([(3, 7, 11, 0), (2, 9, 6, 0), (4, 5, 13, 3)]):
        g = ev.rng(seed)
        logits = randn(g, B, T, V, scale=2.0)
        tokens = torch.as_tensor(g.integers(0, V, size=(B, T)))
        tokens[tokens == pad_id] = (pad_id + 1) % V                       # padding only where we put it
        tokens[0, T - 2:] = pad_id                                         # rows end in padding
        tokens[B - 1, T - 3:] = pad_id
        got = ev.call(answer, logits.clone(), tokens.clone(), pad_id)
        expect(got is not None, "your function returned nothing: end it with `return loss`.")
        expect(np.size(to_numpy(got)) == 1, f"return ONE number, the mean over the real targets; got shape "
                                            f"{tuple(np.shape(to_numpy(got)))}.")
        x, y = logits[:, :-1], tokens[:, 1:]
        real = y != pad_id
        mistakes = {
            "the targets are not shifted: position t must predict token t+1, so compare logits[:, :-1] with "
            "tokens[:, 1:] (you compared every position with the token it reads)": _ce(logits, tokens, pad_id),
            "the targets are shifted the wrong way: the logits at positions 0..T-2 predict tokens 1..T-1 "
            "(logits[:, :-1] against tokens[:, 1:]), not logits[:, 1:] against tokens[:, :-1]":
                _ce(logits[:, 1:], tokens[:, :-1], pad_id),
            "padding is counted: targets equal to pad_id must not enter the loss (ignore_index=pad_id, or "
            "average over the real targets only)": _ce(x, y, -100),
            "the loss is a sum: return the MEAN over the real targets (a sum grows with the batch and the "
            "length, so the learning rate would have to change with them)": _ce(x, y, pad_id, "sum"),
            "the sum over the real targets is divided by ALL T-1 positions of every row, padding included: "
            "divide by the number of real targets": _ce(x, y, pad_id, "sum") / y.numel(),
            "the softmax runs over the wrong axis: log_softmax over the LAST axis (the vocabulary, V)":
                -(torch.log_softmax(x, dim=1).gather(-1, y[..., None])[..., 0])[real].mean(),
        }
        ev.expect_close(np.reshape(to_numpy(got), ()), ref_loss(logits, tokens, pad_id),
                        f"the loss (B={B}, T={T}, V={V}, pad_id={pad_id})", mistakes=mistakes, atol=1e-5, rtol=1e-4)
        tests += 1
    return tests


# ---------------------------------------------------------------------------------------------
# Exercise 2: temperature, top-k, top-p
# ---------------------------------------------------------------------------------------------
@exercise("sampling distribution: temperature, top-k, top-p", reference=ref_sampling)
@single_threaded
def sampling_distribution(ev: Evaluation, answer):
    """answer(logits (N, V), temperature, top_k, top_p) -> probabilities (N, V), each row summing to 1."""
    tests = 0
    for seed, (N, V) in enumerate([(4, 10), (3, 17)]):
        g = ev.rng(seed)
        logits = randn(g, N, V, scale=2.0)
        # temperature alone: sharper and flatter
        for temperature in (0.5, 1.0, 2.0):
            got = ev.call(answer, logits.clone(), temperature, None, None)
            _expect_sampling(ev, got, logits, temperature, None, None, f"the distribution at temperature {temperature}")
            tests += 1
        # top-k alone: k tokens left
        for top_k in (1, 3):
            got = ev.call(answer, logits.clone(), 1.0, top_k, None)
            _expect_sampling(ev, got, logits, 1.0, top_k, None, f"the distribution with top_k={top_k}")
            support = (to_numpy(got) > 0).sum(-1)
            expect(np.all(support == top_k), f"with top_k={top_k} each row should keep exactly {top_k} tokens "
                                             f"(random logits have no ties); yours keep {support.tolist()}.")
            tests += 1
        # top-p alone: the kept mass reaches p, and is the smallest such set
        for top_p in (0.3, 0.75, 0.9):
            got = ev.call(answer, logits.clone(), 1.0, None, top_p)
            _expect_sampling(ev, got, logits, 1.0, None, top_p, f"the distribution with top_p={top_p}")
            probs = logits.double().softmax(-1)
            kept = torch.as_tensor(to_numpy(got)) > 0
            mass = (probs * kept).sum(-1)
            expect(bool((mass >= top_p - 1e-6).all()), f"with top_p={top_p} the kept tokens hold only "
                                                        f"{float(mass.min()):.3f} of the probability: keep tokens "
                                                        "until their mass reaches p.")
            smallest = (probs * kept).masked_fill(~kept, 2.0).min(-1).values
            expect(bool((mass - smallest < top_p).all()),
                   f"with top_p={top_p} you keep more tokens than needed: without the least probable kept one, "
                   "the mass still reaches p.")
            tests += 1
        # all three together: temperature, then top-k, then top-p on what top-k left
        got = ev.call(answer, logits.clone(), 0.7, 5, 0.8)
        _expect_sampling(ev, got, logits, 0.7, 5, 0.8, "the distribution with temperature=0.7, top_k=5, top_p=0.8")
        # p = 1 keeps everything
        got = ev.call(answer, logits.clone(), 1.5, None, 1.0)
        _expect_sampling(ev, got, logits, 1.5, None, 1.0, "the distribution with top_p=1 (nothing filtered)")
        tests += 2
    # temperature -> 0 is greedy; temperature = 0 is greedy exactly
    g = ev.rng(5)
    logits = randn(g, 3, 8, scale=2.0)
    logits[torch.arange(3), logits.argmax(-1)] += 0.5    # a clear winner, whatever the seed
    greedy = F.one_hot(logits.argmax(-1), 8).float()
    got = ev.call(answer, logits.clone(), 0.0, None, None)
    expect(got is not None and np.allclose(to_numpy(got), to_numpy(greedy), atol=1e-6),
           "temperature=0 means greedy decoding: all the mass on the most probable token (a one-hot row); "
           "handle it before dividing by T.")
    got = ev.call(answer, logits.clone(), 1e-3, None, None)
    expect(np.allclose(to_numpy(got), to_numpy(greedy), atol=1e-4),
           "at temperature 0.001 the distribution should be (almost) one-hot on the most probable token.")
    # ties at the top-p boundary: tokens as probable as the last one kept are all kept
    tied = torch.tensor([[2.0, 1.0, 1.0, 1.0, -1.0, -2.0]])
    got = ev.call(answer, tied.clone(), 1.0, None, 0.5)
    expect(got is not None and np.all((to_numpy(got)[0, 1:4] > 0) == (to_numpy(got)[0, 1] > 0)),
           "a tie at the top-p boundary: tokens 1, 2 and 3 are equally probable, and some are kept but not all. "
           "Keep every token at least as probable as the one that reaches p (the result must not depend on how "
           "a sort orders equal values).")
    _expect_sampling(ev, got, tied, 1.0, None, 0.5, "the distribution with ties at the top-p boundary")
    return tests + 3


# ---------------------------------------------------------------------------------------------
# Exercise 3: one attention step with a key/value cache (rotary positions)
# ---------------------------------------------------------------------------------------------
def reference_cached_attention_step(q, k, v, cache_k, cache_v):
    """The newest position's q, k, v (B, h, 1, d), not yet rotated, and the cache (B, h, t, d) of positions
    0..t-1 -> (out (B, h, 1, d), cache_k, cache_v with t+1 positions). The course's
    `MultiHeadAttention.extend_cache` does this for every head, after the projections."""
    t = cache_k.size(2)                                                   # the newest position
    position = torch.tensor([t])
    q, k = ref_apply_rope(q, position), ref_apply_rope(k, position)
    cache_k, cache_v = torch.cat([cache_k, k], dim=2), torch.cat([cache_v, v], dim=2)   # (B, h, t+1, d)
    out = scaled_dot_product_attention(q, cache_k, cache_v)               # no mask: every key is in the past
    return out, cache_k, cache_v


def _step_variant(q, k, v, cache_k, cache_v, kind):
    t = cache_k.size(2)
    position = torch.tensor([{"pos0": 0, "pos+1": t + 1}.get(kind, t)])
    q, k = ref_apply_rope(q, position), ref_apply_rope(k, position)
    keys, values = torch.cat([cache_k, k], 2), torch.cat([cache_v, v], 2)
    if kind == "cache_only" and t > 0:
        keys, values = cache_k, cache_v
    if kind == "new_only":
        keys, values = k, v
    mask = None
    if kind == "mask_row0":                 # causal_mask(t+1) with the newest query taken as position 0
        mask = causal_mask(t + 1)[:1]
    return scaled_dot_product_attention(q, keys, values, mask)


def _full_attention(q, k, v):
    """Uncached: all T positions at once, rotary positions 0..T-1, causal mask."""
    positions = torch.arange(q.size(2))
    return scaled_dot_product_attention(ref_apply_rope(q, positions), ref_apply_rope(k, positions), v,
                                        causal_mask(q.size(2)))


def _gpt_step(ev: Evaluation, model, answer, token, caches, t):
    """One generation step of `model` with the learner's cached attention in every layer."""
    x = model.embed_tokens(token[:, None], offset=t)                      # (N, 1, d_model)
    for i, layer in enumerate(model.layers):
        attn = layer.attn
        q, k, v = attn.in_proj(layer.norm1(x)).split([attn.d_model, attn.d_kv, attn.d_kv], -1)
        q, k, v = split_heads(q, attn.num_heads), split_heads(k, attn.num_heads), split_heads(v, attn.num_heads)
        result = ev.call(answer, q, k, v, caches[i][0].clone(), caches[i][1].clone())
        out, cache_k, cache_v = expect_returns(result, reference_cached_attention_step(q, k, v, *caches[i]),
                                               ("out", "cache_k", "cache_v"))
        caches[i] = (torch.as_tensor(cache_k), torch.as_tensor(cache_v))
        x = x + attn.out_proj(merge_heads(torch.as_tensor(out)))
        x = x + layer.ff(layer.norm2(x))
    return model.head(model.norm(x))[:, 0]                                # (N, V)


@exercise("attention step with a key/value cache", reference=reference_cached_attention_step)
@single_threaded
def cached_attention_step(ev: Evaluation, answer):
    """answer(q, k, v (B, h, 1, d), cache_k, cache_v (B, h, t, d))
    -> (out (B, h, 1, d), cache_k, cache_v (B, h, t+1, d))."""
    tests = 0
    B, h, T, d = 2, 3, 6, 8
    g = ev.rng(0)
    q_all, k_all, v_all = randn(g, B, h, T, d), randn(g, B, h, T, d), randn(g, B, h, T, d)
    positions = torch.arange(T)
    rotated_k = ref_apply_rope(k_all, positions)
    for t in reversed(range(T)):             # step t, given the right cache of positions 0..t-1 (the longest
        #                                       first: with one or two keys, several mistakes give the same output)
        q, k, v = q_all[:, :, t:t + 1], k_all[:, :, t:t + 1], v_all[:, :, t:t + 1]
        cache_k, cache_v = rotated_k[:, :, :t], v_all[:, :, :t]
        ref = reference_cached_attention_step(q, k, v, cache_k, cache_v)
        result = ev.call(answer, q.clone(), k.clone(), v.clone(), cache_k.clone(), cache_v.clone())
        out, new_k, new_v = expect_returns(result, ref, ("out", "cache_k", "cache_v"))
        expect_shape(out, (B, h, 1, d), f"out at step t={t}")
        expect(not (hasattr(new_k, "shape") and tuple(new_k.shape) == (B, h, t, d)),
               f"at step t={t} the cache you return still has {t} positions: append the new key and value "
               "(torch.cat([cache_k, k], dim=2)) so that the next step sees them.")
        expect_shape(new_k, (B, h, t + 1, d), f"the returned cache_k at step t={t}")
        expect_shape(new_v, (B, h, t + 1, d), f"the returned cache_v at step t={t}")
        args = (q, k, v, cache_k, cache_v)
        mistakes = {
            "the new key and value are not in the attention (not appended yet, or masked out): append them to "
            "the cache FIRST, then attend over all t+1 keys (the newest position also attends to itself)":
                _step_variant(*args, "cache_only"),
            "the cache is not used: attend over the cached keys AND the new one (torch.cat along dim 2)":
                _step_variant(*args, "new_only"),
            "the positions restart at 0 (or q and k are not rotated, which is the same: position 0 is no "
            "rotation): the newest token is at position t = cache_k.size(2), so rotate q and k with "
            "apply_rope(..., torch.tensor([t]))": _step_variant(*args, "pos0"),
            "the position is off by one: the cache holds positions 0..t-1, so the newest token is at position "
            "t = cache_k.size(2), not t+1": _step_variant(*args, "pos+1"),
            "the causal mask is still applied: its first row lets the query see key 0 only, but the newest "
            "query is the LAST position, which may see every cached key; a step needs no mask":
                _step_variant(*args, "mask_row0"),
        }
        mistakes = {k_: v_ for k_, v_ in mistakes.items() if not torch.allclose(v_, ref[0], atol=1e-6)}
        ev.expect_close(out, ref[0], f"out at step t={t}", mistakes=mistakes)
        key_mistakes = {
            "the key appended to the cache is not rotated: store apply_rope(k, [t]), the rotated key (the "
            "cached keys are used as they are at every later step)":
                torch.cat([cache_k, k], 2),
            "the new key is put in front of the cache: append it at the END (torch.cat([cache_k, k], dim=2)), "
            "so that position i stays at index i": torch.cat([ref[1][:, :, -1:], cache_k], 2),
            "the positions restart at 0 (or the key is not rotated: the same thing): the newest key is at "
            "position t = cache_k.size(2); rotate it with apply_rope(k, torch.tensor([t]))":
                torch.cat([cache_k, ref_apply_rope(k, torch.tensor([0]))], 2),
            "the position is off by one: the cache holds positions 0..t-1, so the newest key is at position "
            "t = cache_k.size(2), not t+1": torch.cat([cache_k, ref_apply_rope(k, torch.tensor([t + 1]))], 2),
        }
        key_mistakes = {k_: v_ for k_, v_ in key_mistakes.items() if not torch.allclose(v_, ref[1], atol=1e-6)}
        ev.expect_close(new_k, ref[1], f"the returned cache_k at step t={t}", mistakes=key_mistakes)
        ev.expect_close(new_v, ref[2], f"the returned cache_v at step t={t}", mistakes={
            "the cached values are the keys: append v to cache_v": ref[1]})
        tests += 1
    # chained: the learner's own cache, fed back, gives uncached attention's outputs
    cache_k, cache_v = k_all[:, :, :0], v_all[:, :, :0]
    outs = []
    for t in range(T):
        out, cache_k, cache_v = ev.call(answer, q_all[:, :, t:t + 1].clone(), k_all[:, :, t:t + 1].clone(),
                                        v_all[:, :, t:t + 1].clone(), cache_k, cache_v)
        outs.append(torch.as_tensor(out))
    ev.expect_close(torch.cat(outs, 2), _full_attention(q_all, k_all, v_all),
                    f"the outputs of {T} steps with your cache fed back, against uncached causal attention")
    tests += 1
    # a small GPT generating greedily with your step in every layer: the same tokens as without a cache
    torch.manual_seed(1)
    model = GPT(23, d_model=16, num_heads=2, num_layers=2, d_ff=32, max_len=16, positions="rope").eval()
    prompt = torch.as_tensor(ev.rng(1).integers(3, 23, size=(2, 3)))
    with torch.no_grad():
        expected = generate(model, prompt, 8, temperature=0, use_cache=False)
        caches = [(torch.zeros(2, 2, 0, 8), torch.zeros(2, 2, 0, 8)) for _ in model.layers]
        tokens, prefix = [], prompt
        for t in range(prompt.size(1) + expected.size(1) - 1):
            logits = _gpt_step(ev, model, answer, prefix[:, t], caches, t)
            if t >= prompt.size(1) - 1:
                ev.expect_close(logits, model(prefix)[:, -1], f"a GPT's next-token logits at position {t} with your "
                                "cached step in every layer, against the model run on the whole prefix", atol=1e-4)
                y = logits.argmax(-1)
                tokens.append(y)
                prefix = torch.cat([prefix, y[:, None]], 1)
        expect(torch.equal(torch.stack(tokens, 1), expected), "greedy generation with your cached step gives other "
                                                              "tokens than generation without a cache.")
    return tests + 1


# ---------------------------------------------------------------------------------------------
# Exercise 4: rotary position embedding
# ---------------------------------------------------------------------------------------------
@exercise("rotary position embedding (RoPE)", reference=ref_apply_rope)
@single_threaded
def apply_rope(ev: Evaluation, answer):
    """answer(x (..., T, d), positions (T,), base) -> x rotated: pair (x_i, x_{i+d/2}) by angle positions[t] θ_i."""
    tests = 0
    for seed, (shape, base) in enumerate([((2, 3, 5, 8), 10000.0), ((4, 6), 10000.0), ((1, 2, 7, 12), 100.0)]):
        g = ev.rng(seed)
        x = randn(g, *shape)
        T = shape[-2]
        positions = torch.as_tensor(g.permutation(np.arange(3, 3 + 2 * T))[:T])   # any positions, any order
        got = ev.call(answer, x.clone(), positions.clone(), base)
        expect_shape(got, tuple(shape), "the rotated x")
        norms = np.linalg.norm(to_numpy(got).astype(np.float64), axis=-1)
        expect(np.allclose(norms, np.linalg.norm(to_numpy(x).astype(np.float64), axis=-1), atol=1e-4),
               "the rotation changed the vectors' norms: each pair (x_i, x_{i+d/2}) is rotated, (a cos - b sin, "
               "a sin + b cos): a rotation keeps lengths.")
        mistakes = {
            "the pairs are neighbours (2i, 2i+1): this lesson pairs the two HALVES, feature i with feature i + d/2 "
            "(the GPT-NeoX / Hugging Face Llama convention; the RoFormer paper's neighbours are the other one)":
                _rope_variant(x, positions, base, "interleaved"),
            "the angle has the wrong sign: (x_i, x_{i+d/2}) -> (x_i cos - x_{i+d/2} sin, x_i sin + x_{i+d/2} cos), "
            "a rotation by +m θ_i": _rope_variant(x, positions, base, "sign"),
            "the frequencies are off: θ_i = base^(-2i/d) for i = 0 .. d/2-1 (you used base^(-i/d))":
                _rope_variant(x, positions, base, "freq_no_two"),
            "the frequencies are off: θ_i = base^(-2i/d), a NEGATIVE exponent (the first pair turns fastest, "
            "the last slowest)": _rope_variant(x, positions, base, "freq_sign"),
            "the frequencies are off: θ_i = base^(-2i/d) with d the full feature size, not d/2":
                _rope_variant(x, positions, base, "freq_full"),
            "the angles are taken as degrees: m θ_i is in radians (torch.cos and torch.sin take radians)":
                _rope_variant(x, positions, base, "degrees"),
        }
        ev.expect_close(got, _rope_complex(x, positions, base), f"the rotated x (shape {shape}, base {base})",
                        mistakes=mistakes, atol=1e-4, rtol=1e-4)
        tests += 1
    # relative positions: q_m . k_n depends on m - n only
    g = ev.rng(7)
    q, k = randn(g, 1, 8), randn(g, 1, 8)
    dots = []
    for m, n in ((5, 2), (13, 10), (3, 0)):
        qm = torch.as_tensor(to_numpy(ev.call(answer, q.clone(), torch.tensor([m]), 10000.0)))
        kn = torch.as_tensor(to_numpy(ev.call(answer, k.clone(), torch.tensor([n]), 10000.0)))
        dots.append(float((qm * kn).sum()))
    expect(np.allclose(dots, dots[0], atol=1e-4), f"q_m · k_n should depend on m - n only: for m - n = 3 it is "
                                                  f"{', '.join(f'{x:.4f}' for x in dots)}.")
    return tests + 1


# ---------------------------------------------------------------------------------------------
# Exercise 5: grouped-query attention
# ---------------------------------------------------------------------------------------------
@exercise("grouped-query attention", reference=ref_gqa)
@single_threaded
def grouped_query_attention(ev: Evaluation, answer):
    """answer(q (B, h, T, d), k, v (B, h_kv, T, d), mask) -> (B, h, T, d): query head j uses key/value head
    j // (h / h_kv)."""
    tests = 0
    for seed, (B, h, h_kv, T, d) in enumerate([(2, 4, 2, 5, 8), (1, 6, 3, 4, 4), (2, 4, 1, 6, 8), (2, 4, 4, 5, 8)]):
        g = ev.rng(seed)
        q, k, v = randn(g, B, h, T, d), randn(g, B, h_kv, T, d), randn(g, B, h_kv, T, d)
        mask = causal_mask(T)
        got = ev.call(answer, q.clone(), k.clone(), v.clone(), mask.clone())
        expect_shape(got, (B, h, T, d), f"the output (h={h} query heads, h_kv={h_kv})")
        group = h // h_kv
        mistakes = {
            "query head j uses key/value head j % h_kv (round-robin, k.repeat): the course groups CONSECUTIVE query "
            "heads, head j uses key/value head j // (h / h_kv) (repeat_interleave)":
                scaled_dot_product_attention(q, k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1), mask),
            "every query head uses the first key/value head: head j uses key/value head j // (h / h_kv)":
                scaled_dot_product_attention(q, k[:, :1].expand(B, h, T, d), v[:, :1].expand(B, h, T, d), mask),
            "the mask is not applied: pass it to the attention (here: causal)":
                scaled_dot_product_attention(q, repeat_kv_heads(k, h), repeat_kv_heads(v, h)),
            "the scores are not scaled: divide q kᵀ by √d_head":
                scaled_dot_product_attention(q * math.sqrt(d), repeat_kv_heads(k, h), repeat_kv_heads(v, h), mask),
            "the key/value heads are averaged: each key/value head serves its own group of query heads":
                scaled_dot_product_attention(q, k.mean(1, keepdim=True).expand(B, h, T, d),
                                             v.mean(1, keepdim=True).expand(B, h, T, d), mask),
        }
        expected = ref_gqa(q, k, v, mask)
        mistakes = {key: value for key, value in mistakes.items() if not torch.allclose(value, expected, atol=1e-6)}
        name = "multi-head" if h_kv == h else ("multi-query" if h_kv == 1 else "grouped-query")
        ev.expect_close(got, expected, f"the output of {name} attention (h={h}, h_kv={h_kv})", mistakes=mistakes)
        tests += 1
    return tests

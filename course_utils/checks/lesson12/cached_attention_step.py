"""Lesson 12, exercise 5: one attention step with a key/value cache (rotary positions).

    cached_attention_step(q, k, v (B, h, 1, d), cache_k, cache_v (B, h, t, d))
        -> (out (B, h, 1, d), cache_k, cache_v (B, h, t+1, d)): q and k rotated at position t (the cache holds
        positions 0..t-1), the new key and value appended, the newest query attending over all t+1 keys, no mask

The check gives the step the right cache of positions 0..t-1 for t = 5 down to 0 and compares its output and the
caches it returns with the course's (reference_cached_attention_step), naming the mistake whose values the answer
gives (cached_step_mistakes.py); then it chains the steps on the answer's own caches against uncached causal
attention, and runs a small GPT generating greedily with the answer in every layer.
"""
import functools
import re

import numpy as np
import torch

from ...attention import merge_heads, split_heads
from ...decoding import generate
from ...gpt import GPT
from ...gpt_attention import grouped_query_attention
from ...masks import causal_mask
from ...positions import apply_rope
from ..core import exercise, expect, expect_returns, expect_shape, randn, single_threaded, to_numpy
from ..evaluation import Evaluation, call_naming
from ..expectations import explained
from ..mistakes import Said
from ..torch_errors import BMM, BROADCAST, CAT, OUTPUT_BROADCAST
from .cached_step_mistakes import VALUE_KEYS, M, reference_cached_attention_step, step_variant
from .unit_values import unnormalised

# the course's own words (masks.check_mask, attention._check_qkv, positions.apply_rope)
_MASK = re.compile(r"mask of shape \((?P<mask>[\d, ]+)\) does not broadcast to the scores' shape "
                   r"\((?P<scores>[\d, ]+)\)")
_LENGTHS = re.compile(r"k and v must have the same length T_k, got (?P<keys>\d+) and (?P<values>\d+)")
_POSITIONS = re.compile(r"positions must be (?:\(T,\) with T = x\.size\(-2\) = \d+|a 1-D tensor \(T,\) of integer "
                        r"positions), got shape \((?P<got>[\d, ]*)\)")


def crashes(h, t):
    """The typical crashes of a step with h heads and a cache of t positions, named where the words single the
    slip out."""
    def sizes(match):
        return {int(match["a"]), int(match["b"])}

    def course_mask(match):
        mask, scores = [int(n) for n in match["mask"].split(",")], [int(n) for n in match["scores"].split(",")]
        square = len(mask) >= 2 and mask[-1] == mask[-2] == scores[-1] == t + 1 and scores[-2] == 1
        return M.causal_mask_in_step.at(mask=f"({match['mask']})", scores=f"({match['scores']})") if square else None

    def torch_mask(match):
        shape, broadcast = match["shape"].split(", "), match["broadcast"].split(", ")
        square = shape[-2:] == ["1", str(t + 1)] and broadcast[-2:] == [str(t + 1)] * 2
        return M.causal_mask_in_step.at(mask=f"(..., {t + 1}, {t + 1})", scores=f"({', '.join(shape)})") \
            if square else None

    def bmm(match):
        want, got = [int(n) for n in match["want"].split(",")], [int(n) for n in match["got"].split(",")]
        return M.lengths_differ.at(keys=want[-1], values=got[-1]) if want[0] == got[0] != 0 else None
    return [
        (BROADCAST, lambda match: M.heads_meet_positions if match["dim"] == "1" and sizes(match) == {h, t + 1}
         else M.lengths_differ.at(keys=match["a"], values=match["b"]) if match["dim"] == "2"
         and sizes(match) == {t, t + 1} else None),
        (CAT, lambda match: M.cat_axis if match["dim"] != "2" else None),
        (_POSITIONS, lambda match: M.position_shape.at(got=f"({match['got']})")),
        (_LENGTHS, lambda match: M.lengths_differ.at(keys=match["keys"], values=match["values"])),
        (BMM, bmm),
        (_MASK, course_mask),
        (OUTPUT_BROADCAST, torch_mask),
    ]


def position_mistakes(args, ref):
    """{M.wrong_position at p: out} of q and k rotated at another position p than t = cache_k.size(2) (the sizes
    a learner may take for it: a neighbour of t, the heads, the head's size, the batch)."""
    B, h, t, d = args[3].shape                                  # cache_k
    wrong = sorted(p for p in {1, t - 1, t + 2, h, d, B, 2 * t} if p > 0 and p not in (t, t + 1))
    aside = {1: " (q.size(2), the length of the ONE new position?)"}
    return {M.wrong_position.at(p=p, aside=aside.get(p, ""), t=t): step_variant(*args, p)[0] for p in wrong}


def full_attention(q, k, v):
    """Uncached: all T positions at once, rotary positions 0..T-1, causal mask."""
    positions = torch.arange(q.size(2))
    return grouped_query_attention(apply_rope(q, positions), apply_rope(k, positions), v, causal_mask(q.size(2)))


def _torch_attention(q, k, v, cache_k, cache_v):
    """torch's fused attention, the position made with torch.full, the caches joined along axis -2."""
    position = torch.full((1,), cache_k.shape[-2], dtype=torch.long)
    keys, values = torch.cat((cache_k, apply_rope(k, position)), -2), torch.cat((cache_v, v), -2)
    return torch.nn.functional.scaled_dot_product_attention(apply_rope(q, position), keys, values), keys, values


@exercise("attention step with a key/value cache", reference=reference_cached_attention_step, mistakes=M,
          right=[_torch_attention])
@single_threaded
def cached_attention_step(ev: Evaluation, answer):
    """answer(q, k, v (B, h, 1, d), cache_k, cache_v (B, h, t, d))
    -> (out (B, h, 1, d), cache_k, cache_v (B, h, t+1, d))."""
    tests = 0
    B, h, T, d = 2, 3, 6, 8
    g = ev.rng(0)
    q_all, k_all, v_all = randn(g, B, h, T, d), randn(g, B, h, T, d), randn(g, B, h, T, d)
    rotated_k = apply_rope(k_all, torch.arange(T))
    for t in reversed(range(T)):   # step t, given the right cache of positions 0..t-1 (the longest first: with
        #                            one or two keys, several mistakes give the same output)
        args = (q_all[:, :, t:t + 1], k_all[:, :, t:t + 1], v_all[:, :, t:t + 1], rotated_k[:, :, :t], v_all[:, :, :t])
        ref = reference_cached_attention_step(*args)
        result = call_naming(ev, crashes(h, t), answer, *args)
        out, new_k, new_v = expect_returns(result, ref, ("out", "cache_k", "cache_v"))
        shape = tuple(out.shape) if hasattr(out, "shape") else None
        expect(shape != (B, h, d), M.squeezed)
        expect(shape != (B, h, t + 1, d) or t == 0, M.rows_broadcast.at(n=t + 1))
        expect_shape(out, (B, h, 1, d), f"out at step t={t}")
        for name, new in (("key", new_k), ("value", new_v)):
            expect(not (hasattr(new, "shape") and tuple(new.shape) == (B, h, t, d)),
                   M.not_appended.at(t=t, name=name, short=name[0]))
        for new, name in ((new_k, "cache_k"), (new_v, "cache_v")):
            expect(not (hasattr(new, "shape") and tuple(new.shape) in ((2 * B, h, t, d), (B, 2 * h, t, d),
                                                                      (B, h, t, 2 * d))), M.cat_axis)
            expect_shape(new, (B, h, t + 1, d), f"the returned {name} at step t={t}")
        variants = M.variants(VALUE_KEYS, *args)
        with explained(functools.partial(unnormalised, ev, M, crashes(h, t), answer, args, (2, 4), "out")):
            ev.expect_close(out, ref[0], f"out at step t={t}", mistakes={
                **{mistake: outs[0] for mistake, outs in variants.items()}, **position_mistakes(args, ref[0])})
        front = torch.cat([ref[1][:, :, -1:], args[3]], 2)
        ev.expect_close(new_k, ref[1], f"the returned cache_k at step t={t}", mistakes={
            M.key_unrotated: torch.cat([args[3], args[1]], 2), M.new_in_front.at(name="key"): front,
            **{M[key]: variants[M[key]][1] for key in ("pos_plus_one", "rotate_again", "rotate_all")}})
        ev.expect_close(new_v, ref[2], f"the returned cache_v at step t={t}", mistakes={
            M.values_are_keys: ref[1], M.rope_v: variants[M.rope_v][2],
            M.new_in_front.at(name="value"): torch.cat([args[2], args[4]], 2)})
        tests += 1
    _chained(ev, answer, q_all, k_all, v_all)
    gpt_generates_with(ev, answer)      # a small GPT generating greedily with your step in every layer
    return tests + 2


def _chained(ev, answer, q_all, k_all, v_all):
    """The learner's own cache, fed back step after step, gives uncached attention's outputs."""
    T, h = q_all.size(2), q_all.size(1)
    cache_k, cache_v = k_all[:, :, :0], v_all[:, :, :0]
    full = full_attention(q_all, k_all, v_all)
    for t in range(T):
        out, cache_k, cache_v = call_naming(ev, crashes(h, t), answer, q_all[:, :, t:t + 1], k_all[:, :, t:t + 1],
                                            v_all[:, :, t:t + 1], cache_k, cache_v)
        same = np.allclose(to_numpy(out), to_numpy(full[:, :, t:t + 1]), atol=1e-5, rtol=1e-4)
        expect(same, M.chain_differs.at(T=T, t=t))


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
        expect(torch.equal(torch.stack(tokens, 1), expected),
               Said("values", "greedy generation with your cached step gives other tokens than generation without "
                              "a cache."))

"""Lesson 12: every check passes the reference, says "not implemented yet" for a stub, and names each
typical mistake, written here as a learner would write it."""
import math

import pytest
import torch
import torch.nn.functional as F

from course_utils.attention import apply_rope, grouped_query_attention, scaled_dot_product_attention
from course_utils.checks import lesson12 as check
from course_utils.decoding import sampling_distribution
from course_utils.gpt import next_token_loss
from course_utils.masks import causal_mask
from tests.checking import not_implemented, prints_not_implemented

pytestmark = pytest.mark.usefixtures("any_seed_offset")   # every test under every seed offset


def wrong(check_fn, fn, symptom):
    outcome = check_fn.evaluate(fn)
    assert outcome.status == "wrong" and symptom in outcome.message, outcome.message


@pytest.mark.parametrize("check_fn, reference", [
    (check.next_token_loss, next_token_loss),
    (check.sampling_distribution, sampling_distribution),
    (check.cached_attention_step, check.reference_cached_attention_step),
    (check.apply_rope, apply_rope),
    (check.grouped_query_attention, grouped_query_attention),
])
def test_reference_passes_and_stub_is_not_implemented(check_fn, reference, capsys):
    assert check_fn(reference) is None
    assert "✔" in capsys.readouterr().out
    with prints_not_implemented():
        check_fn(not_implemented)


# ---- exercise 1: the loss -----------------------------------------------------------------------
def _ce(logits, targets, pad_id, **kwargs):
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), **kwargs)


LOSS_MISTAKES = {
    "not shifted": (lambda lg, tok, pad: _ce(lg, tok, pad, ignore_index=pad), "targets are not shifted"),
    "wrong way": (lambda lg, tok, pad: _ce(lg[:, 1:], tok[:, :-1], pad, ignore_index=pad), "shifted the wrong way"),
    "padding": (lambda lg, tok, pad: _ce(lg[:, :-1], tok[:, 1:], pad), "padding is counted"),
    "sum": (lambda lg, tok, pad: _ce(lg[:, :-1], tok[:, 1:], pad, ignore_index=pad, reduction="sum"),
            "the loss is a sum"),
    "all positions": (lambda lg, tok, pad: _ce(lg[:, :-1], tok[:, 1:], pad, ignore_index=pad, reduction="sum")
                      / tok[:, 1:].numel(), "divided by ALL"),
    "axis": (lambda lg, tok, pad: -(torch.log_softmax(lg[:, :-1], 1).gather(-1, tok[:, 1:, None])[..., 0])
             [tok[:, 1:] != pad].mean(), "wrong axis"),
    "per token": (lambda lg, tok, pad: _ce(lg[:, :-1], tok[:, 1:], pad, ignore_index=pad, reduction="none"),
                  "ONE number"),
}


@pytest.mark.parametrize("name", LOSS_MISTAKES)
def test_loss_mistakes(name):
    fn, symptom = LOSS_MISTAKES[name]
    wrong(check.next_token_loss, fn, symptom)


# ---- exercise 2: sampling -----------------------------------------------------------------------
def sampler(kind):
    """A learner's sampling_distribution with one mistake."""
    def fn(logits, temperature, top_k, top_p):
        if temperature == 0:
            return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
        z = logits * temperature if kind == "temperature_times" else logits / temperature
        if kind == "temperature_after":
            z = logits
        if top_k is not None:
            values, _ = torch.topk(z, top_k, dim=-1, largest=kind != "k_smallest")
            kth = values[..., -1:]
            z = z.masked_fill(z > kth if kind == "k_smallest" else z < kth, float("-inf"))
        probs = F.softmax(z, dim=-1)
        if kind == "temperature_after":
            probs = probs / temperature
        if kind == "no_renorm_topk" and top_k is not None:   # zeroes after a full softmax, never renormalises
            probs = F.softmax(logits / temperature, -1) * (probs > 0)
        if top_p is not None and top_p < 1:
            sorted_probs, order = probs.sort(-1, descending=True)
            cum = sorted_probs.cumsum(-1)
            if kind == "drops_crossing":
                remove = cum > top_p
            elif kind == "hf_ties":                            # the common recipe: ties broken by the sort
                remove = cum - sorted_probs >= top_p
            else:
                remove = cum - sorted_probs >= top_p
                last = sorted_probs.masked_fill(remove, 2.0).min(-1, keepdim=True).values
                remove = sorted_probs < last
            probs = probs.scatter(-1, order, sorted_probs.masked_fill(remove, 0.0))
        if kind in ("no_renorm", "no_renorm_topk"):
            return probs
        return probs / probs.sum(-1, keepdim=True)
    return fn


def test_a_learner_style_sampler_passes():
    assert check.sampling_distribution.evaluate(sampler("ok")).passed


@pytest.mark.parametrize("kind, symptom", [
    ("temperature_after", "temperature has no effect"),
    ("temperature_times", "multiplied by the temperature"),
    ("k_smallest", "SMALLEST"),
    ("drops_crossing", "drops the token that crosses p"),
    ("no_renorm", "not renormalised"),
    ("no_renorm_topk", "not renormalised"),
])
def test_sampling_mistakes(kind, symptom):
    wrong(check.sampling_distribution, sampler(kind), symptom)


def test_sampling_ties_at_the_boundary_are_named():
    def tie_breaking(logits, temperature, top_k, top_p):
        probs = sampler("hf_ties")(logits, temperature, top_k, top_p)
        if top_p == 0.5:   # the tie test: keep one of the three equal tokens, as a sort would
            probs = probs.clone()
            probs[..., 2:4] = 0
            probs = probs / probs.sum(-1, keepdim=True)
        return probs
    wrong(check.sampling_distribution, tie_breaking, "tie at the top-p boundary")


def test_sampling_top_p_on_the_unfiltered_distribution_is_named():
    def unfiltered(logits, temperature, top_k, top_p):
        probs = sampling_distribution(logits, temperature, top_k, None)
        if top_p is None or top_p == 1:
            return probs
        keep = sampling_distribution(logits, temperature, None, top_p) > 0
        probs = probs * keep
        return probs / probs.sum(-1, keepdim=True)
    wrong(check.sampling_distribution, unfiltered, "before top-k")


def test_sampling_without_greedy_case_is_named():
    def no_greedy(logits, temperature, top_k, top_p):
        if temperature == 0:
            return torch.full_like(logits, 1.0 / logits.size(-1))
        return sampling_distribution(logits, temperature, top_k, top_p)
    wrong(check.sampling_distribution, no_greedy, "temperature=0 means greedy")


# ---- exercise 3: the cached step -----------------------------------------------------------------
def cached_step(kind):
    def fn(q, k, v, cache_k, cache_v):
        t = cache_k.size(2)
        position = torch.tensor([{"pos0": 0, "pos+1": t + 1}.get(kind, t)])
        if kind != "no_rope":
            q, k_rot = apply_rope(q, position), apply_rope(k, position)
        else:
            k_rot = k
        keys = torch.cat([cache_k, k_rot], dim=2)
        values = torch.cat([cache_v, v], dim=2)
        mask = None
        if kind == "mask":                                   # the full causal mask, its first row used
            mask = causal_mask(t + 1)[:1]
        if kind == "mask_self":
            mask = torch.ones(1, t + 1, dtype=torch.bool)
            mask[0, t] = False
        if kind == "cache_only" and t > 0:
            out = scaled_dot_product_attention(q, cache_k, cache_v)
        elif kind == "new_only":
            out = scaled_dot_product_attention(q, k_rot, v)
        else:
            out = scaled_dot_product_attention(q, keys, values, mask)
        if kind == "not_appended":
            return out, cache_k, cache_v
        if kind == "unrotated_cache":
            return out, torch.cat([cache_k, k], 2), values
        if kind == "front":
            return out, torch.cat([k_rot, cache_k], 2), torch.cat([v, cache_v], 2)
        if kind == "swapped":
            return out, values, keys
        return out, keys, values
    return fn


@pytest.mark.parametrize("kind, symptom", [
    ("not_appended", "still has 5 positions"),
    ("pos0", "positions restart at 0"),
    ("pos+1", "off by one"),
    ("no_rope", "positions restart at 0 (or q and k are not rotated"),
    ("mask", "causal mask is still applied"),
    ("mask_self", "not in the attention (not appended yet, or masked out)"),
    ("cache_only", "are not in the attention"),
    ("new_only", "cache is not used"),
    ("unrotated_cache", "appended to the cache is not rotated"),
    ("front", "in front of the cache"),
    ("swapped", "wrong order"),
])
def test_cached_step_mistakes(kind, symptom):
    wrong(check.cached_attention_step, cached_step(kind), symptom)


def test_cached_step_that_passes_single_steps_but_breaks_the_chain_is_caught():
    calls = []

    def forgets_after_three(q, k, v, cache_k, cache_v):   # right with a given cache, drops it when chained
        calls.append(1)
        out, keys, values = check.reference_cached_attention_step(q, k, v, cache_k, cache_v)
        if len(calls) > 6 and cache_k.size(2) >= 3:
            return out * 1.5, keys, values
        return out, keys, values
    outcome = check.cached_attention_step.evaluate(forgets_after_three)
    assert outcome.status == "wrong", outcome.message


# ---- exercise 4: RoPE ----------------------------------------------------------------------------
def rope(kind):
    def fn(x, positions, base=10000.0):
        d = x.size(-1)
        i = torch.arange(d // 2, dtype=torch.float32)
        exponent = {"freq_no_two": -i / d, "freq_sign": 2 * i / d, "freq_full": -2 * i / (d // 2)}.get(kind, -2 * i / d)
        angle = positions.float()[:, None] * base ** exponent
        angle = -angle if kind == "sign" else angle
        angle = angle * math.pi / 180 if kind == "degrees" else angle
        cos, sin = angle.cos(), angle.sin()
        if kind == "interleaved":
            a, b = x[..., 0::2], x[..., 1::2]
            return torch.stack([a * cos - b * sin, a * sin + b * cos], -1).flatten(-2)
        a, b = x[..., :d // 2], x[..., d // 2:]
        if kind == "scaled":
            return torch.cat([a * cos - b * sin, a * sin + b * cos], -1) * 1.1
        return torch.cat([a * cos - b * sin, a * sin + b * cos], -1)
    return fn


def test_a_learner_style_rope_passes():
    assert check.apply_rope.evaluate(rope("ok")).passed


@pytest.mark.parametrize("kind, symptom", [
    ("interleaved", "neighbours (2i, 2i+1)"),
    ("sign", "wrong sign"),
    ("freq_no_two", "base^(-i/d)"),
    ("freq_sign", "NEGATIVE exponent"),
    ("freq_full", "not d/2"),
    ("degrees", "degrees"),
    ("scaled", "norms"),
])
def test_rope_mistakes(kind, symptom):
    wrong(check.apply_rope, rope(kind), symptom)


# ---- exercise 5: grouped-query attention ---------------------------------------------------------
def gqa(kind):
    def fn(q, k, v, mask=None):
        h, h_kv = q.size(1), k.size(1)
        g = h // h_kv
        if kind == "round_robin":
            k, v = k.repeat(1, g, 1, 1), v.repeat(1, g, 1, 1)
        elif kind == "first":
            k, v = k[:, :1].expand(-1, h, -1, -1), v[:, :1].expand(-1, h, -1, -1)
        elif kind == "mean":
            k, v = k.mean(1, keepdim=True).expand(-1, h, -1, -1), v.mean(1, keepdim=True).expand(-1, h, -1, -1)
        else:
            k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
        scores = q @ k.transpose(-2, -1) / (1 if kind == "no_scale" else math.sqrt(q.size(-1)))
        if mask is not None and kind != "no_mask":
            scores = scores.masked_fill(~mask, float("-inf"))
        return scores.softmax(-1) @ v
    return fn


def test_a_learner_style_gqa_passes():
    assert check.grouped_query_attention.evaluate(gqa("ok")).passed


@pytest.mark.parametrize("kind, symptom", [
    ("round_robin", "round-robin"),
    ("first", "first key/value head"),
    ("mean", "averaged"),
    ("no_scale", "not scaled"),
    ("no_mask", "mask is not applied"),
])
def test_gqa_mistakes(kind, symptom):
    wrong(check.grouped_query_attention, gqa(kind), symptom)

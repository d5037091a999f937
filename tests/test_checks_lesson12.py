"""Lesson 12: every check passes the reference, says "not implemented yet" for a stub, and names each
typical mistake, written here as a learner would write it (every test under eight seed offsets)."""
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from course_utils.attention import MultiHeadAttention, scaled_dot_product_attention
from course_utils.checks import lesson12 as check
from course_utils.decoding import sampling_distribution
from course_utils.gpt import GPTBlock, next_token_loss
from course_utils.gpt_attention import grouped_query_attention
from course_utils.masks import causal_mask
from course_utils.positions import LearnedPositionalEncoding, apply_rope
from course_utils.transformer import PositionwiseFeedForward
from tests.checking import named, not_implemented, prints_not_implemented

pytestmark = pytest.mark.usefixtures("any_seed_offset")   # every test under every seed offset


@pytest.mark.parametrize("check_fn, reference", [
    (check.next_token_loss, next_token_loss),
    (check.gpt_block, GPTBlock),
    (check.gpt, check.ReferenceGPT),
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
def _ce(logits, targets, **kwargs):
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), **kwargs)


def _per_row(lg, tok, pad):
    per = _ce(lg[:, :-1], tok[:, 1:], ignore_index=pad, reduction="none").view(tok.size(0), -1)
    real = tok[:, 1:] != pad
    return ((per * real).sum(1) / real.sum(1)).mean()


def _input_mask(lg, tok, pad):
    keep = tok[:, :-1] != pad                                  # the inputs' padding, not the targets'
    return F.cross_entropy(lg[:, :-1][keep], tok[:, 1:][keep])


LOSS_MISTAKES = {
    "not shifted": (lambda lg, tok, pad: _ce(lg, tok, ignore_index=pad), "targets are not shifted"),
    "wrong way": (lambda lg, tok, pad: _ce(lg[:, 1:], tok[:, :-1], ignore_index=pad), "shifted the wrong way"),
    "by two": (lambda lg, tok, pad: _ce(lg[:, :-2], tok[:, 2:], ignore_index=pad), "shifted by two"),
    "roll": (lambda lg, tok, pad: _ce(lg, tok.roll(-1, 1), ignore_index=pad), "torch.roll wraps around"),
    "padding": (lambda lg, tok, pad: _ce(lg[:, :-1], tok[:, 1:]), "padding is counted"),
    "pad 0": (lambda lg, tok, pad: _ce(lg[:, :-1], tok[:, 1:], ignore_index=0), "padding id is taken as 0"),
    "input mask": (_input_mask, "padding mask is taken from the INPUTS"),
    "sum": (lambda lg, tok, pad: _ce(lg[:, :-1], tok[:, 1:], ignore_index=pad, reduction="sum"), "the loss is a sum"),
    "all positions": (lambda lg, tok, pad: _ce(lg[:, :-1], tok[:, 1:], ignore_index=pad, reduction="sum")
                      / tok[:, 1:].numel(), "divided by ALL"),
    "per row": (_per_row, "averaged per row"),
    "axis": (lambda lg, tok, pad: -(torch.log_softmax(lg[:, :-1], 1).gather(-1, tok[:, 1:, None])[..., 0])
             [tok[:, 1:] != pad].mean(), "wrong axis"),
    "softmax first": (lambda lg, tok, pad: _ce(lg[:, :-1].softmax(-1), tok[:, 1:], ignore_index=pad),
                      "went through a softmax"),
    "same positions": (lambda lg, tok, pad: _ce(lg[:, 1:], tok[:, 1:], ignore_index=pad), "at the same positions"),
    "nll on logits": (lambda lg, tok, pad: F.nll_loss(lg[:, :-1].reshape(-1, lg.size(-1)), tok[:, 1:].reshape(-1),
                                                      ignore_index=pad), "nll_loss takes LOG-probabilities"),
    "label smoothing": (lambda lg, tok, pad: _ce(lg[:, :-1], tok[:, 1:], ignore_index=pad, label_smoothing=0.1),
                        "label-smoothed"),
    "per token": (lambda lg, tok, pad: _ce(lg[:, :-1], tok[:, 1:], ignore_index=pad, reduction="none"),
                  "ONE number"),
    "view": (lambda lg, tok, pad: F.cross_entropy(lg[:, :-1].view(-1, lg.size(-1)), tok[:, 1:].reshape(-1),
                                                  ignore_index=pad), r"\.view cannot flatten"),
    "no flatten": (lambda lg, tok, pad: F.cross_entropy(lg[:, :-1], tok[:, 1:], ignore_index=pad),
                   "classes on axis 1"),
}


@pytest.mark.parametrize("name", LOSS_MISTAKES)
def test_loss_mistakes(name):
    fn, symptom = LOSS_MISTAKES[name]
    named(check.next_token_loss, fn, symptom)


# ---- exercise 2: the decoder block --------------------------------------------------------------
class Block(nn.Module):
    """A learner's MyGPTBlock: the exercise's __init__, a forward with one mistake."""
    kind = "ok"

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.norm2 = nn.LayerNorm(d_model)
        self.ff = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, x, mask):
        kind, attn = self.kind, (lambda y: self.attn(y, y, y, None if self.kind == "no_mask" else mask))
        if kind == "post_norm":
            x = self.norm1(x + self.dropout1(attn(x)))
            return self.norm2(x + self.dropout2(self.ff(x)))
        if kind == "no_residual_attn":
            x = self.dropout1(attn(self.norm1(x)))
            return x + self.dropout2(self.ff(self.norm2(x)))
        if kind == "no_residual_ff":
            x = x + self.dropout1(attn(self.norm1(x)))
            return self.dropout2(self.ff(self.norm2(x)))
        if kind == "one_norm":
            x = x + self.dropout1(attn(self.norm1(x)))
            return x + self.dropout2(self.ff(self.norm1(x)))
        if kind == "norm_residual":
            x = self.norm1(x)
            x = x + self.dropout1(attn(x))
            x = self.norm2(x)
            return x + self.dropout2(self.ff(x))
        if kind == "stale":
            y = self.norm1(x)
            x = x + self.dropout1(attn(y))
            return x + self.dropout2(self.ff(y))
        if kind == "norm_after":
            x = x + self.dropout1(self.norm1(attn(x)))
            return x + self.dropout2(self.norm2(self.ff(x)))
        if kind == "order":
            x = x + self.dropout2(self.ff(self.norm2(x)))
            return x + self.dropout1(attn(self.norm1(x)))
        if kind == "no_dropout":
            x = x + attn(self.norm1(x))
            return x + self.ff(self.norm2(x))
        if kind == "dropout_sum":
            x = self.dropout1(x + attn(self.norm1(x)))
            return self.dropout2(x + self.ff(self.norm2(x)))
        if kind == "kv_raw":
            x = x + self.dropout1(self.attn(self.norm1(x), x, x, mask))
            return x + self.dropout2(self.ff(self.norm2(x)))
        if kind == "ff_no_norm":
            x = x + self.dropout1(attn(self.norm1(x)))
            return x + self.dropout2(self.ff(x))
        if kind == "attn_no_norm":
            x = x + self.dropout1(attn(x))
            return x + self.dropout2(self.ff(self.norm2(x)))
        if kind == "sees_next":                       # its own mask, one diagonal too many
            T = x.size(1)
            allowed = torch.ones(T, T, dtype=torch.bool).tril(1)
            x = x + self.dropout1(self.attn(self.norm1(x), self.norm1(x), self.norm1(x), allowed))
            return x + self.dropout2(self.ff(self.norm2(x)))
        y = self.norm1(x)
        x = x + self.dropout1(attn(y))
        return x + self.dropout2(self.ff(self.norm2(x)))


def block(kind):
    return type(f"Block_{kind}", (Block,), {"kind": kind})


def test_a_learner_style_block_passes():
    assert check.gpt_block.evaluate(block("ok")).passed


@pytest.mark.parametrize("kind, symptom", [
    ("post_norm", "post-norm"),
    ("no_residual_attn", "residual connection around the attention is missing"),
    ("no_residual_ff", "residual connection around the feed-forward network is missing"),
    ("no_mask", "mask is not passed"),
    ("one_norm", "one LayerNorm serves both"),
    ("norm_residual", "residual starts from the normalised x"),
    ("stale", "reads LayerNorm of the block's INPUT"),
    ("norm_after", "applied to the sub-layer's OUTPUT"),
    ("order", "feed-forward network comes before the attention"),
    ("no_dropout", "dropout1 and dropout2 are not applied"),
    ("dropout_sum", "dropout is applied to the sum"),
    ("sees_next", "position t see position t\\+1"),
    ("kv_raw", "keys and values come from x"),
    ("ff_no_norm", "feed-forward network reads x without its LayerNorm"),
    ("attn_no_norm", "attention reads x without its LayerNorm"),
])
def test_block_mistakes(kind, symptom):
    named(check.gpt_block, block(kind), symptom)


def test_block_with_other_names_is_told_to_keep_init():
    class Renamed(Block):
        def __init__(self, d_model, num_heads, d_ff, dropout=0.0):
            super().__init__(d_model, num_heads, d_ff, dropout)
            self.ln_1 = self.norm1
            del self.norm1
    named(check.gpt_block, Renamed, "keep __init__ as given")


# ---- exercise 3: the GPT ------------------------------------------------------------------------
class Model(nn.Module):
    """A learner's MyGPT: the exercise's __init__ (the course's GPTBlock), a forward with one mistake."""
    kind = "ok"

    def __init__(self, vocab_size, d_model, num_heads, num_layers, d_ff, max_len, dropout=0.0):
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        self.embed = nn.Embedding(vocab_size, d_model)
        self.pos = LearnedPositionalEncoding(d_model, max_len, dropout)
        self.layers = nn.ModuleList(GPTBlock(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        if self.kind == "copied":
            self.head.weight.data = self.embed.weight.data.clone()
        elif self.kind not in ("untied", "untied_embed_matrix"):
            self.head.weight = self.embed.weight

    def forward(self, tokens):
        kind, T, d = self.kind, tokens.size(1), self.d_model
        scale = {"no_scale": 1.0, "scale_d": d, "divided": 1 / math.sqrt(d)}.get(kind, math.sqrt(d))
        x = self.embed(tokens) * scale
        if kind == "pos_scaled":
            x = self.pos(self.embed(tokens)) * math.sqrt(d)
        elif kind == "pos_twice":
            x = self.pos(self.pos(x))
        elif kind != "no_pos":
            x = self.pos(x)
        mask = {"no_mask": None, "inverted": ~causal_mask(T), "max_len": causal_mask(self.max_len),
                "sees_next": torch.tril(torch.ones(T, T), diagonal=1).bool(),
                "float_mask": torch.tril(torch.ones(T, T))}.get(kind, causal_mask(T))
        if kind == "norm_before":
            x = self.norm(x)
        layers = list(self.layers)[::-1] if kind == "reversed" else self.layers
        for layer in layers:
            x = (self.layers[0] if kind == "first_block_only" else layer)(x, mask)
            if kind == "norm_every_block" and layer is not layers[-1]:
                x = self.norm(x)
        if kind not in ("no_final_norm", "norm_before"):
            x = self.norm(x)
        if kind in ("embed_matrix", "untied_embed_matrix"):   # the embedding's matrix: fine once self.head is tied
            return F.linear(x, self.embed.weight)
        logits = self.head(x)
        return logits.softmax(-1) if kind == "softmax" else logits


def model(kind):
    return type(f"Model_{kind}", (Model,), {"kind": kind})


@pytest.mark.parametrize("kind", ["ok", "embed_matrix"])
def test_a_learner_style_gpt_passes(kind):
    outcome = check.gpt.evaluate(model(kind))
    assert outcome.passed, outcome.message


@pytest.mark.parametrize("kind, symptom", [
    ("no_scale", "embeddings are not scaled"),
    ("scale_d", "multiplied by d_model"),
    ("divided", "divided by √d_model"),
    ("pos_scaled", "positions are scaled too"),
    ("no_pos", "positions are not added"),
    ("pos_twice", "positions are added twice"),
    ("no_mask", "get no causal mask"),
    ("sees_next", "position t see position t\\+1"),
    ("inverted", "mask is inverted"),
    ("max_len", "build it for the T"),
    ("float_mask", "must be boolean"),
    ("no_final_norm", "final LayerNorm is missing"),
    ("norm_before", "final LayerNorm is applied before the blocks"),
    ("first_block_only", "same block is applied"),
    ("softmax", "return probabilities"),
    ("reversed", "reverse order"),
    ("norm_every_block", "after EVERY block"),
    ("untied", "not tied to the embedding"),
    ("copied", "not tied to the embedding"),
    ("untied_embed_matrix", r"the logits use the embedding matrix E, but self\.head is never tied to it in __init__"),
])
def test_gpt_mistakes(kind, symptom):
    named(check.gpt, model(kind), symptom)


# ---- exercise 4: sampling -----------------------------------------------------------------------
def sampler(kind):
    """A learner's sampling_distribution with one mistake."""
    def fn(logits, temperature, top_k, top_p):
        if temperature == 0:
            return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
        z = logits * temperature if kind == "temperature_times" else logits / temperature
        if kind in ("temperature_after", "temperature_after_filters"):
            z = logits
        if top_k is not None:
            values, indices = torch.topk(z, min(top_k, z.size(-1)), dim=-1, largest=kind != "k_smallest")
            if kind == "k_ties_dropped":                     # keeps exactly the k indices topk returned
                z = torch.full_like(z, float("-inf")).scatter(-1, indices, values)
            else:
                kth = values[..., :1] if kind == "kth_is_max" else values[..., -1:]
                fill = 0.0 if kind == "fill_zero" else float("-inf")
                z = z.masked_fill(z > kth if kind == "k_smallest" else z < kth, fill)
        probs = F.softmax(z, dim=-1)
        if kind == "temperature_after":
            probs = probs / temperature
        if kind == "no_renorm_topk" and top_k is not None:   # zeroes after a full softmax, never renormalises
            probs = F.softmax(logits / temperature, -1) * (probs > 0)
        if top_p is not None and top_p < 1:
            sorted_probs, order = probs.sort(-1, descending=kind != "p_ascending")
            cum = sorted_probs.cumsum(-1)
            if kind == "drops_crossing":
                remove = cum > top_p
            elif kind in ("hf_ties", "p_ascending"):          # the common recipe: ties broken by the sort
                remove = cum - sorted_probs >= top_p
            else:
                remove = cum - sorted_probs >= top_p
                last = sorted_probs.masked_fill(remove, 2.0).min(-1, keepdim=True).values
                remove = sorted_probs < last
            probs = probs.scatter(-1, order, sorted_probs.masked_fill(remove, 0.0))
        if kind == "temperature_after_filters":               # T applied to what the filters kept at T = 1
            probs = F.softmax(logits / temperature, -1) * (probs > 0)
        if kind in ("no_renorm", "no_renorm_topk"):
            return probs
        if kind == "softmax_renorm":
            return probs.softmax(-1)
        return probs / probs.sum(-1, keepdim=True)
    return fn


def test_a_learner_style_sampler_passes():
    outcome = check.sampling_distribution.evaluate(sampler("ok"))
    assert outcome.passed, outcome.message


@pytest.mark.parametrize("kind, symptom", [
    ("temperature_after", "temperature has no effect"),
    ("temperature_times", "multiplied by the temperature"),
    ("temperature_after_filters", "temperature is applied after the filters"),
    ("k_smallest", "SMALLEST"),
    ("kth_is_max", "compares every logit with the LARGEST"),
    ("fill_zero", "sets the removed logits to 0"),
    ("k_ties_dropped", "tie at the k-th largest logit"),
    ("drops_crossing", "drops the token that crosses p"),
    ("p_ascending", "keeps the LEAST probable"),
    ("softmax_renorm", "renormalised with a softmax"),
    ("no_renorm", "not renormalised"),
    ("no_renorm_topk", "not renormalised"),
])
def test_sampling_mistakes(kind, symptom):
    named(check.sampling_distribution, sampler(kind), symptom)


def test_sampling_ties_at_the_boundary_are_named():
    def tie_breaking(logits, temperature, top_k, top_p):
        probs = sampler("hf_ties")(logits, temperature, top_k, top_p)
        if top_p == 0.5:   # the tie test: keep one of the three equal tokens, as a sort would
            probs = probs.clone()
            probs[..., 2:4] = 0
            probs = probs / probs.sum(-1, keepdim=True)
        return probs
    named(check.sampling_distribution, tie_breaking, "tie at the top-p boundary")


def test_sampling_top_p_on_the_unfiltered_distribution_is_named():
    def unfiltered(logits, temperature, top_k, top_p):
        probs = sampling_distribution(logits, temperature, top_k, None)
        if top_p is None or top_p == 1:
            return probs
        keep = sampling_distribution(logits, temperature, None, top_p) > 0
        probs = probs * keep
        return probs / probs.sum(-1, keepdim=True)
    named(check.sampling_distribution, unfiltered, "before top-k")


def test_sampling_with_powers_of_probabilities_is_told_why_it_underflows():
    def powers(logits, temperature, top_k, top_p):
        if temperature == 0:
            return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
        probs = logits.softmax(-1) ** (1 / temperature)              # right in exact arithmetic
        return sampler("ok")(probs.log(), 1.0, top_k, top_p)
    named(check.sampling_distribution, powers, "underflow")


def test_sampling_with_powers_of_probabilities_in_float64_is_told_why_it_underflows():
    def powers(logits, temperature, top_k, top_p):                  # float64 underflows too, on a flat-ish row
        if temperature == 0:
            return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
        probs = logits.double().softmax(-1) ** (1 / temperature)
        probs = probs / probs.sum(-1, keepdim=True)
        return sampler("ok")(probs.log().float(), 1.0, top_k, top_p)
    named(check.sampling_distribution, powers, r"temperature 0\.001 .*p\^\(1/T\), underflow")


def test_sampling_top_p_before_top_k_is_named():
    def top_p_first(logits, temperature, top_k, top_p):
        probs = sampling_distribution(logits, temperature, None, top_p)
        if top_k is not None:
            kth = probs.topk(top_k, -1).values[..., -1:]
            probs = probs * (probs >= kth)
        return probs / probs.sum(-1, keepdim=True)
    named(check.sampling_distribution, top_p_first, "before top-k")


def test_sampling_without_greedy_case_is_named():
    def no_greedy(logits, temperature, top_k, top_p):
        if temperature == 0:
            return torch.full_like(logits, 1.0 / logits.size(-1))
        return sampling_distribution(logits, temperature, top_k, top_p)
    named(check.sampling_distribution, no_greedy, "temperature=0 means greedy")


def test_the_reference_keeps_ties_at_the_kth_logit():
    tied = torch.tensor([[3.0, 2.0, 1.0, 1.0, 1.0, 0.0, -1.0]])
    assert (sampling_distribution(tied, top_k=3) > 0).sum() == 5
    assert (sampling_distribution(tied, top_k=2) > 0).sum() == 2


# ---- exercise 5: the cached step -----------------------------------------------------------------
def cached_step(kind):
    def fn(q, k, v, cache_k, cache_v):
        t = cache_k.size(2)
        position = torch.tensor([{"pos0": 0, "pos+1": t + 1}.get(kind, t)])
        if kind == "int_position":
            position = torch.tensor(t)
        q_rot = q if kind in ("no_rope", "k_only") else apply_rope(q, position)
        k_rot = k if kind in ("no_rope", "q_only") else apply_rope(k, position)
        axis = {"cat_last": -1, "cat_first": 0}.get(kind, 2)
        keys = torch.cat([cache_k, k_rot], dim=axis)
        values = torch.cat([cache_v, v], dim=2)
        if kind == "rotate_again":
            keys = apply_rope(keys, torch.arange(t + 1))
        if kind == "stale_values_attended":
            values = cache_v
        mask = None
        if kind == "mask":                                   # the full causal mask, its first row used
            mask = causal_mask(t + 1)[:1]
        if kind == "mask_self":
            mask = torch.ones(1, t + 1, dtype=torch.bool)
            mask[0, t] = False
        scale = {"scale_1/d": 1 / q.size(-1), "no_scale": 1.0}.get(kind, 1 / math.sqrt(q.size(-1)))
        if kind == "cache_only" and t > 0:
            out = scaled_dot_product_attention(q_rot, cache_k, cache_v)
        elif kind == "new_only":
            out = scaled_dot_product_attention(q_rot, k_rot, v)
        elif kind in ("scale_1/d", "no_scale", "softmax_queries", "stale_values_attended"):
            scores = q_rot @ keys.transpose(-2, -1) * scale
            out = scores.softmax(-2 if kind == "softmax_queries" else -1) @ values
        else:
            out = scaled_dot_product_attention(q_rot, keys, values, mask)
        if kind == "not_appended":
            return out, cache_k, cache_v
        if kind == "stale_values":
            return out, keys, cache_v
        if kind == "unrotated_cache":
            return out, torch.cat([cache_k, k], 2), values
        if kind == "front":
            return out, torch.cat([k_rot, cache_k], 2), torch.cat([v, cache_v], 2)
        if kind == "swapped":
            return out, values, keys
        return out, keys, values
    return fn


@pytest.mark.parametrize("kind, symptom", [
    ("not_appended", "key cache you return still has 5 positions"),
    ("stale_values", "value cache you return still has 5 positions"),
    ("stale_values_attended", "keys and the values have different lengths"),
    ("pos0", "positions restart at 0"),
    ("pos+1", "off by one"),
    ("int_position", "1-D tensor"),
    ("no_rope", "positions restart at 0 \\(or q and k are not rotated"),
    ("q_only", r"the new key you append \(and attend to\) is k as it came, unrotated"),
    ("k_only", "only k is rotated"),
    ("rotate_again", "cached keys are rotated again"),
    ("mask", "causal mask is still applied"),
    ("mask_self", "not in the attention \\(not appended yet, or masked out\\)"),
    ("cache_only", "are not in the attention"),
    ("new_only", "cache is not used"),
    ("scale_1/d", "divided by d"),
    ("no_scale", "not scaled"),
    ("softmax_queries", "softmax runs over the queries"),
    ("unrotated_cache", "appended to the cache is not rotated"),
    ("front", "in front of the cache"),
    ("swapped", "wrong order"),
    ("cat_last", "wrong axis"),
    ("cat_first", "wrong axis"),
])
def test_cached_step_mistakes(kind, symptom):
    named(check.cached_attention_step, cached_step(kind), symptom)


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


# ---- exercise 6: RoPE ----------------------------------------------------------------------------
def rope(kind):
    def fn(x, positions, base=10000.0):
        d = x.size(-1)
        i = torch.arange(d // 2, dtype=torch.float32)
        exponent = {"freq_no_two": -i / d, "freq_sign": 2 * i / d, "freq_full": -2 * i / (d // 2)}.get(kind, -2 * i / d)
        m = {"pos+1": positions.float() + 1, "arange": torch.arange(x.size(-2)).float()}.get(kind, positions.float())
        angle = m[:, None] * (10000.0 if kind == "base_ignored" else base) ** exponent
        angle = -angle if kind == "sign" else angle
        angle = angle * math.pi / 180 if kind == "degrees" else angle
        cos, sin = (angle.sin(), angle.cos()) if kind == "sin_cos" else (angle.cos(), angle.sin())
        if kind == "interleaved":
            a, b = x[..., 0::2], x[..., 1::2]
            return torch.stack([a * cos - b * sin, a * sin + b * cos], -1).flatten(-2)
        a, b = x[..., :d // 2], x[..., d // 2:]
        if kind == "halves_swapped":
            return torch.cat([a * sin + b * cos, a * cos - b * sin], -1)
        if kind == "scaled":
            return torch.cat([a * cos - b * sin, a * sin + b * cos], -1) * 1.1
        if kind == "first_half_only":
            return torch.cat([a * cos - b * sin, b], -1)
        return torch.cat([a * cos - b * sin, a * sin + b * cos], -1)
    return fn


def test_a_learner_style_rope_passes():
    assert check.apply_rope.evaluate(rope("ok")).passed


@pytest.mark.parametrize("kind, symptom", [
    ("interleaved", "neighbours \\(2i, 2i\\+1\\)"),
    ("sign", "wrong sign"),
    ("sin_cos", "sin and cos are swapped"),
    ("halves_swapped", "wrong order"),
    ("pos+1", "positions are off by one"),
    ("arange", "positions are ignored"),
    ("base_ignored", "base argument is ignored"),
    ("freq_no_two", "base\\^\\(-i/d\\)"),
    ("freq_sign", "NEGATIVE exponent"),
    ("freq_full", "not d/2"),
    ("degrees", "degrees"),
    ("scaled", "norms"),
    ("first_half_only", "norms"),
])
def test_rope_mistakes(kind, symptom):
    named(check.apply_rope, rope(kind), symptom)


# ---- exercise 7: grouped-query attention ---------------------------------------------------------
def gqa(kind):
    def fn(q, k, v, mask=None):
        h, h_kv = q.size(1), k.size(1)
        g = h // h_kv
        if kind == "round_robin":
            k, v = k.repeat(1, g, 1, 1), v.repeat(1, g, 1, 1)
        elif kind == "kv_different":
            k, v = k.repeat_interleave(g, 1), v.repeat(1, g, 1, 1)
        elif kind == "first":
            k, v = k[:, :1].expand(-1, h, -1, -1), v[:, :1].expand(-1, h, -1, -1)
        elif kind == "mean":
            k, v = k.mean(1, keepdim=True).expand(-1, h, -1, -1), v.mean(1, keepdim=True).expand(-1, h, -1, -1)
        elif kind == "wrong_axis":
            k, v = k.repeat_interleave(g, 2), v.repeat_interleave(g, 2)
        elif kind != "no_repeat":
            k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
        d = q.size(-1)
        scale = {"no_scale": 1.0, "scale_1/d": 1 / d, "scale_d_model": 1 / math.sqrt(h * d)}.get(kind, 1 / math.sqrt(d))
        scores = q @ k.transpose(-2, -1) * scale
        if mask is not None and kind != "no_mask":
            scores = scores.masked_fill(mask if kind == "inverted" else ~mask, float("-inf"))
        return scores.softmax(-2 if kind == "softmax_queries" else -1) @ v
    return fn


def test_a_learner_style_gqa_passes():
    assert check.grouped_query_attention.evaluate(gqa("ok")).passed


@pytest.mark.parametrize("kind, symptom", [
    ("round_robin", "round-robin"),
    ("kv_different", "grouped differently"),
    ("first", "first key/value head"),
    ("mean", "averaged"),
    ("no_scale", "not scaled"),
    ("scale_1/d", "divided by d_head"),
    ("scale_d_model", "√d_model"),
    ("no_mask", "mask is not applied"),
    ("inverted", "mask is inverted"),
    ("softmax_queries", "over the queries"),
    ("no_repeat", "do not line up with the query heads"),
    ("wrong_axis", "do not line up with the query heads"),
])
def test_gqa_mistakes(kind, symptom):
    named(check.grouped_query_attention, gqa(kind), symptom)


# ---- more slips a learner makes, each named ------------------------------------------------------
@pytest.mark.parametrize("fn, symptom", [
    (lambda lg, tok, pad: _ce(lg[:, :-1], tok[:, :-1], ignore_index=pad),
     "targets are not shifted: the logits at position t are compared with the token at t"),
    (lambda lg, tok, pad: _ce(lg[:, :-1], tok[:, 1:], ignore_index=pad).item(), r"without \.item\(\)"),
    (lambda lg, tok, pad: _ce(lg[:, :-1], tok[:, 1:], ignore_index=pad).detach(), "gradients flow through"),
    (lambda lg, tok, pad: -(torch.log_softmax(lg[:, :-1], 0).gather(-1, tok[:, 1:, None])[..., 0])
     [tok[:, 1:] != pad].mean(), r"softmax runs over the batch axis \(dim 0\)"),
    (lambda lg, tok, pad: F.cross_entropy(lg.reshape(-1, lg.size(-1))[:-1], tok.reshape(-1)[1:], ignore_index=pad),
     "flattened BEFORE the shift"),
], ids=["not-shifted-cut", "item", "detach", "log-softmax-dim0", "flattened-then-shifted"])
def test_more_loss_mistakes(fn, symptom):
    named(check.next_token_loss, fn, symptom)


class MoreBlock(Block):
    def forward(self, x, mask):
        kind, y = self.kind, (self.norm2 if self.kind == "norms_swapped" else self.norm1)(x)
        if kind == "ff_on_attn":
            a = self.dropout1(self.attn(y, y, y, mask))
            return x + a + self.dropout2(self.ff(self.norm2(a)))
        if kind == "norms_swapped":
            x = x + self.dropout1(self.attn(y, y, y, mask))
            return x + self.dropout2(self.ff(self.norm1(x)))
        if kind == "inverted":
            x = x + self.dropout1(self.attn(y, y, y, ~mask))
        elif kind == "no_dropout1":
            x = x + self.attn(y, y, y, mask)
        elif kind == "unpacked":                         # as if it returned (out, weights), like nn.MultiheadAttention
            out, _ = self.attn(y, y, y, mask)
            x = x + self.dropout1(out)
        elif kind == "norm_residual_attn":
            x = y + self.dropout1(self.attn(y, y, y, mask))
        elif kind == "parallel":
            return x + self.dropout1(self.attn(y, y, y, mask)) + self.dropout2(self.ff(self.norm2(x)))
        else:
            x = x + self.dropout1(self.attn(y, y, y, mask))
        if kind == "no_dropout2":
            return x + self.ff(self.norm2(x))
        return x + self.dropout2(self.ff(self.norm2(x)))


@pytest.mark.parametrize("kind, symptom", [
    ("inverted", "mask is inverted"),
    ("no_dropout1", "dropout1 is not applied"),
    ("no_dropout2", "dropout2 is not applied"),
    ("unpacked", r"unpacked as \(out, weights\)"),
    ("norm_residual_attn", "residual starts from the normalised x"),
    ("parallel", "side by side on the block's input"),
    ("ff_on_attn", "reads the attention's output alone"),
    ("norms_swapped", "norm1 and norm2 are swapped"),
])
def test_more_block_mistakes(kind, symptom):
    named(check.gpt_block, type(f"MoreBlock_{kind}", (MoreBlock,), {"kind": kind}), symptom)


class MoreModel(Model):
    def forward(self, tokens):
        kind, T = self.kind, tokens.size(1)
        x = self.embed(tokens) * math.sqrt(self.d_model)
        if kind == "pos_by_token":
            x = x + self.pos.pe(tokens)
        elif kind != "pos_every_block":
            x = self.pos(x)
        layers = {"one_block": list(self.layers)[-1:]}.get(kind, self.layers)
        for layer in layers:
            x = layer(self.pos(x) if kind == "pos_every_block" else x, causal_mask(T))
        x = self.norm(x)
        if kind == "no_transpose":
            return x @ self.embed.weight
        return F.log_softmax(self.head(x), -1) if kind == "log_softmax" else self.head(x)


@pytest.mark.parametrize("kind, symptom", [
    ("pos_by_token", "looked up by POSITION"),
    ("pos_every_block", "before EVERY block"),
    ("one_block", "only the last block is applied"),
    ("no_transpose", r"without transposing it.*self\.embed\.weight\.T"),
    ("log_softmax", "log-probabilities"),
])
def test_more_gpt_mistakes(kind, symptom):
    named(check.gpt, type(f"MoreModel_{kind}", (MoreModel,), {"kind": kind}), symptom)


def test_a_gpt_tied_the_other_way_round_passes():
    class TiedBack(Model):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.embed.weight = self.head.weight
    outcome = check.gpt.evaluate(TiedBack)
    assert outcome.passed, outcome.message


def more_sampler(kind):
    """A learner's sampling_distribution: the reference's steps, one of them slipped."""
    def fn(logits, temperature, top_k, top_p):
        if temperature == 0:
            return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
        z = logits / temperature ** (2 if kind == "temperature_twice" else 1)
        if top_k is not None:
            ranked = z.sort(-1, descending=True).values
            kth = {"k_plus_one": ranked[..., top_k:top_k + 1], "no_keepdim": ranked[..., top_k - 1],
                   "kthvalue": z.kthvalue(top_k, dim=-1, keepdim=True).values}.get(kind, ranked[..., top_k - 1:top_k])
            z = z.masked_fill(z <= kth if kind == "k_minus_one" else z < kth, float("-inf"))
        probs = z.softmax(-1)
        if top_p is not None and top_p < 1:
            sorted_probs, order = probs.sort(-1, descending=True)
            remove = sorted_probs.cumsum(-1) - sorted_probs >= top_p
            if kind == "crossing_dropped":               # the mass that stays <= p, at least the first token
                keep = sorted_probs.cumsum(-1) <= top_p
                keep[..., 0] = True
                probs = probs.scatter(-1, order, sorted_probs * keep)
            elif kind == "unsorted_mask":                # the sorted row's mask on the row as it is
                probs = probs.masked_fill(remove, 0.0)
            elif kind == "sorted_out":                   # the sorted row returned
                probs = sorted_probs.masked_fill(remove, 0.0)
            else:
                last = sorted_probs.masked_fill(remove, 2.0).min(-1, keepdim=True).values
                probs = probs.masked_fill(probs < last, 0.0)
        return probs / (probs.sum() if kind == "whole_sum" else probs.sum(-1, keepdim=True))
    return fn


@pytest.mark.parametrize("kind, symptom", [
    ("kthvalue", "k-th SMALLEST"),
    ("crossing_dropped", "drops the token that crosses p"),
    ("whole_sum", "sum of the whole tensor"),
    ("temperature_twice", "applied twice"),
    ("k_plus_one", "top-k keeps k\\+1 tokens"),
    ("k_minus_one", "top-k keeps k-1 tokens"),
    ("no_keepdim", "lost its last axis"),
    ("unsorted_mask", "in SORTED order"),
    ("sorted_out", "in SORTED order"),
])
def test_more_sampling_mistakes(kind, symptom):
    named(check.sampling_distribution, more_sampler(kind), symptom)


def test_a_sampler_written_row_by_row_in_float64_passes():
    def row_by_row(logits, temperature, top_k, top_p):
        if temperature == 0:
            return F.one_hot(logits.argmax(-1), logits.size(-1)).double()
        rows = []
        for z in logits.double() / temperature:
            keep = (z >= z.sort(descending=True).values[min(top_k, len(z)) - 1] if top_k is not None
                    else torch.ones_like(z).bool())
            p = z.softmax(-1) * keep
            p = p / p.sum()
            if top_p is not None and top_p < 1:
                ranked = p.sort(descending=True).values
                last = ranked[int((ranked.cumsum(0) < top_p).sum().clamp(max=len(p) - 1))]
                p = p * (p >= last)
            rows.append(p / p.sum())
        return torch.stack(rows)
    outcome = check.sampling_distribution.evaluate(row_by_row)
    assert outcome.passed, outcome.message


def more_step(kind):
    def fn(q, k, v, cache_k, cache_v):
        t = {"at_d": cache_k.size(-1), "at_t-1": max(cache_k.size(2) - 1, 0)}.get(kind, cache_k.size(2))
        position = torch.tensor([t])
        q, k = apply_rope(q, position), apply_rope(k, position)
        cache_k = torch.cat([cache_k, k], dim=2)
        cache_v = torch.cat([cache_v, apply_rope(v, position) if kind == "rope_v" else v], dim=2)
        d = q.size(-1) * (q.size(1) if kind == "scale_d_model" else 1)
        if kind == "scale_after":
            out = torch.softmax(q @ cache_k.transpose(-2, -1), -1) / math.sqrt(d) @ cache_v
        else:
            out = torch.softmax(q @ cache_k.transpose(-2, -1) / math.sqrt(d), -1) @ cache_v
        return (out[:, :, 0] if kind == "squeezed" else out), cache_k, cache_v
    return fn


@pytest.mark.parametrize("kind, symptom", [
    ("at_d", r"rotated at position 8, not at the newest position t = cache_k.size\(2\)"),
    ("at_t-1", r"rotated at position \d+, not at the newest position"),
    ("rope_v", "value is rotated too"),
    ("scale_d_model", r"divided by √\(h·d\)"),
    ("squeezed", "lost its position axis"),
    ("scale_after", "divided by √d AFTER the softmax"),
])
def test_more_cached_step_mistakes(kind, symptom):
    named(check.cached_attention_step, more_step(kind), symptom)


def test_a_cached_step_with_torch_s_attention_passes():
    def with_torch(q, k, v, cache_k, cache_v):
        position = torch.full((1,), cache_k.shape[-2], dtype=torch.long)
        keys, values = torch.cat((cache_k, apply_rope(k, position)), -2), torch.cat((cache_v, v), -2)
        return F.scaled_dot_product_attention(apply_rope(q, position), keys, values), keys, values
    outcome = check.cached_attention_step.evaluate(with_torch)
    assert outcome.passed, outcome.message


def more_rope(kind):
    def fn(x, positions, base=10000.0):
        d = x.size(-1)
        i = torch.arange(d if kind == "i_over_d" else d // 2)
        exponent = (-2 * i) // d if kind == "int_exponent" else -2 * i.float() / d
        m = torch.arange(1, x.size(-2) + 1).float() if kind == "arange1" else positions.float()
        angle = m * base ** exponent if kind == "no_outer" else m[:, None] * base ** exponent
        x1, x2 = x[..., :d // 2], x[..., d // 2:]
        return torch.cat([x1 * angle.cos() - x2 * angle.sin(), x1 * angle.sin() + x2 * angle.cos()], -1)
    return fn


@pytest.mark.parametrize("kind, symptom", [
    ("arange1", r"positions are ignored \(1, 2, ..., T"),
    ("no_outer", r"positions\[:, None\] \* theta"),
    ("i_over_d", "one frequency per PAIR"),
    ("int_exponent", "computed with integers"),
])
def test_more_rope_mistakes(kind, symptom):
    named(check.apply_rope, more_rope(kind), symptom)


def test_rope_in_the_rotate_half_form_passes():
    def rotate_half(x, positions, base=10000.0):
        d = x.shape[-1]
        freqs = torch.outer(positions.float(), 1.0 / base ** (torch.arange(0, d, 2).float() / d))
        emb = torch.cat([freqs, freqs], -1)
        return x * emb.cos() + torch.cat([-x[..., d // 2:], x[..., :d // 2]], -1) * emb.sin()
    outcome = check.apply_rope.evaluate(rotate_half)
    assert outcome.passed, outcome.message


def more_gqa(kind):
    def fn(q, k, v, mask=None):
        g = q.size(1) // k.size(1)
        k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
        if kind == "is_causal":                          # the mask it is given ignored
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        if kind == "float_mask":
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask.float())
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
        if kind == "after_softmax":
            return (scores.softmax(-1) * mask) @ v
        return scores.masked_fill(~mask, 0.0).softmax(-1) @ v     # fill_zero
    return fn


@pytest.mark.parametrize("kind, symptom", [
    ("is_causal", "mask you are given is ignored"),
    ("float_mask", "ADDS a float mask"),
    ("after_softmax", "applied after the softmax"),
    ("fill_zero", "set to 0"),
])
def test_more_gqa_mistakes(kind, symptom):
    named(check.grouped_query_attention, more_gqa(kind), symptom)


def test_gqa_with_expand_and_torch_s_attention_passes():
    def expanded(q, k, v, mask=None):
        B, h_kv, T, d = k.shape
        g = q.size(1) // h_kv
        k = k[:, :, None].expand(B, h_kv, g, T, d).reshape(B, h_kv * g, T, d)
        v = v[:, :, None].expand(B, h_kv, g, T, d).reshape(B, h_kv * g, T, d)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    outcome = check.grouped_query_attention.evaluate(expanded)
    assert outcome.passed, outcome.message


# ---- slips no catalogued mistake gives: the probes say where they are ----------------------------
class ProbedBlock(Block):
    def forward(self, x, mask):
        y = self.norm1(x)
        if self.kind == "raw_queries":                   # queries from x, keys and values from LayerNorm(x)
            x = x + self.dropout1(self.attn(x, y, y, mask))
            return x + self.dropout2(self.ff(self.norm2(x)))
        if self.kind == "mask_transposed":
            x = x + self.dropout1(self.attn(y, y, y, mask.T))
            return x + self.dropout2(self.ff(self.norm2(x)))
        x = x + self.dropout1(self.attn(y, y, y, mask))
        return x + self.dropout2(self.ff(self.norm2(y)))    # "ffn_reads_input_norm": LN2 of LN1 of the input


@pytest.mark.parametrize("kind, symptom", [
    ("raw_queries", "the feed-forward half of your block is right.*the slip is in the attention half"),
    ("ffn_reads_input_norm", "the attention half of your block is right.*the slip is in the feed-forward half"),
    ("mask_transposed", "the feed-forward half of your block is right.*the slip is in the attention half"),
])
def test_block_slips_are_placed_in_their_half(kind, symptom):
    named(check.gpt_block, type(f"ProbedBlock_{kind}", (ProbedBlock,), {"kind": kind}), symptom)


class ProbedModel(Model):
    def forward(self, tokens):
        T = tokens.size(1)
        e = self.embed(tokens) * math.sqrt(self.d_model)
        x = e + self.pos(e) if self.kind == "embedding_twice" else self.pos(e)    # self.pos already returns e + P
        x = self.norm(x) if self.kind == "norm_before_too" else x
        for i, layer in enumerate(self.layers):
            mask = None if self.kind == "mask_first_block_only" and i > 0 else causal_mask(T)
            x = layer(x, mask)
        return self.head(self.norm(x))


@pytest.mark.parametrize("kind, symptom", [
    ("embedding_twice", "with every block switched off your logits still differ.*the slip is at the ends"),
    ("mask_first_block_only", "the embeddings and the output layer are right.*the slip is in how the blocks run"),
    ("norm_before_too", "with every block switched off your logits still differ.*the slip is at the ends"),
])
def test_gpt_slips_are_placed_at_the_ends_or_in_the_blocks(kind, symptom):
    named(check.gpt, type(f"ProbedModel_{kind}", (ProbedModel,), {"kind": kind}), symptom)


@pytest.mark.parametrize("exercise, answer, symptom", [
    (check.next_token_loss, lambda lg, tok, pad: _ce(lg[:, :-1], tok[:, 1:], ignore_index=pad, reduction="sum")
     / lg.size(0), "divided by the batch size B"),
    (check.next_token_loss, lambda lg, tok, pad: _ce(lg, tok[:, 1:], ignore_index=pad), "do not line up: shift both"),
    (check.sampling_distribution, lambda lg, T, k, p: lg.argmax(-1) if T == 0 else sampling_distribution(lg, T, k, p),
     "not the indices of the argmax"),
    (check.grouped_query_attention, lambda q, k, v, mask=None: grouped_query_attention(
        q, k, v, causal_mask(q.size(2)) if mask is None else mask & causal_mask(q.size(2))),
     "query 0 does not see the later keys its mask allows"),
    (check.next_token_loss, lambda lg, tok, pad: _ce(lg[:, :-1], tok[:, 1:], ignore_index=pad, reduction="sum")
     / (tok != pad).sum(), "number of ALL real tokens"),
], ids=["loss-over-batch-size", "loss-logits-not-cut", "greedy-indices", "gqa-own-causal-mask", "loss-over-all-tokens"])
def test_more_slips_named(exercise, answer, symptom):
    named(exercise, answer, symptom)


# ---- the second catalogue's slips (tests/fresh_slips/lesson12b.py), planted the way a learner writes them ---------
def test_loss_on_probabilities_in_nll_loss_is_named():
    def nll_on_probs(lg, tok, pad):
        return F.nll_loss(lg[:, :-1].softmax(-1).reshape(-1, lg.size(-1)), tok[:, 1:].reshape(-1), ignore_index=pad)
    named(check.next_token_loss, nll_on_probs, "nll_loss takes LOG-probabilities and you gave it probabilities")


class DropoutOverSum(Block):
    def forward(self, x, mask):
        y = self.norm1(x)
        if self.kind == "attn":
            x = self.dropout1(x + self.attn(y, y, y, mask))
            return x + self.dropout2(self.ff(self.norm2(x)))
        x = x + self.dropout1(self.attn(y, y, y, mask))
        return self.dropout2(x + self.ff(self.norm2(x)))


@pytest.mark.parametrize("kind, symptom", [("attn", "dropout1 is applied to the sum x \\+ Attn"),
                                           ("ff", "dropout2 is applied to the sum x \\+ FFN")])
def test_block_dropout_over_one_residual_sum_is_named(kind, symptom):
    named(check.gpt_block, type(f"DropoutOverSum_{kind}", (DropoutOverSum,), {"kind": kind}), symptom)


def sampler_with(kind):
    """The reference's sampling distribution, one step slipped the way the second catalogue's learners did."""
    def fn(logits, temperature, top_k, top_p):
        if kind == "tiny_temperature":                        # no case for 0: a tiny temperature in its place
            temperature = max(temperature, 1e-8)
        if temperature == 0:
            if kind == "int_one_hot":
                return F.one_hot(logits.argmax(-1), logits.size(-1))
            if kind == "all_tied":                            # every largest logit gets 1
                return (logits == logits.max(-1, keepdim=True).values).float()
            return sampling_distribution(logits, 0, top_k, top_p)
        if kind == "no_min" and top_k is not None:
            torch.topk(logits, top_k, dim=-1)                 # min(top_k, V) forgotten: raises when top_k > V
        z = logits / temperature
        if kind == "softmax_dim0":
            probs = z.softmax(0)
            return probs / probs.sum(-1, keepdim=True)
        if kind == "top_p_raw" and top_p is not None and top_p < 1:   # the nucleus of the untempered distribution
            probs = sampling_distribution(logits, temperature, top_k, None)
            probs = probs * (sampling_distribution(logits, 1.0, None, top_p) > 0)
            return probs / probs.sum(-1, keepdim=True)
        return sampling_distribution(logits, temperature, top_k, top_p)
    return fn


@pytest.mark.parametrize("kind, symptom", [
    ("tiny_temperature", "where the largest logits tie, your row shares the mass among the tied tokens"),
    ("int_one_hot", "one-hot row is of integers \\(torch.int64\\)"),
    ("all_tied", "where the largest logits tie, your row is not one-hot on one of the tied tokens"),
    ("no_min", "with top_k=9 larger than the vocabulary \\(V=6\\) your function fails"),
    ("softmax_dim0", "softmax runs over the rows \\(dim=0\\)"),
    ("top_p_raw", "top-p chose its tokens from the distribution at T = 1, before the temperature"),
])
def test_more_sampling_slips_are_named(kind, symptom):
    named(check.sampling_distribution, sampler_with(kind), symptom)


def test_greedy_on_any_of_the_tied_largest_logits_passes():
    def last_of_the_tied(logits, temperature, top_k, top_p):
        if temperature == 0:                                  # the LAST of the tied largest logits: still greedy
            flipped = logits.flip(-1).argmax(-1)
            return F.one_hot(logits.size(-1) - 1 - flipped, logits.size(-1)).float()
        return sampling_distribution(logits, temperature, top_k, top_p)
    outcome = check.sampling_distribution.evaluate(last_of_the_tied)
    assert outcome.passed, outcome.message


def test_the_reference_filters_nothing_when_top_k_exceeds_the_vocabulary():
    logits = torch.randn(2, 6)
    assert torch.allclose(sampling_distribution(logits, 1.0, 9, None), logits.softmax(-1))


def test_cached_step_at_position_q_size_2_is_named():
    def at_one(q, k, v, cache_k, cache_v):
        position = torch.tensor([q.size(2)])                  # 1, the query's length, not the cache's
        q, k = apply_rope(q, position), apply_rope(k, position)
        keys, values = torch.cat([cache_k, k], 2), torch.cat([cache_v, v], 2)
        return scaled_dot_product_attention(q, keys, values), keys, values
    named(check.cached_attention_step, at_one, r"rotated at position 1 \(q.size\(2\)")


def test_rope_returning_float32_for_a_float64_x_is_named():
    def float32(x, positions, base=10000.0):
        return apply_rope(x.float(), positions, base)
    named(check.apply_rope, float32, "x is float64 and your rotated x is torch.float32")


def test_gqa_with_the_group_size_inverted_is_named():
    def inverted(q, k, v, mask=None):
        g = k.size(1) // q.size(1)                            # 0: h_kv // h
        return scaled_dot_product_attention(q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1), mask)
    named(check.grouped_query_attention, inverted, r"all zeros.*group of h // h_kv query heads")


def test_gqa_repeating_the_mask_is_named():
    def mask_repeated(q, k, v, mask=None):
        g = q.size(1) // k.size(1)
        return scaled_dot_product_attention(q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1),
                                            mask.repeat_interleave(g, dim=1))
    named(check.grouped_query_attention, mask_repeated, r"the mask your attention got has shape \(5, 10\)")


def unrotated_key_step(kind):
    def fn(q, k, v, cache_k, cache_v):
        t = cache_k.size(2)
        position = torch.tensor([t])
        if kind == "appended before rotating":           # the cache keeps k as it came; the rotated k goes unused
            cache_k, cache_v = torch.cat([cache_k, k], 2), torch.cat([cache_v, v], 2)
            q, k = apply_rope(q, position), apply_rope(k, position)
        else:                                            # "k at position 0": rotated, but at 0 every step
            q, k = apply_rope(q, position), apply_rope(k, torch.tensor([0]))
            cache_k, cache_v = torch.cat([cache_k, k], 2), torch.cat([cache_v, v], 2)
        return torch.softmax(q @ cache_k.transpose(-2, -1) / math.sqrt(q.size(-1)), -1) @ cache_v, cache_k, cache_v
    return fn


@pytest.mark.parametrize("kind", ["appended before rotating", "k at position 0"])
def test_cached_step_keeping_the_new_key_unrotated_is_named(kind):
    named(check.cached_attention_step, unrotated_key_step(kind),
          r"the new key you append \(and attend to\) is k as it came, unrotated.*rotated at position 0 .*appended "
          r"BEFORE it was rotated")


def length_scaled_step(appended_first):
    def fn(q, k, v, cache_k, cache_v):
        position = torch.tensor([cache_k.size(2)])
        scale = math.sqrt(cache_k.size(2) + (1 if appended_first else 0))   # the cache's length, not √d
        q, k = apply_rope(q, position), apply_rope(k, position)
        cache_k, cache_v = torch.cat([cache_k, k], 2), torch.cat([cache_v, v], 2)
        return torch.softmax(q @ cache_k.transpose(-2, -1) / scale, -1) @ cache_v, cache_k, cache_v
    return fn


@pytest.mark.parametrize("appended_first, symptom", [
    (True, r"divided by √\(t\+1\), the number of keys .*divide q kᵀ by √d"),
    (False, r"divided by √t, the cache's length .*divide q kᵀ by √d"),
])
def test_cached_step_scaled_by_the_cache_length_is_named(appended_first, symptom):
    named(check.cached_attention_step, length_scaled_step(appended_first), symptom)


def copy_pasted_gqa(kind):
    def fn(q, k, v, mask=None):
        g = q.size(1) // k.size(1)
        kk, vv = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
        kk, vv = {"v_from_k": (kk, kk), "k_from_v": (vv, vv), "v_is_q": (kk, q)}[kind]
        return F.scaled_dot_product_attention(q, kk, vv, attn_mask=mask)
    return fn


@pytest.mark.parametrize("kind, symptom", [
    ("v_from_k", r"the values are the keys, repeated .*repeat v for the values"),
    ("k_from_v", r"the keys are the values, repeated .*repeat k for the keys"),
    ("v_is_q", r"the output does not change when the values change .*it is v, not k or q"),
])
def test_gqa_with_a_copy_pasted_key_or_value_is_named(kind, symptom):
    named(check.grouped_query_attention, copy_pasted_gqa(kind), symptom)

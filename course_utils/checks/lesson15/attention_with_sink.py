"""Lesson 15, exercise 3: attention with a learned sink (gpt-oss).

    attention_with_sink(q (B, h, T_q, d), k, v (B, h, T_k, d), sink (h,), mask=None)
        -> (out (B, h, T_q, d), weights (B, h, T_q, T_k)), weights_tj = exp(e_tj) / (exp(s_h) + sum_j exp(e_tj))

mask: bool, True = may attend, broadcast to the scores. The check compares both results with the course's
(course_utils.local_attention.attention_with_sink) on: no mask; a causal mask; a mask with a query that may see no
key (its weights 0, its output 0, finite: the sink takes everything); sinks of -inf (plain attention); large scores
(the exponentials must not overflow). It names the mistake whose values the answer gives, and tests the point of a
sink: each query's weights are >= 0 and sum to LESS than 1.
"""
import math

import numpy as np
import torch
import torch.nn.functional as F

from ...local_attention import attention_with_sink as ref_sink
from ...masks import causal_mask
from ..core import Mistake, Mistakes, exercise, expect, expect_returns, expect_shape, randn, single_threaded, to_numpy
from ..evaluation import Evaluation, call_naming
from ..mistakes import Said
from ..torch_errors import BROADCAST, EXPAND


def _scores(q, k, mask, scale=True, inverted=False):
    s = q @ k.transpose(-2, -1) / (math.sqrt(q.size(-1)) if scale else 1.0)
    return s if mask is None else s.masked_fill(mask if inverted else ~mask, float("-inf"))


def wrong(kind):
    """Attention with a sink, with the mistake `kind`."""
    def attention_with_sink(q, k, v, sink, mask=None):
        s = _scores(q, k, mask, scale=kind not in ("no_scale", "sink_scaled"), inverted=kind == "mask_inverted")
        col = sink.view(1, -1, 1, 1).expand(*s.shape[:-1], 1)
        if kind == "no_sink":
            w = torch.cat([s, torch.full_like(col, -math.inf)], -1).softmax(-1)[..., :-1]
        elif kind == "sink_zero":                     # a sink logit of 0 in every head: `sink` ignored
            w = torch.cat([s, torch.zeros_like(col)], -1).softmax(-1)[..., :-1]
        elif kind == "sink_in_numerator":             # exp(e + s) / (exp(s) + sum exp(e))
            w = (s + col).exp() / (col.exp() + s.exp().sum(-1, keepdim=True))
        elif kind == "sink_not_exp":                  # sum exp(e) + s
            w = s.exp() / (s.exp().sum(-1, keepdim=True) + col)
        elif kind == "sink_negated":
            w = torch.cat([s, -col], -1).softmax(-1)[..., :-1]
        elif kind == "drop_first":                    # the sink appended last, the FIRST column dropped
            w = torch.cat([s, col], -1).softmax(-1)[..., 1:]
        elif kind == "sink_first_keep_first":         # the sink prepended, and the first column (the sink) kept
            w = torch.cat([col, s], -1).softmax(-1)[..., :-1]
        elif kind == "overflow":                      # exp without the maximum subtracted first
            w = s.exp() / (s.exp().sum(-1, keepdim=True) + col.exp())
        elif kind == "sink_scaled":                   # the sink's column divided by sqrt(d) with the scores
            w = (torch.cat([s, col], -1) / math.sqrt(q.size(-1))).softmax(-1)[..., :-1]
        elif kind in ("no_scale", "mask_inverted"):
            w = torch.cat([s, col], -1).softmax(-1)[..., :-1]
        elif kind == "mask_after":                    # the mask applied to the weights, after the softmax
            w = torch.cat([_scores(q, k, None), col], -1).softmax(-1)[..., :-1]
            w = w if mask is None else w * mask
        return w @ v, w
    return attention_with_sink


def _sink_on_queries(q, k, v, sink, mask=None):
    """The sink viewed as (1, h, 1): broadcast against the scores' query axis, not the head axis."""
    s = _scores(q, k, mask)
    return torch.cat([s, sink.view(1, -1, 1).expand(*s.shape[:-1], 1)], -1).softmax(-1)[..., :-1] @ v, None


M = Mistakes(
    Mistake("sink_axes", "the sink logits (h,) are lined up with the wrong axis of the scores (B, h, T_q, T_k): one "
            "per HEAD, the same for every query and key", hint="sink.view(1, -1, 1, 1)", shows=_sink_on_queries),
    Mistake("sums_to_one", "each query's weights sum to 1, so the sink takes nothing: exp(s_h) must join the "
            "denominator, weights = exp(e) / (exp(s_h) + Σ exp(e)) (a sink added to every score cancels out in the "
            "softmax, and renormalising the weights after it gives the sink's share back)",
            hint="softmax over torch.cat([scores, sink column], -1), then drop the sink's column",
            shows=wrong("no_sink")),
    Mistake("sink_zero", "the weights are those of a sink logit of 0 in every head, not of the logits in `sink` "
            "(exp(0) = 1 joins each denominator, the 'off-by-one' softmax): head h's denominator adds exp(s_h), "
            "s_h = sink[h], a logit learned per head", hint="the sink's column is sink.view(1, -1, 1, 1) expanded "
            "to the scores' rows: sink.view(1, -1, 1, 1).expand(*scores.shape[:-1], 1)", shows=wrong("sink_zero")),
    Mistake("sink_in_numerator", "the sink is in the numerators too (weights exp(e + s_h) / (exp(s_h) + Σ exp(e))): "
            "the sink logit joins the DENOMINATOR only", shows=wrong("sink_in_numerator")),
    Mistake("sink_not_exp", "the denominator adds the sink logit s_h itself: it adds exp(s_h), as one more "
            "exponentiated score", shows=wrong("sink_not_exp")),
    Mistake("sink_negated", "the sink enters as exp(-s_h): with the sink as one more score, its logit is s_h",
            shows=wrong("sink_negated")),
    Mistake("drop_first", "the weights are shifted by one key: the sink's column was appended last, but the FIRST "
            "column was dropped (key 0's weight) instead of the sink's", hint="weights[..., :-1] when the sink is "
            "the last column", shows=wrong("drop_first")),
    Mistake("sink_kept", "the sink's weight is kept as a key's weight (the sink prepended, the last key dropped): "
            "drop the sink's own column", shows=wrong("sink_first_keep_first")),
    Mistake("no_scale", "the scores are not scaled by 1/√d", shows=wrong("no_scale")),
    Mistake("sink_scaled", "the sink logit is divided by √d with the scores: only q . k is scaled, s_h joins the "
            "softmax as it is", shows=wrong("sink_scaled")),
    Mistake("mask_inverted", "the mask is used the other way round: True means MAY attend, so the scores to fill "
            "with -inf are where the mask is False", hint="scores.masked_fill(~mask, float('-inf'))",
            shows=wrong("mask_inverted")),
    Mistake("mask_after", "the mask is applied to the weights after the softmax: masked scores must be -inf "
            "BEFORE it, so that they take no share of the denominator", shows=wrong("mask_after")),
    Mistake("overflow", "with large scores the weights are NaN: exp overflows. Subtract the largest of the scores "
            "AND the sink before exp (softmax does it for you over the scores and the sink together)",
            shows=wrong("overflow")),
)
VALUE_KEYS = ["sums_to_one", "sink_zero", "sink_in_numerator", "sink_not_exp", "sink_negated", "drop_first",
              "sink_kept", "no_scale", "sink_scaled", "mask_inverted", "mask_after", "overflow"]


def _same(a, b):
    a, b = to_numpy(a).astype(float), to_numpy(b).astype(float)
    return a.shape == b.shape and bool(np.allclose(a, b, atol=1e-5, rtol=1e-4, equal_nan=True))


def _extra_key(q, k, v, sink, mask=None):
    """torch's fused attention over the keys and one more, whose score is s_h and whose value is 0."""
    B, h, T_q, d = q.shape
    zero = q.new_zeros(B, h, 1, d)
    bias = torch.zeros(B, h, T_q, k.size(2) + 1)
    if mask is not None:
        bias[..., :-1] = bias[..., :-1].masked_fill(~mask, float("-inf"))
    bias[..., -1] = sink.view(1, h, 1)
    scores = torch.cat([q @ k.transpose(-2, -1) / d ** 0.5, torch.zeros(B, h, T_q, 1)], -1) + bias
    weights = scores.softmax(-1)[..., :-1]
    out = F.scaled_dot_product_attention(q, torch.cat([k, zero], 2), torch.cat([v, zero], 2), attn_mask=bias)
    return out, weights


def _logsumexp(q, k, v, sink, mask=None):
    s = _scores(q, k, mask)
    lse = torch.logaddexp(s.logsumexp(-1, keepdim=True), sink.view(1, -1, 1, 1))
    w = (s - lse).exp()
    return w @ v, w


def _cases(ev):
    """(name, q, k, v, sink, mask): the cases the check runs, each from the evaluation's seeds."""
    out = []
    for seed, (B, h, T_q, T_k, d, kind) in enumerate([(2, 3, 4, 6, 5, "none"), (2, 3, 5, 5, 4, "causal"),
                                                      (1, 2, 4, 5, 4, "empty_row"), (2, 3, 4, 4, 4, "minus_inf"),
                                                      (1, 2, 3, 4, 4, "large")]):
        g = ev.rng(seed)
        q, k, v = randn(g, B, h, T_q, d, scale=1.5), randn(g, B, h, T_k, d), randn(g, B, h, T_k, d)
        sink = randn(g, h)
        mask = None
        if kind == "causal":
            mask = causal_mask(T_k)
        elif kind == "empty_row":
            mask = torch.as_tensor(ev.rng(20 + seed).random((T_q, T_k)) > 0.3)
            mask[:, 0], mask[2] = True, False                   # query 2 may attend to no key
        elif kind == "minus_inf":
            sink = torch.full((h,), float("-inf"))
            mask = causal_mask(T_k)
        elif kind == "large":
            q = 200 * k[:, :, :T_q]                             # each query along a key: scores of several hundred
        out.append((kind, q, k, v, sink, mask))
    return out


_SAID = {"none": "no mask", "causal": "a causal mask", "empty_row": "a mask under which query 2 sees no key",
         "minus_inf": "sinks of -inf (plain attention)", "large": "large scores"}


@exercise("attention with a learned sink", reference=ref_sink, mistakes=M, right=[_extra_key, _logsumexp])
@single_threaded
def attention_with_sink(ev: Evaluation, answer):
    """answer(q, k, v, sink, mask=None) -> (out, weights)."""
    tests, alive = 0, [M[key] for key in VALUE_KEYS]   # the mistakes whose weights the answer gave so far
    for kind, q, k, v, sink, mask in _cases(ev):
        args = (q, k, v, sink) + ((mask,) if mask is not None else ())
        expected = ref_sink(q, k, v, sink, mask)
        h, T_q = q.size(1), q.size(2)
        crashes = [(BROADCAST, lambda m, sizes={h, T_q}: M.sink_axes if {int(m["a"]), int(m["b"])} == sizes else None),
                   (EXPAND, lambda m, sizes={h, T_q}: M.sink_axes if {int(m["new"]), int(m["old"])} == sizes else None)]
        out, weights = expect_returns(call_naming(ev, crashes, answer, *args), expected, ("out", "weights"))
        expect_shape(weights, tuple(expected[1].shape), f"the weights ({_SAID[kind]})")
        variants = M.variants(alive, *args)
        ev.expect_close(weights, expected[1], f"the weights ({_SAID[kind]})",
                        mistakes={m: w for m, (_, w) in variants.items()})
        ev.expect_close(out, expected[0], f"the output ({_SAID[kind]})",
                        mistakes={m: o for m, (o, _) in variants.items()})
        alive = [m for m, (_, w) in variants.items() if _same(w, weights)]
        tests += 1
    # the point of a sink: weights >= 0 summing to less than 1, for a query that sees at least one key
    _, q, k, v, sink, _ = _cases(ev)[0]
    _, weights = ev.call(answer, q, k, v, sink)
    sums = to_numpy(weights).sum(-1)
    expect((to_numpy(weights) >= 0).all(), Said("distribution.negative", "a weight is negative: each weight is "
                                                "exp(e) / (exp(s_h) + Σ exp(e)), between 0 and 1"))
    expect((sums < 1 - 1e-6).all(), M.sums_to_one)
    return tests + 1

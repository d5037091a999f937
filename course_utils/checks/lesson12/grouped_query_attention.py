"""Lesson 12, exercise 7: grouped-query attention.

    grouped_query_attention(q (B, h, T, d), k, v (B, h_kv, T, d), mask) -> (B, h, T, d): query head j uses
        key/value head j // (h / h_kv); the mask (a causal (T, T) one, or a padding mask (B, 1, 1, T)) as given

The check compares the output with the course's (gpt_attention.grouped_query_attention) for grouped-query,
multi-query and multi-head sizes with the causal mask, then with a padding mask that is not causal, names the
mistake whose values the answer gives (gqa_mistakes.py), and where none does, says which property fails
(gqa_probes.py, unit_values.py): the heads' order, the key/value head each query head uses, the batch, the keys
the mask allows, weights that do not sum to 1.
"""
import functools

import numpy as np
import torch
import torch.nn.functional as F

from ...gpt_attention import grouped_query_attention as ref_gqa
from ...masks import causal_mask, masked_softmax
from ..core import exercise, expect, expect_shape, randn, single_threaded, to_numpy
from ..evaluation import Evaluation
from ..expectations import explained
from .gqa_mistakes import VALUE_KEYS, M
from .gqa_probes import batch_mixed, call, crashes, gqa_heads, gqa_pairs, heads_permuted, masks_more
from .unit_values import unnormalised


def _grouped_queries(q, k, v, mask=None):
    """No copy of k and v: the queries grouped as (B, h_kv, g, T, d), the mask given an axis for the group."""
    B, h, T, d = q.shape
    h_kv = k.size(1)
    scores = q.reshape(B, h_kv, h // h_kv, T, d) @ k[:, :, None].transpose(-2, -1) / d ** 0.5
    weights = masked_softmax(scores, None if mask is None else mask.unsqueeze(-3))
    return (weights @ v[:, :, None]).reshape(B, h, T, d)


def _torch_gqa(q, k, v, mask=None):
    """torch's fused attention with its own grouped heads."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)


def _index_select(q, k, v, mask=None):
    which = torch.arange(q.size(1)) // (q.size(1) // k.size(1))
    return ref_gqa(q, k.index_select(1, which), v.index_select(1, which), mask)


@exercise("grouped-query attention", reference=ref_gqa, mistakes=M, right=[_grouped_queries, _torch_gqa, _index_select])
@single_threaded
def grouped_query_attention(ev: Evaluation, answer):
    """answer(q (B, h, T, d), k, v (B, h_kv, T, d), mask) -> (B, h, T, d): query head j uses key/value head
    j // (h / h_kv)."""
    tests = 0
    # the causal mask, then a padding mask (B, 1, 1, T) that is not causal (an answer must use the mask it is given)
    for seed, (B, h, h_kv, T, d) in enumerate([(2, 4, 2, 5, 8), (1, 6, 3, 4, 4), (2, 4, 1, 6, 8), (2, 4, 4, 5, 8),
                                               (3, 4, 2, 6, 8)]):
        g = ev.rng(seed)
        q, k, v = randn(g, B, h, T, d), randn(g, B, h_kv, T, d), randn(g, B, h_kv, T, d)
        lengths = torch.as_tensor([T - 1, 2, T]) if seed == 4 else None         # keys past a sequence's end masked
        mask = causal_mask(T) if lengths is None else (torch.arange(T) < lengths[:, None])[:, None, None, :]
        got = call(ev, answer, q, k, v, mask)
        expect_shape(got, (B, h, T, d), f"the output (h={h} query heads, h_kv={h_kv})")
        expected = ref_gqa(q, k, v, mask)
        name = "multi-head" if h_kv == h else ("multi-query" if h_kv == 1 else "grouped-query")
        with_mask = "" if lengths is None else f", a padding mask of shape {tuple(mask.shape)}"
        probes = [functools.partial(masks_more, ev, answer, q, k, v, mask)] if lengths is not None else []
        probes += [functools.partial(gqa_heads, got, q, k, v, mask),
                   functools.partial(batch_mixed, ev, answer, (q, k, v, mask)),
                   functools.partial(gqa_pairs, got, q, k, v, mask),
                   functools.partial(unnormalised, ev, M, crashes(B, h, h_kv, T, mask), answer, (q, k, v, mask),
                                     (2,), "the output")]
        permuted = heads_permuted(got, expected)
        expect(permuted is None, permuted)
        mistakes = M.variants(VALUE_KEYS, q, k, v, mask)
        finite = np.isfinite(to_numpy(got)) if hasattr(got, "shape") else None
        if finite is not None and not finite.all():    # NaN or inf: only a mistake with NaN where the answer has
            mistakes = {m: w for m, w in mistakes.items() if np.array_equal(np.isfinite(to_numpy(w)), finite)}
            if not mistakes:                           # ... them; else the property the NaN break
                symptom = probes[-1]()
                expect(symptom is None, symptom)
        with explained(*probes):
            ev.expect_close(got, expected, f"the output of {name} attention (h={h}, h_kv={h_kv}{with_mask})",
                            mistakes=mistakes)
        tests += 1
    return tests

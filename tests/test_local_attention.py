"""Lesson 15's local layers, learned sinks and ring buffer (course_utils.local_attention), against independent forms:
a sink of -inf is plain attention, a learned sink is attention with one extra zero-valued key (torch's own kernel),
a ring buffer decodes as a sliding window recomputed from scratch."""
import pytest
import torch
import torch.nn.functional as F

from course_utils import local_attention as la
from course_utils.masks import causal_mask


def _qkv(seed=0, B=2, h=3, T_q=5, T_k=7, d=4):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, h, T_q, d, generator=g), torch.randn(B, h, T_k, d, generator=g),
            torch.randn(B, h, T_k, d, generator=g))


def test_a_sink_of_minus_infinity_is_plain_attention():
    q, k, v = _qkv()
    out, weights = la.attention_with_sink(q, k, v, torch.full((3,), float("-inf")))
    assert torch.allclose(out, F.scaled_dot_product_attention(q, k, v), atol=1e-6)
    assert torch.allclose(weights.sum(-1), torch.ones(2, 3, 5))
    mask = causal_mask(7)[2:]                                               # (5, 7): queries 2..6
    out, _ = la.attention_with_sink(q, k, v, None, mask)
    assert torch.allclose(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), atol=1e-6)


def test_a_learned_sink_is_one_extra_key_with_a_zero_value():
    q, k, v = _qkv(1)
    sink = torch.tensor([0.5, -1.0, 2.0])
    mask = torch.rand(5, 7, generator=torch.Generator().manual_seed(3)) > 0.3
    out, weights = la.attention_with_sink(q, k, v, sink, mask)
    # torch's kernel over the keys and one more: its key 0 (score 0) plus a bias of s_h, its value 0
    k1, v1 = torch.cat([k, torch.zeros(2, 3, 1, 4)], 2), torch.cat([v, torch.zeros(2, 3, 1, 4)], 2)
    bias = torch.zeros(2, 3, 5, 8).masked_fill(~torch.cat([mask, torch.ones(5, 1, dtype=torch.bool)], 1),
                                               float("-inf"))
    bias[..., -1] = sink.view(1, 3, 1)
    assert torch.allclose(out, F.scaled_dot_product_attention(q, k1, v1, attn_mask=bias), atol=1e-6)
    assert (weights.sum(-1) < 1).all() and (weights[..., ~mask] == 0).all()


def test_a_query_with_every_key_masked_gives_the_sink_everything_and_stays_finite():
    q, k, v = _qkv(2)
    mask = torch.ones(5, 7, dtype=torch.bool)
    mask[1] = False
    out, weights = la.attention_with_sink(q, k, v, torch.zeros(3), mask)
    assert torch.isfinite(out).all() and (out[:, :, 1] == 0).all() and (weights[:, :, 1] == 0).all()
    out, weights = la.attention_with_sink(q, k, v, None, mask)               # no sink: zero weights, no NaN
    assert torch.isfinite(out).all() and (weights[:, :, 1] == 0).all()
    with pytest.raises(ValueError, match="one logit per head"):
        la.attention_with_sink(q, k, v, torch.zeros(2))


def test_layer_patterns():
    assert la.layer_pattern(12, 6) == (("local",) * 5 + ("full",)) * 2               # Gemma 3's 5:1
    assert la.layer_pattern(8, 4, "gated_deltanet") == (("gated_deltanet",) * 3 + ("full",)) * 2
    assert la.layer_pattern(4, 2) == ("local", "full") * 2                            # gpt-oss alternates
    mask = la.local_causal_mask(6, 3)
    assert mask.sum(-1).tolist() == [1, 2, 3, 3, 3, 3] and not mask.triu(1).any()


def test_the_ring_buffer_decodes_as_a_window_recomputed_from_scratch():
    B, h, T, d, W = 2, 3, 11, 4, 4
    q, k, v = _qkv(4, B, h, T, T, d)
    cache_k, cache_v, slots = la.empty_ring_buffer(B, h, W, d)
    for t in range(T):
        cache_k, cache_v, slots = la.ring_buffer_append(cache_k, cache_v, slots, k[:, :, t:t + 1], v[:, :, t:t + 1], t)
        assert cache_k.shape == (B, h, W, d) and sorted(slots.tolist()) == sorted(
            [p for p in range(t - W + 1, t + 1) if p >= 0] + [-1] * max(0, W - t - 1))
        mask = la.ring_buffer_mask(slots, t, W)[None]
        out, _ = la.attention_with_sink(q[:, :, t:t + 1], cache_k, cache_v, None, mask)
        start = max(0, t - W + 1)
        expected = F.scaled_dot_product_attention(q[:, :, t:t + 1], k[:, :, start:t + 1], v[:, :, start:t + 1])
        assert torch.allclose(out, expected, atol=1e-6), t


def test_cache_bytes_are_flat_for_a_local_layer():
    assert la.kv_bytes(2, 16, 1000) == 2 * 2 * 16 * 1000 * 2
    assert la.kv_bytes(2, 16, 1000, window=16) == la.kv_bytes(2, 16, 16) == la.kv_bytes(2, 16, 5000, window=16)

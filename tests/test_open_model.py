"""Lesson 15's language model (course_utils.open_model): cached decoding equals recomputation for every kind of
layer, the caches of local and delta-rule layers stop growing, and the models of lesson 15 are built as described."""
import pytest
import torch

from course_utils.local_attention import layer_pattern
from course_utils.open_model import KINDS, OpenLM

CASES = {"full": {}, "local": dict(window=3), "mla": dict(d_latent=12, d_rope=4), "linear": {}, "deltanet": {},
         "gated_deltanet": {}}


@pytest.mark.parametrize("kind", KINDS)
def test_cached_decoding_equals_recomputation(kind):
    torch.manual_seed(0)
    layers = (kind, "full") if kind != "full" else ("full",) * 2
    model = OpenLM(30, 16, 4, layers, 24, num_kv_heads=2, sinks=kind == "local", chunk_size=3, **CASES[kind]).double()
    tokens = torch.randint(0, 30, (2, 10))
    full, state, steps = model(tokens), None, []
    for t in range(10):
        logits, state = model.decode_step(tokens[:, t], state)
        steps.append(logits)
    assert torch.allclose(torch.stack(steps, 1), full, atol=1e-10)
    bytes_at = model.cache_bytes(state, by_layer=True)[0]
    for t in range(10, 16):
        _, state = model.decode_step(tokens[:, t % 10], state)
    grows = model.cache_bytes(state, by_layer=True)[0] > bytes_at
    assert grows == (kind in ("full", "mla")), kind


def test_patterns_and_untied_embeddings():
    model = OpenLM(30, 16, 4, layer_pattern(12, 6), 24, num_kv_heads=2, window=4)
    assert [i for i, _ in model.attention_layers()] == list(range(12))
    assert [m.window for _, m in model.attention_layers()] == ([4] * 5 + [None]) * 2
    assert model.head.weight is not model.embed.weight
    tied = OpenLM(30, 16, 4, ("full",), 24, tie=True)
    assert tied.head.weight is tied.embed.weight
    with pytest.raises(ValueError, match="window"):
        OpenLM(30, 16, 4, ("local",), 24)
    with pytest.raises(ValueError, match="kinds"):
        OpenLM(30, 16, 4, ("sparse",), 24)
    out = OpenLM(30, 16, 4, ("full",), 24).generate(torch.tensor([[1, 2]]), 5)
    assert out.shape == (1, 5)

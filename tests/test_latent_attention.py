"""Lesson 15's multi-head latent attention (course_utils.latent_attention) against independent forms: with a
full-rank identity latent it is multi-head attention; the absorbed step equals the step with the keys and values
rebuilt, and the layer's forward pass; the cache holds d_c + d_R numbers per token."""
import torch
import torch.nn.functional as F

from course_utils import latent_attention as mla
from course_utils.attention import MultiHeadAttention


def test_an_identity_latent_is_multi_head_attention():
    """d_c = d_model, W_DKV = I (the latent is the input itself), no RoPE part (d_R = 0): W_UK and W_UV are W_K
    and W_V, head by head, and MLA is lesson 08's multi-head attention with the causal mask."""
    torch.manual_seed(0)
    B, T, d_model, h = 2, 6, 12, 3
    d_h = d_model // h
    mha = MultiHeadAttention(d_model, h, bias=False).eval()
    x = torch.randn(B, T, d_model)
    W_q, W_k, W_v = mha.in_proj.weight.split(d_model)
    q_c = F.linear(x, W_q).view(B, T, h, d_h).transpose(1, 2)                     # (B, h, T, d_h)
    no_rope_q, no_rope_k = torch.zeros(B, h, T, 0), torch.zeros(B, T, 0)
    out = mla.latent_attention(q_c, no_rope_q, x, no_rope_k, W_k.view(h, d_h, d_model), W_v.view(h, d_h, d_model))
    got = mha.out_proj(out.transpose(1, 2).reshape(B, T, d_model))
    expected = mha(x, x, x, torch.ones(T, T, dtype=torch.bool).tril())
    assert torch.allclose(got, expected, atol=1e-5)


def test_absorbed_equals_unabsorbed_and_the_forward_pass():
    torch.manual_seed(1)
    layer = mla.MultiHeadLatentAttention(d_model=32, num_heads=4, d_latent=12, d_rope=4).double()
    x = torch.randn(2, 9, 32, dtype=torch.float64)
    full = layer(x)
    for absorbed in (True, False):
        layer.absorbed, cache, outs = absorbed, None, []
        for t in range(9):
            out, cache = layer.step(x[:, t:t + 1], cache, t)
            outs.append(out)
        assert torch.allclose(torch.cat(outs, 1), full, atol=1e-10)
    assert [tuple(c.shape) for c in cache] == [(2, 9, 12), (2, 9, 4)]
    assert layer.cache_bytes(cache) == 2 * 9 * (12 + 4) * 8


def test_the_two_steps_agree_on_random_weights():
    g = torch.Generator().manual_seed(2)
    B, h, t, d_h, d_r, d_c, d_model = 2, 4, 7, 8, 4, 6, 20
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)               # noqa: E731
    args = (r(B, h, 1, d_h), r(B, h, 1, d_r), r(B, t, d_c), r(B, t, d_r), r(h, d_h, d_c), r(h, d_h, d_c),
            r(d_model, h * d_h))
    assert torch.allclose(mla.absorbed_step(*args), mla.unabsorbed_step(*args), atol=1e-10)


def test_cache_numbers_at_deepseek_v3s_sizes():
    s = mla.DEEPSEEK_V3
    assert mla.cache_numbers("MLA", s["num_heads"], s["d_head"], d_latent=512, d_rope=64) == 576
    assert mla.cache_numbers("MHA", 128, 128) == 32768 and mla.cache_numbers("MQA", 128, 128) == 256
    assert mla.cache_numbers("GQA", 128, 128, num_kv_heads=8) == 2048

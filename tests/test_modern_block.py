"""Lesson 15's modern block (course_utils.modern_block) against independent forms: RMSNorm is torch's, SwiGLU is
its formula, ModernAttention without QK-norm is lesson 12's grouped-query attention with rotary positions, and
QK-norm bounds the largest logit whatever the projections grow to."""
import math

import torch
import torch.nn.functional as F

from course_utils import modern_block as mb
from course_utils.gpt_attention import grouped_query_attention
from course_utils.masks import causal_mask
from course_utils.positions import apply_rope


def test_rms_norm_is_torchs():
    torch.manual_seed(0)
    norm = mb.RMSNorm(8)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
    ref = torch.nn.RMSNorm(8, eps=1e-6)
    ref.weight.data.copy_(norm.weight.data)
    x = torch.randn(3, 5, 8) * 4
    assert torch.allclose(norm(x), ref(x), atol=1e-6)


def test_swiglu_and_its_width():
    torch.manual_seed(1)
    ff = mb.SwiGLU(6, 10)
    x = torch.randn(2, 6)
    expected = (F.silu(x @ ff.w1.weight.T) * (x @ ff.w3.weight.T)) @ ff.w2.weight.T
    assert torch.allclose(ff(x), expected, atol=1e-6) and all(m.bias is None for m in (ff.w1, ff.w2, ff.w3))
    assert mb.swiglu_width(4 * 768) == 2048                    # 8/3 d_model for d_ff = 4 d_model (Llama)


def test_without_qk_norm_it_is_lesson_12s_grouped_query_attention():
    torch.manual_seed(2)
    attn = mb.ModernAttention(16, 4, 2, qk_norm=False)
    x = torch.randn(2, 7, 16)
    q = apply_rope(attn.q_proj(x).view(2, 7, 4, 4).transpose(1, 2), torch.arange(7))
    k = apply_rope(attn.k_proj(x).view(2, 7, 2, 4).transpose(1, 2), torch.arange(7))
    v = attn.v_proj(x).view(2, 7, 2, 4).transpose(1, 2)
    expected = attn.o_proj(grouped_query_attention(q, k, v, causal_mask(7)).transpose(1, 2).reshape(2, 7, 16))
    assert torch.allclose(attn(x), expected, atol=1e-6)
    assert all(p.dim() > 1 for n, p in attn.named_parameters())      # no biases


def test_qk_norm_bounds_the_largest_logit():
    torch.manual_seed(3)
    x = torch.randn(2, 9, 16)
    found = {}
    for qk_norm in (True, False):
        attn = mb.ModernAttention(16, 4, 4, qk_norm=qk_norm)
        with torch.no_grad():
            attn.q_proj.weight.mul_(30)
            attn.k_proj.weight.mul_(30)
        attn.track_logits = True
        attn(x)
        found[qk_norm] = attn.max_logit
    assert found[True] <= math.sqrt(4) + 1e-5 < 100 < found[False]   # |q_hat . k_hat| / sqrt(d) <= sqrt(d)


def test_a_local_layer_sees_its_window_and_its_ring_buffer_decodes_the_same():
    torch.manual_seed(4)
    attn = mb.ModernAttention(16, 4, 2, window=3, sinks=True).double()
    with torch.no_grad():
        attn.sink.normal_()
    x = torch.randn(2, 10, 16, dtype=torch.float64)
    full, cache, outs = attn(x), None, []
    y = x.clone()
    y[:, :4] += 1                                                  # positions 0..3: out of the window of 7..9
    assert torch.allclose(attn(y)[:, 7:], full[:, 7:])
    for t in range(10):
        out, cache = attn.step(x[:, t:t + 1], cache, t)
        outs.append(out)
        assert cache[0].shape == (2, 2, 3, 4)                      # never more than `window` keys
    assert torch.allclose(torch.cat(outs, 1), full, atol=1e-10)

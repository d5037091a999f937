"""The reference attention components agree with torch's own and keep the course's mask convention."""
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from course_utils.attention import (
    LearnedPositionalEncoding,
    MultiHeadAttention,
    PositionalEncoding,
    attention_weights,
    merge_heads,
    scaled_dot_product_attention,
    sinusoidal_positional_encoding,
    split_heads,
)
from course_utils.masks import causal_mask, padding_mask


def qkv(B=2, h=3, Tq=5, Tk=7, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, h, Tq, d, generator=g), torch.randn(B, h, Tk, d, generator=g),
            torch.randn(B, h, Tk, d, generator=g))


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("mask_kind", ["none", "causal", "padding", "full"])
def test_sdpa_matches_torch(need_weights, mask_kind):
    q, k, v = qkv(Tq=6, Tk=6)
    mask = {"none": None, "causal": causal_mask(6),
            "padding": padding_mask(torch.tensor([[1, 2, 3, 4, 0, 0], [5, 6, 7, 8, 9, 1]]), 0),
            "full": torch.rand(2, 3, 6, 6, generator=torch.Generator().manual_seed(1)) > 0.3}[mask_kind]
    if mask is not None:
        mask = mask | torch.eye(6, dtype=torch.bool)  # no fully masked rows: torch's own result is defined
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    result = scaled_dot_product_attention(q, k, v, mask, need_weights=need_weights)
    out = result[0] if need_weights else result
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


def test_sdpa_three_dims_and_manual_formula():
    g = torch.Generator().manual_seed(0)
    q, k, v = torch.randn(2, 4, 8, generator=g), torch.randn(2, 6, 8, generator=g), torch.randn(2, 6, 3, generator=g)
    out, weights = scaled_dot_product_attention(q, k, v, need_weights=True)
    manual = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(8), dim=-1)
    torch.testing.assert_close(weights, manual)
    torch.testing.assert_close(out, manual @ v)
    assert out.shape == (2, 4, 3)


@pytest.mark.parametrize("need_weights", [False, True])
def test_fully_masked_rows_give_zero_and_no_nan(need_weights):
    q, k, v = qkv(Tq=4, Tk=5)
    q.requires_grad_(True)
    mask = torch.ones(2, 1, 4, 5, dtype=torch.bool)
    mask[0, 0, 2] = False                        # query 2 of batch 0 may attend nowhere
    mask[1, 0, :, 3:] = False
    result = scaled_dot_product_attention(q, k, v, mask, need_weights=need_weights)
    out = result[0] if need_weights else result
    assert torch.isfinite(out).all()
    assert torch.all(out[0, :, 2] == 0)
    out.sum().backward()
    assert torch.isfinite(q.grad).all()
    if need_weights:
        weights = result[1]
        assert torch.all(weights[0, :, 2] == 0)
        assert torch.all(weights[1, :, :, 3:] == 0)
        torch.testing.assert_close(weights[1].sum(-1), torch.ones(3, 4))


@pytest.mark.parametrize("case", ["bf16", "bf16 autocast", "one query"])
def test_explicit_cpu_path_matches_torch_and_handles_empty_rows(case):
    """On a CPU, bf16 attention and a single query (a decoding step) take the explicit formula (faster
    than torch's fused kernel there): the same results, zeros for a query with no key, finite gradients."""
    q, k, v = qkv(Tq=1 if case == "one query" else 6, Tk=6)
    mask = torch.rand(2, 3, q.size(-2), 6, generator=torch.Generator().manual_seed(2)) > 0.3
    mask[..., 0] = True                                   # a key for every query: torch's result is defined
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    empty = mask.clone()
    empty[0, 1, 0] = False                                # query 0 of batch 0, head 1: no key at all
    if case == "bf16":
        q, k, v = (t.bfloat16().requires_grad_() for t in (q, k, v))
    else:
        q.requires_grad_(True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=case == "bf16 autocast"):
        out = scaled_dot_product_attention(q, k, v, mask)
        out_empty = scaled_dot_product_attention(q, k, v, empty)
    tol = 1e-5 if case == "one query" else 3e-2
    torch.testing.assert_close(out.float(), expected, atol=tol, rtol=tol)
    assert torch.all(out_empty[0, 1, 0] == 0) and torch.isfinite(out_empty).all()
    out_empty.float().sum().backward()
    assert torch.isfinite(q.grad).all()


def test_positional_encoding_offset_for_decoding_step_by_step():
    x = torch.randn(2, 5, 8)
    for pos in (PositionalEncoding(8, 16), LearnedPositionalEncoding(8, 16)):
        torch.testing.assert_close(pos(x[:, 3:4], offset=3), pos(x)[:, 3:4])
        with pytest.raises(ValueError, match="max_len"):
            pos(x[:, :1], offset=16)


def test_weights_are_distributions_and_zero_where_masked():
    q, k, _ = qkv(Tq=6, Tk=6)
    w = attention_weights(q, k, causal_mask(6))
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 3, 6))
    assert torch.all(w.masked_select(~causal_mask(6).expand_as(w)) == 0)


def test_masks_follow_the_convention():
    m = causal_mask(4)
    assert m.dtype == torch.bool and m.shape == (4, 4)
    assert torch.equal(m, torch.tril(torch.ones(4, 4, dtype=torch.bool)))
    assert m[3, 0] and not m[0, 3]  # later queries see earlier keys, never the reverse
    tokens = torch.tensor([[5, 6, 0], [7, 0, 0]])
    p = padding_mask(tokens, pad_id=0)
    assert p.shape == (2, 1, 1, 3) and p.dtype == torch.bool
    assert p[0, 0, 0].tolist() == [True, True, False] and p[1, 0, 0].tolist() == [True, False, False]


def test_bad_inputs_raise_clear_errors():
    q, k, v = qkv()
    with pytest.raises(TypeError, match="bool"):
        scaled_dot_product_attention(q, k, v, torch.zeros(5, 7))
    with pytest.raises(ValueError, match="broadcast"):
        scaled_dot_product_attention(q, k, v, torch.ones(4, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="d_k"):
        scaled_dot_product_attention(q, k[..., :4], v)
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadAttention(10, 3)
    with pytest.raises(ValueError, match="tokens"):
        padding_mask(torch.zeros(3, dtype=torch.long), 0)


def test_split_and_merge_heads_are_inverse_and_contiguous_per_head():
    x = torch.arange(2 * 3 * 12, dtype=torch.float32).view(2, 3, 12)
    heads = split_heads(x, 4)
    assert heads.shape == (2, 4, 3, 3)
    torch.testing.assert_close(heads[:, 1], x[..., 3:6])  # head i = features i*d_head:(i+1)*d_head
    torch.testing.assert_close(merge_heads(heads), x)


def torch_pair(d_model=16, num_heads=4, bias=True, seed=0):
    torch.manual_seed(seed)
    ref = nn.MultiheadAttention(d_model, num_heads, bias=bias, batch_first=True)
    ours = MultiHeadAttention(d_model, num_heads, bias=bias).load_from_torch(ref)
    return ours.eval(), ref.eval()


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("kind", ["self", "cross", "distinct"])
def test_multihead_attention_equals_torch(kind, bias):
    ours, ref = torch_pair(bias=bias)
    g = torch.Generator().manual_seed(1)
    x, mem, other = (torch.randn(2, T, 16, generator=g) for T in (5, 7, 7))
    query, key, value = {"self": (x, x, x), "cross": (x, mem, mem), "distinct": (x, mem, other)}[kind]
    Tk = key.size(1)
    src = torch.tensor([[1] * Tk, [1] * (Tk - 2) + [0, 0]])
    keep = padding_mask(src, 0)                                     # ours: True = keep
    expected, expected_w = ref(query, key, value, key_padding_mask=(src == 0), average_attn_weights=False)
    out = ours(query, key, value, mask=keep, need_weights=True)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ours.attn_weights, expected_w, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ours(query, key, value, mask=keep), expected, atol=1e-5, rtol=1e-5)


def test_multihead_attention_equals_torch_with_causal_mask_and_grads():
    ours, ref = torch_pair()
    x = torch.randn(3, 6, 16)
    expected, _ = ref(x, x, x, attn_mask=~causal_mask(6), need_weights=False)  # torch: True = masked out
    out = ours(x, x, x, mask=causal_mask(6))
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    out.sum().backward()
    expected.sum().backward()
    torch.testing.assert_close(ours.in_proj.weight.grad, ref.in_proj_weight.grad, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(ours.out_proj.weight.grad, ref.out_proj.weight.grad, atol=1e-4, rtol=1e-4)


def test_three_dim_mask_applies_to_every_head():
    ours, _ = torch_pair()
    x = torch.randn(2, 5, 16)
    mask3 = causal_mask(5).expand(2, 5, 5)
    torch.testing.assert_close(ours(x, x, x, mask=mask3), ours(x, x, x, mask=causal_mask(5)))


def test_causal_multihead_output_ignores_future_positions():
    ours, _ = torch_pair()
    x = torch.randn(1, 8, 16)
    y = x.clone()
    y[:, 5:] = torch.randn(1, 3, 16)  # change positions 5, 6, 7
    a, b = ours(x, x, x, mask=causal_mask(8)), ours(y, y, y, mask=causal_mask(8))
    torch.testing.assert_close(a[:, :5], b[:, :5])
    assert not torch.allclose(a[:, 5:], b[:, 5:])


def test_store_weights_keeps_weights_and_matches_fast_path():
    ours, _ = torch_pair()
    x = torch.randn(2, 5, 16)
    fast = ours(x, x, x, mask=causal_mask(5))
    assert ours.attn_weights is None
    ours.store_weights = True
    slow = ours(x, x, x, mask=causal_mask(5))
    torch.testing.assert_close(fast, slow, atol=1e-5, rtol=1e-5)
    assert ours.attn_weights.shape == (2, 4, 5, 5)
    assert not ours.attn_weights.requires_grad


def test_self_attention_without_positions_is_permutation_equivariant():
    ours, _ = torch_pair()
    x = torch.randn(1, 6, 16)
    perm = torch.randperm(6)
    torch.testing.assert_close(ours(x, x, x)[:, perm], ours(x[:, perm], x[:, perm], x[:, perm]),
                               atol=1e-5, rtol=1e-5)


def test_sinusoidal_positional_encoding_formula_and_forms():
    pe = sinusoidal_positional_encoding(50, 8)
    assert pe.shape == (50, 8)
    pos, i = 7, 1
    assert math.isclose(pe[pos, 2 * i], math.sin(pos / 10000 ** (2 * i / 8)), abs_tol=1e-6)
    assert math.isclose(pe[pos, 2 * i + 1], math.cos(pos / 10000 ** (2 * i / 8)), abs_tol=1e-6)
    concat = sinusoidal_positional_encoding(50, 8, interleaved=False)
    torch.testing.assert_close(concat[:, :4], pe[:, 0::2])
    torch.testing.assert_close(concat[:, 4:], pe[:, 1::2])
    torch.testing.assert_close(sinusoidal_positional_encoding(100, 8)[:50], pe)  # extends, never changes
    with pytest.raises(ValueError, match="even"):
        sinusoidal_positional_encoding(10, 7)


def test_positional_encoding_modules():
    x = torch.zeros(2, 5, 8)
    torch.testing.assert_close(PositionalEncoding(8, max_len=20)(x)[0], sinusoidal_positional_encoding(5, 8))
    with pytest.raises(ValueError, match="max_len"):
        PositionalEncoding(8, max_len=4)(x)
    learned = LearnedPositionalEncoding(8, max_len=10)
    assert learned(x).shape == (2, 5, 8) and learned.pe.weight.requires_grad
    with pytest.raises(ValueError, match="max_len"):
        LearnedPositionalEncoding(8, max_len=4)(x)


# ---- bad input gets a clear error (issue: trust) --------------------------------------------------
def test_numpy_arrays_are_named_with_the_fix():
    import numpy as np

    x = np.ones((1, 3, 4), dtype=np.float32)
    with pytest.raises(TypeError, match=r"q must be a torch tensor, got ndarray: convert it with torch.as_tensor"):
        scaled_dot_product_attention(x, x, x)
    with pytest.raises(TypeError, match="query must be a torch tensor"):
        MultiHeadAttention(4, 2)(x, x, x)


def test_split_and_merge_heads_name_the_expected_shape():
    with pytest.raises(ValueError, match=r"split_heads takes x of shape \(B, T, d_model\), got 4-D .*already split"):
        split_heads(torch.zeros(2, 2, 3, 4), 2)
    with pytest.raises(ValueError, match=r"merge_heads takes x of shape \(B, num_heads, T, d_head\), got 3-D"):
        merge_heads(torch.zeros(2, 3, 4))
    for bad in (0, -2):
        with pytest.raises(ValueError, match="num_heads must be a positive integer"):
            split_heads(torch.zeros(2, 3, 4), bad)
        with pytest.raises(ValueError, match="num_heads must be a positive integer"):
            MultiHeadAttention(8, bad)


def test_a_padding_mask_given_as_b_by_t_k_is_refused_even_when_b_equals_t_q():
    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 2)
    x = torch.randn(4, 4, 8)                                   # B = T_q = 4
    keep = torch.tensor([[True] * 4, [True] * 3 + [False], [True] * 2 + [False] * 2, [True] * 4])
    with pytest.raises(ValueError, match=r"ambiguous.*\(B, 1, 1, T_k\)"):
        mha(x, x, x, mask=keep)
    mha(x, x, x, mask=keep[:, None, None, :])                  # the documented shape
    mha(x, x, x, mask=causal_mask(4))                          # a mask over positions stays accepted
    with pytest.raises(ValueError, match=r"a 2-D mask must be \(T_q, T_k\)"):
        mha(torch.randn(3, 4, 8), torch.randn(3, 5, 8), torch.randn(3, 5, 8), mask=torch.ones(3, 5, dtype=torch.bool))


def test_numpy_helpers_name_mismatched_shapes():
    import numpy as np

    from course_utils import numpy_attention as npa

    with pytest.raises(ValueError, match=r"the number of weights \(T\) and the number of vectors must match"):
        npa.weighted_sum(np.ones(3), np.ones((4, 2)))
    with pytest.raises(ValueError, match=r"Q's last size d_k and K's last size must match, got 3 and 4"):
        npa.attention(np.ones((2, 3)), np.ones((5, 4)), np.ones((5, 2)))
    with pytest.raises(ValueError, match=r"K's number of keys T_k and V's number of values must match"):
        npa.single_query_attention(np.ones(3), np.ones((5, 3)), np.ones((4, 2)))
    with pytest.raises(ValueError, match=r"h should be \(T, d\) \(2-D\)"):
        npa.bahdanau_context(np.ones(3), np.ones(3))

"""course_utils.snail: causal temporal convolutions, causal attention, the SNAIL model, the recall data."""
import math

import numpy as np
import pytest
import torch

from course_utils.snail import (
    SNAIL,
    AttentionBlock,
    CausalConv1d,
    DenseBlock,
    TCBlock,
    causal_attention_block,
    causal_mask,
    make_next_token_batch,
    reachable_lags,
    tc_dilations,
)


def _future_does_not_leak(module, x, t):
    """Changing inputs after t leaves outputs 0..t unchanged."""
    changed = x.clone()
    changed[:, t + 1:] = torch.randn_like(changed[:, t + 1:])
    with torch.no_grad():
        return torch.allclose(module(x)[:, :t + 1], module(changed)[:, :t + 1], atol=1e-6)


def test_causal_mask():
    assert torch.equal(causal_mask(3), torch.tensor([[1, 0, 0], [1, 1, 0], [1, 1, 1]], dtype=torch.bool))


def test_causal_attention_block_matches_formula():
    torch.manual_seed(0)
    x = torch.randn(2, 5, 4)
    W_q, W_k, W_v = torch.randn(4, 3), torch.randn(4, 3), torch.randn(4, 2)
    out, weights = causal_attention_block(x, W_q, W_k, W_v)
    assert out.shape == (2, 5, 6) and torch.equal(out[..., :4], x)
    for t in range(5):
        scores = (x[:, t] @ W_q)[:, None, :] @ (x[:, :t + 1] @ W_k).transpose(1, 2) / math.sqrt(3)   # (B, 1, t+1)
        alpha = torch.softmax(scores[:, 0], dim=-1)
        assert torch.allclose(weights[:, t, :t + 1], alpha, atol=1e-6)
        assert torch.all(weights[:, t, t + 1:] == 0)
        assert torch.allclose(out[:, t, 4:], (alpha[:, :, None] * (x[:, :t + 1] @ W_v)).sum(1), atol=1e-5)
    with pytest.raises(ValueError, match=r"\(B, T, d_in\)"):
        causal_attention_block(torch.randn(5, 4), W_q, W_k, W_v)


def test_attention_block_keeps_weights_and_is_causal():
    torch.manual_seed(1)
    block = AttentionBlock(6, 4, 5)
    x = torch.randn(2, 7, 6)
    assert block(x).shape == (2, 7, 11) and block.d_out == 11
    assert block.attn_weights.shape == (2, 7, 7)
    assert _future_does_not_leak(block, x, 3)


def test_causal_conv_mixes_t_and_t_minus_dilation_only():
    torch.manual_seed(2)
    conv = CausalConv1d(1, 1, kernel_size=2, dilation=3)
    with torch.no_grad():
        conv.conv.weight.copy_(torch.tensor([[[10.0, 1.0]]]))     # weight on x[t - 3], x[t]
        conv.conv.bias.zero_()
    x = torch.arange(1.0, 9.0).view(1, 8, 1)
    y = conv(x)[0, :, 0]
    expected = torch.tensor([1.0 * t + (10.0 * (t - 3) if t > 3 else 0.0) for t in range(1, 9)])
    assert torch.allclose(y, expected)


def test_dense_and_tc_blocks_are_causal_and_grow_by_concatenation():
    torch.manual_seed(3)
    dense = DenseBlock(4, 3, dilation=2)
    x = torch.randn(2, 9, 4)
    assert dense(x).shape == (2, 9, 7) and torch.equal(dense(x)[..., :4], x)
    assert tc_dilations(17) == [1, 2, 4, 8, 16] and tc_dilations(16) == [1, 2, 4, 8] and tc_dilations(1) == [1]
    tc = TCBlock(4, seq_len=9, filters=3)
    assert tc(x).shape == (2, 9, 4 + 4 * 3) == (2, 9, tc.d_out)
    for t in (0, 4, 7):
        assert _future_does_not_leak(tc, x, t)


def test_dilations_from_1_reach_every_lag_and_the_papers_literal_2_4_8_only_even_ones():
    assert tc_dilations(13, first=2) == [2, 4, 8, 16]                  # DenseBlock(inputs, 2^i, D), i = 1..⌈log2 T⌉
    assert reachable_lags(tc_dilations(13)) == list(range(16))
    assert reachable_lags(tc_dilations(13, first=2)) == list(range(0, 31, 2))
    assert reachable_lags([1, 3], kernel_size=3) == [0, 1, 2, 3, 4, 5, 6, 7, 8]
    torch.manual_seed(7)
    tc = TCBlock(2, seq_len=13, filters=2, first_dilation=2)
    x = torch.randn(1, 13, 2, requires_grad=True)
    tc(x)[0, 12, 2:].sum().backward()                                  # every new feature at step 12
    reach = (x.grad[0].abs().sum(-1) > 0).nonzero().flatten().tolist()
    assert reach == [0, 2, 4, 6, 8, 10, 12]                             # step 11 (lag 1) never reaches step 12
    with pytest.raises(ValueError, match="first dilation"):
        tc_dilations(8, first=0)
    model = SNAIL(vocab_size=12, num_classes=5, seq_len=9, d_model=8, d_key=4, d_value=4, filters=4, first_dilation=2)
    assert [b.conv_f.conv.dilation[0] for b in model.blocks[1].blocks] == [2, 4, 8, 16]


def test_tc_block_sees_back_to_step_0():
    torch.manual_seed(4)
    tc = TCBlock(2, seq_len=9, filters=2)
    x = torch.randn(1, 9, 2, requires_grad=True)
    tc(x)[0, -1, -2:].sum().backward()         # the last block's new features at the last step
    assert x.grad[0, 0].abs().sum() > 0


@pytest.mark.parametrize("use_tc", [True, False])
def test_snail_shapes_and_causality(use_tc):
    torch.manual_seed(5)
    model = SNAIL(vocab_size=12, num_classes=5, seq_len=9, d_model=8, d_key=4, d_value=4, filters=4, use_tc=use_tc)
    tokens = torch.randint(12, (3, 9))
    assert model(tokens).shape == (3, 9, 5)
    assert len(model.attention_blocks) == (3 if use_tc else 5)
    changed = tokens.clone()
    changed[:, 6:] = (changed[:, 6:] + 1) % 12
    with torch.no_grad():
        assert torch.allclose(model(tokens)[:, :6], model(changed)[:, :6], atol=1e-6)
    with pytest.raises(ValueError, match="int64"):
        model(tokens.float())


def test_snail_outputs_depend_on_the_order_of_earlier_tokens():
    """Swapping two adjacent early tokens changes every later output (the TC blocks see order)."""
    torch.manual_seed(6)
    model = SNAIL(vocab_size=12, num_classes=5, seq_len=6, d_model=8, d_key=4, d_value=4, filters=4)
    tokens = torch.tensor([[1, 2, 3, 4, 5, 6]])
    swapped = torch.tensor([[2, 1, 3, 4, 5, 6]])
    with torch.no_grad():
        assert not torch.allclose(model(tokens)[:, 1:], model(swapped)[:, 1:])


def test_next_token_batch():
    tokens, targets = make_next_token_batch(200, length=5, vocab_size=7, generator=np.random.default_rng(0))
    assert tokens.shape == (200, 6) and targets.shape == (200,) and tokens.dtype == torch.int64
    seen = set()
    for row, target in zip(tokens.tolist(), targets.tolist()):
        symbols, query = row[:-1], row[-1]
        assert len(set(symbols)) == 5 and all(0 <= s < 7 for s in symbols)
        where = symbols.index(query)
        assert where < 4 and symbols[where + 1] == target
        seen.add(where)
    assert seen == {0, 1, 2, 3}
    again, _ = make_next_token_batch(200, 5, 7, np.random.default_rng(0))
    assert torch.equal(again, tokens)
    with pytest.raises(ValueError, match="length"):
        make_next_token_batch(2, 8, 7, np.random.default_rng(0))
    with pytest.raises(TypeError, match="Generator"):
        make_next_token_batch(2, 2, 6, 0)

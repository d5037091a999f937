"""Lesson 15's delta rule (course_utils.delta_rule) against independent forms: the recurrent form equals the chunked
form (with and without gates, any chunk size, a last chunk cut short), lesson 13's linear attention is the same loop
without the erase term, and the delta rule is one step of gradient descent on ||S k - v||^2."""
import pytest
import torch

from course_utils import delta_rule as dr
from course_utils.efficient_attention import causal_linear_attention


def _inputs(seed=0, B=2, h=3, T=29, d_k=5, d_v=4, gated=False):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, h, T, d_k, generator=g, dtype=torch.float64)
    k = torch.nn.functional.normalize(torch.randn(B, h, T, d_k, generator=g, dtype=torch.float64), dim=-1)
    v = torch.randn(B, h, T, d_v, generator=g, dtype=torch.float64)
    beta = torch.rand(B, h, T, generator=g, dtype=torch.float64)
    alpha = 0.5 + 0.5 * torch.rand(B, h, T, generator=g, dtype=torch.float64) if gated else None
    return q, k, v, beta, alpha


@pytest.mark.parametrize("gated", [False, True])
@pytest.mark.parametrize("chunk", [1, 4, 8, 29, 64])
def test_recurrent_equals_chunked(gated, chunk):
    q, k, v, beta, alpha = _inputs(gated=gated)
    o1, S1 = dr.delta_rule_recurrent(q, k, v, beta, alpha)
    o2, S2 = dr.delta_rule_chunked(q, k, v, beta, alpha, chunk_size=chunk)
    assert torch.allclose(o1, o2, atol=1e-10) and torch.allclose(S1, S2, atol=1e-10)


def test_a_gate_of_one_is_deltanet_and_the_state_carries_over():
    q, k, v, beta, _ = _inputs(1)
    ones = torch.ones_like(beta)
    assert torch.allclose(dr.delta_rule_chunked(q, k, v, beta, ones, 8)[0], dr.delta_rule_recurrent(q, k, v, beta)[0])
    o_first, S = dr.delta_rule_recurrent(q[:, :, :10], k[:, :, :10], v[:, :, :10], beta[:, :, :10])
    o_rest, _ = dr.delta_rule_chunked(q[:, :, 10:], k[:, :, 10:], v[:, :, 10:], beta[:, :, 10:], chunk_size=4, S=S)
    assert torch.allclose(torch.cat([o_first, o_rest], 2), dr.delta_rule_recurrent(q, k, v, beta)[0], atol=1e-10)


def test_the_delta_rule_is_a_gradient_step_and_stores_an_exact_value_at_beta_one():
    q, k, v, beta, _ = _inputs(2, T=1)
    S = torch.randn(2, 3, 4, 5, dtype=torch.float64, requires_grad=True)
    loss = 0.5 * ((S @ k[:, :, 0, :, None])[..., 0] - v[:, :, 0]).pow(2).sum()
    (grad,) = torch.autograd.grad(loss, S)
    _, new = dr.delta_rule_step(S.detach(), q[:, :, 0], k[:, :, 0], v[:, :, 0], beta[:, :, 0])
    assert torch.allclose(new, S.detach() - beta[:, :, 0, None, None] * grad)
    _, new = dr.delta_rule_step(S.detach(), q[:, :, 0], k[:, :, 0], v[:, :, 0], torch.ones(2, 3, dtype=torch.float64))
    assert torch.allclose((new @ k[:, :, 0, :, None])[..., 0], v[:, :, 0])     # unit key, beta = 1: S k = v


def test_lesson_13s_linear_attention_is_the_same_loop_without_the_erase_term():
    q, k, v, _, _ = _inputs(3)
    o, S = dr.linear_attention_recurrent(q, k, v)
    assert torch.allclose(o, causal_linear_attention(q, k, v), atol=1e-10)
    assert S.shape == (2, 3, 4, 5) and dr.state_bytes(3, 5, 4) == 3 * 4 * 5 * 2


def test_bad_shapes_are_named():
    q, k, v, beta, _ = _inputs(4)
    with pytest.raises(ValueError, match="beta must be"):
        dr.delta_rule_chunked(q, k, v, beta[..., :-1])
    with pytest.raises(ValueError, match="q, k must be"):
        dr.delta_rule_recurrent(q[..., :-1], k, v, beta)

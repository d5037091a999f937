"""Lesson 11's dense-block reference, which the check builds around course_utils.snail.DenseBlock, is the exercise's
formula, and keeps the caller's random state. (Every check's reference, right answers and registered mistakes are run
by tests/test_exercises.py, from the checks' registries.)"""
import torch

from course_utils.checks import lesson11 as check


def test_dense_block_reference_is_the_formula():
    g = torch.Generator().manual_seed(0)
    B, T, d_in, filters, d = 2, 7, 3, 4, 2
    x, W_f, W_g = torch.randn(B, T, d_in, generator=g), torch.randn(2, d_in, filters, generator=g), \
        torch.randn(2, d_in, filters, generator=g)
    out = check.dense_block_reference(x, W_f, W_g, d)
    assert out.shape == (B, T, d_in + filters) and torch.equal(out[..., :d_in], x)
    for t in range(T):
        past = x[:, t - d] if t >= d else torch.zeros(B, d_in)
        new = torch.tanh(x[:, t] @ W_f[0] + past @ W_f[1]) * torch.sigmoid(x[:, t] @ W_g[0] + past @ W_g[1])
        assert torch.allclose(out[:, t, d_in:], new, atol=1e-6)


def test_dense_block_reference_keeps_the_global_seed():
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    check.dense_block_reference(torch.randn(1, 4, 2), torch.randn(2, 2, 3), torch.randn(2, 2, 3), 1)
    torch.manual_seed(0)
    assert torch.equal(torch.rand(3), expected)

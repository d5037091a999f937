"""Lesson 11, exercise 1: SAGAN's attention over the pixels of a feature map, with 1×1 convolutions.

    self_attention_2d(x (B, C, H, W), W_f (d_key, C), W_g (d_key, C), W_h (C̄, C), W_v (C, C̄))
        -> (o (B, C, H, W), weights (B, N, N)),  N = H·W

keys f(x) = W_f x, queries g(x) = W_g x, values h(x) = W_h x at every pixel; weights[b, j, i] = softmax over the keys i
of g_j·f_i / √d_key (pixels numbered row by row); o = W_v applied to the read-out Σ_i α_{j,i} h_i, back as a map.
The check runs three maps, the weights before o: on the first, the scale by √d_key, by √C̄, √C, √N, d_key, d_key/2
and √(C // 8) all differ (a scale by the wrong size shows; on the second, d_key/2 also differs from 1); C̄ ≠ C (a
missing W_v shows in the shape). Then float64 inputs (the dtype kept) and the gradient that must reach W_f, W_g, W_h
and W_v through o.
"""
import torch
import torch.nn.functional as F

from ...vision import conv1x1
from ...vision import self_attention_2d as reference
from ..core import (
    exercise,
    expect,
    expect_distribution,
    expect_returns,
    expect_shape,
    randn,
    single_threaded,
)
from ..evaluation import Evaluation
from .crashes import call
from .float64 import expect_dtype, mixed
from .self_attention_2d_mistakes import OUTPUTS, WEIGHTS, M, crashes, wrong


def _values_mapped_first(x, W_f, W_g, W_h, W_v):
    """W_v (Σ α h) = Σ α (W_v h): the output map folded into the values first, by linearity."""
    B, C, H, W = x.shape
    _, weights = reference(x, W_f, W_g, W_h, W_v)
    v = conv1x1(x, W_v @ W_h).flatten(2).transpose(1, 2)                     # (B, N, C)
    return (weights @ v).transpose(1, 2).reshape(B, C, H, W), weights


def _with_conv2d(x, W_f, W_g, W_h, W_v):
    """F.conv2d with 1×1 kernels, the attention written channels first."""
    B, C, H, W = x.shape
    f, g, h = (F.conv2d(x, kernel[:, :, None, None]).view(B, -1, H * W) for kernel in (W_f, W_g, W_h))   # (B, c, N)
    weights = torch.softmax(torch.bmm(g.transpose(1, 2), f) / f.size(1) ** 0.5, dim=2)
    read = torch.bmm(h, weights.transpose(1, 2)).view(B, -1, H, W)
    return F.conv2d(read, W_v[:, :, None, None]), weights


@exercise("self_attention_2d (1×1-convolution attention)", reference=reference, mistakes=M,
          right=[wrong(), _values_mapped_first, _with_conv2d])
@single_threaded
def self_attention_2d(ev: Evaluation, answer):
    """answer(x, W_f, W_g, W_h, W_v) -> (o (B, C, H, W), weights (B, N, N))."""
    tests = 0
    for seed, (B, C, H, W, d_key, C_bar) in enumerate([(2, 17, 3, 5, 4, 6), (1, 5, 4, 4, 3, 2), (3, 6, 2, 7, 3, 5)]):
        g = ev.rng(110 + seed)
        x = randn(g, B, C, H, W, scale=(8 / C) ** 0.5)                  # scores of the size they have for C = 8
        W_f, W_g = randn(g, d_key, C), randn(g, d_key, C)
        W_h, W_v = randn(g, C_bar, C), randn(g, C, C_bar)
        args, N = (x, W_f, W_g, W_h, W_v), H * W
        expected = reference(*args)
        result = call(ev, answer, *args, errors=crashes(B, C, d_key, C_bar), transposed=M.k_T_3d)
        o, weights = expect_returns(result, expected, ("o", "weights"))
        expect_shape(weights, (B, N, N), f"weights (for x of shape {(B, C, H, W)}, N = H·W = {N})")
        ev.expect_close(weights, expected[1], "weights", mistakes=M.variants(WEIGHTS, *args, pick=lambda r: r[1]))
        expect_distribution(weights, "weights (each query pixel's row)", axis=-1)
        ev.expect_close(o, expected[0], "o", mistakes=M.variants(OUTPUTS, *args, pick=lambda r: r[0]),
                        atol=1e-4)            # o sums over C = 17 channels: float32 rounds it differently by order
        tests += 1
    _in_float64(ev, answer)
    return tests + 1


def _in_float64(ev: Evaluation, answer):
    """float64 inputs give float64 results, and the gradient reaches W_f, W_g, W_h and W_v through o."""
    g = ev.rng(119)
    args = [randn(g, *s).double() for s in ((2, 6, 3, 4), (3, 6), (3, 6), (2, 6), (6, 2))]
    expected = reference(*args)
    errors = [mixed(M)] + crashes(2, 6, 3, 2)
    o, weights = expect_returns(call(ev, answer, *args, errors=errors, transposed=M.k_T_3d), expected,
                                ("o", "weights"))
    for what, got, want in (("weights", weights, expected[1]), ("o", o, expected[0])):
        expect_dtype(got, what, M)
        ev.expect_close(got, want, f"{what} in float64")
    leaves = [t.detach().clone().requires_grad_() for t in args]
    o, _ = expect_returns(call(ev, answer, *leaves, errors=errors, transposed=M.k_T_3d), expected, ("o", "weights"))
    o.sum().backward()
    cut = [name for name, t in zip(("W_f", "W_g", "W_h", "W_v"), leaves[1:]) if t.grad is None or not t.grad.any()]
    expect(not cut, M.grad_cut.at(names=", ".join(cut)))

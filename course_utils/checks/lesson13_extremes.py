"""Lesson 13's checks at the edges of the number range: the online softmax on scores around 100, where exp(x)
overflows float32 and only exp(x − m) stays finite, and the backward pass in float64, where gradients made in
float32 lose the precision gradcheck needs."""
import numpy as np
import torch

from .. import efficient_attention as ref
from .core import expect, expect_returns, randn, to_numpy
from .evaluation import Evaluation
from .lesson13_inputs import backward_inputs, gradients, stats

OVERFLOW = ("with scores around 100, l is {what}: exp(x) overflows float32 beyond x ≈ 88. Subtract the maximum "
            "INSIDE the exponential, exp(x − m) (exp(x) / exp(m) overflows first and then divides inf by inf)")
GRADS_DTYPE = ("with float64 inputs your {what} is {dtype}: make the gradients in q's dtype (torch.zeros_like(q), "
               "q.new_zeros(...)); torch.zeros(shape) is float32 whatever q is, and section 4's gradcheck needs "
               "float64")


def large_scores(ev: Evaluation, answer):
    """The online softmax of rows of scores near 100 (blocks of 4): m and l stay finite and right."""
    x = randn(ev.rng(40), 3, 12, scale=3.0) + 100.0
    expected = stats(x)
    m, ell = expect_returns(ev.call(answer, ref.column_blocks(x, 4)), expected, ("m", "l"))
    got = to_numpy(ell).astype(np.float64)
    expect(np.isfinite(got).all(), OVERFLOW.format(what="NaN" if np.isnan(got).any() else "inf"))
    ev.expect_close(m, expected[0], "m, with scores around 100")
    ev.expect_close(ell, expected[1], "l, with scores around 100",
                    hint="Measure every term from the running maximum: l = l·e^(m_old − m_new) + Σ exp(x − m_new).")


def backward_in_float64(ev: Evaluation, answer):
    """The backward pass on float64 inputs returns float64 gradients, equal to autograd's."""
    q, k, v, grad_out = (t.double() for t in backward_inputs(ev, 720, (1, 2, 7, 4), 5))
    out, lse = ref.tiled_attention(q, k, v, 3, causal=True)
    expected = gradients(q, k, v, grad_out, True)
    result = ev.call(answer, q, k, v, out, lse, grad_out, 3, 2, causal=True)
    grads = expect_returns(result, expected, ("dq", "dk", "dv"))
    for what, got, want in zip(("dq", "dk", "dv"), grads, expected):
        dtype = getattr(got, "dtype", None)
        expect(dtype in (None, torch.float64), GRADS_DTYPE.format(what=what, dtype=dtype))
        ev.expect_close(got, want, f"{what} in float64 (block_q=3, block_k=2, causal=True)", atol=1e-8, rtol=1e-6)

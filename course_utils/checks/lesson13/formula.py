"""The inputs of lesson 13's attention checks (tiled forward and backward), drawn from an evaluation's seeds, and the
formula's values on them, never the lesson's own tiled code: the course's reference attention (lesson 07) and the
log-sum-exp of the masked scores, autograd's gradients through that attention."""
import torch

from ...attention import scaled_dot_product_attention
from ...masks import causal_mask
from ..core import randn
from ..evaluation import Evaluation
from .softmax_stats import NEG_INF


def expected(q, k, v, causal, mask):
    """(out (..., T_q, d_v), lse (..., T_q)) from the formula."""
    full = causal_mask(q.shape[-2]) if causal else None
    if mask is not None:
        full = mask if full is None else mask & full
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    if full is not None:
        scores = scores.masked_fill(~full, NEG_INF)
    return scaled_dot_product_attention(q, k, v, full), torch.logsumexp(scores, dim=-1)


def padding_mask(ev: Evaluation, seed, B, T):
    """(B, 1, 1, T): sequence b has its last positions padded; the last sequence is ALL padding."""
    lengths = [int(n) for n in ev.rng(seed).integers(2, T, size=B - 1)] + [0]
    return (torch.arange(T)[None, :] < torch.tensor(lengths)[:, None])[:, None, None, :]


def gradients(q, k, v, grad_out, causal):
    """(dq, dk, dv) by autograd through the course's reference attention (which keeps P)."""
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    out = scaled_dot_product_attention(*leaves, causal_mask(q.shape[-2]) if causal else None)
    return torch.autograd.grad(out, leaves, grad_out)


def backward_inputs(ev: Evaluation, seed, shape, d_v):
    """q, k (shape), v and grad_out (shape with d_v) for the backward pass."""
    g = ev.rng(seed)
    *lead, T, d = shape
    q, k, v = randn(g, *lead, T, d), randn(g, *lead, T, d), randn(g, *lead, T, d_v)
    return q, k, v, randn(g, *lead, T, d_v)

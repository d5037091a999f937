"""The inputs of lesson 13's checks, drawn from an evaluation's seeds, and the formula's values on them (never the
lesson's own tiled code): the statistics of whole rows, the reference attention and its log-sum-exp, autograd's
gradients through it."""
import torch

from ..attention import scaled_dot_product_attention
from ..masks import causal_mask
from .core import randn
from .evaluation import Evaluation
from .lesson13_mistakes import safe

NEG_INF = float("-inf")


def stats(x):
    """(m, l) of every row, from the whole row at once: m = max, l = sum exp(x - m)."""
    m = x.amax(dim=-1)
    return m, torch.exp(x - safe(m)[..., None]).sum(dim=-1)


def online_inputs(ev: Evaluation, seed):
    """Rows (6, 12): random, ascending (the maximum grows at every block), with −inf entries (its last 4), a first
    block of −inf (the first 4 entries), a row of −inf only, and descending (the maximum in the first block)."""
    g = ev.rng(seed)
    x = randn(g, 6, 12, scale=3.0)
    x[1] = torch.sort(x[1]).values
    x[2, torch.as_tensor(g.random(12) < 0.4)] = NEG_INF
    x[2, -4:] = NEG_INF                                # a block of −∞ after finite ones (blocks of up to 4)
    x[2, int(g.integers(8))] = 0.5
    x[3, :4] = NEG_INF
    x[4, :] = NEG_INF
    x[5] = torch.sort(x[5], descending=True).values
    return x


def blocks(x, block):
    return [x[..., j0:j0 + block].clone() for j0 in range(0, x.shape[-1], block)]


def expected(q, k, v, causal, mask):
    """(out, lse) from the formula: the course's reference attention, and logsumexp of the masked scores."""
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
    g = ev.rng(seed)
    *lead, T, d = shape
    q, k, v = randn(g, *lead, T, d), randn(g, *lead, T, d), randn(g, *lead, T, d_v)
    return q, k, v, randn(g, *lead, T, d_v)

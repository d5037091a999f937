"""Lesson 07, exercise 1: scaled dot-product attention with a mask.

    attention(q (B, ..., T_q, d_k), k (B, ..., T_k, d_k), v (B, ..., T_k, d_v), mask=None)
        -> (out (B, ..., T_q, d_v), weights (B, ..., T_q, T_k))

mask: boolean, True = may attend, broadcast over the leading axes; a query whose every key is masked gets zero
weights and a zero output. The check tests the values on three cases (3-D without a mask, 4-D with heads and a
mask, 4-D where d_k, d_v and T_k all differ, so that scaling by the wrong one shows), that each query's weights
are a distribution over the keys, that a causal mask hides later positions, and that a fully masked query gets
zeros, not NaN.
"""
import math

import numpy as np
import torch
import torch.nn.functional as F

from ... import attention as ref
from ... import masks
from ..core import (
    Mistake,
    Mistakes,
    exercise,
    expect,
    expect_distribution,
    expect_returns,
    expect_shape,
    randn,
    single_threaded,
    to_numpy,
)
from ..evaluation import Evaluation, call_naming
from ..torch_errors import BROADCAST


def wrong(divisor=None, dim=-1, invert=False, fill=float("-inf"), guard=True, after=False, transposed=False,
          by_max=False, values=None, dim_4d=None):
    """Attention written with one typical mistake (every default is the right choice).

    divisor(q, k, v): what the scores are divided by (right: √d_k); dim: the softmax's axis (dim_4d: its axis for
    4-D inputs only); invert: the mask read as True = hidden; fill: what masked scores are set to; guard: rows
    with no key allowed get zero weights; after: the mask applied to the weights; transposed: k qᵀ;
    by_max: exp(e − max) not divided by its sum; values: what the weights mix (right: v)."""
    def attention(q, k, v, mask=None):
        scores = k @ q.transpose(-2, -1) if transposed else q @ k.transpose(-2, -1)
        scores = scores / (math.sqrt(q.size(-1)) if divisor is None else divisor(q, k, v))
        axis = dim_4d if dim_4d is not None and q.dim() == 4 else dim
        keep = None if mask is None else (~mask if invert else mask)
        if keep is not None and after:
            weights = scores.softmax(axis) * keep
        elif by_max:
            scores = scores if keep is None else scores.masked_fill(~keep, float("-inf"))
            weights = (scores - scores.amax(-1, keepdim=True)).exp()
        elif keep is not None and guard:
            has_key = keep.any(-1, keepdim=True)
            weights = scores.masked_fill(~(keep | ~has_key), fill).softmax(axis) * has_key
        else:
            weights = (scores if keep is None else scores.masked_fill(~keep, fill)).softmax(axis)
        return weights @ (v if values is None else values(q, k, v)), weights
    return attention


def _reference(q, k, v, mask=None):
    return ref.scaled_dot_product_attention(q, k, v, mask, need_weights=True)


def _causal_leak(q, k, v, mask=None):
    """The weights masked, but the output mixing every value (the future too) under a (T, T) causal mask."""
    out, weights = _reference(q, k, v, mask)
    return (_reference(q, k, v)[0] if mask is not None and mask.dim() == 2 else out), weights


def _transposes_1_2(q, k, v, mask=None):
    """kᵀ as k.transpose(1, 2): right for (B, T, d), the head and time axes for (B, h, T, d)."""
    scores = q @ k.transpose(1, 2) / math.sqrt(q.size(-1))
    if mask is not None:
        has_key = mask.any(-1, keepdim=True)
        weights = scores.masked_fill(~(mask | ~has_key), float("-inf")).softmax(-1) * has_key
    else:
        weights = scores.softmax(-1)
    return weights @ v, weights


_AXIS = ("each query's weights must sum to 1 over the KEYS, the last axis, whatever the number of leading axes")
M = Mistakes(
    Mistake("no_scale", "the scores are not scaled: q·k grows with d_k, so the softmax saturates on the largest score",
            hint="divide q kᵀ by math.sqrt(d_k), d_k = q.size(-1), before the softmax",
            shows=wrong(divisor=lambda q, k, v: 1.0)),
    Mistake("softmax_over_queries", "each KEY's weights sum to 1 over the queries: the softmax runs down the "
            "columns; each query (a row) must sum to 1 over the keys", hint="softmax(dim=-1)", shows=wrong(dim=-2)),
    Mistake("scale_by_dk", "the scores are divided by d_k: the scale is its square root, √d_k",
            hint="scores / math.sqrt(q.size(-1))", shows=wrong(divisor=lambda q, k, v: q.size(-1))),
    Mistake("scale_multiplied", "the scores are multiplied by √d_k, where they must be divided by it",
            shows=wrong(divisor=lambda q, k, v: 1 / math.sqrt(q.size(-1)))),
    Mistake("by_max", "the weights are exp(e) divided by their MAXIMUM, so they do not sum to 1: a softmax divides "
            "by the SUM over the keys (subtracting the maximum first only keeps exp from overflowing)",
            shows=wrong(by_max=True)),
    Mistake("scale_by_dv", "the scores are scaled by √d_v, the width of the VALUES: the scale comes from d_k, the "
            "width of the queries and keys", hint="math.sqrt(q.size(-1))",
            shows=wrong(divisor=lambda q, k, v: math.sqrt(v.size(-1)))),
    Mistake("scale_by_tk", "the scores are scaled by √T_k, the number of keys: the scale comes from d_k, the width of "
            "the queries and keys", hint="q.size(-1), not k.size(-2)",
            shows=wrong(divisor=lambda q, k, v: math.sqrt(k.size(-2)))),
    Mistake("scores_transposed", "the scores are transposed (k qᵀ): row t must hold query t's scores over the keys",
            hint="q @ k.transpose(-2, -1)", shows=wrong(transposed=True)),
    Mistake("softmax_batch_axis", "the softmax runs over the batch axis (axis 0): " + _AXIS,
            hint="softmax(dim=-1); a softmax without dim= picks axis 0 or 1", shows=wrong(dim=0)),
    Mistake("softmax_head_axis", "the softmax runs over the head axis (axis 1) of 4-D inputs: " + _AXIS,
            hint="softmax(dim=-1), not dim=1", shows=wrong(dim_4d=1)),
    Mistake("mask_inverted", "the mask is read the wrong way round: True means 'may attend', and the keys it marks "
            "False are the ones to hide", hint="scores.masked_fill(~mask, float('-inf'))", shows=wrong(invert=True)),
    Mistake("mask_after_softmax", "the mask is applied after the softmax, so the remaining weights no longer sum to "
            "1: masked scores must be set to -inf BEFORE the softmax", shows=wrong(after=True)),
    Mistake("mask_fill_zero", "masked scores are set to 0, and a score of 0 still gets weight after the softmax: a "
            "hidden key needs a score of -inf", hint="masked_fill(~mask, float('-inf'))", shows=wrong(fill=0.0)),
    Mistake("nan_row", "a query whose every key is masked gets NaN (the softmax of a row of -inf): such a row must "
            "get zero weights and stay finite",
            hint="has_key = mask.any(-1, keepdim=True); keep those rows finite; multiply the weights by has_key",
            shows=wrong(guard=False)),
    Mistake("uniform_row", "a query whose every key is masked gets uniform weights (a large negative fill gives every "
            "key the same score): such a row must get zero weights", hint="multiply by mask.any(-1, keepdim=True)",
            shows=wrong(guard=False, fill=-1e9)),
    Mistake("values_from_keys", "out mixes the KEYS: the weights must mix the values", hint="out = weights @ v",
            shows=wrong(values=lambda q, k, v: k)),
    Mistake("leading_axes", "with 4-D inputs (B, h, T, d) your function fails where 3-D ones (B, T, d) passed: kᵀ "
            "must swap the LAST two axes whatever comes before them (swapping axes 1 and 2 exchanges the head and "
            "time axes of a 4-D k)", hint="k.transpose(-2, -1)", shows=_transposes_1_2),
    Mistake("causal_leak", "the output at position {t} changed when positions 5-7 changed: with the causal mask, a "
            "position must not see later positions, in its weights AND in its output", shows=_causal_leak),
)

# the weights' mistakes, in the order the check tries them (the output's are the same, times v)
WEIGHT_MISTAKES = [M[key] for key in M.keys() if key not in ("values_from_keys", "leading_axes", "causal_leak")]


def _random_mask(ev: Evaluation, seed, shape):
    """A mask with the diagonal kept and at least one key masked in every row (so no row is empty, and the
    inverted mask has no empty row either)."""
    T_q, T_k = shape[-2:]
    mask = torch.as_tensor(ev.rng(seed).random(shape) > 0.4)
    eye = torch.eye(T_q, T_k, dtype=torch.bool)
    return (mask | eye) & ~torch.roll(eye, 1, dims=-1)


def _right_other_way(q, k, v, mask=None):
    """torch's fused attention for the output, the weights written out with a finite fill and a guard."""
    scores = torch.einsum("...qd,...kd->...qk", q, k) * q.size(-1) ** -0.5
    if mask is None:
        weights = torch.softmax(scores, dim=-1)
    else:
        weights = torch.softmax(scores.masked_fill(~mask, torch.finfo(scores.dtype).min), dim=-1)
        weights = weights * mask.any(-1, keepdim=True) * mask
    return weights @ v, weights


@exercise("scaled dot-product attention with a mask", name="attention", reference=_reference, mistakes=M,
          right=[_right_other_way])
@single_threaded
def scaled_dot_product_attention(ev: Evaluation, answer):
    """answer(q, k, v, mask=None) -> (out (B, ..., T_q, d_v), weights (B, ..., T_q, T_k))."""
    tests = 0
    cases = [((2, 5, 4), (2, 5, 4), (2, 5, 4), False),
             ((2, 3, 6, 8), (2, 3, 6, 8), (2, 3, 6, 8), True),
             ((2, 2, 4, 8), (2, 2, 7, 8), (2, 2, 7, 5), True)]
    for seed, (sq, sk, sv, masked) in enumerate(cases):
        g = ev.rng(seed)
        q, k, v = randn(g, *sq, scale=2.0), randn(g, *sk, scale=2.0), randn(g, *sv)
        mask = _random_mask(ev, seed, (sq[0], 1, sq[-2], sk[-2])) if masked else None
        expected = _reference(q, k, v, mask)
        crashes = [(BROADCAST, M.leading_axes)] if len(sq) == 4 else []
        args = (q, k, v, mask) if masked else (q, k, v)
        out, weights = expect_returns(call_naming(ev, crashes, answer, *args), expected, ("out", "weights"))
        variants = M.variants(WEIGHT_MISTAKES + [M.values_from_keys], q, k, v, mask)
        expect_shape(weights, sq[:-1] + (sk[-2],), "weights")
        ev.expect_close(weights, expected[1], f"the weights (q {sq}, k {sk}, v {sv}, "
                        f"{'with a mask' if masked else 'no mask'})",
                        mistakes={mistake: w for mistake, (_, w) in variants.items()})
        expect_distribution(weights, "each query's weights")
        expect_shape(out, sq[:-1] + (sv[-1],), "out")
        out_mistakes = {mistake: o for mistake, (o, _) in variants.items()}
        ev.expect_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
                        "out, compared with torch.nn.functional.scaled_dot_product_attention", mistakes=out_mistakes)
        tests += 1
    # causality: with a causal mask, changing later positions leaves earlier outputs unchanged
    x = randn(ev.rng(7), 1, 8, 6)
    y = x.clone()
    y[:, 5:] += randn(ev.rng(8), 1, 3, 6, scale=3.0)
    causal = masks.causal_mask(8)
    out_x, _ = expect_returns(ev.call(answer, x, x, x, causal), _reference(x, x, x, causal), ("out", "weights"))
    out_y, _ = expect_returns(ev.call(answer, y, y, y, causal), _reference(y, y, y, causal), ("out", "weights"))
    changed = np.abs(to_numpy(out_x)[0, :5] - to_numpy(out_y)[0, :5]).max(axis=-1) > 1e-5
    expect(not changed.any(), M.causal_leak.at(t=int(np.argmax(changed))))
    tests += 1
    # a query with no key allowed gets zero weights and a zero output, not NaN
    g = ev.rng(9)
    q, k, v = randn(g, 1, 4, 4), randn(g, 1, 5, 4), randn(g, 1, 5, 3)
    mask = torch.ones(1, 4, 5, dtype=torch.bool)
    mask[0, 2] = False
    expected = _reference(q, k, v, mask)
    out, weights = expect_returns(ev.call(answer, q, k, v, mask), expected, ("out", "weights"))
    ev.expect_close(weights, expected[1], "the weights when query 2 may attend to no key",
                    mistakes=M.variants([M.nan_row, M.uniform_row], q, k, v, mask, pick=lambda r: r[1]))
    ev.expect_close(out, expected[0], "the output when query 2 may attend to no key", hint="it should be all zeros")
    return tests + 1

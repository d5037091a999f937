"""Lesson 11, exercise 5: SNAIL's causal attention block.

    causal_attention_block(x (B, T, d_in), W_q (d_in, d_key), W_k (d_in, d_key), W_v (d_in, d_value))
        -> ([x, read] (B, T, d_in + d_value), weights (B, T, T))

q, k, v = x W_q, x W_k, x W_v; weights[b, t, s] = softmax over s <= t of q_t·k_s/√d_key (0 for s > t); read = weights
v. The check runs three blocks where d_key, d_value, T and d_in differ (a scale by the wrong size shows, a
concatenation on another axis raises) and T ≠ d_in + d_value (the two results have different shapes): the weights
first (a returned score matrix, made-up weights beside a right output), then the output and its causality (the
inputs after step T // 2 changed); then the future changed on another input, and scores near 150, which overflow a
softmax written without its maximum.
"""
import torch

from ...masks import causal_mask
from ...snail import causal_attention_block as reference
from ..core import (
    ValuesDiffer,
    exercise,
    expect,
    expect_distribution,
    expect_returns,
    expect_shape,
    randn,
    single_threaded,
)
from ..evaluation import Evaluation
from ..expectations import fail
from ..torch_errors import BMM, BOOL_MASK, BROADCAST, CAT, MATMUL
from . import attention_slips as slips
from .causal_attention_block_mistakes import OUTPUTS, WEIGHTS, M, wrong
from .crashes import call


def crashes(B, T, d_in, d_key, d_value):
    """The crashes of the typical slips, named (for crashes.call)."""
    sizes = dict(d_in=d_in, d_key=d_key, d_value=d_value)

    def broadcast(m):
        a, b = int(m["a"]), int(m["b"])
        if m["dim"] == "2" and {a, b} == {d_in, d_value}:
            return M.residual_added.at(**sizes)
        return M.mask_size.at(T=T) if T in (a, b) and a != b else None
    return [
        slips.transposed_batch(B, d_key, M),
        (CAT, lambda m: M.concat_axis.at(axis=m["dim"]) if m["dim"] != "2" else None),
        (MATMUL, lambda m: M.weight_transposed.at(**sizes) if (int(m["r2"]), int(m["c2"])) in (
            (d_key, d_in), (d_value, d_in)) else M.product_shapes),
        (BMM, lambda m: M.weight_transposed.at(**sizes) if int(m["got"].split(",")[-1]) in (d_key, d_value)
         and int(m["want"].split(",")[-1]) == d_in else M.product_shapes),
        (BOOL_MASK, M.mask_not_bool),
        (BROADCAST, broadcast),
    ]


def _scores_returned(weights, args):
    """M.scores_returned (or raw_scores_returned) when `weights` are the masked scores at every s <= t, whatever fills
    the later ones (−∞, a large negative number), else None."""
    got, keep = torch.as_tensor(weights).detach().float(), causal_mask(args[0].shape[1])
    for mistake in (M.scores_returned, M.raw_scores_returned):
        scores = mistake.run(*args)[1]
        if got.shape == scores.shape and torch.allclose(got[:, keep], scores[:, keep], atol=1e-4, rtol=1e-4):
            return mistake
    return None


def _made_up(weights, args):
    """The mistake of `weights` that are wrong beside an output that is right: uniform ones, or others."""
    uniform, got = M.weights_uniform.run(*args)[1], torch.as_tensor(weights).detach().float()
    return M.weights_uniform if torch.allclose(got, uniform, atol=1e-5) else M.weights_not_read_outs


def _expect_causal_output(ev: Evaluation, answer, args, out, t):
    """Changing x after step t leaves the output at steps 0..t unchanged."""
    x = args[0]
    changed = x.clone()
    changed[:, t + 1:] = randn(ev.rng(1300 + x.shape[1]), x.shape[0], x.shape[1] - t - 1, x.shape[2])
    after = ev.call(answer, changed, *args[1:])
    after = after[0] if isinstance(after, (tuple, list)) and len(after) == 2 else after
    if not (hasattr(after, "shape") and hasattr(out, "shape") and tuple(after.shape) == tuple(out.shape)):
        return
    expect(torch.allclose(out[:, :t + 1], after[:, :t + 1], atol=1e-5), M.output_leaks_future.at(t=t))


def _additive_mask(x, W_q, W_k, W_v):
    """An additive −∞ mask above the diagonal, einsum throughout."""
    T = x.shape[1]
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    scores = torch.einsum("btd,bsd->bts", q, k) / k.shape[-1] ** 0.5
    weights = torch.softmax(scores + torch.full((T, T), float("-inf")).triu(1), dim=-1)
    return torch.cat([x, torch.einsum("bts,bsd->btd", weights, v)], -1), weights


def _renormalised(x, W_q, W_k, W_v):
    """The mask applied after the softmax, the rows renormalised."""
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    weights = torch.softmax(q @ k.transpose(1, 2) / k.size(-1) ** 0.5, -1) * causal_mask(x.shape[1])
    weights = weights / weights.sum(-1, keepdim=True)
    return torch.cat([x, weights @ v], -1), weights


@exercise("causal_attention_block (SNAIL)", reference=reference, mistakes=M,
          right=[wrong(weights=lambda s, T: torch.softmax(s.masked_fill(~causal_mask(T), -1e9), -1)), _additive_mask,
                 _renormalised])
@single_threaded
def causal_attention_block(ev: Evaluation, answer):
    """answer(x, W_q, W_k, W_v) -> ([x, read] (B, T, d_in + d_value), weights (B, T, T))."""
    tests = 0
    for seed, (B, T, d_in, d_key, d_value) in enumerate([(2, 7, 6, 4, 5), (1, 5, 3, 2, 6), (3, 10, 8, 3, 6)]):
        g = ev.rng(130 + seed)
        args = (randn(g, B, T, d_in), randn(g, d_in, d_key), randn(g, d_in, d_key), randn(g, d_in, d_value))
        ref_out, ref_w = reference(*args)
        result = call(ev, answer, *args, errors=crashes(B, T, d_in, d_key, d_value), transposed=M.k_T_3d)
        out, weights = expect_returns(result, (ref_out, ref_w), ("out", "weights"))
        expect_shape(weights, (B, T, T), "weights")
        symptom = _scores_returned(weights, args)
        expect(symptom is None, symptom)
        try:
            ev.expect_close(weights, ref_w, "weights", mistakes=M.variants(WEIGHTS, *args, pick=lambda r: r[1]))
        except ValuesDiffer:                       # no listed mistake: named when the output is right
            if not (hasattr(out, "shape") and tuple(out.shape) == tuple(ref_out.shape)
                    and torch.allclose(torch.as_tensor(out).detach().float(), ref_out, atol=1e-5)):
                raise
            fail(_made_up(weights, args))
        expect_distribution(weights, "weights (each position's row)", axis=-1)
        mistakes = M.variants(OUTPUTS, *args, pick=lambda r: r[0])
        width = out.shape[-1] if hasattr(out, "shape") and tuple(out.shape[:2]) == (B, T) else d_in + d_value
        expect(width == d_in + d_value or any(tuple(m.shape) == tuple(out.shape) for m in mistakes.values()),
               M.output_width.at(width=width, want=d_in + d_value, d_in=d_in, d_value=d_value))
        got = torch.as_tensor(out).detach().float() if hasattr(out, "shape") else None
        for mistake, values in mistakes.items():     # a known mistake, before the leak it may also make
            expect(got is None or got.shape != values.shape or not torch.allclose(got, values, atol=1e-5), mistake)
        _expect_causal_output(ev, answer, args, out, t=T // 2)
        ev.expect_close(out, ref_out, "the block's output", mistakes=mistakes)
        tests += 1
    _future_changed(ev, answer)
    _large_scores(ev, answer)
    return tests + 2


def _future_changed(ev: Evaluation, answer):
    """Changing the future leaves the past unchanged, on an input where d_key = d_in."""
    g = ev.rng(139)
    x, W_q, W_k, W_v = randn(g, 1, 8, 4), randn(g, 4, 4), randn(g, 4, 4), randn(g, 4, 3)
    t, changed = 3, x.clone()
    changed[:, t + 1:] = randn(g, 1, 8 - t - 1, 4)
    before, _ = expect_returns(ev.call(answer, x, W_q, W_k, W_v), reference(x, W_q, W_k, W_v), ("out", "weights"))
    after, _ = expect_returns(ev.call(answer, changed, W_q, W_k, W_v), reference(changed, W_q, W_k, W_v),
                              ("out", "weights"))
    expect(torch.allclose(before[:, :t + 1], after[:, :t + 1], atol=1e-5), M.output_leaks_future.at(t=t))


def _large_scores(ev: Evaluation, answer):
    """Scores near 150 everywhere (x = c·u + noise, W_q = W_k): exp(150) overflows float32, while the scores of a row
    differ by a few units only, so that any stable way of writing the softmax stays finite."""
    g = ev.rng(138)
    W, W_v, u = randn(g, 4, 3), randn(g, 4, 2), randn(g, 4)
    c = float((150 * 3 ** 0.5 / (u @ W).square().sum()) ** 0.5)
    x = c * u + randn(g, 2, 6, 4, scale=0.05)
    expected = reference(x, W, W, W_v)
    result = call(ev, answer, x, W, W, W_v, errors=crashes(2, 6, 4, 3, 2), transposed=M.k_T_3d)
    out, weights = expect_returns(result, expected, ("out", "weights"))
    for what, got, want in (("weights", weights, expected[1]), ("output", out, expected[0])):
        finite = torch.isfinite(torch.as_tensor(got).detach()).all() if hasattr(got, "shape") else True
        expect(bool(finite), M.overflow.at(what=what))
        ev.expect_close(got, want, f"the {what} with scores near 150", atol=1e-3, rtol=1e-3)


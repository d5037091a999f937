"""Lesson 03, exercise 3: the masked softmax.

    masked_softmax(scores (..., T), mask bool, broadcastable to the scores, True = keep) -> weights of the scores'
    shape: a softmax over the last axis among the kept positions, 0 elsewhere; a fully masked row -> zeros

The check compares the weights on three inputs (the second has a fully masked row and a partly masked one; the
third has 3 axes and a mask (2, 1, 5) that broadcasts, which must not be reshaped to the scores' shape), then on
large scores (around +100 and -120), where a softmax written without the maximum subtracted overflows or underflows
in float32.
"""
import torch

from ... import scores as ref
from ..core import Mistake, Mistakes, exercise, expect, expect_distribution, expect_shape, randn
from ..evaluation import Evaluation, call_naming
from ..torch_errors import MASK_INDEX, RESHAPE


def _filled(fill, dim=-1, zeroed=False):
    """A wrong answer: the masked scores set to `fill`, a softmax over `dim`, the masked weights zeroed after it."""
    def masked_softmax(scores, mask):
        weights = torch.softmax(scores.masked_fill(~mask, fill), dim)
        return weights * mask if zeroed else weights
    return masked_softmax


def _by_hand(clamp=None):
    """A softmax written out without the maximum subtracted (clamp: the scores clamped from above first)."""
    def masked_softmax(scores, mask):
        scores = scores if clamp is None else scores.clamp(max=clamp)
        w = torch.exp(scores) * mask
        total = w.sum(-1, keepdim=True)
        return w / torch.where(total > 0, total, torch.ones_like(total))
    return masked_softmax


def _mask_indexes(scores, mask):
    scores = scores.clone()
    scores[~mask] = torch.finfo(scores.dtype).min
    return torch.softmax(scores, -1) * mask


_BROADCAST = ("the mask has shape {mask_shape}, broadcastable to the scores' {shape} but not the same shape: it is "
              "used by operations that broadcast, ")
_STABLE = "subtract each row's maximum before the exp (softmax(e) = softmax(e - max e))"
M = Mistakes(
    Mistake("mask_reshaped", _BROADCAST + "not reshaped to the scores' shape",
            hint="scores.masked_fill(~mask, ...) or torch.where(mask, ...) (or mask.expand_as(scores))",
            shows=lambda scores, mask: ref.masked_softmax(scores, mask.reshape(scores.shape))),
    Mistake("mask_as_index", _BROADCAST + "not used to index the scores",
            hint="scores.masked_fill(~mask, ...) or torch.where(mask, ...)", shows=_mask_indexes),
    Mistake("mask_ignored", "the mask is ignored: the masked positions (mask False) must get weight 0",
            shows=lambda scores, mask: torch.softmax(scores, -1)),
    Mistake("fill_zero", "the masked scores are set to 0, and a score of 0 still gets weight exp(0): a masked "
            "position needs a very negative score before the softmax",
            hint="masked_fill(~mask, torch.finfo(scores.dtype).min)", shows=_filled(0.0)),
    Mistake("fill_zero_then_zeroed", "the masked scores are set to 0 and their weights zeroed after the softmax: the "
            "kept weights no longer sum to 1, since each masked position's exp(0) still counts in the sum",
            hint="masked_fill(~mask, torch.finfo(scores.dtype).min) before the softmax",
            shows=_filled(0.0, zeroed=True)),
    Mistake("mask_inverted", "the mask is inverted: True means KEEP (may attend), False means masked out",
            shows=lambda scores, mask: ref.masked_softmax(scores, ~mask)),
    Mistake("nan_rows", "a row where every position is masked gives NaN (its softmax has nothing to normalise over: "
            "0 / 0): such a row must give zeros", hint="keep such rows finite (fill with a large negative number, "
            "not -inf, or divide by a sum that is never 0), then multiply the weights by the mask",
            shows=_filled(float("-inf"))),
    Mistake("uniform_rows", "a row where every position is masked gives uniform weights: such a row must give zeros",
            hint="multiply the weights by the mask", shows=_filled(-1e9)),
    Mistake("zeroed_after", "the masked positions are zeroed AFTER the softmax without renormalising: the kept "
            "weights no longer sum to 1; the scores must be masked before the softmax",
            shows=lambda scores, mask: torch.softmax(scores, -1) * mask),
    Mistake("axis_first", "the softmax runs over the first axis: each row normalises over the source positions, the "
            "last axis", hint="dim=-1", shows=lambda scores, mask: ref.masked_softmax(scores, mask, dim=0)),
    Mistake("axis_middle", "the softmax runs over axis 1, the last axis of 2-D scores only: the weights normalise "
            "over the source positions, the last axis, whatever the number of axes", hint="dim=-1",
            shows=lambda scores, mask: ref.masked_softmax(scores, mask, dim=min(1, scores.dim() - 1))),
    Mistake("overflow", f"the weights are NaN or inf for large scores (around 100): exp overflows in float32 above "
            f"about 88; {_STABLE}", hint="torch.softmax, which does it", shows=_by_hand()),
    Mistake("underflow", f"a row's weights are all 0 for very negative scores (around -120): exp underflows to 0 in "
            f"float32; {_STABLE}", hint="torch.softmax, which does it", shows=_by_hand(clamp=80.0)),
)
VALUES = [m for m in M if m.key not in ("mask_reshaped", "mask_as_index", "overflow", "underflow")]


def mask_shape_errors(shape, mask_shape):
    """A broadcastable mask (fewer or size-1 axes) reshaped or viewed to the scores' shape, or used as a boolean
    index of the scores: named by torch's sizes."""
    if tuple(shape) == tuple(mask_shape):
        return []
    size = int(torch.tensor(mask_shape).prod())
    fields = dict(mask_shape=tuple(mask_shape), shape=tuple(shape))
    shape_text = ", ".join(str(n) for n in shape)

    def reshaped(match):
        return M.mask_reshaped.at(**fields) if match["shape"] == shape_text and int(match["size"]) == size else None
    return [(RESHAPE, reshaped), (MASK_INDEX, M.mask_as_index.at(**fields))]


def large_scores(g, shape):
    """Scores around +100 in the first rows (exp overflows) and around -120 in the last (exp underflows)."""
    scores = randn(g, *shape, scale=3.0)
    scores[..., : shape[-2] - 1, :] += 100.0
    scores[..., shape[-2] - 1, :] -= 120.0
    return scores


def _where(scores, mask):
    """-inf where masked, then the NaN of fully masked rows turned into 0."""
    return torch.nan_to_num(torch.softmax(torch.where(mask, scores, float("-inf")), -1), nan=0.0)


def _lowest(scores, mask):
    """The dtype's lowest finite value, then the masked weights set to 0."""
    weights = torch.softmax(scores.masked_fill(~mask, torch.finfo(scores.dtype).min), dim=-1)
    return weights.masked_fill(~mask, 0.0)


@exercise("masked softmax", reference=ref.masked_softmax, mistakes=M, right=[_where, _lowest])
def masked_softmax(ev: Evaluation, answer):
    """answer(scores (..., T), mask bool broadcastable, True = keep) -> weights; fully masked rows -> 0."""
    tests = 0
    cases = [((4, 6), (4, 6)), ((3, 5), (3, 5)), ((2, 3, 5), (2, 1, 5))]
    for seed, (shape, mask_shape) in enumerate(cases):
        g = ev.rng(seed)
        scores = randn(g, *shape, scale=3.0)
        mask = torch.as_tensor(g.random(size=mask_shape) < 0.6)
        mask[..., 0] = True
        if seed == 1:
            mask[1] = False                                        # one fully masked row,
            mask[0, -1] = False                                    # and a row that is only partly masked
        weights = call_naming(ev, mask_shape_errors(shape, mask_shape), answer, scores.clone(), mask.clone())
        expect_shape(weights, shape, f"the weights (scores of shape {shape})")
        ev.expect_close(weights, ref.masked_softmax(scores, mask), f"the weights (scores {shape}, mask {mask_shape})",
                        mistakes=M.variants(VALUES, scores, mask))
        w = weights.detach().numpy()
        full = mask.expand(shape).any(-1).numpy()
        expect_distribution(w[full], "the weights of rows with a real position")
        tests += 1
    g = ev.rng(len(cases))                          # large scores: exp overflows (and underflows) in float32
    scores = large_scores(g, (3, 6))
    mask = torch.as_tensor(g.random(size=(3, 6)) < 0.6)
    mask[..., 0] = True
    weights = ev.call(answer, scores, mask)
    expect_shape(weights, (3, 6), "the weights (scores around 100 and -120)")
    expect(bool(torch.isfinite(torch.as_tensor(weights)).all()), M.overflow)
    expect(bool((torch.as_tensor(weights).sum(-1) > 1e-6).all()), M.underflow)
    ev.expect_close(weights, ref.masked_softmax(scores, mask), "the weights (scores around 100 and -120)")
    return tests + 1

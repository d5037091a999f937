"""Lesson 06, exercise 2: the pointer's softmax over the positions that may still be chosen.

    masked_pointer_softmax(scores (B, T), mask (B, T) bool, True = may be chosen) -> weights (B, T)

The weights are a softmax over the allowed positions of each row, exactly 0 elsewhere; a row where every position is
taken gets zeros, not NaN. The check draws three batches of masks (at least one allowed position per row), names
the mistakes by their values, and otherwise what the weights break (an inverted mask, weights normalised over the
batch); then a fully masked row, and scores moved by +-200 (a softmax does not change; exp must not overflow).
"""
import functools

import numpy as np
import torch

from ... import pointer as ref
from ..core import Mistake, Mistakes, exercise, expect, expect_distribution, expect_shape, randn, to_numpy
from ..evaluation import Evaluation
from ..expectations import explained

_GUARD = "weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)"


def _filled(value, dim=-1, guard=False):
    """A softmax over the scores with the masked ones set to `value` (over axis `dim`); guard: fully masked rows 0."""
    def masked_pointer_softmax(scores, mask):
        weights = torch.softmax(scores.masked_fill(~mask, value), dim=dim)
        return weights.masked_fill(~mask.any(-1, keepdim=True), 0.0) if guard else weights
    return masked_pointer_softmax


def _by_max(scores, mask):
    exp = torch.exp(scores - scores.masked_fill(~mask, float("-inf")).amax(-1, keepdim=True)) * mask
    return exp / exp.amax(-1, keepdim=True)


def _renormalised_over_batch(scores, mask):
    e = torch.softmax(scores, dim=-1) * mask
    return e / e.sum(dim=0, keepdim=True).clamp_min(1e-30)


def _exp_without_max(scores, mask):
    e = torch.where(mask, scores.exp(), torch.zeros_like(scores))
    return e / e.sum(dim=-1, keepdim=True).clamp_min(1e-30)


M = Mistakes(
    Mistake("not_masked", "the taken positions are not masked: positions where mask is False get weight 0",
            hint="scores.masked_fill(~mask, float('-inf')) before the softmax",
            shows=lambda scores, mask: torch.softmax(scores, dim=-1)),
    Mistake("zero_fill", "masked positions still get weight: a masked score of 0 is not enough (exp(0) = 1); a masked "
            "score is -inf", hint="masked_fill(~mask, float('-inf'))", shows=_filled(0.0, guard=True)),
    Mistake("inverted", "the mask is inverted: True means 'may be chosen' (keep), False means 'already chosen' (mask "
            "out)", hint="masked_fill(~mask, float('-inf'))",
            shows=lambda scores, mask: ref.masked_softmax(scores, ~mask)),
    Mistake("wrong_axis", "the softmax runs over the batch axis: it normalises over the positions (the last axis)",
            hint="dim=-1", shows=_filled(float("-inf"), dim=0, guard=True)),
    Mistake("mask_after_softmax", "the masked positions get weight 0, but the remaining weights no longer sum to 1: "
            "the masked positions still count in the softmax's denominator; the scores are masked (-inf) BEFORE the "
            "softmax", shows=lambda scores, mask: torch.softmax(scores, dim=-1) * mask),
    Mistake("by_max", "exp(e_j) is divided by its largest value instead of the sum: a softmax divides exp(e_j) by the "
            "sum of exp(e_k) over the positions that may be chosen", shows=_by_max),
    Mistake("log_probabilities", "some weights are -inf: the weights are probabilities, not log-probabilities",
            hint="torch.softmax, not log_softmax",
            shows=lambda scores, mask: torch.log_softmax(scores.masked_fill(~mask, float("-inf")), -1)),
    Mistake("batch_normalised", "the weights are normalised over the batch axis (dim=0): each example's weights, one "
            "ROW, sum to 1 over its positions", hint="the softmax (or the sum you divide by) over dim=-1",
            shows=_renormalised_over_batch),
    Mistake("masked_not_zero", "positions where mask is False get a weight that is small but not exactly 0: a masked "
            "score is -inf, so that exp gives exactly 0", hint="masked_fill(~mask, float('-inf'))",
            shows=_filled(-30.0, guard=True)),
    Mistake("nan_row", "a row where every position is masked gives NaN: such a row gets zeros", hint=_GUARD,
            shows=_filled(float("-inf"))),
    Mistake("guard_axis", "a row where every position is masked still gives NaN at some positions: the guard that "
            "finds such rows looks along the wrong axis; a row is fully masked when none of ITS positions (the last "
            "axis) may be chosen", hint="mask.any(-1, keepdim=True)",
            shows=lambda scores, mask: torch.softmax(scores.masked_fill(~mask, float("-inf")), -1).masked_fill(
                ~mask.any(0, keepdim=True), 0.0)),
    Mistake("uniform_row", "a row where every position is masked gives equal weights (a large negative fill such as "
            "-1e9 leaves a uniform softmax there): such a row gets zeros", hint=_GUARD, shows=_filled(-1e9)),
    Mistake("unstable", "with large scores (every score moved by {shift:+g}) your weights come out wrong (NaN, inf or "
            "0): exp overflows above about 88 in float32 and underflows below about -100; softmax(e) = softmax(e - "
            "max e)", hint="subtract each row's maximum over the allowed positions before exp, or use torch.softmax",
            shows=_exp_without_max),
)
_VALUES = ("not_masked", "zero_fill", "inverted", "wrong_axis", "mask_after_softmax", "by_max")


def _random_mask(generator, B, T):
    """A (B, T) bool mask with at least one True per row (some positions already chosen)."""
    mask = torch.from_numpy(generator.random((B, T)) < 0.6)
    mask[torch.arange(B), torch.from_numpy(generator.integers(T, size=B))] = True
    return mask


def _inverted(got, mask):
    """True when the weights are 0 (or NaN) at every position that may be chosen and not at some taken one, whatever
    the answer gives in rows where the inverted mask hides everything."""
    w, m = to_numpy(got).astype(np.float64), mask.numpy()
    allowed, taken = w[m], np.nan_to_num(w[~m])
    return bool(np.all((allowed == 0) | np.isnan(allowed)) and np.any(taken != 0))


def _batch_normalised(got):
    """batch_normalised when the weights (B, T) sum to 1 (or 0) down every column and not along the rows (or None)."""
    w = np.nan_to_num(to_numpy(got).astype(np.float64))
    columns, rows = w.sum(axis=0), w.sum(axis=-1)
    by_batch = np.all(np.isclose(columns, 1.0, atol=1e-4) | np.isclose(columns, 0.0, atol=1e-4)) \
        and np.isclose(columns, 1.0, atol=1e-4).any()
    return M.batch_normalised if by_batch and not np.allclose(rows, 1.0, atol=1e-4) else None


def _written_out(scores, mask):
    """A right answer written another way: the row maximum over the allowed positions, a guarded denominator."""
    e = torch.where(mask, scores - scores.masked_fill(~mask, float("-inf")).amax(-1, keepdim=True), -torch.inf)
    e = torch.where(mask, e.exp(), torch.zeros_like(scores))
    return e / e.sum(-1, keepdim=True).clamp_min(1e-30)


@exercise("masked pointer softmax", name="masked_pointer_softmax", reference=ref.masked_softmax, mistakes=M,
          right=[_written_out, lambda scores, mask: torch.nan_to_num(torch.softmax(
              scores.masked_fill(~mask, float("-inf")), -1))])
def masked_pointer_softmax(ev: Evaluation, answer):
    """answer(scores (B, T), mask (B, T) bool) -> weights (B, T)."""
    tests = 0
    for seed, (B, T) in enumerate([(3, 6), (5, 4), (2, 9)]):
        g = ev.rng(610 + seed)
        scores, mask = 3 * randn(g, B, T), _random_mask(g, B, T)
        got = ev.call(answer, scores, mask)
        expect_shape(got, (B, T), "masked_pointer_softmax(scores, mask)")
        expect(not _inverted(got, mask), M.inverted)
        expect(not bool(torch.isneginf(torch.as_tensor(got)).any()), M.log_probabilities)
        with explained(functools.partial(_batch_normalised, got)):
            ev.expect_close(got, ref.masked_softmax(scores, mask), "masked_pointer_softmax(scores, mask)",
                            mistakes=M.variants(_VALUES, scores, mask))
        expect_distribution(got, "the pointer weights", axis=-1)
        expect(bool((to_numpy(got)[~mask.numpy()] == 0).all()), M.masked_not_zero)
        tests += 1
    # a row where every position is taken gives zeros, not NaN (the house convention)
    scores, mask = randn(ev.rng(619), 2, 4), torch.tensor([[True, False, True, False], [False] * 4])
    ev.expect_close(ev.call(answer, scores, mask), ref.masked_softmax(scores, mask),
                    "masked_pointer_softmax with a fully masked row",
                    mistakes=M.variants(("nan_row", "uniform_row", "guard_axis"), scores, mask))
    # a softmax does not change when every score moves by the same amount: large scores must not overflow
    for seed, shift in enumerate((200.0, -200.0)):
        g = ev.rng(615 + seed)
        scores, mask = 3 * randn(g, 3, 6) + shift, _random_mask(g, 3, 6)
        got = ev.call(answer, scores, mask)
        expect_shape(got, (3, 6), f"masked_pointer_softmax(scores {shift:+g}, mask)")
        w = to_numpy(got).astype(np.float64)
        right = np.all(np.isfinite(w)) and np.allclose(w, to_numpy(ref.masked_softmax(scores, mask)), atol=1e-5,
                                                       rtol=1e-4)
        expect(right, M.unstable.at(shift=shift))
    return tests + 3

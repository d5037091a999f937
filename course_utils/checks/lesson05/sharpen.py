"""Lesson 05, exercise 7: sharpening.

    sharpen(w (B, N), gamma (B, 1)) -> w(i)**gamma / sum_j w(j)**gamma, (B, N), gamma >= 1

The check draws two weightings with gamma between 1 and 5 (B != N, so that a sum without keepdim crashes and is
named), names the mistakes by their values, and otherwise the property a sharpening breaks: the result is a
distribution, and with gamma >= 1 the largest weight can only grow.
"""
import numpy as np
import torch

from ... import memory as ref
from ..core import Mistake, Mistakes, exercise, expect_shape, to_numpy
from ..evaluation import Evaluation, call_naming
from . import inputs
from .batch_axis import lined_up
from .weightings import compare, is_distribution

_RULE = "w(i)**gamma / sum_j w(j)**gamma"


def _no_keepdim(w, gamma):
    w = w ** gamma
    return w / w.sum(-1)                                                       # (B, N) / (B,): B meets N


def _renormalised_root(w, gamma):
    w = w ** 0.5
    return w / w.sum(-1, keepdim=True)


M = Mistakes(
    Mistake("rows_axis", "a value per example, (B,), divides the (B, N) weighting: broadcasting lines it up with the "
            "N rows (B = {B}, N = {N}; right only for a batch of one)",
            hint="keep the axis: w.sum(-1, keepdim=True), (B, 1)", shows=_no_keepdim),
    Mistake("not_renormalised", f"the sharpened weights are not renormalised: w**gamma is divided by its sum over the "
            f"rows, {_RULE}", shows=lambda w, gamma: w ** gamma),
    Mistake("times_gamma", f"you multiplied by gamma instead of raising to the power gamma: {_RULE}",
            shows=lambda w, gamma: ref.sharpen(w * gamma, torch.ones_like(gamma))),
    Mistake("wrong_axis", "you renormalised over the wrong axis: the sum runs over the memory rows (the last axis)",
            shows=lambda w, gamma: w ** gamma / (w ** gamma).sum(0, keepdim=True)),
    Mistake("by_max", f"you divided by the largest w(j)**gamma instead of the sum: {_RULE}",
            shows=lambda w, gamma: w ** gamma / (w ** gamma).amax(-1, keepdim=True)),
    Mistake("softmax_gamma_w", f"you took softmax(gamma * w): sharpening raises each weight to the power gamma, "
            f"{_RULE}", shows=lambda w, gamma: torch.softmax(gamma * w, -1)),
    Mistake("softmax_of_power", f"you took the softmax of w**gamma: it is renormalised by dividing by the sum, {_RULE} "
            "(a softmax exponentiates the weights again)", shows=lambda w, gamma: torch.softmax(w ** gamma, -1)),
    Mistake("inverse_power", f"you raised w to the power 1 / gamma, which flattens the weighting: sharpening raises it "
            f"to the power gamma >= 1, {_RULE}", shows=lambda w, gamma: ref.sharpen(w, 1 / gamma)),
    Mistake("not_distribution", f"the sharpened weighting does not sum to 1 over each row: it is divided by sum_j "
            f"w(j)**gamma, {_RULE}", shows=lambda w, gamma: w ** gamma / (w ** gamma).sum()),
    Mistake("flattened", f"sharpening lowered the largest weight: with gamma >= 1 the largest weight can only grow; "
            f"{_RULE}", shows=_renormalised_root),
)
_VALUES = ("not_renormalised", "times_gamma", "wrong_axis", "by_max", "softmax_gamma_w", "softmax_of_power",
           "inverse_power")


def _keeps_the_largest(w):
    return lambda out: bool(np.all(to_numpy(out).max(-1) >= to_numpy(w).max(-1) - 1e-6))


@exercise("sharpening", reference=ref.sharpen, mistakes=M,
          right=[lambda w, gamma: torch.softmax(gamma * torch.log(w), -1),
                 lambda w, gamma: ref.sharpen(w / w.amax(-1, keepdim=True), gamma)])
def sharpen(ev: Evaluation, answer):
    """answer(w (B, N), gamma (B, 1)) -> (B, N)."""
    tests = 0
    for seed, (B, N) in enumerate([(2, 6), (3, 10)]):
        r = ev.rng(60 + seed)
        w, gamma = inputs.weighting(r, B, N, 1.5), inputs.column(r, B, 1.0, 5.0)
        out = call_naming(ev, [lined_up(B, N, M.rows_axis)], answer, w, gamma)
        expect_shape(out, (B, N), "sharpen(w, gamma)")
        compare(ev, out, ref.sharpen(w, gamma), "sharpen(w, gamma)", mistakes=M.variants(_VALUES, w, gamma),
                properties=[(is_distribution, M.not_distribution), (_keeps_the_largest(w), M.flattened)])
        tests += 1
    return tests

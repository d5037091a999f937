"""Lesson 01, exercise 1: a numerically stable softmax over the last axis.

    softmax(x (..., n)) -> an array of x's shape, each slice along the last axis a distribution

The check compares the values on inputs of 1, 2 (square, where a sum or a maximum without its axis kept
broadcasts the wrong way and runs) and 3 axes, then on large scores (around 1000), where an exp without the
maximum subtracted overflows; an answer whose whole array sums to 1, each row in the right proportions, is named
by that property (whatever it subtracted first).
"""
import numpy as np

from ... import numpy_attention as ref
from ..core import Mistake, Mistakes, exercise, expect, expect_distribution, to_numpy
from ..evaluation import Evaluation
from .softmax_by_hand import call, fixed_axis, no_max_softmax


def _e(x):
    return np.exp(x - x.max(axis=-1, keepdims=True))


def _by_max(x):
    return _e(x) / _e(x).max(axis=-1, keepdims=True)


def _sum_all(x):
    return _e(x) / _e(x).sum()


def _global_max(x):
    e = np.exp(x - x.max())
    return e / e.sum(axis=-1, keepdims=True)


_AXIS = "each slice along the LAST axis must sum to 1, whatever the number of axes"
M = Mistakes(
    Mistake("by_max", "the exponentials are divided by their maximum instead of their sum: the largest weight is "
            "1 and the weights do not sum to 1", hint="e / e.sum(axis=-1, keepdims=True)", shows=_by_max),
    Mistake("exp_only", "the output is the exponentials themselves: divide them by their sum over the last axis",
            hint="e / e.sum(axis=-1, keepdims=True)", shows=np.exp),
    Mistake("divided_by_max", "x is divided by its maximum instead of having it subtracted: softmax(x) = "
            "softmax(x - c) holds for a constant c SUBTRACTED, not divided",
            hint="np.exp(x - x.max(axis=-1, keepdims=True))",
            shows=lambda x: no_max_softmax(x / x.max(-1, keepdims=True))),
    Mistake("axis_first", "the weights sum to 1 over the first axis: " + _AXIS, hint="axis=-1",
            shows=lambda x: ref.softmax(x, axis=0)),
    Mistake("axis_middle", "the weights sum to 1 over axis 1, which is the last axis of a 2-D array only: " + _AXIS,
            hint="axis=-1", shows=lambda x: ref.softmax(x, axis=min(1, x.ndim - 1))),
    Mistake("sum_all", "the whole array sums to 1: each row must be normalised on its own, by its sum over the "
            "last axis", hint="e.sum(axis=-1, keepdims=True)", shows=_sum_all),
    Mistake("max_wrong_axis", "the maximum subtracted is each column's, not each row's: a number that differs "
            "within a row changes the result", hint="x.max(axis=-1, keepdims=True)",
            shows=lambda x: no_max_softmax(x - x.max(axis=0, keepdims=True))),
    Mistake("sum_no_keepdims", "the row sums lost their axis, so they broadcast the wrong way: element (i, j) is "
            "divided by the sum of row j", hint="e.sum(axis=-1, keepdims=True)", shows=lambda x: _e(x) / _e(x).sum(-1)),
    Mistake("max_no_keepdims", "the row maxima lost their axis, so they broadcast the wrong way: element (i, j) gets "
            "the maximum of row j subtracted", hint="x.max(axis=-1, keepdims=True)",
            shows=lambda x: no_max_softmax(x - x.max(axis=-1))),
    Mistake("no_max", "the weights are NaN on large scores (around 1000): exp(1000) overflows to inf, and inf / inf "
            "is NaN; subtract each row's maximum before the exp", hint="np.exp(x - x.max(axis=-1, keepdims=True))",
            shows=no_max_softmax),
    Mistake("global_max", "the maximum subtracted is the whole array's, not each row's: on large scores a row far "
            "below it underflows to 0 / 0 = NaN", hint="x.max(axis=-1, keepdims=True)", shows=_global_max),
    Mistake("max_in_numerator", "the maximum is subtracted in the numerator only: each row is off by the factor "
            "exp(its maximum) and no longer sums to 1; subtract it once, from x, before both the exp and the sum",
            hint="e = np.exp(x - x.max(axis=-1, keepdims=True)); e / e.sum(axis=-1, keepdims=True)",
            shows=lambda x: _e(x) / np.exp(x).sum(axis=-1, keepdims=True)),
    fixed_axis(shows=lambda x: ref.softmax(x, axis=1)),
)
VALUES = [m for m in M if m.key not in ("sum_all", "fixed_axis")]     # those named by their values


def _expect_rows_normalised(out, expected):
    """Each row in the right proportions, the whole array summing to 1 instead of each row: M.sum_all."""
    a = np.asarray(to_numpy(out), dtype=np.float64)
    if a.shape != expected.shape or a.ndim < 2 or not np.all(np.isfinite(a)) or np.any(a.sum(-1) <= 0):
        return
    rows = a / a.sum(axis=-1, keepdims=True)
    expect(not (np.isclose(a.sum(), 1.0) and np.allclose(rows, expected, atol=1e-6)
                and not np.allclose(a.sum(-1), 1.0)), M.sum_all)


def _other_way(x):
    """A right answer written another way: exp(x - logsumexp(x))."""
    x = np.asarray(x, dtype=np.float64)
    m = x.max(axis=-1, keepdims=True)
    return np.exp(x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True)))


@exercise("softmax", reference=ref.softmax, mistakes=M, right=[_other_way])
def softmax(ev: Evaluation, answer):
    """answer(x) -> softmax over the last axis, stable for large inputs."""
    tests = 0
    for seed, shape in enumerate([(5,), (4, 4), (3, 4), (2, 3, 6)]):
        x = ev.rng(seed).normal(size=shape) * 3
        out = call(ev, answer, M, x)
        _expect_rows_normalised(out, ref.softmax(x))
        ev.expect_close(out, ref.softmax(x), f"softmax(x of shape {shape})", mistakes=M.variants(VALUES, x))
        expect_distribution(out, "softmax outputs")
        tests += 1
    big = np.array([[1000.0, 1001.0, 999.0], [-1000.0, -1000.0, -999.0]])
    ev.expect_close(call(ev, answer, M, big), ref.softmax(big), "softmax of large scores [1000, 1001, 999]",
                    mistakes=M.variants(VALUES, big))
    return tests + 1

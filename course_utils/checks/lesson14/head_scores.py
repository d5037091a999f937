"""Lesson 14, exercise 1: the previous-token and induction scores of a head.

    head_scores(weights (B, h, 2L, 2L), half_length=L) -> (previous (B, h), induction (B, h))
        previous  = mean over the queries t = 1 .. 2L-1 of alpha[t, t-1]       (the token before)
        induction = mean over the queries t = L .. 2L-1 of alpha[t, t-L+1]     (the token after the previous
                                                                               occurrence of the current one)

The check draws causal attention weights (each row sums to 1 over the keys up to its query) for three sizes and
compares both scores with the reference; the lesson's typical mistakes are named by their values, each computed
by running its own wrong answer below. Where none matches it names the property that fails (score_reading.py):
a score that moves when only another sequence's or head's weights move, a score that is not a sum of weights, or
the weights alpha[q, k] the score reads (only keys after their query: rows and columns swapped) and how much each
counts.
"""
import functools

import torch

from ... import induction as ref
from ..core import Mistake, Mistakes, exercise, expect, expect_returns, expect_shape, randn, single_threaded
from ..evaluation import Evaluation
from ..mistakes import GENERIC, Said
from . import score_reading as reading
from .properties import by_property


def _causal_weights(g, B, h, T, scale=2.0):
    """(B, h, T, T) attention weights: a causal softmax of random scores (rows sum to 1 over keys <= query)."""
    scores = randn(g, B, h, T, T, scale=scale).masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    return scores.softmax(-1)


def _mean(w, queries, offset):
    """The mean over `queries` t of w[..., t, t + offset] (offset: a function of L)."""
    return w[..., queries, queries + offset].mean(-1)


# Each score written with one mistake: kind -> (w (B, h, 2L, 2L), L) -> (B, h). "right" is the exercise's.
PREVIOUS = {
    "right": lambda w, L: _mean(w, torch.arange(1, 2 * L), -1),
    "swapped": lambda w, L: w[..., torch.arange(0, 2 * L - 1), torch.arange(1, 2 * L)].mean(-1),
    "self": lambda w, L: _mean(w, torch.arange(0, 2 * L), 0),
    "with_first": lambda w, L: w[..., torch.arange(1, 2 * L), torch.arange(0, 2 * L - 1)].sum(-1) / (2 * L),
    "second": lambda w, L: _mean(w, torch.arange(L, 2 * L), -1),
    "short": lambda w, L: _mean(w, torch.arange(1, 2 * L - 1), -1),
    "late": lambda w, L: _mean(w, torch.arange(2, 2 * L), -1),
    "block": lambda w, L: w[..., torch.arange(1, 2 * L), :][..., torch.arange(0, 2 * L - 1)].mean((-2, -1)),
    "summed": lambda w, L: w[..., torch.arange(1, 2 * L), torch.arange(0, 2 * L - 1)].sum(-1),
    "two_back": lambda w, L: _mean(w, torch.arange(2, 2 * L), -2),
    "largest": lambda w, L: w[..., torch.arange(1, 2 * L), torch.arange(0, 2 * L - 1)].amax(-1),
}
INDUCTION = {
    "right": lambda w, L: _mean(w, torch.arange(L, 2 * L), 1 - L),
    "swapped": lambda w, L: w[..., torch.arange(1, L + 1), torch.arange(L, 2 * L)].mean(-1),
    "off": lambda w, L: _mean(w, torch.arange(L, 2 * L), -L),
    "diagonal": lambda w, L: torch.diagonal(w, offset=-(L - 1), dim1=-2, dim2=-1).mean(-1),
    "over_all": lambda w, L: w[..., torch.arange(L, 2 * L), torch.arange(1, L + 1)].sum(-1) / (2 * L),
    "short": lambda w, L: _mean(w, torch.arange(L, 2 * L - 1), 1 - L),
    "late": lambda w, L: _mean(w, torch.arange(L + 1, 2 * L), 1 - L),
    "early": lambda w, L: _mean(w, torch.arange(L - 1, 2 * L - 1), 1 - L),
    "block": lambda w, L: w[..., torch.arange(L, 2 * L), :][..., torch.arange(1, L + 1)].mean((-2, -1)),
    "summed": lambda w, L: w[..., torch.arange(L, 2 * L), torch.arange(1, L + 1)].sum(-1),
    "batch": lambda w, L: INDUCTION["right"](w, L).mean(0, keepdim=True).expand(w.shape[:2]),
    "heads": lambda w, L: INDUCTION["right"](w, L).mean(1, keepdim=True).expand(w.shape[:2]),
}


def scores(weights, half_length, previous="right", induction="right"):
    """head_scores written with the mistakes `previous` and `induction` (kinds of PREVIOUS and INDUCTION)."""
    return PREVIOUS[previous](weights, half_length), INDUCTION[induction](weights, half_length)


def _wrong(previous="right", induction="right"):
    return functools.partial(scores, previous=previous, induction=induction)


_SHORT = "the {} score leaves out the last query, t = 2L-1: its queries run up to 2L-1, the last one included"
M = Mistakes(
    Mistake("swapped", "{what} reads only weights above the diagonal (keys after their query), where a causal "
            "head's weights are 0: rows are queries and columns keys, so the key before query t is row t, column "
            "t - 1",
            hint="weights[..., t, t - 1]: the query index first", shows=_wrong("swapped", "swapped")),
    Mistake("block", "{what} averages a whole block of weights (every query of the stripe with every key of it), "
            "not one key per query", hint="index the queries and the keys in ONE step: weights[..., t, t - 1], "
            "not weights[..., t, :][..., t - 1]", shows=_wrong("block", "block")),
    Mistake("summed", "{what} sums the weights on its stripe: a score is their mean over the queries, between 0 "
            "and 1", hint=".mean(-1)", shows=_wrong("summed", "summed")),
    Mistake("prev_self", "the previous-token score reads the diagonal, each query's weight on itself: the token "
            "before query t is key t - 1, one below the diagonal", shows=_wrong(previous="self")),
    Mistake("prev_with_first", "the previous-token score is averaged over 2L queries: query 0 has no token before "
            "it; the mean runs over the 2L - 1 queries t = 1 .. 2L-1", shows=_wrong(previous="with_first")),
    Mistake("prev_second", "the previous-token score is averaged over the second copy only: a previous-token head "
            "attends to the token before in both copies, queries t = 1 .. 2L-1", shows=_wrong(previous="second")),
    Mistake("prev_short", _SHORT.format("previous-token"),
            hint="torch.arange(a, b) stops at b - 1: torch.arange(1, 2 * L)", shows=_wrong(previous="short")),
    Mistake("prev_late", "the previous-token score leaves out the first query, t = 1 (its key is token 0): the "
            "queries are t = 1 .. 2L-1", hint="torch.arange(1, 2 * L)", shows=_wrong(previous="late")),
    Mistake("ind_off", "the induction score reads key t - L, the previous occurrence of the current token itself: "
            "an induction head attends to the token AFTER it, key t - L + 1", shows=_wrong(induction="off")),
    Mistake("ind_diagonal", "the induction score reads the whole stripe, query L-1 of the first copy included: only "
            "a query in the second copy, t = L .. 2L-1, has an earlier occurrence of its token to look back at",
            shows=_wrong(induction="diagonal")),
    Mistake("ind_over_all", "the induction score is divided by 2L, the number of all queries: it is a mean over the "
            "L queries of the second copy, t = L .. 2L-1", shows=_wrong(induction="over_all")),
    Mistake("ind_short", _SHORT.format("induction"), hint="torch.arange(a, b) stops at b - 1: torch.arange(L, 2 * L)",
            shows=_wrong(induction="short")),
    Mistake("ind_late", "the induction score leaves out the second copy's first query, t = L (its key is 1): the "
            "queries are t = L .. 2L-1, L of them", hint="torch.arange(L, 2 * L)", shows=_wrong(induction="late")),
    Mistake("ind_early", "the induction queries are one position early: the score reads queries L-1 .. 2L-2, and "
            "query L-1 is still in the first copy; the queries are t = L .. 2L-1, each with key t - L + 1",
            shows=_wrong(induction="early")),
    Mistake("score_shape", "{what} has shape {shape}: it needs one score per sequence and head, shape {want}, "
            "averaged over the queries only (the last two axes are query and key)",
            shows=lambda w, L: tuple(s.mean(0) for s in ref.head_scores(w, L))),
    Mistake("across_batch", "{what} of sequence {b}, head {j} moved when only the weights of sequence 0, head 0 "
            "changed: each sequence's score comes from its own weights; the mean runs over the queries only, not the "
            "batch",
            shows=_wrong(induction="batch")),
    Mistake("across_heads", "{what} of sequence {b}, head {j} moved when only the weights of sequence 0, head 0 "
            "changed: each head's score comes from its own weights; the mean runs over the queries only, not the "
            "heads",
            shows=_wrong(induction="heads")),
    Mistake("reads", "{what} reads {found}; it must read {wanted}", shows=_wrong(previous="two_back")),
    Mistake("not_mean", "{what} does not add up: its score of a whole map is not the sum of its scores of the map's "
            "weights taken one at a time, as a mean of weights must be", shows=_wrong(previous="largest")),
)
_BOTH = ["block", "summed"]
_BY_VALUES = {0: _BOTH + [key for key in M.keys() if key.startswith("prev_")],
              1: _BOTH + [key for key in M.keys() if key.startswith("ind_")]}


def _right_by_masks(weights, half_length):
    """Boolean selectors of the two stripes; the selected weights' sum over their count."""
    L, n = half_length, 2 * half_length
    q, k = torch.arange(n)[:, None], torch.arange(n)[None, :]
    previous, induction = (k == q - 1) & (q >= 1), (k == q - L + 1) & (q >= L)
    return tuple((weights * s).sum((-2, -1)) / s.sum() for s in (previous, induction))


def _right_by_diagonals(weights, half_length):
    """torch.diagonal for both stripes; the induction stripe without its first entry (query L-1)."""
    L = half_length
    previous = torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1).mean(-1)
    return previous, torch.diagonal(weights, offset=-(L - 1), dim1=-2, dim2=-1)[..., 1:].mean(-1)


def _property(ev, answer, w, L, which, what):
    """The property the `which` score breaks (a probe of by_property), or None."""
    def probe():
        found = reading.mixed(ev, answer, w, L, which)
        if found:
            axis, b, j = found
            return (M.across_batch if axis == "batch" else M.across_heads).at(what=what, b=b, j=j)
        C = reading.entries(ev, answer, L, which)
        got = reading.score(ev, answer, w, L, which)
        if C is None or got is None or got.shape != w.shape[:2]:
            return None
        if not reading.linear(C, w, got):
            return M.not_mean.at(what=what)
        if reading.above_diagonal(C):
            return M.swapped.at(what=what)
        wanted = reading.expected(L, which)
        return M.reads.at(what=what, found=reading.describe(C, L), wanted=reading.describe(wanted, L))
    return probe


@exercise("previous-token and induction scores", name="head_scores", reference=ref.head_scores, mistakes=M,
          right=[_right_by_masks, _right_by_diagonals])
@single_threaded
def head_scores(ev: Evaluation, answer):
    """answer(weights (B, h, 2L, 2L), half_length) -> (previous, induction), each (B, h)."""
    tests = 0
    for seed, (B, h, L) in enumerate([(3, 2, 5), (2, 4, 6), (1, 3, 4)]):
        w = _causal_weights(ev.rng(seed), B, h, 2 * L)
        expected = ref.head_scores(w, L)
        got = expect_returns(ev.call(answer, w, L), expected, ("previous", "induction"))
        for which, name in enumerate(("previous-token", "induction")):
            what = f"the {name} score (L = {L})"
            expect(hasattr(got[which], "shape"), Said("not_array", f"{what} should be a tensor of shape {(B, h)}, "
                                                                   f"got {type(got[which]).__name__}."))
            shape = tuple(got[which].shape)
            expect(shape not in ((h,), (B,), ()), M.score_shape.at(what=what, shape=shape, want=(B, h)))
            expect_shape(got[which], (B, h), what)
        for which, name in enumerate(("previous-token", "induction")):
            what = f"the {name} score (L = {L})"
            with by_property(_property(ev, answer, w, L, which, what), keys=set(GENERIC)):
                variants = M.variants(_BY_VALUES[which], w, L, pick=lambda r, i=which: r[i])
                ev.expect_close(got[which], expected[which], what,
                                mistakes={m.at(what=what) if m.fields else m: v for m, v in variants.items()})
        tests += 1
    return tests

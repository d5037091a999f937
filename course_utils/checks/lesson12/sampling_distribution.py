"""Lesson 12, exercise 4: the sampling distribution (temperature, top-k, top-p).

    sampling_distribution(logits (N, V), temperature=1.0, top_k=None, top_p=None) -> probabilities (N, V),
        each row summing to 1: the logits divided by T, then top-k, then top-p on what top-k left, renormalised;
        temperature 0 is greedy (a one-hot row of floats)

The check compares the distribution with the course's (decoding.sampling_distribution) for each step alone and
together, on random rows and on rows built so that the mistakes of the order give values of their own, names the
mistake whose values the answer gives (sampling_mistakes.py), and tests the edges (sampling_edges.py): temperature
0 and near 0, ties at the k-th logit and at the top-p boundary, p = 1, top_k > V, each row judged alone.
"""
import functools

import torch

from ...decoding import sampling_distribution as ref_sampling
from ..core import Mistakes, exercise, expect, randn, single_threaded
from ..evaluation import Evaluation, call_naming
from .sampling_edges import EDGES, crashes, greedy, large_top_k, rows_alone, ties, top_p_one
from .sampling_mistakes import NUCLEUS, VARIANTS, expect_sampling

M = Mistakes(*VARIANTS, *NUCLEUS, *EDGES)

# top-p rows where its mistakes give values of their own: logits of both signs, each row's largest above the
# probabilities top-p compares with (a probability compared with the logits keeps a set of its own), and the second
# row's largest probability below 1 - p (keeping the LEAST probable tokens then leaves it out)
TOP_P_ROWS = torch.tensor([[.45, .05, .2, .1, .15, .05], [.21, .23, .12, .18, .14, .12]]).log() + 1.8


def designed_logits(temperature=0.7):
    """Two rows on which the mistakes of the order of the steps give values of their own (T = 0.7, top_k = 5,
    top_p = 0.8): p at T = 0.7 is [.35, .25, .16, .07, .035, then .135 over 5 tokens]; top-5 keeps .865, top-p on
    it keeps 3 tokens, top-p on the unfiltered distribution 4 (so top-p before top-k keeps 4), top-k alone 5; with
    top-p alone, T = 1 (the distribution p^0.7) keeps 6 tokens where T = 0.7 keeps 4; and the row's mirror image."""
    p = torch.tensor([0.35, 0.25, 0.16, 0.07, 0.035, 0.029, 0.028, 0.027, 0.026, 0.025], dtype=torch.float64)
    row = p.log() * temperature
    return torch.stack([row, row.flip(0)]).float()


def _row_by_row(logits, temperature=1.0, top_k=None, top_p=None):
    """Each row alone, in float64, the nucleus's last token found by counting."""
    if temperature == 0:
        return torch.nn.functional.one_hot(logits.argmax(-1), logits.size(-1)).double()
    rows = []
    for z in logits.double() / temperature:
        keep = (z >= z.sort(descending=True).values[min(top_k, len(z)) - 1] if top_k is not None
                else torch.ones_like(z).bool())
        p = z.softmax(-1) * keep
        p = p / p.sum()
        if top_p is not None and top_p < 1:
            ranked = p.sort(descending=True).values
            last = ranked[int((ranked.cumsum(0) < top_p).sum().clamp(max=len(p) - 1))]
            p = p * (p >= last)
        rows.append(p / p.sum())
    return torch.stack(rows)


def _last_of_the_tied(logits, temperature=1.0, top_k=None, top_p=None):
    """Greedy on the LAST of the tied largest logits: still greedy."""
    if temperature == 0:
        flipped = logits.flip(-1).argmax(-1)
        return torch.nn.functional.one_hot(logits.size(-1) - 1 - flipped, logits.size(-1)).float()
    return ref_sampling(logits, temperature, top_k, top_p)


@exercise("sampling distribution: temperature, top-k, top-p", reference=ref_sampling, mistakes=M,
          right=[_row_by_row, _last_of_the_tied])
@single_threaded
def sampling_distribution(ev: Evaluation, answer):
    """answer(logits (N, V), temperature, top_k, top_p) -> probabilities (N, V), each row summing to 1."""
    def call(logits, *args):                                    # ev.call, the crashes named
        return call_naming(ev, crashes(*logits.shape, M), answer, logits, *args)
    expect_as = functools.partial(expect_sampling, ev, M)
    tests = 0
    for seed, (N, V) in enumerate([(4, 10), (3, 17)]):
        logits = randn(ev.rng(seed), N, V, scale=2.0)
        for temperature in (0.5, 1.0, 2.0):                     # temperature alone: sharper and flatter
            got = call(logits, temperature, None, None)
            expect_as(got, logits, temperature, None, None, f"the distribution at temperature {temperature}")
            tests += 1
        for top_k in (1, 3):                                    # top-k alone: k tokens left
            got = call(logits, 1.0, top_k, None)
            expect_as(got, logits, 1.0, top_k, None, f"the distribution with top_k={top_k}")
            tests += 1
        # top-p alone, the smallest set reaching p: first on rows where its mistakes give values of their own
        for rows, top_p, what in ([(TOP_P_ROWS, 0.75, " (rows built to tell its mistakes apart)")] if seed == 0
                                  else []) + [(logits, p, "") for p in (0.3, 0.75, 0.9)]:
            got = call(rows, 1.0, None, top_p)
            expect(rows_alone(call, got, rows, top_p), M.rows_mixed.at(top_p=top_p))
            expect_as(got, rows, 1.0, None, top_p, f"the distribution with top_p={top_p}{what}")
            tests += 1
        # temperature with top-p: the nucleus of the TEMPERED distribution (rows built so that T = 1 keeps more)
        for rows, what in ((designed_logits(0.7), "rows built so that T = 1 keeps other tokens"),
                           (logits, "random rows")):
            got = call(rows, 0.7, None, 0.8)
            expect_as(got, rows, 0.7, None, 0.8, f"the distribution with temperature=0.7, top_p=0.8 ({what})")
        tests += 1
        # all three together, temperature, then top-k, then top-p on what top-k left: first on rows built so that
        # every mistake of the order gives values of its own, then on random rows
        for rows, what in ((designed_logits(0.7), "rows built to tell the orders apart"), (logits, "random rows")):
            got = call(rows, 0.7, 5, 0.8)
            expect_as(got, rows, 0.7, 5, 0.8, f"the distribution with temperature=0.7, top_k=5, top_p=0.8 ({what})")
        got = call(logits, 1.5, None, 1.0)           # p = 1 keeps everything
        expect_as(got, logits, 1.5, None, 1.0, "the distribution with top_p=1 (nothing filtered)")
        tests += 3
    tests += greedy(ev, M, call) + ties(ev, M, call) + top_p_one(ev, M, call)   # temperature 0, ties, p = 1 keeps all
    return tests + large_top_k(ev, M, answer)          # last: top_k > V filters nothing

"""Lesson 05, exercise 4: content addressing.

    content_addressing(k (B, M), beta (B, 1), memory (B, N, M)) -> w_c (B, N), softmax_i(beta K(k, M(i)))

The check draws two memories with a zero row (the cosine needs its eps) and key strengths beta between 0.5 and 8,
names the mistakes by their values, and otherwise the property a weighting breaks (a distribution over the rows);
then a key strength of 1000, whose exp overflows float32 unless the maximum is subtracted.
"""
import numpy as np
import torch
import torch.nn.functional as F

from ... import memory as ref
from ..core import Mistake, Mistakes, exercise, expect, expect_distribution, expect_shape, to_numpy
from ..evaluation import Evaluation
from . import inputs
from .weightings import compare, is_distribution

_W = "softmax_i(beta K(k, M(i)))"


def _of(scores):
    """A content weighting computed from scores(k, beta, memory, K), K the cosine similarities (B, N)."""
    def content(k, beta, memory):
        return scores(k, beta, memory, ref.cosine_similarity(k, memory))
    return content


def _exp_over_sum(k, beta, memory):
    x = torch.exp(beta * ref.cosine_similarity(k, memory))
    return x / x.sum(-1, keepdim=True)


M = Mistakes(
    Mistake("no_beta", f"the key strength beta is missing: w_c = {_W}, not softmax(K)",
            shows=_of(lambda k, beta, memory, K: torch.softmax(K, -1))),
    Mistake("divided_by_beta", "you divided by beta: beta is a strength (it multiplies K), not a temperature",
            shows=_of(lambda k, beta, memory, K: torch.softmax(K / beta, -1))),
    Mistake("wrong_axis", "the softmax runs over the wrong axis: the weighting is a distribution over the memory rows "
            "(the last axis)", shows=_of(lambda k, beta, memory, K: torch.softmax(beta * K, 0))),
    Mistake("dot_not_cosine", "you used the dot product k·M(i) instead of the cosine similarity: beta multiplies "
            "K(k, M(i)), the dot product divided by |k| |M(i)|", hint="ntm.cosine_similarity(k, memory)",
            shows=lambda k, beta, memory: torch.softmax(beta * (memory @ k.unsqueeze(-1)).squeeze(-1), -1)),
    Mistake("softplus_beta", f"you applied softplus to beta: beta is already the key strength (>= 0, the head's "
            f"softplus made it); it is used as it is, {_W}",
            shows=_of(lambda k, beta, memory, K: torch.softmax(F.softplus(beta) * K, -1))),
    Mistake("no_exp", "beta K(k, M(i)) is divided by its sum without exp: the weighting is a softmax",
            shows=_of(lambda k, beta, memory, K: beta * K / (beta * K).sum(-1, keepdim=True))),
    Mistake("by_max", "exp(beta K(k, M(i))) is divided by its largest value instead of the sum: a softmax divides it "
            "by sum_j exp(beta K(k, M(j)))",
            shows=_of(lambda k, beta, memory, K: torch.exp(beta * K - (beta * K).amax(-1, keepdim=True)))),
    Mistake("no_eps", "a zero memory row gives NaN: the cosine's eps keeps zero rows at 0",
            hint="compute the cosine with ntm.cosine_similarity",
            shows=lambda k, beta, memory: torch.softmax(beta * (memory @ k.unsqueeze(-1)).squeeze(-1) / (
                memory.norm(dim=-1) * k.norm(dim=-1, keepdim=True)), -1)),
    Mistake("not_distribution", "the weighting is not a distribution over the rows (>= 0, summing to 1): it is a "
            "softmax", shows=_of(lambda k, beta, memory, K: torch.exp(beta * K))),
    Mistake("overflow", "with a large key strength (beta = 1000) your weighting contains NaN or inf: exp(beta K) "
            "overflows float32 (exp(89) is already inf), and inf / inf is NaN; softmax(x - max x) = softmax(x)",
            hint="torch.softmax, or subtract the largest beta K(k, M(j)) before the exp", shows=_exp_over_sum),
)
_VALUES = ("no_beta", "divided_by_beta", "wrong_axis", "dot_not_cosine", "softplus_beta", "no_exp", "by_max",
           "no_eps")


def _large_beta(ev: Evaluation, answer, memory):
    """A key strength beta = 1000 on a key that matches row 2 (cosine 1): exp(beta K) overflows float32."""
    k, beta = memory[:, 2] * 3, torch.full((memory.shape[0], 1), 1000.0)
    out = ev.call(answer, k, beta, memory)
    expect(np.all(np.isfinite(to_numpy(out))), M.overflow)
    ev.expect_close(out, ref.content_addressing(k, beta, memory), "content_addressing with beta = 1000")


def _max_subtracted(k, beta, memory):
    """A right answer written another way: the softmax written out, the maximum subtracted."""
    x = beta * ref.cosine_similarity(k, memory)
    x = torch.exp(x - x.amax(-1, keepdim=True))
    return x / x.sum(-1, keepdim=True)


@exercise("content addressing", reference=ref.content_addressing, mistakes=M,
          right=[_max_subtracted, lambda k, beta, memory: torch.log_softmax(beta * ref.cosine_similarity(k, memory),
                                                                            -1).exp()])
def content_addressing(ev: Evaluation, answer):
    """answer(k (B, M), beta (B, 1), memory (B, N, M)) -> w_c (B, N)."""
    tests = 0
    for seed, (B, N, width) in enumerate([(2, 6, 4), (3, 10, 5)]):
        r = ev.rng(30 + seed)
        memory, k = inputs.memory(r, B, N, width), inputs.tensor(r.normal(size=(B, width)))
        memory[-1, 2] = 0.0                                  # a zero row: the cosine needs its eps
        beta = inputs.column(r, B, 0.5, 8.0)
        out = ev.call(answer, k, beta, memory)
        expect_shape(out, (B, N), "content_addressing(k, beta, memory)")
        compare(ev, out, ref.content_addressing(k, beta, memory), "content_addressing(k, beta, memory)",
                mistakes=M.variants(_VALUES, k, beta, memory), properties=[(is_distribution, M.not_distribution)])
        expect_distribution(out, "content weights")
        tests += 1
    _large_beta(ev, answer, inputs.memory(ev.rng(39), 2, 5, 4))
    return tests + 1

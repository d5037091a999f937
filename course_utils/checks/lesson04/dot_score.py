"""Lesson 04, exercise 5: the dot score (Luong et al. 2015).

    dot_score(s (B, d), h (B, T, d)) -> s^T h_i, (B, T), before any softmax

The check draws three configurations (d = 4, 9, 16) and names the mistakes by their values: a scale or a cosine
where the plain dot product is asked, products not summed, s mixed across the batch, features summed separately.
"""
import math

from ... import scores as ref
from ..core import Mistake, Mistakes, exercise, randn
from ..evaluation import Evaluation
from .scores import batch_mixups, dot, features_summed, score_tests, separate_sums

M = Mistakes(
    Mistake("scaled", "the scores are scaled by 1/sqrt(d): that is the scaled dot score; the dot score is s·h_i "
            "itself", shows=lambda s, h: dot(s, h) / math.sqrt(s.shape[-1])),
    Mistake("cosine", "the scores are cosine similarities: the dot score does not normalise, it is s·h_i",
            shows=lambda s, h: ref.cosine_score(s, h)),
    Mistake("not_summed", "the products are not summed over the features: e_i = sum_k s_k h_ik, one number per "
            "position, shape (B, T)", shows=lambda s, h: s[:, None, :] * h),
    separate_sums(lambda s, h: features_summed(s, h)),
    *batch_mixups(dot, "einsum 'bd,btd->bt', or `h @ s[:, :, None]` (a batched matmul, (B, T, 1))"),
)


def _draw(g, B, T, d):
    return randn(g, B, d), randn(g, B, T, d)


@exercise("dot score (Luong)", reference=ref.dot_score, mistakes=M,
          right=[lambda s, h: (s[:, None, :] * h).sum(-1), lambda s, h: (s[:, None, :] @ h.transpose(1, 2))[:, 0]])
def dot_score(ev: Evaluation, answer):
    """answer(s (B, d), h (B, T, d)) -> s^T h_i, (B, T)."""
    return score_tests(ev, answer, ref.dot_score, [(2, 5, 4), (3, 3, 9), (1, 6, 16)], _draw,
                       lambda *args: M.variants(M, *args), lambda s, h: f"e (d={s.shape[-1]})")


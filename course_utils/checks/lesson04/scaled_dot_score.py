"""Lesson 04, exercise 6: the scaled dot score (Vaswani et al. 2017).

    scaled_dot_score(s (B, d), h (B, T, d)) -> s^T h_i / sqrt(d), (B, T), before any softmax

The check draws three configurations in which d, T and B differ (so that a scale by the wrong size shows) and names
the mistakes by their values.
"""
import math

from ... import scores as ref
from ..core import Mistake, Mistakes, exercise, randn
from ..evaluation import Evaluation
from .scores import batch_mixups, dot, features_summed, score_tests, separate_sums


def _scaled(s, h):
    return dot(s, h) / math.sqrt(s.shape[-1])


M = Mistakes(
    Mistake("not_scaled", "the scores are not scaled: s·h_i is divided by sqrt(d)", shows=dot),
    Mistake("divided_by_d", "the scores are divided by d: the scale is sqrt(d), which keeps their variance near 1",
            shows=lambda s, h: dot(s, h) / s.shape[-1]),
    Mistake("divided_by_sqrt_T", "the scores are divided by sqrt(T): the scale comes from the vector size d (the last "
            "axis), not from the number of positions", shows=lambda s, h: dot(s, h) / math.sqrt(h.shape[1])),
    Mistake("multiplied_by_sqrt_d", "the scores are multiplied by sqrt(d), where they are divided by it",
            shows=lambda s, h: dot(s, h) * math.sqrt(s.shape[-1])),
    separate_sums(lambda s, h: features_summed(s, h) / math.sqrt(s.shape[-1])),
    *batch_mixups(_scaled, "einsum 'bd,btd->bt', or `h @ s[:, :, None]` (a batched matmul, (B, T, 1))"),
)


def _draw(g, B, T, d):
    return randn(g, B, d), randn(g, B, T, d)


@exercise("scaled dot score (Vaswani)", reference=ref.scaled_dot_score, mistakes=M,
          right=[lambda s, h: dot(s / math.sqrt(s.shape[-1]), h), lambda s, h: dot(s, h) * s.shape[-1] ** -0.5])
def scaled_dot_score(ev: Evaluation, answer):
    """answer(s (B, d), h (B, T, d)) -> s^T h_i / sqrt(d), (B, T)."""
    return score_tests(ev, answer, ref.scaled_dot_score, [(2, 5, 4), (3, 7, 9), (1, 6, 16)], _draw,
                       lambda *args: M.variants(M, *args), lambda s, h: f"e (d={s.shape[-1]}, T={h.shape[1]})")

"""Lesson 04, exercise 4: the general score (Luong et al. 2015).

    general_score(s (B, d_s), h (B, T, d_h), W_a (d_s, d_h)) -> s^T W_a h_i, (B, T), before any softmax

The check draws three configurations, the first and last with a square W_a (so that W_a transposed, or left out,
still runs and is named), and names the mistakes by their values.
"""
import functools

import torch

from ... import scores as ref
from ..core import Mistake, Mistakes, exercise, randn
from ..evaluation import Evaluation
from .scores import batch_mixups, dot, features_summed, score_tests, separate_sums


def _separate(s, h, W_a, mapped="s"):
    """s^T W_a h_i with the features summed separately: W_a applied to s ('bd,de,btf->bt') or to h ('bc,de,bte->bt')."""
    return features_summed(s @ W_a, h) if mapped == "s" else features_summed(s, h @ W_a.T)


M = Mistakes(
    Mistake("W_a_transposed", "W_a is transposed: the score is s^T W_a h_i, with W_a of shape (d_s, d_h)",
            shows=lambda s, h, W_a: ref.general_score(s, h, W_a.T)),
    Mistake("no_W_a", "W_a is missing: the general score is s^T W_a h_i, not the dot product s^T h_i",
            shows=lambda s, h, W_a: dot(s, h)),
    separate_sums(functools.partial(_separate, mapped="s"), "torch.einsum('bd,de,bte->bt', s, W_a, h)"),
    *batch_mixups(ref.general_score, "einsum 'bd,de,bte->bt', or `h @ (s @ W_a)[:, :, None]` (a batched matmul)"),
)


def _mistakes(s, h, W_a):
    values = M.variants(M, s, h, W_a)
    values[M.features_summed_separately.said()] = _separate(s, h, W_a, mapped="h")    # (the same mistake)
    return values


def _draw(g, B, T, d_s, d_h):
    s, h = randn(g, B, d_s), randn(g, B, T, d_h)
    return s, h, randn(g, d_s, d_h)


@exercise("general score (Luong)", reference=ref.general_score, mistakes=M,
          right=[lambda s, h, W_a: torch.bmm(h, (s @ W_a)[:, :, None]).squeeze(-1),
                 lambda s, h, W_a: dot(s, h @ W_a.T)])
def general_score(ev: Evaluation, answer):
    """answer(s (B, d_s), h (B, T, d_h), W_a (d_s, d_h)) -> s^T W_a h_i, (B, T)."""
    return score_tests(ev, answer, ref.general_score, [(2, 5, 4, 4), (3, 4, 3, 6), (1, 6, 5, 5)], _draw, _mistakes,
                       lambda s, h, W_a: f"e (d_s={s.shape[-1]}, d_h={h.shape[-1]})")

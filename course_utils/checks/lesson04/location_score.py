"""Lesson 04, exercise 3: the location score (Luong et al. 2015).

    location_score(s (B, d_s), W_a (max_len, d_s), T) -> the first T entries of W_a s, (B, T), before any softmax

The score ignores the encoder states: one score per source position 0..T-1. The check draws three configurations
with T < max_len (so that keeping all max_len entries, or the last T, shows) and names the mistakes by their values.
"""
import torch

from ... import scores as ref
from ..core import Mistake, Mistakes, exercise, randn
from ..evaluation import Evaluation
from .scores import batch_mixups, score_tests


def _full(s, W_a):
    return s @ W_a.T                                                         # (B, max_len)


_RAW = "the scores are the raw W_a s, before any softmax (the masked softmax comes later)"
M = Mistakes(
    Mistake("softmax", "you returned weights (a softmax over the first T entries): " + _RAW,
            shows=lambda s, W_a, T: torch.softmax(_full(s, W_a)[:, :T], -1)),
    Mistake("softmax_then_cut", "you returned weights (a softmax over all max_len positions, then cut to T): " + _RAW,
            shows=lambda s, W_a, T: torch.softmax(_full(s, W_a), -1)[:, :T]),
    Mistake("all_positions", "the scores keep all max_len positions: there is one score per source position, the "
            "first T", hint="(s @ W_a.T)[:, :T]", shows=lambda s, W_a, T: _full(s, W_a)),
    Mistake("summed_over_positions", "the products W_a[i, k] s_k are summed over the positions i instead of the "
            "features k: (W_a s)_i = sum_k W_a[i, k] s_k, a sum over the LAST axis", hint="s @ W_a.T",
            shows=lambda s, W_a, T: (s * W_a.sum(0))[:, :T]),
    Mistake("last_T", "the scores are the LAST T entries of W_a s: the positions are 0..T-1, the first T",
            shows=lambda s, W_a, T: _full(s, W_a)[:, -T:]),
    Mistake("from_one", "the scores are off by one position: they are entries 1..T of W_a s, where the positions "
            "are 0..T-1", hint="[:, :T]", shows=lambda s, W_a, T: _full(s, W_a)[:, 1:T + 1]),
    *batch_mixups(ref.location_score, "(s @ W_a.T)[:, :T]"),
)


def _draw(g, B, T, d_s, max_len):
    return randn(g, B, d_s), randn(g, max_len, d_s), T


@exercise("location score (Luong)", reference=ref.location_score, mistakes=M,
          right=[lambda s, W_a, T: torch.nn.functional.linear(s, W_a[:T]),
                 lambda s, W_a, T: torch.einsum("bd,md->bm", s, W_a)[:, :T]])
def location_score(ev: Evaluation, answer):
    """answer(s (B, d_s), W_a (max_len, d_s), T) -> the first T entries of W_a s, (B, T)."""
    return score_tests(ev, answer, ref.location_score, [(2, 4, 5, 7), (3, 6, 3, 6), (1, 2, 4, 9)], _draw,
                       lambda *args: M.variants(M, *args), lambda s, W_a, T: f"e (T={T}, max_len={W_a.shape[0]})")

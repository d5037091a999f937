"""Lesson 04, exercise 1: the cosine score (Graves et al. 2014, the NTM's content addressing).

    cosine_score(s (B, d), h (B, T, d), beta) -> beta * cos(s, h_i), (B, T), before any softmax

The check draws three configurations in which B, T and d all differ (so that a crash of a norm taken without
keepdim says which axes met), with beta = 1, 5 and 2.5, and names the mistakes by their values: a missing or
squared norm, a norm over the wrong axes, beta left out or dividing, s mixed across the batch.
"""
import functools

import torch.nn.functional as F

from ... import scores as ref
from ..core import Mistake, Mistakes, exercise, randn
from ..evaluation import Evaluation
from ..torch_errors import BROADCAST, found
from .scores import batch_mixups, dot, features_summed, score_tests, separate_sums

# the norms of the cosine: each vector's own (over the features), or over the wrong axes
_S_NORMS = {"own": lambda s: s.norm(dim=-1, keepdim=True), "whole": lambda s: s.norm(),
            "batch": lambda s: s.norm(dim=0, keepdim=True)}
_H_NORMS = {"own": lambda h: h.norm(dim=-1, keepdim=True), "whole": lambda h: h.norm(),
            "time": lambda h: h.norm(dim=1, keepdim=True), "batch": lambda h: h.norm(dim=0, keepdim=True)}
_NORM_WORDS = {("s", "whole"): "|s| is the norm of the whole tensor s", ("s", "batch"): "s is normalised along the "
               "batch axis", ("h", "whole"): "|h_i| is the norm of the whole tensor h", ("h", "time"): "h is "
               "normalised along the time axis", ("h", "batch"): "h is normalised along the batch axis"}


def _norms_over(s, h, beta, s_norm="own", h_norm="own"):
    """The cosine with |s| and |h_i| taken over the axes named (the vectors normalised first, as F.normalize does)."""
    return beta * dot(s / _S_NORMS[s_norm](s), h / _H_NORMS[h_norm](h))


def _norm_words(s_norm, h_norm):
    return " and ".join(_NORM_WORDS[key] for key in (("s", s_norm), ("h", h_norm)) if key in _NORM_WORDS)


def _no_keepdim_s(s, h, beta):
    return beta * dot(s, h) / (s.norm(dim=-1) * h.norm(dim=-1))             # (B,) against (B, T)


def _no_keepdim_h(s, h, beta):
    return beta * dot(s / s.norm(dim=-1, keepdim=True), h / h.norm(dim=-1))  # (B, T) against (B, T, d)


M = Mistakes(
    Mistake("plain_dot", "the scores are plain dot products: the cosine divides s·h_i by both norms, |s| |h_i|",
            shows=lambda s, h, beta: beta * dot(s, h)),
    Mistake("only_h_normalised", "only h_i is normalised: the cosine divides s·h_i by BOTH norms, |s| and |h_i|",
            shows=lambda s, h, beta: beta * dot(s, h) / h.norm(dim=-1)),
    Mistake("only_s_normalised", "only s is normalised: the cosine divides s·h_i by BOTH norms, |s| and |h_i|",
            shows=lambda s, h, beta: beta * dot(s, h) / s.norm(dim=-1, keepdim=True)),
    Mistake("norms_squared", "the norms are not square-rooted: |s| = sqrt(sum_k s_k^2), not the sum of squares",
            shows=lambda s, h, beta: beta * dot(s, h) / ((s ** 2).sum(-1, keepdim=True) * (h ** 2).sum(-1))),
    Mistake("no_beta", "beta is missing: the cosine is multiplied by the key strength beta",
            shows=lambda s, h, beta: ref.cosine_score(s, h, 1.0)),
    Mistake("divided_by_beta", "the cosine is divided by beta: beta is a strength, the cosine is multiplied by it",
            shows=lambda s, h, beta: ref.cosine_score(s, h, 1.0) / beta),
    Mistake("norm_axes", "{wrong}: each vector is divided by its own norm, taken over its features (the last axis)",
            hint="|s| = s.norm(dim=-1, keepdim=True), |h_i| = h.norm(dim=-1, keepdim=True)",
            shows=functools.partial(_norms_over, s_norm="whole", h_norm="whole")),
    Mistake("per_example_meets_positions", "a tensor of one value per example, (B,), met one of shape (B, T) (B = "
            "{B}, T = {T}): PyTorch lines up the LAST axes, so the value of example b is matched with position b, "
            "not with example b; a norm of s keeps its axis, (B, 1)", hint="s.norm(dim=-1, keepdim=True)",
            shows=_no_keepdim_s),
    Mistake("norm_meets_features", "a norm that lost its axis (|s| of shape (B,) or |h_i| of shape (B, T)) divides "
            "vectors of d features (d = {d}): PyTorch lines up the LAST axes, so the norm meets the feature axis; "
            "keep the norm's axis, |s| (B, 1), |h_i| (B, T, 1)", hint="s.norm(dim=-1, keepdim=True), "
            "h.norm(dim=-1, keepdim=True)", shows=_no_keepdim_h),
    separate_sums(lambda s, h, beta: beta * features_summed(s, h) / (s.norm(dim=-1, keepdim=True) * h.norm(dim=-1))),
    *batch_mixups(ref.cosine_score, "F.cosine_similarity(s[:, None, :], h, dim=-1)", scale_free=True),
)
_VALUES = [m for m in M if m.key not in ("norm_axes", "per_example_meets_positions", "norm_meets_features")]


def _crash(text, B, T, d):
    """The Mistake of a crash where PyTorch could not broadcast two sizes: (B,) against (B, T), or a norm without
    keepdim against the d features; None for another crash, or when two of B, T, d are equal."""
    match = found(BROADCAST, text)
    if not match or len({B, T, d}) < 3:
        return None
    sizes = {int(match["a"]), int(match["b"])}
    if sizes == {B, T}:
        return M.per_example_meets_positions.at(B=B, T=T)
    if d in sizes and sizes <= {B, T, d}:
        return M.norm_meets_features.at(d=d)
    return None


def _mistakes(s, h, beta):
    values = M.variants(_VALUES, s, h, beta)
    for s_norm in _S_NORMS:
        for h_norm in _H_NORMS:
            if (s_norm, h_norm) != ("own", "own"):
                values[M.norm_axes.at(wrong=_norm_words(s_norm, h_norm))] = _norms_over(s, h, beta, s_norm, h_norm)
    return values


def _draw(g, B, T, d, beta):
    return randn(g, B, d, scale=2.0), randn(g, B, T, d, scale=2.0), beta


def _normalised_first(s, h, beta):
    """A right answer written another way: unit vectors first, then a batched product."""
    unit_s, unit_h = F.normalize(s, dim=-1), F.normalize(h, dim=-1)      # (B, d), (B, T, d)
    return beta * (unit_h @ unit_s[:, :, None]).squeeze(-1)


@exercise("cosine score (Graves)", reference=ref.cosine_score, mistakes=M, right=[_normalised_first])
def cosine_score(ev: Evaluation, answer):
    """answer(s (B, d), h (B, T, d), beta) -> beta * cos(s, h_i), (B, T)."""
    # B, T and d differ in every config, so that a crash of a norm without keepdim says which axes met
    return score_tests(ev, answer, ref.cosine_score, [(2, 5, 4, 1.0), (3, 4, 6, 5.0), (1, 7, 3, 2.5)], _draw,
                       _mistakes, lambda s, h, beta: f"e (d={s.shape[-1]}, beta={beta})",
                       lambda text, args, passed: _crash(text, *args[1].shape))

"""Lesson 03, exercise 4: the context vector.

    context_vector(weights (B, T), h (B, T, d_h)) -> c (B, d_h),  c = sum_i alpha_i h_i for each sequence

The check compares c on four inputs (B = 1 in one: a squeeze without its axis drops the batch; a row of zero
weights in the last, as the masked softmax gives a fully masked source); where no mistake's values match, it moves
feature 0 of h and names features of c that moved with it (h reshaped instead of transposed).
"""
import functools

import torch

from ... import scores as ref
from ..core import ExerciseError, Mistake, Mistakes, exercise, randn
from ..evaluation import Evaluation
from ..expectations import explained

_TRANSPOSE = "h.transpose(1, 2) @ weights[..., None], or (weights[:, None, :] @ h)[:, 0]"
M = Mistakes(
    Mistake("softmax_again", "the weights went through a softmax again: they already are the attention weights "
            "alpha (a softmax of the scores); c = sum_i alpha_i h_i uses them as they are",
            shows=lambda weights, h: ref.context_vector(torch.softmax(weights, -1), h)),
    Mistake("renormalised", "c is NaN for a row of zero weights (a fully masked source): the weights were divided "
            "by their sum, 0 / 0; c = sum_i alpha_i h_i uses them as they are (0 for such a row)",
            hint="no division by weights.sum(...)",
            shows=lambda weights, h: ref.context_vector(weights / weights.sum(1, keepdim=True), h)),
    Mistake("plain_mean", "c is the plain mean of h over the positions: it ignores the weights; c = sum_i alpha_i h_i",
            shows=lambda weights, h: h.mean(1)),
    Mistake("unweighted_sum", "c is the sum of the states over the positions, unweighted: each state h_i must be "
            "scaled by its own weight alpha_i before the sum",
            hint="torch.einsum('bt,btd->bd', weights, h): one letter for the positions of both",
            shows=lambda weights, h: torch.einsum("bt,bsd->bd", weights, h)),
    Mistake("weighted_mean", "c is a mean of alpha_i h_i over the positions: c is their SUM (the weights already sum "
            "to 1)", hint=".sum(1), not .mean(1)", shows=lambda weights, h: (weights[..., None] * h).mean(1)),
    Mistake("sums_features", "c sums over the feature axis: the sum runs over the source positions (axis 1), and c "
            "keeps its d_h features", hint="(weights[..., None] * h).sum(1)",
            shows=lambda weights, h: (weights[..., None] * h).sum(-1)),
    Mistake("keeps_source_axis", "c keeps the source axis: the weighted states alpha_i h_i are added up over the "
            "positions i (axis 1)", hint="(weights[..., None] * h).sum(1)",
            shows=lambda weights, h: weights[..., None] * h),
    Mistake("mixes_batch", "c mixes the sequences of the batch: a (B, T) matrix times a batch of (T, d_h) ones gives "
            "(B, B, d_h); each sequence's weights multiply its own states",
            hint="(weights[:, None, :] @ h)[:, 0] or torch.einsum('bt,btd->bd', weights, h)",
            shows=lambda weights, h: weights @ h),
    Mistake("h_reshaped", "h is reshaped to (B, d_h, T) instead of transposed: a reshape keeps the memory order, so it "
            "scrambles positions and features", hint=_TRANSPOSE,
            shows=lambda weights, h: (h.reshape(h.shape[0], h.shape[2], h.shape[1]) @ weights[..., None])[..., 0]),
    Mistake("features_mixed", "c's features are mixed: changing feature 0 of h changes the other features of c; each "
            "feature of c comes from the same feature of h", hint=_TRANSPOSE + " (a reshape or a view to (B, d_h, T) "
            "keeps the memory order, and scrambles positions and features)",
            shows=lambda weights, h: (weights[..., None] * h.transpose(1, 2).reshape(h.shape)).sum(1)),
)
VALUES = [m for m in M if m.key != "features_mixed"]


def mixes_features(ev: Evaluation, answer, weights, h):
    """A probe: M.features_mixed when changing feature 0 of h changes the other features of c (or None)."""
    h_moved = h.clone()
    h_moved[..., 0] += 1.0
    try:
        c, moved = (torch.as_tensor(ev.call(answer, weights, x)) for x in (h, h_moved))
        if c.shape != moved.shape or c.shape[-1] != h.shape[-1] or torch.allclose(moved[..., 1:], c[..., 1:],
                                                                                    atol=1e-5):
            return None
    except (ExerciseError, RuntimeError, TypeError, ValueError):
        return None
    return M.features_mixed


def _bmm(weights, h):
    return torch.bmm(weights.unsqueeze(1), h).squeeze(1)


def _transposed(weights, h):
    return (h.transpose(1, 2) @ weights[..., None])[..., 0]


def _loop(weights, h):
    c = torch.zeros(h.shape[0], h.shape[2])
    for i in range(h.shape[1]):
        c = c + weights[:, i, None] * h[:, i]
    return c


@exercise("context vector", reference=ref.context_vector, mistakes=M, right=[_bmm, _transposed, _loop])
def context_vector(ev: Evaluation, answer):
    """answer(weights (B, T), h (B, T, d_h)) -> c (B, d_h) = sum_i alpha_i h_i."""
    tests = 0
    for seed, (B, T, d) in enumerate([(2, 5, 3), (4, 3, 7), (1, 6, 6), (3, 4, 5)]):
        g = ev.rng(seed)
        weights = torch.softmax(randn(g, B, T, scale=2.0), -1)
        zero_row = seed == 3                        # a fully masked source: masked_softmax gives a row of zeros
        if zero_row:
            weights[1] = 0.0
        h = randn(g, B, T, d)
        c = ev.call(answer, weights, h)
        what = f"c (B={B}, T={T}, d_h={d}" + (", a row of zero weights)" if zero_row else ")")
        with explained(functools.partial(mixes_features, ev, answer, weights, h)):
            ev.expect_close(c, ref.context_vector(weights, h), what, mistakes=M.variants(VALUES, weights, h))
        tests += 1
    return tests

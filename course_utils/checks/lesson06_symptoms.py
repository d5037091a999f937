"""The symptoms of lesson 06's typical slips that a planted value alone does not name: W_s s broadcast the wrong
way (a crash where the batch axis meets the positions, or scores built with another example's decoder state),
weights normalised over the batch axis, an inverted mask whatever the learner did in fully masked rows, and a
softmax written out that overflows on large scores; and the values of a misplaced tanh (or of the projections
multiplied instead of added) in the scores."""
import contextlib
import re

import numpy as np
import torch

from .core import ExerciseError, to_numpy
from .evaluation import RAISED

NOT_BROADCAST = ("s is not broadcast over the positions: (B, T, d_attn) + (B, d_attn) lines the batch axis of s up "
                 "with the positions axis; add s @ W_s as (B, 1, d_attn) (`.unsqueeze(1)`).")
OTHER_EXAMPLE = ("some scores use the decoder state s of ANOTHER example of the batch: W_s s of example b must be "
                 "added to the T positions of example b only; add s @ W_s as (B, 1, d_attn) (`.unsqueeze(1)`), "
                 "which broadcasts it over T (a repeat, reshape or view of s @ W_s mixes the examples).")
BATCH_NORMALISED = ("the weights are normalised over the batch axis (dim=0): each example's weights, one ROW, must "
                    "sum to 1 over its positions; take the softmax (or the sum you divide by) over dim=-1.")
INVERTED = ("the mask is inverted: True means 'may be chosen' (keep), False means 'already chosen' (mask out); "
            "use `~mask` in masked_fill.")
UNSTABLE = ("with large scores (every score moved by {shift:+g}) your weights come out wrong (NaN, inf or 0): exp "
            "overflows above about 88 in float32 and underflows below about -100; subtract each row's maximum over "
            "the allowed positions before exp (softmax(e) = softmax(e - max e)), or use torch.softmax.")


@contextlib.contextmanager
def batch_meets_positions(B, T):
    """pointer_scores crashing because W_s s, (B, d_attn), was added to (B, T, d_attn) without a positions axis (or
    with it in the wrong place): PyTorch compares its B with the T positions."""
    try:
        yield
    except ExerciseError as error:
        text = str(error)
        sizes = re.search(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\)", text)
        if text.startswith(RAISED) and sizes and {int(sizes[1]), int(sizes[2])} == {B, T}:
            raised = text[len(RAISED):].partition("\n")[0]
            raise ExerciseError(f"{NOT_BROADCAST}\n  (PyTorch: {raised[:200]})") from None
        raise


def other_example(got, h, s, W_h, W_s, v):
    """OTHER_EXAMPLE when every score of `got` (B, T) is the score of its position with the decoder state of some
    example of the batch, and some are not with their own example's (or None)."""
    a = to_numpy(got).astype(np.float64)
    with torch.no_grad():
        candidates = to_numpy(torch.tanh((h @ W_h).unsqueeze(0) + (s @ W_s)[:, None, None, :]) @ v)  # (B', B, T)
    match = np.isclose(candidates, a[None], atol=1e-5, rtol=1e-4)
    own = np.stack([match[b, b] for b in range(a.shape[0])])
    return OTHER_EXAMPLE if match.any(axis=0).all() and not own.all() else None


def batch_normalised(got):
    """BATCH_NORMALISED when the weights (B, T) sum to 1 (or 0) down every column and not along the rows (or None)."""
    w = np.nan_to_num(to_numpy(got).astype(np.float64))
    columns, rows = w.sum(axis=0), w.sum(axis=-1)
    by_batch = np.all(np.isclose(columns, 1.0, atol=1e-4) | np.isclose(columns, 0.0, atol=1e-4)) \
        and np.isclose(columns, 1.0, atol=1e-4).any()
    return BATCH_NORMALISED if by_batch and not np.allclose(rows, 1.0, atol=1e-4) else None


def inverted(got, mask):
    """INVERTED when the weights are 0 (or NaN) at every position that may be chosen and not at some taken one,
    whatever the answer gives in rows where the inverted mask hides everything (or None)."""
    w, m = to_numpy(got).astype(np.float64), mask.numpy()
    allowed, taken = w[m], np.nan_to_num(w[~m])
    return INVERTED if np.all((allowed == 0) | np.isnan(allowed)) and np.any(taken != 0) else None


def unstable(got, expected, shift):
    """UNSTABLE when the weights for scores moved by `shift` (a softmax does not change) are not the expected."""
    w = to_numpy(got).astype(np.float64)
    right = np.all(np.isfinite(w)) and np.allclose(w, to_numpy(expected), atol=1e-5, rtol=1e-4)
    return None if right else UNSTABLE.format(shift=shift)


TANH_EACH = ("tanh is applied to each projection separately, tanh(W_h h_j) + tanh(W_s s): the two terms are added "
             "first, then one tanh, e_j = v^T tanh(W_h h_j + W_s s).")
TANH_ONE = ("tanh is applied to {inside} only: add the two projections first, then apply one tanh to the sum, "
            "e_j = v^T tanh(W_h h_j + W_s s).")
MULTIPLIED = ("the projections are multiplied{tanh}, (W_h h_j) * (W_s s): additive attention ADDS them, "
              "e_j = v^T tanh(W_h h_j + W_s s) (`h @ W_h + (s @ W_s).unsqueeze(1)`).")


def tanh_and_sum_mistakes(keys, query, v):
    """The values of pointer_scores when the tanh, or the sum inside it, is misplaced: tanh of each projection, of one
    of them, or the projections multiplied instead of added. keys = h @ W_h (B, T, d_attn), query = (s @ W_s)
    unsqueezed to (B, 1, d_attn)."""
    return {
        TANH_EACH: (torch.tanh(keys) + torch.tanh(query)) @ v,
        TANH_ONE.format(inside="W_h h_j"): (torch.tanh(keys) + query) @ v,
        TANH_ONE.format(inside="W_s s"): (keys + torch.tanh(query)) @ v,
        MULTIPLIED.format(tanh=""): torch.tanh(keys * query) @ v,
        MULTIPLIED.format(tanh=" and the tanh is missing"): (keys * query) @ v,
    }

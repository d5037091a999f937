"""What lesson 11's two attention exercises (SAGAN's over the pixels, SNAIL's over the steps) share: the slips of
scaled dot-product attention, in words that fit both (each exercise gives its own wrong answer that shows them)."""
import math

import torch

from ..core import Mistake
from ..torch_errors import BROADCAST

_KEYS = "each query's weights must sum to 1 over the keys, the last axis"


def softmax_batch(shows):
    return Mistake("softmax_batch", "the softmax runs over the batch axis (axis 0): " + _KEYS,
                   hint="softmax(scores, dim=-1); F.softmax without dim= picks axis 0 for a 3-D tensor", shows=shows)


def softmax_over_queries(shows):
    return Mistake("softmax_over_queries", "the weights are normalised over the queries (axis 1): " + _KEYS,
                   hint="softmax(scores, dim=-1)", shows=shows)


def by_max(shows):
    return Mistake("by_max", "the weights are divided by their largest value, not by their sum, so a row does not sum "
                   "to 1: the softmax divides exp(score) by its SUM over the keys",
                   hint="torch.softmax(scores, dim=-1)", shows=shows)


def no_scale(shows):
    return Mistake("no_scale", "the scores are not divided by √d_key, the width of a query and a key: q·k grows with "
                   "d_key, and the softmax saturates", hint="scores / math.sqrt(k.size(-1)) before the softmax",
                   shows=shows)


def scale_by_d_key(shows):
    return Mistake("scale_by_d_key", "the scores are divided by d_key: the scale is its square root, √d_key",
                   hint="scores / math.sqrt(k.size(-1))", shows=shows)


def scale_by(key, name, what, shows):
    """The scores divided by √`name` (`what`: what that size counts), not by √d_key."""
    return Mistake(key, f"the scores are divided by √{name}, {what}: the scale is √d_key, the width of a query and a "
                   "key", hint="math.sqrt(k.size(-1)), k of shape (B, ·, d_key)", shows=shows)


def k_T_3d(shows):
    return Mistake("k_T_3d", "kᵀ reverses all three axes of the batched keys, (B, ·, d_key) -> (d_key, ·, B), instead "
                   "of transposing each matrix of the batch: only the last two axes swap",
                   hint="k.transpose(1, 2) (or k.mT); `.T` on a 3-D tensor reverses every axis", shows=shows)


def transposed_batch(B, d_key, M):
    """The crash of q @ k.T with k (B, ·, d_key): k.T is (d_key, ·, B), and the batch axes B and d_key do not
    broadcast (for crashes.call)."""
    return BROADCAST, lambda m: M.k_T_3d if (int(m["a"]), int(m["b"]), m["dim"]) == (B, d_key, "0") else None


def divided_by_max(scores, mask=None):
    """exp(s) / max exp(s): a "softmax" normalised by the row's maximum instead of its sum."""
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.exp(scores - scores.amax(-1, keepdim=True))


def scaled(raw, size):
    return raw / math.sqrt(size)

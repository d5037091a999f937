"""What split_heads and merge_heads share: both only move the numbers of x between axes, so an answer that holds
exactly x's numbers (per batch element) in other places has put them in the wrong places, whatever the order."""
import contextlib

import numpy as np

from ..core import Mistake, ValuesDiffer, randn, to_numpy
from ..evaluation import Evaluation
from ..expectations import fail


def x_of(ev: Evaluation, seed, *shape):
    return randn(ev.rng(seed), *shape)


def rearranged_mistake(hint, shows):
    return Mistake("rearranged", "{what} holds the numbers of x, but in the wrong places: a view or a reshape never "
                   "moves numbers between axes, only a transpose or a permute does", hint=hint, shows=shows)


@contextlib.contextmanager
def rearranged(out, x, what, M):
    """Inside: values that differ (no listed mistake) while `out` holds exactly the numbers of `x` (per batch
    element), only elsewhere, are named M.rearranged, before any generic order ("reversed along axis 2") is."""
    try:
        yield
    except ValuesDiffer:
        a, e = to_numpy(out), to_numpy(x)
        if a.size == e.size and a.shape[0] == e.shape[0] and np.array_equal(
                np.sort(a.reshape(a.shape[0], -1), -1), np.sort(e.reshape(e.shape[0], -1), -1)):
            fail(M.rearranged.at(what=what))
        raise

"""What lesson 05's checks share about comparing a result: the values first, naming the registered mistakes; then,
when the values differ for no named reason, the first property the answer breaks (a weighting that is no longer a
distribution, a cosine that changes with the vectors' lengths, ...), named by its Mistake.

    compare(ev, actual, expected, what, mistakes={Mistake: values}, properties=[(holds, Mistake), ...])
"""
import numpy as np

from ..core import ValuesDiffer, expect, to_numpy
from ..evaluation import Evaluation


def compare(ev: Evaluation, actual, expected, what, mistakes=None, properties=(), atol=1e-5):
    """ev.expect_close; when the values differ for no registered reason (a finding of the framework's, or none),
    the first property the answer breaks is named instead. properties: (holds, mistake) pairs, `holds(actual)` True
    when the answer has the property."""
    try:
        ev.expect_close(actual, expected, what, mistakes=mistakes, atol=atol)
    except ValuesDiffer:
        for holds, mistake in properties:
            expect(holds(actual), mistake)
        raise


def is_distribution(w):
    """Every row of `w` is finite, >= 0 and sums to 1."""
    w = to_numpy(w).astype(np.float64)
    return bool(np.all(np.isfinite(w)) and np.all(w >= -1e-6) and np.allclose(w.sum(-1), 1, atol=1e-4))


def close(a, b, atol=1e-5):
    a = to_numpy(a)
    return a.shape == tuple(b.shape) and bool(np.allclose(a, to_numpy(b), atol=atol, rtol=1e-4))

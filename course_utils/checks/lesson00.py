"""Check for lesson 00 (welcome): the warm-up exercise."""

from .. import numpy_attention as ref
from .core import exercise
from .evaluation import Evaluation


@exercise("weighted sum", reference=ref.weighted_sum)
def weighted_sum(ev: Evaluation, answer):
    """answer(weights (T,), vectors (T, d)) -> (d,) = sum_i weights[i] * vectors[i]."""
    tests = 0
    for seed, (T, d) in enumerate([(4, 3), (6, 5), (1, 2), (7, 7)]):
        g = ev.rng(seed)
        w, x = g.random(T), g.normal(size=(T, d))
        what = f"weighted_sum(weights {w.shape}, vectors {x.shape})"
        ev.expect_close(ev.call(answer, w, x), ref.weighted_sum(w, x), what,
                        mistakes={
                            "the result keeps the sequence axis: sum the weighted vectors over i (axis 0)":
                                w[:, None] * x,
                            "you summed over the vector's own axis (d) instead of over the positions i":
                                (w[:, None] * x).sum(axis=1),
                            "you took the plain mean of the vectors: multiply each vector by its weight first":
                                x.mean(axis=0),
                            "you forgot the weights: the sum of the vectors, unweighted": x.sum(axis=0),
                        })
        tests += 1
    return tests

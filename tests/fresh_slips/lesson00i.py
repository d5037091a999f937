"""Typical learner answers for lesson 00 (00_welcome.ipynb), exercise `weighted_sum`.

weighted_sum(weights, vectors): weights (T,), vectors (T, d) -> z (d,), z = sum_i weights[i] * vectors[i],
written without a Python loop (NumPy arrays, as in course_utils.numpy_attention).

SLIPS: one typical mistake each (marked `# slip:`); CORRECT: right answers written differently from
the reference `weights @ vectors`.
"""
import numpy as np

# ----------------------------------------------------------------------------- slips

def ws_transposed_product(weights, vectors):
    return vectors @ weights  # slip: matrix product in the wrong order (only runs when T == d, then wrong)


def ws_sum_wrong_axis(weights, vectors):
    return (weights[:, None] * vectors).sum(axis=1)  # slip: sums over the vector components instead of over i


def ws_sum_everything(weights, vectors):
    return (weights[:, None] * vectors).sum()  # slip: sums over both axes, returns a scalar


def ws_mean_not_sum(weights, vectors):
    return (weights[:, None] * vectors).mean(axis=0)  # slip: averages (divides by T) instead of summing


def ws_normalises_weights(weights, vectors):
    weights = weights / weights.sum()  # slip: renormalises the weights to sum to 1
    return weights @ vectors


def ws_softmax_weights(weights, vectors):
    weights = np.exp(weights) / np.exp(weights).sum()  # slip: applies a softmax to the given weights
    return weights @ vectors


def ws_keeps_row_axis(weights, vectors):
    return weights[None, :] @ vectors  # slip: returns shape (1, d) instead of (d,)


def ws_forgets_return(weights, vectors):
    z = weights @ vectors  # slip: computes the result but never returns it (returns None)


def ws_python_loop(weights, vectors):
    z = np.zeros(vectors.shape[1])
    for i in range(len(weights)):  # slip: Python loop over the T vectors, which the exercise forbids
        z = z + weights[i] * vectors[i]
    return z


def ws_in_place(weights, vectors):
    vectors *= weights[:, None]  # slip: scales the caller's `vectors` array in place
    return vectors.sum(axis=0)


# ----------------------------------------------------------------------------- correct

def ws_einsum(weights, vectors):
    return np.einsum("i,id->d", weights, vectors)


def ws_broadcast_sum(weights, vectors):
    return (np.asarray(weights)[:, None] * np.asarray(vectors)).sum(axis=0)


def ws_transpose_matvec(weights, vectors):
    return np.tensordot(np.asarray(vectors).T, np.asarray(weights), axes=1)


SLIPS = [
    ("weighted_sum", "multiplies in the wrong order, vectors @ weights", ws_transposed_product),
    ("weighted_sum", "sums the weighted vectors over the wrong axis (over the d components)", ws_sum_wrong_axis),
    ("weighted_sum", "sums over every element, returning one number", ws_sum_everything),
    ("weighted_sum", "takes the mean over the vectors instead of the sum", ws_mean_not_sum),
    ("weighted_sum", "divides the weights by their sum first (a weighted average, not a weighted sum)",
     ws_normalises_weights),
    ("weighted_sum", "passes the weights through a softmax first", ws_softmax_weights),
    ("weighted_sum", "returns a (1, d) row instead of a (d,) vector", ws_keeps_row_axis),
    ("weighted_sum", "forgets the return statement", ws_forgets_return),
    ("weighted_sum", "uses a Python loop over the vectors", ws_python_loop),
    ("weighted_sum", "multiplies the input array in place, changing the caller's vectors", ws_in_place),
]

CORRECT = [
    ("weighted_sum", "einsum over the shared index i", ws_einsum),
    ("weighted_sum", "broadcast the weights over the columns, then sum over axis 0", ws_broadcast_sum),
    ("weighted_sum", "tensordot of the transposed vectors with the weights", ws_transpose_matvec),
]

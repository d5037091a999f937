"""Typical learner mistakes (and a few differently written right answers) for lesson 00, the welcome lesson.

Exercise, as the check calls it:
    weighted_sum   weighted_sum(weights, vectors) -> z
                   weights: NumPy array (T,), vectors: NumPy array (T, d) -> z: (d,),
                   z = sum_i weights[i] * vectors[i], written without a Python loop.

SLIPS: each answer has exactly one thing wrong, marked with a `# slip:` comment on that line.
CORRECT: right answers written differently from the reference solution (`weights @ vectors`).
"""
import numpy as np

# ---------------------------------------------------------------------------------------------------
# Exercise: weighted_sum
# ---------------------------------------------------------------------------------------------------

def ws_operands_swapped(weights, vectors):
    return vectors @ weights  # slip: operands in the wrong order (only runs when T == d, then contracts over d)


def ws_broadcast_without_new_axis(weights, vectors):
    return (weights * vectors).sum(axis=0)  # slip: weights (T,) broadcast along d, not along T (missing [:, None])


def ws_sum_wrong_axis(weights, vectors):
    return (weights[:, None] * vectors).sum(axis=1)  # slip: sums over d instead of over T, returns (T,)


def ws_sum_everything(weights, vectors):
    return (weights[:, None] * vectors).sum()  # slip: no axis, sums everything into one number


def ws_mean_instead_of_sum(weights, vectors):
    return (weights[:, None] * vectors).mean(axis=0)  # slip: mean over T instead of sum (divides by T)


def ws_forgets_sum(weights, vectors):
    return weights[:, None] * vectors  # slip: scales each vector but never sums them, returns (T, d)


def ws_divides_by_weight_total(weights, vectors):
    return (weights @ vectors) / weights.sum()  # slip: normalises by the sum of the weights (a weighted mean)


def ws_row_vector_shape(weights, vectors):
    return weights.reshape(1, -1) @ vectors  # slip: weights made a (1, T) row, result has shape (1, d), not (d,)


def ws_python_loop(weights, vectors):
    return sum(w_i * x_i for w_i, x_i in zip(weights, vectors))  # slip: a Python loop over the vectors, the text asks for none


def ws_in_place(weights, vectors):
    vectors *= weights[:, None]  # slip: scales the caller's array in place
    return vectors.sum(axis=0)


# --- right answers, written differently ------------------------------------------------------------

def ws_broadcast_sum(weights, vectors):
    return (weights[:, None] * vectors).sum(axis=0)


def ws_einsum(weights, vectors):
    return np.einsum("t,td->d", weights, vectors)


def ws_transposed_matvec(weights, vectors):
    return vectors.T @ weights


SLIPS = [
    ("weighted_sum", "multiplies in the wrong order, vectors @ weights", ws_operands_swapped),
    ("weighted_sum", "multiplies weights * vectors without weights[:, None], so the weights run along d",
     ws_broadcast_without_new_axis),
    ("weighted_sum", "sums over the wrong axis (d instead of T)", ws_sum_wrong_axis),
    ("weighted_sum", "sums over every axis and returns a single number", ws_sum_everything),
    ("weighted_sum", "takes the mean over the vectors instead of the sum", ws_mean_instead_of_sum),
    ("weighted_sum", "scales the vectors by their weights but forgets to add them up", ws_forgets_sum),
    ("weighted_sum", "divides by the sum of the weights", ws_divides_by_weight_total),
    ("weighted_sum", "turns the weights into a (1, T) row and returns shape (1, d)", ws_row_vector_shape),
    ("weighted_sum", "uses a Python loop over the vectors", ws_python_loop),
    ("weighted_sum", "multiplies the input vectors in place", ws_in_place),
]

CORRECT = [
    ("weighted_sum", "broadcasting weights[:, None] and a sum over axis 0", ws_broadcast_sum),
    ("weighted_sum", "einsum 't,td->d'", ws_einsum),
    ("weighted_sum", "the transposed matrix-vector product vectors.T @ weights", ws_transposed_matvec),
]
